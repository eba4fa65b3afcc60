#include "validate/megatron_dataset.hpp"

#include <fmt/core.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "validate/golden_section.hpp"

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

double megatron_graph_nodes(const MegatronRun& r) {
  // Per transformer layer and micro-batch a rank runs about 50 nodes: ~13 forward kernels,
  // ~20 backward, ~13 recomputed, and its collectives (counted from the unfused GPT layer).
  constexpr double kNodesPerLayer = 50.0;
  const double dp = static_cast<double>(r.gpus) / (r.tp * r.pp);
  const double micro_batches = r.global_batch / (dp * r.micro_batch);
  const double simulated = r.pp;  // replicas and TP ranks fold (strategies/hybrid_layout.hpp)
  return simulated * micro_batches * kMegatronSteps * kNodesPerLayer * r.layers / r.pp;
}

std::vector<std::string> megatron_missing_features(const MegatronRun& r) {
  std::vector<std::string> missing;
  if (r.recompute != "none" && r.recompute != "full") missing.push_back(fmt::format("{} recompute", r.recompute));
  const double nodes = megatron_graph_nodes(r);
  if (nodes > kMegatronNodeLimit) {
    missing.push_back(fmt::format("a smaller graph: {} stages x {} micro-batches would be ~{:.0f} M execution-graph nodes "
                                  "(the suite's limit is {:.0f} M)",
                                  r.pp, r.global_batch / (r.gpus / (r.tp * r.pp) * r.micro_batch), nodes / 1e6,
                                  kMegatronNodeLimit / 1e6));
  }
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
        {"optimizer_impl", "fused"},  // Megatron-LM steps with Apex FusedAdam
        {"recompute", r.recompute},
        {"kernel_generation", "megatron-2021"},  // the code SC21 ran: its rate is what the fit measures
        // Contention-free links: with folding the 3072-GPU row takes ~15 s this way against ~4 min
        // on the flow model, for a 0.3% different answer.
        {"network", "analytical"},
        {"steps", kMegatronSteps}}},
      {"workload", {{"steps", 1}}}};
  json with_schedule = doc;
  if (r.pp > 1) {
    json& plan = with_schedule["plan"];
    plan["partition"] = "uniform";
    if (r.layers_per_virtual_stage > 0 && r.layers / r.pp / r.layers_per_virtual_stage > 1) {
      // Megatron's interleaved schedule: num_layers_per_virtual_pipeline_stage layers per chunk.
      plan["schedule"] = "interleaved";
      plan["virtual_stages"] = r.layers / r.pp / r.layers_per_virtual_stage;
    } else {
      plan["schedule"] = "1f1b";
    }
  }
  return strategy::parse_scenario(with_schedule, dataset_file);
}

double megatron_predicted_tflops(const MegatronRun& r, const std::string& dataset_file,
                                 const strategy::SimulationInputs& inputs, double* iteration_s) {
  const auto out = strategy::simulate_scenario(megatron_scenario(r, dataset_file), inputs);
  if (iteration_s != nullptr) *iteration_s = out.report.iteration_time_s;
  return megatron_flops_per_iteration(r) / (out.report.iteration_time_s * r.gpus) * 1e-12;
}

MegatronCalibration fit_megatron(const MegatronDataset& d, const std::string& dataset_file,
                                 const strategy::SimulationInputs& inputs) {
  std::vector<const MegatronRun*> cal;
  for (const MegatronRun& r : d.runs) {
    if (r.role == Role::calibration && megatron_missing_features(r).empty()) cal.push_back(&r);
  }
  if (cal.empty()) throw sim::ConfigError(fmt::format("{}: no calibration row the simulator can run", dataset_file));
  strategy::SimulationInputs trial = inputs;
  auto cost = [&](double log_eff) {
    trial.megatron_2021_gemm_efficiency = std::exp(log_eff);
    double sum = 0.0;
    for (const MegatronRun* r : cal) {
      const double t = megatron_predicted_tflops(*r, dataset_file, trial);
      sum += std::pow(t / r->tflops_per_gpu - 1.0, 2);
    }
    return sum;
  };
  const double log_efficiency = golden_section_min(cost, std::log(0.3), std::log(2.0), 1e-4, 1000);
  MegatronCalibration c;
  c.gemm_efficiency = std::exp(log_efficiency);
  for (const MegatronRun* r : cal) c.fitted_on.push_back(r->id);
  return c;
}

}  // namespace foresight::validate
