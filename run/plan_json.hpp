#pragma once
/// The JSON `foresight plan --json` prints and foresight.plan() returns: a plan search's
/// candidates (run/planner.hpp), or a hardware comparison's options (run/compare.hpp).

#include <nlohmann/json.hpp>
#include <vector>

#include "run/compare.hpp"
#include "run/planner.hpp"

namespace foresight::strategy {

/// {"plans": [{status, plan, label, reason, bound_s, bound_by, iteration_s, tokens_per_s,
/// samples_per_s, mfu, peak_bytes, set, usd_run, kwh_run}], "simulated", "compiled"}; usd_run and
/// kwh_run null when unknown; bound_by names the bound bound_s is (to_string(PlanRow::Bound)).
/// Times in seconds, peak_bytes in bytes.
nlohmann::json plan_search_json(const PlanSearch& s);

/// {"options": [{cluster, gpus, gpu, price_basis, pareto, within_budget, plans, simulated, reason,
/// best: null or {plan, label, iteration_s, run_s, tokens_per_s, samples_per_s, mfu, peak_bytes,
/// set, usd_run, kwh_run}}]}; usd_run and kwh_run null when unknown.
nlohmann::json hardware_json(const std::vector<HardwareRow>& rows);

}  // namespace foresight::strategy
