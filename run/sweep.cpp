#include "run/sweep.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include "common/error.hpp"

namespace foresight::strategy {
namespace {

/// Every combination, as value indices, the last dimension varying fastest.
std::vector<std::vector<std::size_t>> combinations(const std::vector<SweepDimension>& dims) {
  std::vector<std::vector<std::size_t>> out{{}};
  for (const SweepDimension& d : dims) {
    std::vector<std::vector<std::size_t>> next;
    for (const auto& prefix : out) {
      for (std::size_t v = 0; v < d.values.size(); ++v) {
        auto c = prefix;
        c.push_back(v);
        next.push_back(std::move(c));
      }
    }
    out = std::move(next);
  }
  return out;
}

std::vector<std::string> result_fields(const SimulationOutput& out) {
  const Report& r = out.report;
  auto num = [](double v) { return fmt::format("{:.9g}", v); };
  return {num(r.iteration_time_s),
          num(r.run_time_s),
          num(r.samples_per_s),
          num(r.tokens_per_s),
          num(r.tflops_per_gpu),
          num(r.mfu),
          num(r.breakdown.compute_s),
          num(r.breakdown.exposed_comm_s),
          num(r.breakdown.bubble_s),
          num(r.breakdown.host_s),
          num(r.peak_bytes_max()),
          r.oom() ? "1" : "0",
          r.cost.priced ? num(r.cost.usd_run) : "",
          r.cost.powered ? num(r.cost.kwh_run) : "",
          ""};
}

}  // namespace

const std::vector<std::string>& sweep_result_columns() {
  static const std::vector<std::string> columns{
      "iteration_time_s", "run_time_s",     "samples_per_s", "tokens_per_s", "tflops_per_gpu", "mfu",
      "compute_s",        "exposed_comm_s", "bubble_s",      "host_s",       "peak_bytes",     "oom",
      "usd_run",          "kwh_run",        "error"};
  return columns;
}

std::vector<Override> SweepDefinition::overrides(std::size_t i) const {
  std::vector<Override> out = shared;
  for (std::size_t d = 0; d < dims.size(); ++d) out.push_back({dims[d].path, configs.at(i)[d]});
  return out;
}

std::string SweepDefinition::describe(std::size_t i) const {
  std::string out;
  for (std::size_t d = 0; d < dims.size(); ++d) out += fmt::format("{}{}={}", d ? " " : "", dims[d].column, configs.at(i)[d]);
  return out;
}

std::vector<std::size_t> SweepDefinition::value_indices(std::size_t i) const {
  if (i >= configs.size()) {
    throw sim::InternalError(fmt::format("sweep: configuration {} of {}", i, configs.size()));
  }
  // Configurations count in mixed radix, the last dimension the fastest digit.
  std::vector<std::size_t> out(dims.size());
  for (std::size_t d = dims.size(); d-- > 0;) {
    out[d] = i % dims[d].values.size();
    i /= dims[d].values.size();
  }
  return out;
}

SweepDefinition make_sweep(ScenarioSource scenario, std::vector<Override> shared, std::vector<SweepDimension> dims) {
  SweepDefinition def;
  def.scenario = std::move(scenario);
  def.shared = std::move(shared);
  def.dims = std::move(dims);
  for (const auto& picks : combinations(def.dims)) {
    std::vector<std::string> values;
    for (std::size_t d = 0; d < picks.size(); ++d) values.push_back(def.dims[d].values[picks[d]]);
    def.configs.push_back(std::move(values));
  }
  for (const auto& d : def.dims) def.header.push_back(d.column);
  const auto& results = sweep_result_columns();
  def.header.insert(def.header.end(), results.begin(), results.end());
  return def;
}

void check_configurations(const SweepDefinition& def, const std::vector<std::size_t>& which) {
  for (const std::size_t i : which) {
    try {
      (void)load_scenario(def.scenario, def.overrides(i));
    } catch (const sim::Error& e) {
      throw sim::ConfigError(fmt::format("sweep configuration {}: {}", def.describe(i), e.what()));
    }
  }
}

ConfigResult run_configuration(const SweepDefinition& def, std::size_t i, const SimulationInputs& inputs) {
  ConfigResult result;
  result.row = def.configs.at(i);
  try {
    const auto out = simulate_scenario(load_scenario(def.scenario, def.overrides(i)), inputs);
    const auto fields = result_fields(out);
    result.row.insert(result.row.end(), fields.begin(), fields.end());
    const auto& r = out.report;
    result.summary = fmt::format("iteration {}", sim::to_string(sim::Time::from_seconds(r.iteration_time_s)));
    if (r.oom()) {
      double capacity = 0.0;
      for (const auto& m : r.memory) capacity = m.bytes.total() >= r.peak_bytes_max() ? m.capacity : capacity;
      result.summary += fmt::format(", OUT OF MEMORY (peak {:.1f} GiB of {:.0f} GiB)", r.peak_bytes_max() / (1 << 30),
                                    capacity / (1 << 30));
    }
    result.ran = true;
    result.oom = r.oom();
    result.iteration_s = r.iteration_time_s;
  } catch (const sim::Error& e) {
    result.row.resize(def.dims.size() + sweep_result_columns().size() - 1);
    result.row.emplace_back(e.what());
    result.summary = fmt::format("error: {}", e.what());
  }
  return result;
}

void run_on_threads(const SweepDefinition& def, const std::vector<std::size_t>& todo, const SimulationInputs& inputs,
                    int jobs, const std::function<void(std::size_t, const ConfigResult&)>& record) {
  std::atomic<std::size_t> next{0};
  const unsigned hw = std::max(1U, std::thread::hardware_concurrency());
  const auto threads =
      static_cast<unsigned>(std::min<std::size_t>(todo.size(), jobs > 0 ? static_cast<unsigned>(jobs) : hw));
  // An exception escaping a thread would end the process; each is kept and the first rethrown.
  std::vector<std::exception_ptr> crashed(todo.size());
  auto worker = [&] {
    for (std::size_t k = next++; k < todo.size(); k = next++) {
      try {
        record(todo[k], run_configuration(def, todo[k], inputs));
      } catch (...) {
        crashed[k] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  if (threads > 0) worker();
  for (auto& t : pool) t.join();
  for (const auto& e : crashed) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace foresight::strategy
