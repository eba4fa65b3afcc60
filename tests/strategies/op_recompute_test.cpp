// torchtitan's per-op selective activation checkpointing (plan.recompute selective_op): in each
// Llama block the matmuls run as wq wk wv wo w1 w3 w2 and every second one (wk, wo, w3) is
// recomputed with every non-matmul op, flash attention's output kept. Expected values are derived
// from the layer shapes here, not read back from the code.
#include <catch2/catch.hpp>

#include <string>

#include "exec/executor.hpp"
#include "models/model_builder.hpp"
#include "strategies/data_parallel.hpp"
#include "strategies/memory_model.hpp"
#include "strategies/op_recompute.hpp"
#include "strategies/pipeline.hpp"
#include "tests/strategies/toy_model.hpp"

using namespace foresight;
using foresight::test::dgx;

namespace {

constexpr std::int64_t kLayers = 4, kHidden = 256, kHeads = 8, kKvHeads = 2, kFfn = 768, kVocab = 1024, kSeq = 128;
constexpr std::int64_t kHeadDim = kHidden / kHeads;
constexpr std::int64_t kQ = kHeads * kHeadDim, kKv = kKvHeads * kHeadDim;

/// A small Llama: RMSNorm, GQA (8 query, 2 key/value heads), SwiGLU, RoPE, no biases or dropout.
strategy::Model llama(bool fused_attention = true) {
  strategy::TransformerSpec spec;
  spec.name = "tiny-llama";
  spec.shape = strategy::TransformerShape{kLayers, kHidden, kHeads, kKvHeads, kFfn, kVocab, kSeq, true, true, {}};
  spec.norm = strategy::Norm::rmsnorm;
  spec.qkv_bias = spec.proj_bias = spec.mlp_bias = false;
  spec.tied_embeddings = false;
  spec.hidden_dropout = spec.attention_dropout = false;
  const strategy::Model m = strategy::build_transformer(spec);
  return fused_attention ? strategy::with_fused_attention(m) : m;
}

strategy::Plan plan(strategy::Recompute r) {
  strategy::Plan p;
  p.micro_batch = 2;
  p.grad_accum = 3;
  p.global_batch = 6;
  p.precision = strategy::Precision::amp_bf16;
  p.optimizer = strategy::Optimizer::adam;
  p.recompute = r;
  p.steps = 1;
  return p;
}

/// Rank 0's forward-phase GEMM FLOPs and the number of its forward kernels named `suffix`.
struct Forward {
  double gemm_flops = 0.0;
  int kernels = 0;
};

Forward forward(const strategy::CompiledGraph& c, const std::string& suffix) {
  Forward f;
  for (const auto& n : c.graph.nodes) {
    if (n.rank != 0 || n.kind != sim::OpKind::compute || n.phase != sim::Phase::forward) continue;
    const std::string& name = c.graph.names[n.name];
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      ++f.kernels;
    }
    const sim::OpSignature& s = c.graph.signatures[n.signature];
    if (s.type == sim::OpType::gemm) {
      f.gemm_flops += 2.0 * static_cast<double>(s.shape[0]) * static_cast<double>(s.shape[1]) *
                      static_cast<double>(s.shape[2]) * static_cast<double>(s.shape.size() > 3 ? s.shape[3] : 1);
    }
  }
  return f;
}

}  // namespace

TEST_CASE("per-op recompute counts a block's matmuls in forward order", "[training][recompute]") {
  const strategy::Model m = llama();
  std::size_t first = 0;
  while (m.layers[first].block != 0) ++first;
  std::size_t end = first;
  while (end < m.layers.size() && m.layers[end].block == 0) ++end;
  const auto block = strategy::op_recompute_block(m, first, end);
  REQUIRE(block.size() == end - first);
  double saved = 0.0;
  for (std::size_t i = first; i < end; ++i) {
    const strategy::Layer& l = m.layers[i];
    const strategy::OpRecompute& r = block[i - first];
    saved += r.saved_elems;
    INFO(l.name);
    if (l.name.ends_with("attn.qkv")) {
      // wq (1) kept, wk (2) recomputed, wv (3) kept.
      REQUIRE(r.kernels.size() == 1);
      CHECK(r.kernels[0].shape[1] == kKv);
      CHECK(r.kernels[0].flops == Approx(2.0 * kSeq * kHidden * kKv));
      CHECK(r.saved_elems == Approx(kSeq * (kQ + kKv)));
    } else if (l.name.ends_with("attn.proj")) {
      REQUIRE(r.kernels.size() == 1);  // wo (4)
      CHECK(r.kernels[0].flops == Approx(2.0 * kSeq * kQ * kHidden));
      CHECK(r.saved_elems == 0.0);
    } else if (l.name.ends_with("mlp.gate_up")) {
      REQUIRE(r.kernels.size() == 1);  // w1 (5) kept, w3 (6) recomputed
      CHECK(r.kernels[0].shape[1] == kFfn);
      CHECK(r.saved_elems == Approx(kSeq * kFfn));
    } else if (l.name.ends_with("mlp.proj")) {
      CHECK(r.kernels.empty());  // w2 (7) kept
      CHECK(r.saved_elems == Approx(kSeq * kHidden));
    } else if (l.name.ends_with("attn.core")) {
      // RoPE recomputed; the flash kernel's output kept.
      REQUIRE(r.kernels.size() == l.fwd.size() - 1);
      for (const auto& t : r.kernels) CHECK(t.type != sim::OpType::attention);
      CHECK(r.saved_elems == Approx(kSeq * kQ));
    } else {
      CHECK(r.kernels.size() == l.fwd.size());  // norms, SwiGLU, residual adds
      CHECK(r.saved_elems == 0.0);
    }
  }
  // q, v, the attention output, w1's and w2's outputs.
  CHECK(saved == Approx(kSeq * (kQ + kKv + kQ + kFfn + kHidden)));

  // Without fused attention every attention kernel is recomputed (batched matmuls are not aten.mm).
  const strategy::Model unfused = llama(false);
  const auto plain = strategy::op_recompute_block(unfused, first, end);
  for (std::size_t i = first; i < end; ++i) {
    if (unfused.layers[i].name.ends_with("attn.core")) {
      CHECK(plain[i - first].kernels.size() == unfused.layers[i].fwd.size());
      CHECK(plain[i - first].saved_elems == 0.0);
    }
  }
}

TEST_CASE("per-op recompute reruns wk, wo and w3 and the non-matmul ops of every block", "[training][recompute]") {
  const strategy::Model m = llama();
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  auto compile = [&](strategy::Recompute r) { return strategy::compile_data_parallel(m, plan(r), dgx(), compute); };
  const auto none = compile(strategy::Recompute::none);
  const auto op = compile(strategy::Recompute::selective_op);
  const auto full = compile(strategy::Recompute::full);
  const double micro = 3.0, batch = 2.0;
  // Extra GEMM FLOPs: wk, wo and w3 once more per block and micro-batch.
  const double extra = micro * kLayers * batch * 2.0 * kSeq * (kHidden * kKv + kQ * kHidden + kHidden * kFfn);
  CHECK(forward(op, "").gemm_flops - forward(none, "").gemm_flops == Approx(extra).epsilon(1e-9));
  CHECK(forward(op, "flash_attn_fwd").kernels == forward(none, "flash_attn_fwd").kernels);
  CHECK(forward(full, "flash_attn_fwd").kernels == 2 * forward(none, "flash_attn_fwd").kernels);
  for (const char* k : {"rmsnorm_fwd", "rope_fwd", "swiglu_fwd"}) {
    INFO(k);
    REQUIRE(forward(none, k).kernels > 0);
    CHECK(forward(op, k).kernels == 2 * forward(none, k).kernels - (std::string(k) == "rmsnorm_fwd" ? 3 : 0));
  }
  // Costlier than none, cheaper than full.
  auto time = [](const strategy::CompiledGraph& c) {
    return sim::execute(c.graph, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::analytical).makespan.seconds();
  };
  CHECK(time(none) < time(op));
  CHECK(time(op) < time(full));
}

TEST_CASE("per-op recompute keeps each block's input and the outputs it saves", "[training][recompute][memory]") {
  const strategy::Model m = llama();
  auto p = plan(strategy::Recompute::selective_op);
  std::size_t first = 0;
  while (m.layers[first].block != 0) ++first;
  std::size_t last = first;
  while (last < m.layers.size() && m.layers[last].block >= 0) ++last;
  // Per token: the block's input h, then q, v, the attention output, w1's and w2's outputs.
  const double per_block = 2.0 /* bf16 */ * p.micro_batch * kSeq * (kHidden + kQ + kKv + kQ + kFfn + kHidden);
  CHECK(strategy::saved_activation_bytes(m, p, first, last, true) == Approx(kLayers * per_block));
  p.recompute = strategy::Recompute::none;
  const double none = strategy::saved_activation_bytes(m, p, first, last, true);
  p.recompute = strategy::Recompute::full;
  const double full = strategy::saved_activation_bytes(m, p, first, last, true);
  CHECK(full < kLayers * per_block);
  CHECK(kLayers * per_block < none);
}

TEST_CASE("per-op recompute inside a pipeline", "[training][recompute]") {
  const strategy::Model m = llama();
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  auto p = plan(strategy::Recompute::none);
  p.pp = 2;
  p.schedule = strategy::Schedule::one_f_one_b;
  p.partition = strategy::PartitionMode::uniform;
  auto run = [&](strategy::Recompute r) {
    p.recompute = r;
    const auto c = strategy::compile_pipeline(m, p, dgx(), compute);
    REQUIRE(sim::execute(c.graph, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::analytical).makespan.seconds() > 0);
    return std::pair{forward(c, "swiglu_fwd").kernels, c.rank_activation_peak_bytes[0]};
  };
  const auto [none_swiglu, none_peak] = run(strategy::Recompute::none);
  const auto [op_swiglu, op_peak] = run(strategy::Recompute::selective_op);
  REQUIRE(none_swiglu > 0);
  CHECK(op_swiglu == 2 * none_swiglu);
  CHECK(op_peak < none_peak);
}

TEST_CASE("per-op recompute with tensor parallelism splits the recomputed GEMMs as their layers", "[training][recompute][tp]") {
  const strategy::Model m = llama();
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  auto p = plan(strategy::Recompute::selective_op);
  p.tp = 2;
  p.sequence_parallel = true;
  const auto c = strategy::compile_data_parallel(m, p, dgx(), compute);
  // Forward kernels of h.1.attn.qkv on rank 0: the whole projection (q + k + v) and, recomputed,
  // the key part, each split two ways by output features.
  std::vector<std::int64_t> widths;
  for (const auto& n : c.graph.nodes) {
    if (n.rank == 0 && n.micro_batch == 0 && n.phase == sim::Phase::forward &&
        c.graph.names[n.name] == "h.1.attn.qkv.linear_fwd") {
      widths.push_back(c.graph.signatures[n.signature].shape[1]);
    }
  }
  REQUIRE(widths.size() == 2);
  CHECK(widths[0] == (kQ + 2 * kKv) / 2);
  CHECK(widths[1] == kKv / 2);
  REQUIRE(sim::execute(c.graph, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::analytical).makespan.seconds() > 0);
}

TEST_CASE("per-op recompute keeps routed experts whole and recomputes the rest of a MoE block", "[training][recompute]") {
  strategy::TransformerSpec spec;
  spec.name = "tiny-moe";
  spec.shape = strategy::TransformerShape{2, kHidden, kHeads, kKvHeads, kFfn, kVocab, kSeq, true, true, {}};
  spec.shape.moe = strategy::MoeShape{4, 2, kFfn, 0, 0, 0.0};
  spec.norm = strategy::Norm::rmsnorm;
  spec.qkv_bias = spec.proj_bias = spec.mlp_bias = false;
  spec.hidden_dropout = spec.attention_dropout = false;
  const strategy::Model m = strategy::with_fused_attention(strategy::build_transformer(spec));
  std::size_t first = 0;
  while (m.layers[first].block != 0) ++first;
  std::size_t end = first;
  while (end < m.layers.size() && m.layers[end].block == 0) ++end;
  const auto block = strategy::op_recompute_block(m, first, end);
  bool experts = false;
  for (std::size_t i = first; i < end; ++i) {
    if (m.layers[i].experts == 0) continue;
    experts = true;
    CHECK(block[i - first].kernels.empty());
    CHECK(block[i - first].saved_elems == m.layers[i].saved_elems);
  }
  REQUIRE(experts);
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  auto p = plan(strategy::Recompute::selective_op);
  p.ep = 2;
  p.dp = 2;
  p.global_batch = 12;
  const auto c = strategy::compile_data_parallel(m, p, dgx(), compute);
  REQUIRE(sim::execute(c.graph, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::analytical).makespan.seconds() > 0);
}
