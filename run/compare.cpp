#include "run/compare.hpp"

#include <fmt/core.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

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

namespace {

/// One option's search: its best plan and why there is none.
HardwareRow search_option(const std::string& path, const nlohmann::json& doc, const HardwareOption& option,
                          const PlanSpace& space, const PlanOptions& plan_options, const SimulationInputs& inputs,
                          double budget_usd, const std::function<void(const std::string&)>& progress) {
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
  return row;
}

}  // namespace

std::vector<HardwareRow> compare_hardware(const std::string& path, const nlohmann::json& doc,
                                          const std::vector<HardwareOption>& options, const PlanSpace& space,
                                          const PlanOptions& plan_options, const SimulationInputs& inputs,
                                          double budget_usd, const std::function<void(const std::string&)>& progress) {
  // The options' searches run side by side, the threads shared out among them: with as many
  // options as threads or more, one thread each (a search's tail, where one candidate is left,
  // no longer idles the other cores). Each search's result depends only on its own thread count.
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t jobs = plan_options.jobs > 0 ? static_cast<std::size_t>(plan_options.jobs) : hw;
  const std::size_t side_by_side = std::max<std::size_t>(1, std::min(jobs, options.size()));
  PlanOptions each = plan_options;
  each.jobs = static_cast<int>(std::max<std::size_t>(1, jobs / side_by_side));
  // A row keeps its option's best plan alone, so each search prunes against its best so far
  // rather than its top-th: the same best, fewer plans simulated.
  each.top = 1;
  std::mutex lock;
  const std::function<void(const std::string&)> report = [&](const std::string& line) {
    const std::lock_guard<std::mutex> g(lock);
    progress(line);
  };
  std::vector<HardwareRow> rows(options.size());
  std::vector<std::exception_ptr> failures(options.size());
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    for (std::size_t k = next++; k < options.size(); k = next++) {
      try {
        rows[k] = search_option(path, doc, options[k], space, each, inputs, budget_usd,
                                progress ? report : std::function<void(const std::string&)>{});
      } catch (...) {
        failures[k] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < side_by_side; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (const std::exception_ptr& f : failures) {
    if (f) std::rethrow_exception(f);
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
