#include "validate/thetagpu_dataset.hpp"

#include <fmt/core.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "validate/golden_section.hpp"

namespace foresight::validate {
namespace {

using nlohmann::json;

std::string in_source_tree(const std::string& relative) {
  // Dataset files name scenarios relative to the repository root, the folder above data_dir()/..
  return (std::filesystem::path(data_dir()).parent_path().parent_path() / relative).string();
}

}  // namespace

ThetaDataset load_thetagpu_dataset(const std::string& path) {
  const topo::JsonReader r(path, sim::ErrorKind::config);
  const json doc = r.parse_file();
  const topo::JsonPath root;
  r.check_object(doc, {"dataset", "source", "what", "calibration_rule", "assumptions", "scenario", "runs"}, root,
                 "the ThetaGPU dataset");
  ThetaDataset d;
  d.source = r.string_at(doc, "source", root, "the dataset");
  const json& sc = r.require(doc, "scenario", root, "the dataset");
  r.check_object(sc, {"ddp", "gpipe"}, root.at("scenario"), "the scenarios");
  d.ddp_scenario = in_source_tree(r.string_at(sc, "ddp", root.at("scenario"), "the scenarios"));
  d.gpipe_scenario = in_source_tree(r.string_at(sc, "gpipe", root.at("scenario"), "the scenarios"));
  const json& runs = r.array_at(doc, "runs", root, "the dataset");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const topo::JsonPath p = root.at("runs").at(i);
    const json& o = runs[i];
    r.check_object(o, {"id", "strategy", "framework", "gpus", "time_s", "role"}, p, "a run");
    ThetaRun run;
    run.id = r.string_at(o, "id", p, "a run");
    run.strategy = r.string_at(o, "strategy", p, "a run");
    run.gpus = static_cast<int>(r.integer_at(o, "gpus", p, "a run", 1, 1 << 16));
    run.time_s = r.number_at(o, "time_s", p, "a run");
    const std::string role = r.string_at(o, "role", p, "a run");
    if (role != "calibration" && role != "prediction") {
      r.fail(p.at("role"), fmt::format("expected calibration or prediction, found \"{}\"", role));
    }
    run.role = role == "calibration" ? Role::calibration : Role::prediction;
    if (run.strategy != "data_parallel" && run.strategy != "pipeline_gpipe") {
      r.fail(p.at("strategy"), fmt::format("expected data_parallel or pipeline_gpipe, found \"{}\"", run.strategy));
    }
    if (!(run.time_s > 0.0)) r.fail(p.at("time_s"), fmt::format("expected a positive time, found {}", run.time_s));
    for (const ThetaRun& other : d.runs) {
      if (other.id == run.id) r.fail(p.at("id"), fmt::format("a second run \"{}\"", run.id));
    }
    d.runs.push_back(run);
  }
  return d;
}

strategy::Scenario ddp_scenario(const ThetaDataset& d, int gpus, double input_rate) {
  return strategy::load_scenario(d.ddp_scenario, {{"cluster.gpus", std::to_string(gpus)},
                                                  {"plan.input_rate", fmt::format("{:.17g}", input_rate)}});
}

DdpCalibration fit_thetagpu_ddp(const ThetaDataset& d, const strategy::SimulationInputs& inputs) {
  std::vector<const ThetaRun*> cal;
  for (const ThetaRun& r : d.runs) {
    if (r.strategy == "data_parallel" && r.role == Role::calibration) cal.push_back(&r);
  }
  if (cal.empty()) throw sim::ConfigError("ThetaGPU dataset: no data-parallel calibration rows");
  auto cost = [&](double log_rate) {
    double sum = 0.0;
    for (const ThetaRun* r : cal) {
      const double t = strategy::simulate_scenario(ddp_scenario(d, r->gpus, std::exp(log_rate)), inputs).report.run_time_s;
      sum += std::pow(t / r->time_s - 1.0, 2);
    }
    return sum;
  };
  // Golden-section search on log(rate) in [log 10, log 10^6] samples/s.
  const double log_rate = golden_section_min(cost, std::log(10.0), std::log(1e6), 1e-7, 80);
  DdpCalibration c;
  c.input_rate = std::exp(log_rate);
  for (const ThetaRun* r : cal) c.fitted_on.push_back(r->id);
  return c;
}

std::vector<ThetaResult> evaluate_thetagpu_ddp(const ThetaDataset& d, const DdpCalibration& c,
                                               const strategy::SimulationInputs& inputs) {
  std::vector<ThetaResult> out;
  for (const ThetaRun& r : d.runs) {
    if (r.strategy != "data_parallel") continue;
    ThetaResult x;
    x.run = &r;
    x.report = strategy::simulate_scenario(ddp_scenario(d, r.gpus, c.input_rate), inputs).report;
    x.predicted_s = x.report.run_time_s;
    x.error_pct = (x.predicted_s - r.time_s) / r.time_s * 100.0;
    out.push_back(std::move(x));
  }
  return out;
}

strategy::Scenario gpipe_scenario(const ThetaDataset& d, int gpus, double input_rate, const GpipeCalibration& g) {
  return strategy::load_scenario(d.gpipe_scenario,
                                 {{"cluster.gpus", std::to_string(gpus)},
                                  {"plan.input_rate", fmt::format("{:.17g}", input_rate)},
                                  {"plan.microbatch_overhead", fmt::format("{} us", g.microbatch_overhead.microseconds())},
                                  {"plan.dispatch_gil", fmt::format("{} us", g.dispatch_gil.microseconds())}});
}

std::vector<sim::Time> gpipe_overhead_grid() {
  std::vector<sim::Time> grid;
  for (int us = 0; us <= 160; us += 20) grid.push_back(sim::Time::from_ps(us * 1'000'000LL));
  return grid;
}

std::vector<sim::Time> gpipe_gil_grid() {
  std::vector<sim::Time> grid;
  for (int us = 3; us <= 8; ++us) grid.push_back(sim::Time::from_ps(us * 1'000'000LL));
  return grid;
}

GpipeCalibration fit_thetagpu_gpipe(const ThetaDataset& d, double input_rate, const strategy::SimulationInputs& inputs) {
  std::vector<const ThetaRun*> cal;
  for (const ThetaRun& r : d.runs) {
    if (r.strategy == "pipeline_gpipe" && r.role == Role::calibration) cal.push_back(&r);
  }
  if (cal.empty()) throw sim::ConfigError("ThetaGPU dataset: no pipeline_gpipe calibration rows");
  GpipeCalibration best;
  double best_cost = std::numeric_limits<double>::infinity();
  for (const sim::Time overhead : gpipe_overhead_grid()) {
    for (const sim::Time gil : gpipe_gil_grid()) {
      const GpipeCalibration g{overhead, gil, {}};
      double cost = 0.0;
      for (const ThetaRun* r : cal) {
        const double t = strategy::simulate_scenario(gpipe_scenario(d, r->gpus, input_rate, g), inputs).report.run_time_s;
        cost += std::pow(t / r->time_s - 1.0, 2);
      }
      if (cost < best_cost) {
        best_cost = cost;
        best = g;
      }
    }
  }
  for (const ThetaRun* r : cal) best.fitted_on.push_back(r->id);
  return best;
}

std::vector<ThetaResult> evaluate_thetagpu_gpipe(const ThetaDataset& d, double input_rate, const GpipeCalibration& g,
                                                 const strategy::SimulationInputs& inputs) {
  std::vector<ThetaResult> out;
  for (const ThetaRun& r : d.runs) {
    if (r.strategy != "pipeline_gpipe") continue;
    ThetaResult x;
    x.run = &r;
    x.report = strategy::simulate_scenario(gpipe_scenario(d, r.gpus, input_rate, g), inputs).report;
    x.predicted_s = x.report.run_time_s;
    x.error_pct = (x.predicted_s - r.time_s) / r.time_s * 100.0;
    out.push_back(std::move(x));
  }
  return out;
}

}  // namespace foresight::validate
