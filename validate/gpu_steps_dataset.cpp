#include "validate/gpu_steps_dataset.hpp"

#include <fmt/core.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "exec/executor.hpp"
#include "run/scenario.hpp"
#include "topologies/cluster_builders.hpp"
#include "topologies/gpu_spec.hpp"
#include "validate/dataset_fields.hpp"
#include "traces/kineto.hpp"
#include "traces/profile_db_json.hpp"
#include "traces/replay.hpp"

namespace foresight::validate {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// The keys a measured row carries (scripts/gpu/train_steps.py writes them).
const std::vector<std::string_view> kRowKeys = {
    "name", "model", "batch", "precision", "recompute", "parameters", "attention", "warmup", "steps", "step_seconds",
    "p10_seconds", "p90_seconds", "all_seconds", "peak_allocated_bytes", "peak_reserved_bytes", "wall_seconds"};

std::vector<std::string_view> keys_with(std::initializer_list<std::string_view> extra) {
  std::vector<std::string_view> keys = kRowKeys;
  keys.insert(keys.end(), extra);
  return keys;
}

/// A file the row names, resolved against the dataset's folder; it must exist.
std::string existing(const topo::JsonReader& r, const json& o, std::string_view key, const topo::JsonPath& p,
                     const fs::path& folder) {
  const std::string path = (folder / r.string_at(o, key, p, "a row")).lexically_normal().string();
  if (!fs::is_regular_file(path)) r.fail(p.at(key), fmt::format("expected a file, found none at {}", path));
  return path;
}

double positive_seconds(const topo::JsonReader& r, const json& o, const topo::JsonPath& p, std::string_view key) {
  const double s = r.number_at(o, key, p, "a row");
  if (!(s > 0.0)) r.fail(p.at(key), fmt::format("expected a positive step time, found {}", s));
  return s;
}

/// The replayed and the measured steady step of a trace (trace::steady_means), on its own GPU.
trace::StepMeans replayed_steady(const std::string& path, std::string& note) {
  const trace::KinetoTrace t = trace::load_kineto(path);
  const trace::ReplayGraph g = trace::replay_graph(t, -1);
  const topo::Cluster host = topo::resolve_cluster("dgx-a100", 1);  // one GPU: ops keep their measured times
  const sim::ExecutionResult res = sim::execute(g.graph, host, sim::CollectiveConfig{}, sim::NetworkKind::analytical);
  const trace::StepMeans m = trace::steady_means(g.window, res.end);
  note = fmt::format("{} GPU ops, {} step{} replayed", g.gpu_ops, m.steps, m.steps == 1 ? "" : "s");
  return m;
}

}  // namespace

GpuStepsDataset load_gpu_steps_dataset(const std::string& path) {
  const topo::JsonReader r(path, sim::ErrorKind::config);
  const json doc = r.parse_file();
  const topo::JsonPath root;
  r.check_object(doc, {"description", "source", "gpu", "provenance", "steps", "inject_steps"}, root,
                 "a single-GPU steps dataset");
  const fs::path folder = fs::path(path).parent_path();
  GpuStepsDataset d;
  d.source = r.string_at(doc, "source", root, "the dataset");
  d.gpu = catalog_gpu_at(r, doc, "gpu", root, "the dataset");
  const json& steps = r.array_at(doc, "steps", root, "the dataset");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const topo::JsonPath p = root.at("steps").at(i);
    const json& o = steps[i];
    r.check_object(o, keys_with({"scenario", "profile", "kineto_trace", "role", "repeat_step_seconds", "repeat_all_seconds"}),
                   p, "a row");
    GpuStepRun run;
    run.id = r.string_at(o, "name", p, "a row");
    run.scenario = existing(r, o, "scenario", p, folder);
    run.profile = existing(r, o, "profile", p, folder);
    if (o.contains("kineto_trace")) run.kineto_trace = existing(r, o, "kineto_trace", p, folder);
    run.first_step_s = positive_seconds(r, o, p, "step_seconds");
    run.repeat_step_s = o.contains("repeat_step_seconds") ? positive_seconds(r, o, p, "repeat_step_seconds") : 0.0;
    run.step_s = run.repeat_step_s > 0.0 ? 0.5 * (run.first_step_s + run.repeat_step_s) : run.first_step_s;
    run.peak_allocated_bytes = r.number_at(o, "peak_allocated_bytes", p, "a row");
    const std::string role = r.string_at(o, "role", p, "a row");
    if (role != "calibration" && role != "prediction") {
      r.fail(p.at("role"), fmt::format("expected calibration or prediction, found \"{}\"", role));
    }
    run.role = role == "calibration" ? Role::calibration : Role::prediction;
    for (const GpuStepRun& other : d.runs) {
      if (other.id == run.id) r.fail(p.at("name"), fmt::format("a second row \"{}\"", run.id));
    }
    d.runs.push_back(std::move(run));
  }
  const json& inject = r.array_at(doc, "inject_steps", root, "the dataset");
  for (std::size_t i = 0; i < inject.size(); ++i) {
    const topo::JsonPath p = root.at("inject_steps").at(i);
    const json& o = inject[i];
    r.check_object(o, keys_with({"trace"}), p, "a row");
    const std::string name = r.string_at(o, "name", p, "a row");
    const auto it = std::find_if(d.runs.begin(), d.runs.end(), [&](const GpuStepRun& x) { return x.id == name; });
    if (it == d.runs.end()) r.fail(p.at("name"), fmt::format("expected the name of a row of /steps, found \"{}\"", name));
    it->inject_trace = existing(r, o, "trace", p, folder);
    it->inject_step_s = positive_seconds(r, o, p, "step_seconds");
  }
  return d;
}

std::vector<GpuStepResult> evaluate_gpu_steps(const GpuStepsDataset& d, GpuStepMethod method,
                                              const strategy::SimulationInputs& inputs) {
  std::vector<GpuStepResult> out;
  for (const GpuStepRun& run : d.runs) {
    if (method == GpuStepMethod::replay) {
      // Against the traced steps themselves: a tracer slows the host (the PyTorch profiler with
      // shapes adds up to half to a step of many small kernels), which replay reproduces as
      // measured; the untraced median says by how much.
      const auto add = [&](const std::string& path, std::string_view suffix, std::string_view what, double untraced) {
        std::string note;
        const trace::StepMeans m = replayed_steady(path, note);
        out.push_back({run.id + std::string(suffix), &run, m.replayed_s, m.measured_s,
                       fmt::format("{}: {}; untraced {:.2f} ms, the tracer's cost {:+.0f}%", what, note,
                                   untraced * 1e3, (m.measured_s / untraced - 1.0) * 100.0)});
      };
      if (!run.kineto_trace.empty()) add(run.kineto_trace, "/kineto", "PyTorch-profiler trace", run.step_s);
      if (!run.inject_trace.empty()) add(run.inject_trace, "/inject", "libforesight_inject.so (CUPTI) trace", run.step_s);
      continue;
    }
    const strategy::Scenario scenario = strategy::load_scenario(run.scenario);
    strategy::SimulationInputs in = inputs;
    sim::ProfileDb db;
    if (method == GpuStepMethod::profile) {
      db = trace::load_profile_db(run.profile);
      in.profiles = &db;
    }
    const strategy::SimulationOutput s = strategy::simulate_scenario(scenario, in);
    GpuStepResult r{run.id, &run, s.report.iteration_time_s, run.step_s, ""};
    r.note = fmt::format("{}peak memory {:.1f} GiB predicted, {:.1f} GiB allocated by PyTorch",
                         run.repeat_step_s > 0.0 ? fmt::format("measured {:.2f} and {:.2f} ms in two processes; ",
                                                               run.first_step_s * 1e3, run.repeat_step_s * 1e3)
                                                 : "",
                         s.report.peak_bytes_max() / double(1ULL << 30), run.peak_allocated_bytes / double(1ULL << 30));
    if (method == GpuStepMethod::profile) r.note += fmt::format("; {} kernels profiled", db.size());
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace foresight::validate
