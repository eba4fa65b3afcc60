#pragma once
/// A scenario simulated end to end: the model is built, the cluster resolved, every kernel costed,
/// the plan compiled into an execution graph, the graph run, and the report made. The same path
/// serves `foresight simulate`, `sweep` and validation, on any thread (no shared mutable state).

#include <array>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <vector>

#include "collectives/collective_config.hpp"
#include "exec/executor.hpp"
#include "exec/profile_db.hpp"
#include "strategies/data_parallel.hpp"
#include "run/plan_model.hpp"
#include "run/report.hpp"
#include "run/prices.hpp"
#include "run/scenario.hpp"
#include "topologies/cluster.hpp"

namespace foresight::strategy {

struct SimulationInputs {
  sim::CollectiveConfig collectives;
  const sim::ProfileDb* profiles = nullptr;  ///< measured kernels, may be null
  /// Sample the used GPUs' NVLink and NIC links every this long (timelines); zero: off.
  sim::Time link_sample_interval;
  /// Collectives and transfers alone on their links take their closed-form time
  /// (sim::ExecutorOptions::closed_form); false runs every one flow by flow.
  bool closed_form = true;
  /// Coalesce runs of kernels into single graph nodes (strategy::CompileOptions): the same
  /// answer with fewer nodes and events. Off where each kernel's node is read: timelines
  /// (link_sample_interval set) and Chakra export.
  bool coalesce_kernels = true;
  /// Prices and power per GPU model (run/prices.hpp): the report's cost and energy; may be null.
  const PriceTable* prices = nullptr;
  /// The cluster the scenario's cluster spec and GPU count resolve to, built once by a caller
  /// that runs many plans on it (foresight plan); null: each run builds its own.
  std::shared_ptr<const topo::Cluster> cluster;
  /// The rate of Megatron-LM v2's matrix kernels relative to the compute model's, for plans with
  /// kernel_generation megatron-2021: the calibration file's megatron_sc21.gemm_efficiency. 0:
  /// not loaded (such a plan is then refused).
  double megatron_2021_gemm_efficiency = 0.0;
};

struct SimulationOutput {
  Report report;
  nlohmann::json plan;  ///< the effective plan
  Model model;
  std::shared_ptr<const topo::Cluster> cluster;
  CompiledGraph compiled;
  sim::ExecutionResult result;
  std::vector<sim::LinkId> sampled_links;
  /// The compiled graph's check (sim::check_graph on the cluster), when whoever compiled it has
  /// it already (the planner's path bound): simulate_compiled then does not check it again.
  std::optional<sim::GraphIndex> index;
};

/// The slowdown per kernel family while a rank communicates that `plan` simulates on `gpu`:
/// the compute model's measured values with comm_contention measured, none with off
/// (sim::ExecutorOptions::comm_compute_slowdown_by_type).
std::array<double, sim::kOpTypeCount> plan_comm_slowdowns(const Plan& plan, const topo::GpuSpec& gpu);
/// The kernel families whose running kernels a collective waits for on `gpu` under `plan`
/// (sim::ExecutorOptions::comm_waits_for): measured ones with comm_contention measured.
std::array<bool, sim::kOpTypeCount> plan_comm_waits(const Plan& plan, const topo::GpuSpec& gpu);
/// The same per rank of `graph`, each for its own GPU's model (ExecutorOptions::*_by_rank); empty
/// when every rank's model gives the same (a uniform cluster).
std::vector<std::array<double, sim::kOpTypeCount>> plan_comm_slowdowns_by_rank(const Plan& plan, const topo::Cluster& cluster,
                                                                            const sim::ExecutionGraph& graph);
std::vector<std::array<bool, sim::kOpTypeCount>> plan_comm_waits_by_rank(const Plan& plan, const topo::Cluster& cluster,
                                                                      const sim::ExecutionGraph& graph);

/// The steps a report measures its iteration over, of a run of `steps` simulated steps: each
/// rank's window from the end of step `first` (0 with one step: from the run's start) to the end
/// of the last, `count` steps long. A pipeline fills and settles over several steps and is measured
/// over their second half; DataLoader workers deliver batches in bursts, measured over the last.
struct SteadyWindow {
  int first = 0;
  int count = 1;
};
SteadyWindow steady_window(const Plan& plan, int steps);

/// Builds the model, the cluster and the execution graph of `scenario` without simulating it,
/// with each simulated rank's peak memory in report.memory (a lower bound for MoE models, whose
/// dispatch buffers follow the simulated loads): what a planner checks before simulating.
SimulationOutput compile_scenario(const Scenario& scenario, const SimulationInputs& inputs);

/// Simulates `scenario` on the cluster's first dp x tp x pp x ep GPUs. ConfigError when the
/// cluster has fewer, ModelError for an unknown model.
SimulationOutput simulate_scenario(const Scenario& scenario, const SimulationInputs& inputs);
/// Simulates what compile_scenario(scenario, inputs) returned: simulate_scenario without compiling
/// twice. InternalError for a graph compiled for bounds only (plan.fold_as_alike).
SimulationOutput simulate_compiled(SimulationOutput compiled, const Scenario& scenario, const SimulationInputs& inputs);

}  // namespace foresight::strategy
