#include "run/compare.hpp"

#include <fmt/core.h>

#include "common/error.hpp"
#include "run/prices.hpp"
#include "topologies/cluster_builders.hpp"

namespace foresight::strategy {

std::vector<HardwareOption> hardware_options(const Scenario& base, const std::vector<std::string>& clusters,
                                             const std::vector<int>& gpus) {
  const std::vector<std::string> names = clusters.empty() ? std::vector<std::string>{base.cluster.spec} : clusters;
  std::vector<int> counts = gpus;
  if (counts.empty()) {
    counts.push_back(base.cluster.gpus > 0 ? base.cluster.gpus : static_cast<int>(base.plan.ranks()));
  }
  std::vector<HardwareOption> out;
  for (const auto& c : names) {
    for (const int n : counts) out.push_back({c, n});
  }
  return out;
}

std::vector<HardwareRow> compare_hardware(const std::string& path, const nlohmann::json& doc,
                                          const std::vector<HardwareOption>& options, const PlanSpace& space,
                                          const PlanOptions& plan_options, const SimulationInputs& inputs,
                                          double budget_usd, const std::function<void(const std::string&)>& progress) {
  std::vector<HardwareRow> rows;
  for (const HardwareOption& option : options) {
    HardwareRow row;
    row.option = option;
    const std::string name = fmt::format("{} x {}", option.cluster, option.gpus);
    if (progress) progress(fmt::format("{}: searching", name));
    nlohmann::json d = doc;
    d["cluster"] = nlohmann::json{{topo::is_cluster_preset(option.cluster) ? "preset" : "topology", option.cluster},
                                  {"gpus", option.gpus}};
    try {
      SimulationInputs in = inputs;
      try {
        in.cluster = std::make_shared<const topo::Cluster>(topo::resolve_cluster(option.cluster, option.gpus));
      } catch (const sim::ConfigError& e) {
        throw sim::ConfigError(fmt::format("/cluster: {}", e.what()));
      }
      row.gpu = std::string(in.cluster->gpu_model(0).name);
      if (inputs.prices != nullptr) {
        const GpuPrice* price = inputs.prices->find(row.gpu);
        if (price != nullptr && price->usd_per_gpu_hour) row.price_basis = price->basis;
      }
      const PlanSearch search = search_document(path, d, space, plan_options, in, [&](const std::string& line) {
        if (progress) progress(fmt::format("{}: {}", name, line));
      });
      row.plans = static_cast<int>(search.rows.size());
      row.simulated = search.simulated;
      if (!search.rows.empty() && search.rows.front().status == PlanRow::Status::best) {
        row.best = search.rows.front();
        row.within_budget = !(budget_usd > 0.0 && row.best->usd_run > budget_usd);
      } else {
        row.reason = fmt::format("no plan fits ({} considered)", row.plans);
      }
    } catch (const sim::Error& e) {
      row.reason = e.what();
    }
    rows.push_back(std::move(row));
  }
  mark_pareto(rows);
  return rows;
}

void mark_pareto(std::vector<HardwareRow>& rows) {
  const auto priced = [](const HardwareRow& r) { return r.best && r.best->usd_run >= 0.0; };
  for (HardwareRow& a : rows) {
    a.pareto = false;
    if (!priced(a)) continue;
    bool dominated = false;
    for (const HardwareRow& b : rows) {
      if (&a == &b || !priced(b)) continue;
      const bool no_worse = b.best->run_s <= a.best->run_s && b.best->usd_run <= a.best->usd_run;
      const bool better = b.best->run_s < a.best->run_s || b.best->usd_run < a.best->usd_run;
      dominated = dominated || (no_worse && better);
    }
    a.pareto = !dominated;
  }
}

}  // namespace foresight::strategy
