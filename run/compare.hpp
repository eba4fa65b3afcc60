#pragma once
/// Hardware comparison behind `foresight plan --clusters ... --gpus ...`: the planner's search
/// (run/planner.hpp) run once per cluster and GPU count, each option's best plan priced with the
/// price table (run/prices.hpp), and the options no other beats on both the run's time and its
/// cost marked as the Pareto front.

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "run/planner.hpp"

namespace foresight::strategy {

/// One cluster to try: a preset name or a topology file, sized to `gpus`.
struct HardwareOption {
  std::string cluster;
  int gpus = 0;
};

struct HardwareRow {
  HardwareOption option;
  std::string gpu;          ///< the GPU model of the cluster's first GPU ("" when it did not build)
  std::string price_basis;  ///< that model's price basis in the table ("" when unpriced)
  std::optional<PlanRow> best;
  std::string reason;  ///< why there is no best: the search's error, or that no plan fits
  int plans = 0;       ///< candidates the search considered
  int simulated = 0;
  bool pareto = false;         ///< no other row is both no slower and no dearer, and better in one
  bool within_budget = true;   ///< run cost at most the budget (unpriced rows: true)
};

/// Every cluster of `clusters` at every count of `gpus`, the clusters outermost. Empty `clusters`:
/// the scenario's own; empty `gpus`: its GPU count (cluster.gpus, else dp x tp x pp x ep).
std::vector<HardwareOption> hardware_options(const Scenario& base, const std::vector<std::string>& clusters,
                                             const std::vector<int>& gpus);

/// Runs the plan search of `doc` (read from `path`) on every option, with `space`'s dimensions
/// (empty ones: each cluster's defaults); rows in the options' order. The searches run side by
/// side on plan_options.jobs threads (0: all cores), each on jobs / min(jobs, options) of them,
/// and each keeps its best alone (top 1, whatever plan_options.top says).
/// An option whose cluster cannot be built or whose search fails gets its reason, not an
/// exception. `budget_usd` > 0 marks rows whose run costs more. `progress` gets a line per
/// option and per simulation, one call at a time, the options' lines interleaved.
std::vector<HardwareRow> compare_hardware(const std::string& path, const nlohmann::json& doc,
                                          const std::vector<HardwareOption>& options, const PlanSpace& space,
                                          const PlanOptions& plan_options, const SimulationInputs& inputs,
                                          double budget_usd = 0.0,
                                          const std::function<void(const std::string&)>& progress = {});

/// Sets `pareto` on the rows with a priced best plan that no other such row dominates (run time
/// and run cost both no greater, one smaller). Unpriced rows are never on the front.
void mark_pareto(std::vector<HardwareRow>& rows);

}  // namespace foresight::strategy
