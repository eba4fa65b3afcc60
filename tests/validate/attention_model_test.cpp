// Fused attention on Hopper (models/compute_model.hpp, FlashAttentionConstants): a kernel's time
// from FlashAttention-2's tiles (cuDNN's at its measured speedups), the nine constants solved again
// from their declared calibration rows of validate/data/kernels/h200_kernel_sweep.json, and the
// other rows of both Hopper sweeps predicted with them.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "models/compute_model.hpp"
#include "run/scenario.hpp"
#include "run/simulation.hpp"
#include "tests/test_paths.hpp"
#include "topologies/gpu_spec.hpp"
#include "validate/kernel_sweep_dataset.hpp"

using namespace foresight;

namespace {

/// shape {batch x heads, s, s, head dim, causal, kernel}; kernel < 0: the five-entry shape
sim::OpSignature attention_kernel(bool backward, std::int64_t bh, std::int64_t s, std::int64_t d, bool causal,
                                  std::int64_t kernel, sim::DType dtype = sim::DType::bf16) {
  sim::OpSignature a;
  a.type = sim::OpType::attention;
  a.dtype = dtype;
  a.kernel = backward ? "flash_attn_bwd" : "flash_attn_fwd";
  a.shape = {bh, s, s, d, causal ? 1 : 0};
  if (kernel >= 0) a.shape.push_back(kernel);
  a.flops = 4.0 * double(bh) * double(s) * double(s) * double(d) * (causal ? 0.5 : 1.0) * (backward ? 2.5 : 1.0);
  a.bytes = 4.0 * double(bh * s * d) * 2.0 * (backward ? 2.0 : 1.0);
  return a;
}

validate::KernelSweep attention_sweep(const std::string& gpu) {
  return validate::load_kernel_sweep(test::source_path("validate/data/kernels/" + gpu + "_kernel_sweep.json"));
}

}  // namespace

TEST_CASE("a fused attention kernel on Hopper takes FlashAttention-2's tiles at their rates", "[models]") {
  const strategy::ComputeModel h100(topo::find_gpu_spec("H100-SXM5-80GB"));
  REQUIRE(h100.constants().flash_attention.has_value());
  const strategy::FlashAttentionConstants k = strategy::hopper_attention_constants();
  const double gap = h100.constants().launch_gap.seconds();
  const double peak = h100.peak(sim::DType::bf16).per_second();
  // 64 (batch x heads) of 1000 queries at head dim 96: 8 row blocks of 128 (the last one short),
  // each computing 8 tiles and its own overhead; a tile is 4 x 128^2 x (96 + head_extra) FLOPs'
  // worth at `rate` of the peak.
  const double tile = 4.0 * 128 * 128 * (96 + k.head_extra) / (peak * k.rate);
  const double fwd = 64 * 8 * (8 + k.row_overhead) * tile;
  const auto flash = [&](bool bwd, bool causal) {
    return h100.analytical(attention_kernel(bwd, 64, 1000, 96, causal, strategy::kAttentionFlash2)).seconds() - gap;
  };
  REQUIRE(flash(false, false) == Approx(fwd).epsilon(1e-7));
  // Causal: the tiles up to the diagonal, (8 + 1) / 2 per row block on average, and the masked
  // row block's overhead.
  REQUIRE(flash(false, true) == Approx(64 * 8 * (4.5 + k.causal_row_overhead) * tile).epsilon(1e-7));
  // The backward: 2.5 times the FLOPs per tile at backward_rate of the forward's rate.
  REQUIRE(flash(true, false) ==
          Approx(64 * 8 * (8 + k.backward_row_overhead) * tile * 2.5 / k.backward_rate).epsilon(1e-7));
  REQUIRE(flash(true, true) ==
          Approx(64 * 8 * (4.5 + k.backward_causal_row_overhead) * tile * 2.5 / k.backward_rate).epsilon(1e-7));
  // A trace's attention ops (traces/pytorch_et_ops.cpp: attention_fwd, attention_bwd) alike.
  auto traced = attention_kernel(true, 64, 1000, 96, false, strategy::kAttentionFlash2);
  traced.kernel = "attention_bwd";
  REQUIRE(h100.analytical(traced).seconds() - gap == Approx(flash(true, false)).epsilon(1e-7));
  // cuDNN's kernels: the same tiles at its speedups; the GPU's default on Hopper (no kernel given,
  // or kAttentionDefault) is cuDNN's.
  const auto at = [&](bool bwd, std::int64_t kernel) {
    return h100.analytical(attention_kernel(bwd, 64, 1000, 96, false, kernel)).seconds() - gap;
  };
  REQUIRE(at(false, strategy::kAttentionCudnn) == Approx(fwd / k.cudnn_speedup).epsilon(1e-7));
  REQUIRE(at(true, strategy::kAttentionCudnn) == Approx(flash(true, false) / k.cudnn_backward_speedup).epsilon(1e-7));
  REQUIRE(at(false, strategy::kAttentionDefault) == Approx(at(false, strategy::kAttentionCudnn)).epsilon(1e-12));
  REQUIRE(at(false, -1) == Approx(at(false, strategy::kAttentionCudnn)).epsilon(1e-12));
  // What the tiles do not describe keeps FlashAttention-2's published rate on the FLOPs: SDPA's
  // other kernels, fp32 inputs, and GPUs where nothing was measured (the A100).
  const auto cap = [&](const strategy::ComputeModel& m, const sim::OpSignature& s) {
    return s.flops / (m.peak(s.dtype).per_second() * m.constants().attention_cap);
  };
  const auto other = attention_kernel(false, 64, 1000, 96, false, strategy::kAttentionOther);
  REQUIRE(h100.analytical(other).seconds() - gap == Approx(cap(h100, other)).epsilon(1e-7));
  const auto fp32 = attention_kernel(false, 64, 1000, 96, false, strategy::kAttentionFlash2, sim::DType::fp32);
  REQUIRE(h100.analytical(fp32).seconds() - gap == Approx(cap(h100, fp32)).epsilon(1e-7));
  const strategy::ComputeModel a100(topo::find_gpu_spec("A100-SXM4-80GB"));
  REQUIRE_FALSE(a100.constants().flash_attention.has_value());
  const auto on_a100 = attention_kernel(false, 64, 1000, 96, false, strategy::kAttentionFlash2);
  REQUIRE(a100.analytical(on_a100).seconds() - gap == Approx(cap(a100, on_a100)).epsilon(1e-7));
}

TEST_CASE("the Hopper attention constants are what the H200 sweep's calibration rows give", "[validate]") {
  const validate::KernelSweep s = attention_sweep("h200");
  const strategy::FlashAttentionConstants fitted = validate::fit_attention_constants(s);
  const strategy::FlashAttentionConstants used = strategy::hopper_attention_constants();
  for (const validate::AttentionCalibrationRow& row : validate::kAttentionCalibration) {
    CAPTURE(row.constant);
    CHECK(used.*row.member == Approx(fitted.*row.member).epsilon(1e-7));
  }
  // Solved together, every calibration row comes out as measured.
  int calibration = 0;
  for (const validate::KernelResult& r : validate::evaluate_kernel_sweep(s, validate::KernelFamily::attention)) {
    if (r.c->role != validate::Role::calibration) continue;
    CAPTURE(r.c->id);
    REQUIRE(r.predicted_s == Approx(r.c->measured_s).epsilon(1e-6));
    ++calibration;
  }
  REQUIRE(calibration == 9);
  // A row the fit names must be declared a calibration case.
  validate::KernelSweep undeclared = s;
  for (validate::KernelCase& c : undeclared.cases) c.role = validate::Role::prediction;
  REQUIRE_THROWS_AS(validate::fit_attention_constants(undeclared), sim::ConfigError);
}

TEST_CASE("the other FlashAttention-2 and cuDNN rows of both Hopper sweeps are predicted from those nine",
          "[validate]") {
  // Measured when the model was built (2026-11-28), mean absolute error over the prediction rows:
  // FlashAttention-2 H200 8.1% (181 rows), H100 7.6% (384, none fitted); cuDNN H200 3.4% (6), H100
  // 5.2% (8). FlashAttention-2's published rate on the FLOPs gave 29-32% on the same rows.
  for (const auto& [gpu, bound] : {std::pair{std::string("h200"), 0.10}, std::pair{std::string("h100"), 0.10}}) {
    const validate::KernelSweep s = attention_sweep(gpu);  // the results point into it
    std::map<std::int64_t, std::pair<double, int>> by_kernel;  // sum of |error|, rows
    for (const validate::KernelResult& r : validate::evaluate_kernel_sweep(s, validate::KernelFamily::attention)) {
      const std::int64_t kernel = r.c->kernels[0].shape.at(5);
      if (r.c->role == validate::Role::calibration || kernel == strategy::kAttentionOther) continue;
      by_kernel[kernel].first += std::abs(r.predicted_s / r.c->measured_s - 1.0);
      ++by_kernel[kernel].second;
    }
    CAPTURE(gpu);
    REQUIRE(by_kernel[strategy::kAttentionFlash2].second >= 180);
    REQUIRE(by_kernel[strategy::kAttentionCudnn].second >= 6);
    for (const auto& [kernel, sum] : by_kernel) {
      CAPTURE(kernel, sum.second);
      REQUIRE(sum.first / sum.second < bound);
    }
  }
}

TEST_CASE("plan.attention_kernel: cuDNN's by default on Hopper, FlashAttention-2 slower, no effect elsewhere",
          "[validate]") {
  using Catch::Matchers::Contains;
  const auto step = [](const char* preset, const char* kernel) {
    nlohmann::json doc{{"model", {{"name", "llama2-7b"}, {"seq_len", 4096}}},
                       {"cluster", {{"preset", preset}, {"gpus", 1}}},
                       {"plan", {{"micro_batch", 1}, {"precision", "bf16"}, {"optimizer", "adam"},
                                 {"fused_attention", true}, {"recompute", "full"}}},
                       {"workload", {{"steps", 1}}}};
    if (kernel != nullptr) doc["plan"]["attention_kernel"] = kernel;
    return strategy::simulate_scenario(strategy::parse_scenario(doc, "attention.json"), strategy::SimulationInputs{})
        .report.iteration_time_s;
  };
  // On Hopper the default is cuDNN's kernel, bit for bit; FlashAttention-2 does the same tiles at
  // half cuDNN's rate, so the step is longer.
  REQUIRE(step("dgx-h100", nullptr) == step("dgx-h100", "cudnn"));
  REQUIRE(step("dgx-h100", "flash2") > step("dgx-h100", "cudnn") * 1.05);
  // On the A100 nothing was measured: every choice takes FlashAttention-2's published rate.
  REQUIRE(step("dgx-a100", "flash2") == step("dgx-a100", "cudnn"));
  REQUIRE(step("dgx-a100", nullptr) == step("dgx-a100", "cudnn"));
  REQUIRE_THROWS_WITH(step("dgx-h100", "fa3"), Contains("/plan/attention_kernel") && Contains("flash2"));
}
