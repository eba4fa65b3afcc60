// The large-model memory model against its published closed forms: ZeRO's model states
// (Rajbhandari et al. 2020, Fig. 1 and its 7.5B example), Megatron-LM's bytes per parameter with
// and without the distributed optimizer, and Korthikanti et al. 2022's activation memory per
// transformer layer (Table 2) for GPT-3 175B at TP 8, derived here from the model's own layers.
#include <catch2/catch.hpp>

#include <algorithm>

#include "strategies/memory_model.hpp"
#include "models/model_builder.hpp"
#include "models/model_zoo.hpp"

using namespace foresight;
using strategy::Plan;
using strategy::Precision;
using strategy::Recompute;

namespace {

double states(const strategy::MemoryBreakdown& m) { return m.weights + m.gradients + m.optimizer; }

/// The layers [first, last) of GPT-3 175B's first transformer layer (block 0).
std::pair<std::size_t, std::size_t> block0(const strategy::Model& m) {
  std::size_t first = m.layers.size(), last = 0;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    if (m.layers[i].block == 0) {
      first = std::min(first, i);
      last = i + 1;
    }
  }
  return {first, last};
}

}  // namespace

TEST_CASE("ZeRO stages shard model states as Rajbhandari et al. 2020 Fig. 1", "[training][memory]") {
  // Psi = 7.5 B parameters, N_d = 64, mixed-precision Adam: 2 + 2 + K(=12) bytes per parameter.
  const double psi = 7.5e9;
  Plan p;
  p.precision = Precision::fp16;  // half weights and gradients, fp32 master weights and moments
  p.optimizer = strategy::Optimizer::adam;
  p.dp = 64;
  const double expect[] = {(2 + 2 + 12) * psi, 2 * psi + 2 * psi + 12 * psi / 64, 2 * psi + 14 * psi / 64,
                           16 * psi / 64};
  const double paper_gb[] = {120, 31.4, 16.6, 1.9};  // the figure's numbers, 1 GB = 1e9 B
  for (int stage = 0; stage <= 3; ++stage) {
    INFO("ZeRO stage " << stage);
    p.zero = stage;
    const auto m = strategy::model_state_memory(psi, p, p.dp);
    REQUIRE(states(m) == Approx(expect[stage]).epsilon(1e-12));
    REQUIRE(states(m) / 1e9 == Approx(paper_gb[stage]).margin(0.05));
  }
}

TEST_CASE("Megatron-LM bytes per parameter, with and without the distributed optimizer", "[training][memory]") {
  // MLM docs (dist_optimizer.md): bf16 params / fp32 grads 18 -> 6 + 12/d; fp32 16 -> 8 + 8/d.
  const double psi = 1e9;
  const int d = 16;
  Plan p;
  p.optimizer = strategy::Optimizer::adam;
  p.dp = d;
  p.precision = Precision::bf16;
  p.fp32_main_grads = true;
  REQUIRE(states(strategy::model_state_memory(psi, p, d)) == Approx(18 * psi));
  p.zero = 1;
  REQUIRE(states(strategy::model_state_memory(psi, p, d)) == Approx((6 + 12.0 / d) * psi));
  p.precision = Precision::fp32;
  p.fp32_main_grads = false;
  p.zero = 0;
  REQUIRE(states(strategy::model_state_memory(psi, p, d)) == Approx(16 * psi));
  p.zero = 1;
  REQUIRE(states(strategy::model_state_memory(psi, p, d)) == Approx((8 + 8.0 / d) * psi));
}

TEST_CASE("activation memory per GPT-3 175B layer follows Korthikanti et al. 2022 Table 2", "[training][memory]") {
  const auto model = strategy::build_model("gpt3-175b");
  const double s = 2048, b = 1, h = 12288, a = 96, t = 8;
  // Plain variables, not a structured binding: clang 14 (the sanitizer build) cannot capture
  // those in a lambda.
  const auto block = block0(model);
  const auto first = block.first;
  const auto last = block.second;
  REQUIRE(last - first >= 10);  // norms, QKV, core, projection, dropouts, residuals, MLP
  auto bytes = [&](int tp, bool sp, Recompute r) {
    Plan p;
    p.precision = Precision::bf16;
    p.micro_batch = 1;
    p.tp = tp;
    p.sequence_parallel = sp;
    p.recompute = r;
    return strategy::saved_activation_bytes(model, p, first, last, true);
  };
  const double sbh = s * b * h;
  // Each row of the table, from the layers' own saved tensors and their tensor-parallel roles.
  REQUIRE(bytes(1, false, Recompute::none) == Approx(sbh * (34 + 5 * a * s / h)).epsilon(1e-12));
  REQUIRE(bytes(8, false, Recompute::none) == Approx(sbh * (10 + 24 / t + 5 * a * s / (h * t))).epsilon(1e-12));
  REQUIRE(bytes(8, true, Recompute::none) == Approx(sbh * (34 / t + 5 * a * s / (h * t))).epsilon(1e-12));
  REQUIRE(bytes(8, false, Recompute::selective) == Approx(sbh * (10 + 24 / t)).epsilon(1e-12));
  REQUIRE(bytes(8, true, Recompute::selective) == Approx(34 * sbh / t).epsilon(1e-12));
  REQUIRE(bytes(8, false, Recompute::full) == Approx(2 * sbh).epsilon(1e-12));
  REQUIRE(bytes(8, true, Recompute::full) == Approx(2 * sbh / t).epsilon(1e-12));
  // For the record: 114 sbh = 2.87 GB per layer without parallelism, 23 sbh = 579 MB at TP 8,
  // 4.25 sbh = 107 MB with SP and selective recompute: 27x less.
  REQUIRE(bytes(1, false, Recompute::none) / bytes(8, true, Recompute::selective) == Approx(114.0 / 4.25).epsilon(1e-12));
}

TEST_CASE("fused attention keeps no s x s scores: K22's 5as/h term goes, the model FLOPs stay", "[training][memory]") {
  const auto unfused = strategy::build_model("gpt3-175b");
  const auto fused = strategy::with_fused_attention(unfused);
  const double s = 2048, h = 12288, a = 96;
  const auto [first, last] = block0(fused);
  Plan p;
  p.precision = Precision::bf16;
  p.micro_batch = 1;
  // sbh x 34 plus the fp32 log-sum-exp of each row and head (2 half elements each).
  REQUIRE(strategy::saved_activation_bytes(fused, p, first, last, true) ==
          Approx(s * h * 34 + 2 * 2 * s * a).epsilon(1e-12));
  REQUIRE(fused.fwd_flops() == unfused.fwd_flops());
  REQUIRE(fused.bwd_flops() == unfused.bwd_flops());
  // One forward and one backward kernel per attention core, causal: 2 s^2 d h forward, 2.5x back.
  for (const auto& l : fused.layers) {
    if (l.kind != "attention") continue;
    REQUIRE(l.fwd.size() == 1);
    REQUIRE(l.fwd[0].type == sim::OpType::attention);
    REQUIRE(l.fwd[0].flops == Approx(2.0 * s * s * (h / a) * a));
    REQUIRE(l.bwd[0].flops == Approx(2.5 * l.fwd[0].flops));
  }
}
