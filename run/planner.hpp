#pragma once
/// The planner behind `foresight plan`: for a scenario's model, cluster and global batch, every
/// combination of tensor, pipeline, expert and data parallelism, virtual stages, micro-batch,
/// recompute, ZeRO stage and sequence parallelism in a search space; each checked by the scenario reader
/// (the frameworks' divisibility rules), then taken in order of its FLOPs lower bound: compiled,
/// checked against the GPUs' memory less a margin, bounded again by its busiest stream and by the
/// longest chain of ops that must run in order (path_bounds), and simulated, until no plan left
/// can enter the best `top` (its lower bound is no faster than the top-th best found). On N > 1
/// threads a candidate is weighed against the candidates before it but the N + 7 just before it,
/// all done before it starts: what is pruned never depends on thread timing.

#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "exec/path_bound.hpp"
#include "run/scenario.hpp"
#include "run/simulation.hpp"

namespace foresight::strategy {

struct PlanSpace {
  std::vector<int> tp;
  std::vector<int> pp;
  std::vector<int> virtual_stages;
  std::vector<int> micro_batch;
  std::vector<std::string> recompute;
  std::vector<int> zero;
  std::vector<bool> sequence_parallel;
  std::vector<int> ep;  ///< expert-parallel sizes (models with routed experts)
  /// Expert TP: 0 keeps it = tp; e > 0 splits each routed expert over e TP ranks (1: whole),
  /// tried where e < tp divides tp, tp / e divides ep and sequence parallelism is on (elsewhere it
  /// is the same plan as 0, or not one).
  std::vector<int> expert_tp;
};

/// The default space for a scenario's `model` on `cluster`: tp over the powers of two up to a node's GPUs (1 for models
/// without transformer layers), pp over the powers of two up to 64 that leave at least one layer
/// per stage, virtual stages 1 and 2, micro-batches 1 to 8, recompute none, selective (for
/// transformers) and full, ZeRO 0 and 1, sequence parallelism off and on (with tp > 1), and for
/// models with routed experts ep over the powers of two up to 64 that divide the experts (1 for
/// dense models) and expert TP = tp and 1.
PlanSpace default_plan_space(const Model& model, const topo::Cluster& cluster);

/// A lower bound on the largest rank's peak memory, without compiling, for `model` as `plan` runs
/// it (plan_model: its activations depend on the plan's kernels): a data-parallel rank's whole
/// peak (the memory model's); a pipeline rank's model states and buffers at the mean parameters
/// per stage (the largest stage holds at least as many), with no activations (they only add).
/// The planner leaves out plans whose floor passes the memory limit uncompiled.
double plan_memory_floor(const Model& model, const Plan& plan);

/// Per GPU and per server of `cluster`, the rate of every link leaving it and entering it: line
/// rate x its class's `efficiency`, as both network models move data (net/link_efficiency.hpp).
sim::GpuLineRates line_rates(const topo::Cluster& cluster, const sim::LinkEfficiency& efficiency);

/// The planner's third lower bound, from a compiled graph and its check (`index`) alone
/// (exec/path_bound.hpp): for each of `ranks`, the longest chain of ops that must run one after
/// another from the start to the end of the window its report measures (steady_window), per
/// step; 0 where no chain links them. A rank's bound is at most its simulated iteration, so any
/// rank's bounds the report's (the slowest rank's). The planner takes rank 0's.
std::vector<double> path_bounds(const CompiledGraph& compiled, const sim::GraphIndex& index, const Plan& plan,
                                const sim::GpuLineRates& rates, std::span<const sim::RankId> ranks);

struct PlanOptions {
  double memory_margin = 0.1;  ///< fraction of each GPU's memory a plan must leave free
  int top = 10;
  int jobs = 0;  ///< parallel simulations; 0: all cores
};

/// One candidate and what became of it.
struct PlanRow {
  enum class Status : std::uint8_t { best, fits, invalid, memory, oom, bound };
  nlohmann::json plan;  ///< the fields set on the base plan (tp, pp, dp, micro_batch, ...)
  std::string label;    ///< "tp 8 pp 16 dp 8 vs 1 mb 1 recompute full zero 0 sp on"
  Status status = Status::invalid;
  std::string reason;   ///< invalid: the reader's message; memory: the peak against the limit
  double bound_s = 0.0; ///< lower bound on the iteration time
  /// Which bound bound_s is: the FLOPs at peak (before compiling), the busiest stream's kernels,
  /// or the longest chain of ops in order (path_bounds, once a threshold exists).
  enum class Bound : std::uint8_t { flops, stream, path };
  Bound bound_by = Bound::flops;
  double iteration_s = 0.0;
  double run_s = 0.0;   ///< the scenario's whole workload (steps, tokens or epochs) at iteration_s
  double tokens_per_s = 0.0;
  double samples_per_s = 0.0;
  double mfu = 0.0;
  double peak_bytes = 0.0;  ///< the largest simulated rank's
  double capacity = 0.0;    ///< that rank's GPU memory
  double usd_run = -1.0;    ///< the workload's cost (run/prices.hpp); negative when not priced
  double kwh_run = -1.0;    ///< its energy; negative when unknown
  /// The `--set` flags that make `foresight simulate` run this plan on the scenario.
  std::vector<std::string> sets() const;
};
std::string_view to_string(PlanRow::Status s);
std::string_view to_string(PlanRow::Bound b);

struct PlanSearch {
  std::vector<PlanRow> rows;  ///< every candidate: the best first, then fits by time, then the rest
  int simulated = 0;
  int compiled = 0;  ///< compiled for their memory and stream bound (the others: pruned before)
  /// Of those, compiled first as one block of replicas standing for every placement
  /// (plan.fold_as_alike), their placements differing: bounded on that graph, and compiled whole
  /// only when it did not prune them.
  int one_block = 0;
};

/// Searches `space` for `path` (with `overrides` applied first); a dimension left empty takes
/// default_plan_space's values. `progress` gets one line per simulation. The scenario's own plan
/// need not fit its cluster size (only its model, cluster, global batch and the fields the search
/// does not set count). ConfigError when the base scenario is invalid or the space has no plan.
PlanSearch search_plans(const std::string& path, const std::vector<Override>& overrides, const PlanSpace& space,
                        const PlanOptions& options, const SimulationInputs& inputs,
                        const std::function<void(const std::string&)>& progress = {});
/// The same on a scenario document already read (and edited); `path` names it in messages.
PlanSearch search_document(const std::string& path, const nlohmann::json& doc, const PlanSpace& space,
                        const PlanOptions& options, const SimulationInputs& inputs,
                        const std::function<void(const std::string&)>& progress = {});

}  // namespace foresight::strategy
