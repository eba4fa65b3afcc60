#include "validate/megatron_dataset.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "sim/error.hpp"
#include "topologies/json_reader.hpp"

namespace foresight::validate {

MegatronDataset load_megatron_dataset(const std::string& path) {
  using nlohmann::json;
  const topo::JsonReader r(path, sim::ErrorKind::config);
  const json doc = r.parse_file();
  const topo::JsonPath root;
  r.check_object(doc, {"dataset", "source", "what", "system", "calibration_rule", "flops_formula", "runs"}, root,
                 "the Megatron SC21 dataset");
  MegatronDataset d;
  d.source = r.string_at(doc, "source", root, "the dataset");
  const json& runs = r.array_at(doc, "runs", root, "the dataset");
  int calibration = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const topo::JsonPath p = root.at("runs").at(i);
    const json& o = runs[i];
    constexpr std::string_view what = "a run";
    r.check_object(o, {"id", "params_b", "hidden", "layers", "heads", "tp", "pp", "gpus", "global_batch", "tflops_per_gpu",
                       "pct_peak", "micro_batch", "ddp_impl", "recompute", "layers_per_virtual_stage", "seq_len", "vocab",
                       "precision", "role"},
                   p, what);
    MegatronRun run;
    run.id = r.string_at(o, "id", p, what);
    run.params_b = r.number_at(o, "params_b", p, what);
    run.hidden = static_cast<int>(r.integer_at(o, "hidden", p, what, 1, 1 << 20));
    run.layers = static_cast<int>(r.integer_at(o, "layers", p, what, 1, 1 << 16));
    run.heads = static_cast<int>(r.integer_at(o, "heads", p, what, 1, 1 << 16));
    run.tp = static_cast<int>(r.integer_at(o, "tp", p, what, 1, 1 << 16));
    run.pp = static_cast<int>(r.integer_at(o, "pp", p, what, 1, 1 << 16));
    run.gpus = static_cast<int>(r.integer_at(o, "gpus", p, what, 1, 1 << 20));
    run.global_batch = static_cast<int>(r.integer_at(o, "global_batch", p, what, 1, 1 << 24));
    run.micro_batch = static_cast<int>(r.integer_at(o, "micro_batch", p, what, 1, 1 << 20));
    if (!o.at("layers_per_virtual_stage").is_null()) {
      run.layers_per_virtual_stage = static_cast<int>(r.integer_at(o, "layers_per_virtual_stage", p, what, 1, 1 << 16));
    }
    run.recompute = r.string_at(o, "recompute", p, what);
    run.seq_len = static_cast<int>(r.integer_at(o, "seq_len", p, what, 1, 1 << 24));
    run.vocab = static_cast<int>(r.integer_at(o, "vocab", p, what, 1, 1 << 24));
    run.precision = r.string_at(o, "precision", p, what);
    run.tflops_per_gpu = r.number_at(o, "tflops_per_gpu", p, what);
    if (!(run.tflops_per_gpu > 0.0)) {
      r.fail(p.at("tflops_per_gpu"), fmt::format("expected a positive throughput, found {}", run.tflops_per_gpu));
    }
    if (run.gpus % (run.tp * run.pp) != 0) {
      r.fail(p.at("gpus"), fmt::format("expected a multiple of tp x pp = {} x {}, found {}", run.tp, run.pp, run.gpus));
    }
    const std::string role = r.string_at(o, "role", p, what);
    if (role != "calibration" && role != "prediction") {
      r.fail(p.at("role"), fmt::format("expected calibration or prediction, found \"{}\"", role));
    }
    run.role = role == "calibration" ? Role::calibration : Role::prediction;
    if (run.role == Role::calibration && ++calibration > 3) {
      r.fail(p.at("role"), "expected at most 3 calibration rows (the issue's rule), found a fourth");
    }
    for (const MegatronRun& other : d.runs) {
      if (other.id == run.id) r.fail(p.at("id"), fmt::format("a second run \"{}\"", run.id));
    }
    d.runs.push_back(std::move(run));
  }
  return d;
}

std::vector<std::string> megatron_missing_features(const MegatronRun& r) {
  std::vector<std::string> missing;
  if (r.tp > 1 && r.pp > 1) missing.push_back(fmt::format("tensor parallelism inside a pipeline (tp = {}, pp = {})", r.tp, r.pp));
  if (r.recompute != "none" && r.recompute != "full") missing.push_back(fmt::format("{} recompute", r.recompute));
  return missing;
}

double megatron_flops_per_iteration(const MegatronRun& r) {
  const double b = r.global_batch, s = r.seq_len, l = r.layers, h = r.hidden, v = r.vocab;
  return 96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
}

strategy::Scenario megatron_scenario(const MegatronRun& r, const std::string& dataset_file) {
  using nlohmann::json;
  const std::string config =
      (std::filesystem::path(dataset_file).parent_path() / "megatron_sc21" / (r.id + ".json")).string();
  const json doc = {
      {"description", fmt::format("Megatron-LM SC21 Table 1: {}", r.id)},
      {"model", {{"hf_config", config}}},
      {"cluster", {{"preset", "selene"}, {"gpus", r.gpus}}},
      {"plan",
       {{"dp", r.gpus / (r.tp * r.pp)},
        {"tp", r.tp},
        {"pp", r.pp},
        {"micro_batch", r.micro_batch},
        {"global_batch", r.global_batch},
        {"precision", r.precision},
        {"optimizer", "adam"},
        {"recompute", r.recompute},
        {"steps", 2}}},
      {"workload", {{"steps", 1}}}};
  return strategy::parse_scenario(doc, dataset_file);
}

}  // namespace foresight::validate
