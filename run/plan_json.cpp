#include "run/plan_json.hpp"

#include <string>

namespace foresight::strategy {
namespace {

/// A cost or energy: negative means not priced, which JSON says as null.
nlohmann::json or_null(double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

nlohmann::json plan_search_json(const PlanSearch& s) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : s.rows) {
    rows.push_back({{"status", std::string(to_string(r.status))}, {"plan", r.plan}, {"label", r.label},
                    {"reason", r.reason}, {"bound_s", r.bound_s}, {"bound_by", std::string(to_string(r.bound_by))},
                    {"iteration_s", r.iteration_s},
                    {"tokens_per_s", r.tokens_per_s}, {"samples_per_s", r.samples_per_s}, {"mfu", r.mfu},
                    {"peak_bytes", r.peak_bytes}, {"set", r.sets()}, {"usd_run", or_null(r.usd_run)},
                    {"kwh_run", or_null(r.kwh_run)}});
  }
  return {{"plans", rows}, {"simulated", s.simulated}, {"compiled", s.compiled}, {"one_block", s.one_block}};
}

nlohmann::json hardware_json(const std::vector<HardwareRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json row{{"cluster", r.option.cluster}, {"gpus", r.option.gpus},     {"gpu", r.gpu},
                       {"price_basis", r.price_basis}, {"pareto", r.pareto},       {"within_budget", r.within_budget},
                       {"plans", r.plans},             {"simulated", r.simulated}, {"reason", r.reason}};
    if (r.best) {
      const auto& b = *r.best;
      row["best"] = {{"plan", b.plan},
                     {"label", b.label},
                     {"iteration_s", b.iteration_s},
                     {"run_s", b.run_s},
                     {"tokens_per_s", b.tokens_per_s},
                     {"samples_per_s", b.samples_per_s},
                     {"mfu", b.mfu},
                     {"peak_bytes", b.peak_bytes},
                     {"set", b.sets()},
                     {"usd_run", or_null(b.usd_run)},
                     {"kwh_run", or_null(b.kwh_run)}};
    } else {
      row["best"] = nullptr;
    }
    out.push_back(std::move(row));
  }
  return {{"options", out}};
}

}  // namespace foresight::strategy
