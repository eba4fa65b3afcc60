#pragma once
/// The planner behind `foresight plan`: for a scenario's model, cluster and global batch, every
/// combination of tensor, pipeline and data parallelism, virtual stages, micro-batch, recompute,
/// ZeRO stage and sequence parallelism in a search space; each checked by the scenario reader
/// (the frameworks' divisibility rules), then by its compiled graph's peak memory against the
/// GPUs' memory less a margin, then simulated, cheapest lower bound first, until no plan left can
/// enter the best `top` (its lower bound is no faster than the top-th best found).

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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
};

/// The default space for `base`: tp over the powers of two up to a node's GPUs (1 for models
/// without transformer layers), pp over the powers of two up to 64 that leave at least one layer
/// per stage, virtual stages 1 and 2, micro-batches 1 to 8, recompute none, selective (for
/// transformers) and full, ZeRO 0 and 1, sequence parallelism off and on (with tp > 1).
PlanSpace default_plan_space(const Scenario& base, const Model& model, const topo::Cluster& cluster);

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
  double iteration_s = 0.0;
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

struct PlanSearch {
  std::vector<PlanRow> rows;  ///< every candidate: the best first, then fits by time, then the rest
  int simulated = 0;
  int compiled = 0;
};

/// Searches `space` for `path` (with `overrides` applied first). `progress` gets one line per
/// simulation. ConfigError when the base scenario is invalid or the space is empty.
PlanSearch search_plans(const std::string& path, const std::vector<Override>& overrides, const PlanSpace& space,
                        const PlanOptions& options, const SimulationInputs& inputs,
                        const std::function<void(const std::string&)>& progress = {});

}  // namespace foresight::strategy
