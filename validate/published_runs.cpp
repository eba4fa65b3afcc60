#include "validate/published_runs.hpp"

#include <fmt/core.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "run/scenario.hpp"

namespace foresight::validate {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

}  // namespace

PublishedRuns load_published_runs(const std::string& path) {
  const topo::JsonReader r(path, sim::ErrorKind::config);
  const json doc = r.parse_file();
  const topo::JsonPath root;
  r.check_object(doc, {"dataset", "description", "calibration_rule", "sources", "runs"}, root, "a published-runs dataset");
  PublishedRuns d;
  d.description = r.string_at(doc, "description", root, "the dataset");
  const json& sources = r.require(doc, "sources", root, "the dataset");
  if (!sources.is_object() || sources.empty()) {
    r.fail(root.at("sources"), fmt::format("expected an object of sources by key, found {}", sources.dump()));
  }
  for (const auto& [key, s] : sources.items()) {
    const topo::JsonPath p = root.at("sources").at(key);
    r.check_object(s, {"citation", "url"}, p, "a source");
    d.sources[key] = {r.string_at(s, "citation", p, "a source"), r.string_at(s, "url", p, "a source")};
  }
  const fs::path folder = fs::path(path).parent_path();
  const json& runs = r.array_at(doc, "runs", root, "the dataset");
  std::set<std::string> ids;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const topo::JsonPath p = root.at("runs").at(i);
    const json& o = runs[i];
    r.check_object(o, {"id", "source", "scenario", "reported", "derivation", "measured_iteration_s", "role", "note"}, p,
                   "a run");
    PublishedRun run;
    run.id = r.string_at(o, "id", p, "a run");
    if (!ids.insert(run.id).second) r.fail(p.at("id"), fmt::format("expected a new id, found \"{}\" again", run.id));
    run.source = r.string_at(o, "source", p, "a run");
    if (!d.sources.count(run.source)) {
      r.fail(p.at("source"), fmt::format("expected a key of /sources, found \"{}\"", run.source));
    }
    run.scenario = (folder / r.string_at(o, "scenario", p, "a run")).lexically_normal().string();
    if (!fs::is_regular_file(run.scenario)) {
      r.fail(p.at("scenario"), fmt::format("expected a scenario file, found none at {}", run.scenario));
    }
    run.reported = r.string_at(o, "reported", p, "a run");
    run.derivation = r.string_at(o, "derivation", p, "a run");
    run.measured_iteration_s = r.number_at(o, "measured_iteration_s", p, "a run");
    if (!(run.measured_iteration_s > 0.0)) {
      r.fail(p.at("measured_iteration_s"), fmt::format("expected a positive time, found {}", run.measured_iteration_s));
    }
    const std::string role = r.string_at(o, "role", p, "a run");
    if (role != "prediction" && role != "calibration") {
      r.fail(p.at("role"), fmt::format("expected prediction or calibration, found \"{}\"", role));
    }
    run.role = role == "calibration" ? Role::calibration : Role::prediction;
    if (o.contains("note")) run.note = r.string_at(o, "note", p, "a run");
    d.runs.push_back(std::move(run));
  }
  return d;
}

std::vector<PublishedResult> evaluate_published_runs(const PublishedRuns& d, const strategy::SimulationInputs& inputs) {
  std::vector<PublishedResult> out;
  for (const PublishedRun& run : d.runs) {
    const strategy::Scenario scenario = strategy::load_scenario(run.scenario);
    const strategy::SimulationOutput s = strategy::simulate_scenario(scenario, inputs);
    const json& plan = s.plan;
    const auto get = [&](const char* key) { return plan.contains(key) ? plan[key].dump() : std::string("-"); };
    PublishedResult res{&run, s.report.iteration_time_s, ""};
    res.note = fmt::format("{}: {} x {}; tp {} pp {} dp {}, micro-batch {}, global batch {}; reported {}",
                           d.sources.at(run.source).citation.substr(0, d.sources.at(run.source).citation.find(',')),
                           s.report.gpus, s.report.gpu, get("tp"), get("pp"), get("dp"),
                           get("micro_batch"), get("global_batch"), run.reported);
    out.push_back(std::move(res));
  }
  return out;
}

}  // namespace foresight::validate
