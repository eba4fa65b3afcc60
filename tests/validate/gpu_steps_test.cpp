// The single-GPU steps measured on an H200 (validate/data/h200_single_gpu_steps): the dataset
// reads with its traces and profiles; the two tracers' records of each step hold the same kernels;
// replay reproduces every traced step; bad rows are ConfigErrors naming file and field.
#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "models/compute_model.hpp"
#include "models/model_zoo.hpp"
#include "run/scenario.hpp"
#include "run/simulation.hpp"
#include "tests/test_paths.hpp"
#include "traces/kernel_agreement.hpp"
#include "traces/kineto.hpp"
#include "validate/gpu_steps_dataset.hpp"

using namespace foresight;
using Catch::Matchers::Contains;

namespace {

std::string dataset_path() { return test::source_path("validate/data/h200_single_gpu_steps/measured.json"); }

/// A copy of the dataset in the temporary folder with `edit` applied; its files' relative paths
/// are made absolute first unless `keep_relative` (they resolve against the dataset's folder).
std::string edited_copy(const std::string& name, const std::function<void(nlohmann::json&)>& edit,
                        bool keep_relative = false) {
  std::ifstream in(dataset_path());
  nlohmann::json doc = nlohmann::json::parse(in);
  const std::filesystem::path folder = std::filesystem::path(dataset_path()).parent_path();
  if (!keep_relative) {
    for (auto& row : doc["steps"]) {
      for (const char* key : {"scenario", "profile", "kineto_trace"}) row[key] = (folder / row[key].get<std::string>()).string();
    }
    for (auto& row : doc["inject_steps"]) row["trace"] = (folder / row["trace"].get<std::string>()).string();
  }
  edit(doc);
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << doc.dump();
  return path.string();
}

}  // namespace

TEST_CASE("the H200 steps dataset: nine configurations, each with its scenario, profile and both traces", "[validate]") {
  const validate::GpuStepsDataset d = validate::load_gpu_steps_dataset(dataset_path());
  REQUIRE(d.gpu == "H200-SXM-141GB");
  REQUIRE(d.runs.size() == 9);
  for (const validate::GpuStepRun& r : d.runs) {
    CAPTURE(r.id);
    // Four calibration rows: their kernel traces gave the compute model's memory-path factors
    // (ComputeConstants::memory_path_factor: GPT-2) and its BatchNorm factors (the three ResNet
    // rows); nothing is fitted on the others.
    const bool calibration = r.id == "gpt2-amp_bf16-b8" || r.id == "resnet50-amp_bf16-b128" ||
                             r.id == "resnet18-amp_fp16-b256" || r.id == "resnet50-fp32-b64";
    REQUIRE(r.role == (calibration ? validate::Role::calibration : validate::Role::prediction));
    REQUIRE(std::filesystem::exists(r.scenario));
    REQUIRE(std::filesystem::exists(r.profile));
    REQUIRE_FALSE(r.inject_trace.empty());
    REQUIRE(r.step_s == Approx(0.5 * (r.first_step_s + r.repeat_step_s)));
    // The two processes' medians agree within the spread seen (ResNet-50's cuDNN choices: 11%).
    REQUIRE(std::abs(r.repeat_step_s / r.first_step_s - 1.0) < 0.12);
  }
}

TEST_CASE("the H100 steps: the same nine configurations, one process, no traces", "[validate]") {
  const validate::GpuStepsDataset h100 =
      validate::load_gpu_steps_dataset(test::source_path("validate/data/h100_single_gpu_steps/measured.json"));
  const validate::GpuStepsDataset h200 = validate::load_gpu_steps_dataset(dataset_path());
  REQUIRE(h100.gpu == "H100-SXM5-80GB");
  REQUIRE(h100.runs.size() == h200.runs.size());
  for (std::size_t i = 0; i < h100.runs.size(); ++i) {
    const validate::GpuStepRun& r = h100.runs[i];
    CAPTURE(r.id);
    REQUIRE(r.id == h200.runs[i].id);
    REQUIRE(r.kineto_trace.empty());
    REQUIRE(r.repeat_step_s == 0.0);
    REQUIRE(r.step_s == r.first_step_s);  // one process: its median
    // Same chip and clocks, slower memory (3.35 against 4.8 TB/s): no step is faster on the H100.
    REQUIRE(r.step_s >= 0.99 * h200.runs[i].step_s);
  }
  // Without traces there is nothing to replay.
  REQUIRE(validate::evaluate_gpu_steps(h100, validate::GpuStepMethod::replay, {}).empty());
}

TEST_CASE("the PyTorch profiler's GPU-side copy of each step range is not a second step", "[validate]") {
  // Kineto writes ProfilerStep#N twice: the host's range (user_annotation) and the GPU's
  // (gpu_user_annotation). Counting both made four steps of two, two of them 0.2-0.5 ms long.
  const auto t = trace::load_kineto(
      test::source_path("validate/data/h200_single_gpu_steps/traces/kineto-gpt2-amp_bf16-b8.json.gz"));
  REQUIRE(t.steps.size() == 2);
  REQUIRE(t.steps[0].number == 1);
  REQUIRE(t.steps[1].number == 2);
  REQUIRE(t.steps[1].dur_us > 50'000.0);  // a GPT-2 step is ~65 ms
}

TEST_CASE("libforesight_inject.so and the PyTorch profiler record the same kernels of a step", "[validate]") {
  const validate::GpuStepsDataset d = validate::load_gpu_steps_dataset(dataset_path());
  for (const validate::GpuStepRun& r : d.runs) {
    CAPTURE(r.id);
    const auto kineto = trace::load_kineto(r.kineto_trace);
    const auto cupti = trace::load_kineto(r.inject_trace);
    // The collector records its device (CUPTI's device record), as the PyTorch profiler does.
    REQUIRE(cupti.gpu_name == kineto.gpu_name);
    REQUIRE(cupti.sm_count == 132);
    const trace::KernelAgreement k = trace::compare_step_kernels(kineto, cupti);
    REQUIRE(k.kernels_a > 200);
    REQUIRE(k.kernels_b == k.kernels_a);
    REQUIRE(k.same_name_in_order == k.kernels_a);  // same kernels, same order, same (demangled) names
    // Two processes' runs of one program: the same kernels take about the same time. Tolerances:
    // the step's GPU time within 5% (eight pairs agree within 0.8%, the recomputing Llama's within
    // 4.0%), the median kernel within 3%.
    REQUIRE(k.total_b_us == Approx(k.total_a_us).epsilon(0.05));
    REQUIRE(k.median_ratio == Approx(1.0).epsilon(0.03));
  }
}

TEST_CASE("replay reproduces every traced step within 5%", "[validate]") {
  const validate::GpuStepsDataset d = validate::load_gpu_steps_dataset(dataset_path());
  const auto results = validate::evaluate_gpu_steps(d, validate::GpuStepMethod::replay, {});
  REQUIRE(results.size() == 18);  // nine configurations, two tracers each
  for (const validate::GpuStepResult& r : results) {
    CAPTURE(r.id, r.note);
    REQUIRE(r.predicted_s == Approx(r.measured_s).epsilon(0.05));
  }
}

TEST_CASE("bad rows of a steps dataset are errors naming the file and the field", "[validate]") {
  const auto unknown = edited_copy("steps-unknown-key.json", [](nlohmann::json& d) { d["steps"][0]["colour"] = 1; });
  REQUIRE_THROWS_WITH(validate::load_gpu_steps_dataset(unknown), Contains("steps-unknown-key.json") && Contains("colour"));
  const auto negative =
      edited_copy("steps-negative.json", [](nlohmann::json& d) { d["steps"][2]["step_seconds"] = -0.1; });
  REQUIRE_THROWS_WITH(validate::load_gpu_steps_dataset(negative),
                      Contains("/steps/2/step_seconds") && Contains("positive step time"));
  // Relative paths resolve against the dataset's folder: from a copy elsewhere, the files are missing.
  const auto moved = edited_copy("steps-moved.json", [](nlohmann::json&) {}, true);
  REQUIRE_THROWS_WITH(validate::load_gpu_steps_dataset(moved), Contains("/steps/0/scenario") && Contains("found none"));
  const auto orphan = edited_copy("steps-orphan.json", [](nlohmann::json& d) { d["inject_steps"][0]["name"] = "vgg99"; });
  REQUIRE_THROWS_WITH(validate::load_gpu_steps_dataset(orphan),
                      Contains("/inject_steps/0/name") && Contains("\"vgg99\""));
  // The copy with absolute paths reads as the original does.
  REQUIRE(validate::load_gpu_steps_dataset(edited_copy("steps-same.json", [](nlohmann::json&) {})).runs.size() == 9);
}

TEST_CASE("eager kernels' saved tensors: the measured peak less weights and optimizer states", "[validate]") {
  // At the turn from forward to backward a PyTorch step holds its weights (and autocast's cached
  // half copies), the optimizer's states and the saved activations; zero_grad(set_to_none=True)
  // has freed the gradients. So the measured peak allocation less weights and optimizer states is
  // the activations the memory model predicts, nothing fitted. Without recompute (with it, the
  // peak comes late in backward, when the gradients have grown): each transformer row within 6%.
  const validate::GpuStepsDataset d = validate::load_gpu_steps_dataset(dataset_path());
  int checked = 0;
  for (const validate::GpuStepRun& r : d.runs) {
    if (r.id.find("recompute") != std::string::npos || r.id.rfind("resnet", 0) == 0) continue;
    CAPTURE(r.id);
    const strategy::Scenario scenario = strategy::load_scenario(r.scenario);
    REQUIRE(scenario.plan.kernels == strategy::Kernels::eager);
    const strategy::SimulationOutput out = strategy::simulate_scenario(scenario, strategy::SimulationInputs{});
    const strategy::MemoryBreakdown& m = out.report.memory.front().bytes;
    const double measured = r.peak_allocated_bytes - m.weights - m.optimizer;
    REQUIRE(m.activations == Approx(measured).epsilon(0.06));
    ++checked;
  }
  REQUIRE(checked == 4);
}

TEST_CASE("the BatchNorm factors are what the three declared ResNet traces give", "[validate]") {
  // Per step, the traced BatchNorm kernels' time against the model's bytes for them (forward 2,
  // backward 3 elements per activation element, and the scale and shift), as bandwidth over the
  // vectorized kernels' 4.35 TB/s (ComputeConstants::memory_path_factor's reference): cuDNN's
  // NHWC kernels in fp16 (ResNet-18, batch 256), PyTorch's channels-last kernels in bf16
  // (ResNet-50, batch 128), cuDNN's NCHW kernels in fp32 (ResNet-50, batch 64). The three rows
  // are the dataset's calibration cases.
  const validate::GpuStepsDataset d = validate::load_gpu_steps_dataset(dataset_path());
  struct Case {
    const char* id;
    const char* model;
    int batch;
    const char* fwd_kernels[2];
    const char* bwd_kernels[2];
    double elem;  // bytes of an activation element
    double fwd_factor;
    double bwd_factor;
  };
  const Case cases[] = {
      {"resnet18-amp_fp16-b256", "resnet18", 256, {"batchnorm_fwtr_nhwc", ""}, {"batchnorm_bwtr_nhwc", ""}, 2.0,
       strategy::kBatchnormCudnn16Fwd, strategy::kBatchnormCudnn16Bwd},
      {"resnet50-amp_bf16-b128", "resnet50", 128, {"batch_norm_collect_statistics_channels_last", "batch_norm_transform_input_channels_last"},
       {"batch_norm_backward_reduce_channels_last", "batch_norm_backward_elemt_channels_last"}, 2.0,
       strategy::kBatchnormNativeBf16Fwd, strategy::kBatchnormNativeBf16Bwd},
      {"resnet50-fp32-b64", "resnet50", 64, {"bn_fw_tr_1C11", ""}, {"bn_bw_1C11", ""}, 4.0,
       strategy::kBatchnormCudnn32Fwd, strategy::kBatchnormCudnn32Bwd},
  };
  for (const Case& c : cases) {
    CAPTURE(c.id);
    const auto run = std::find_if(d.runs.begin(), d.runs.end(), [&](const validate::GpuStepRun& r) { return r.id == c.id; });
    REQUIRE(run != d.runs.end());
    REQUIRE(run->role == validate::Role::calibration);
    const auto t = trace::load_kineto(run->kineto_trace);
    double fwd_us = 0.0, bwd_us = 0.0;
    int calls = 0;
    for (const trace::KinetoGpuOp& op : t.gpu_ops) {
      const auto has = [&](const char* k) { return *k != 0 && op.name.find(k) != std::string::npos; };
      if (has(c.fwd_kernels[0]) || has(c.fwd_kernels[1])) fwd_us += op.dur_us;
      if (has(c.bwd_kernels[0]) || has(c.bwd_kernels[1])) bwd_us += op.dur_us;
      if (has(c.fwd_kernels[0])) ++calls;
    }
    const double steps = static_cast<double>(t.steps.size());
    double fwd_bytes = 0.0, bwd_bytes = 0.0;
    int layers = 0;
    const strategy::Model m = strategy::build_model(c.model);
    for (const strategy::Layer& l : m.layers) {
      if (l.kind != "batchnorm") continue;
      ++layers;
      fwd_bytes += l.fwd.at(0).act_elems * c.batch * c.elem + l.fwd.at(0).param_elems * 4.0;
      bwd_bytes += l.bwd.at(0).act_elems * c.batch * c.elem + l.bwd.at(0).param_elems * 4.0;
    }
    // One forward kernel per layer and step: cuDNN's batchnorm_fwtr_nhwc or bn_fw_tr_1C11 (in two
    // variants each), PyTorch's statistics kernel.
    REQUIRE(calls == layers * static_cast<int>(steps));
    const double fwd = fwd_bytes / (fwd_us * 1e-6 / steps) / 4.35e12;
    const double bwd = bwd_bytes / (bwd_us * 1e-6 / steps) / 4.35e12;
    REQUIRE(c.fwd_factor == Approx(fwd).epsilon(1e-3));
    REQUIRE(c.bwd_factor == Approx(bwd).epsilon(1e-3));
  }
}
