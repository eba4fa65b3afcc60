// Megatron tensor and sequence parallelism in the execution graph: the collectives per
// transformer layer (S19: 2 all-reduces forward, 2 backward, of s·b·h; K22: with SP, 2 AG + 2 RS
// forward and 4 AG + 2 RS backward, the same ring volume forward), the GEMMs split t ways,
// recompute adding one forward, parameters per rank, and the impossible splits.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "common/error.hpp"
#include "exec/executor.hpp"
#include "strategies/data_parallel.hpp"
#include "strategies/memory_model.hpp"
#include "models/model_builder.hpp"
#include "models/model_zoo.hpp"
#include "strategies/pipeline.hpp"
#include "strategies/tensor_parallel.hpp"
#include "tests/strategies/toy_model.hpp"

using namespace foresight;
using foresight::test::dgx;
using sim::CollectiveOp;

namespace {

// GPT-3 Small: 12 layers, h = 768, 12 heads, s = 2048, vocabulary 50257 (padded by TP as
// Megatron pads it: to 50432 at t = 2).
strategy::Model gpt() { return strategy::build_model("gpt3-125m"); }

strategy::Plan plan(int tp, bool sp, strategy::Recompute r = strategy::Recompute::none) {
  strategy::Plan p;
  p.dp = 1;
  p.tp = tp;
  p.sequence_parallel = sp;
  p.micro_batch = 2;
  p.grad_accum = 1;
  p.global_batch = 2;
  p.precision = strategy::Precision::amp_bf16;
  p.optimizer = strategy::Optimizer::adam;
  p.recompute = r;
  p.steps = 1;
  return p;
}

/// TP 2 with SP in a 2-stage 1F1B pipeline, 4 micro-batches of 2.
strategy::Plan tp2_pipeline() {
  auto p = plan(2, true);
  p.pp = 2;
  p.schedule = strategy::Schedule::one_f_one_b;
  p.partition = strategy::PartitionMode::uniform;
  p.grad_accum = 4;
  p.global_batch = 8;
  return p;
}

strategy::CompiledGraph compile(const strategy::Model& m, const strategy::Plan& p) {
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  return strategy::compile_data_parallel(m, p, dgx(), compute);
}

/// Collectives of rank 0 whose name contains `layer`, counted by (op, phase).
std::map<std::pair<CollectiveOp, sim::Phase>, int> tp_collectives(const strategy::CompiledGraph& c,
                                                                  const std::string& layer, double* bytes = nullptr) {
  std::map<std::pair<CollectiveOp, sim::Phase>, int> n;
  for (const auto& node : c.graph.nodes) {
    if (node.rank != 0 || node.kind != sim::OpKind::collective || node.stream != strategy::streams::tensor_parallel) continue;
    if (c.graph.names[node.name].find(layer) == std::string::npos) continue;
    ++n[{node.op, node.phase}];
    if (bytes != nullptr) *bytes = node.bytes;
  }
  return n;
}

}  // namespace

TEST_CASE("TP without SP: 2 all-reduces of s·b·h forward and 2 backward per transformer layer", "[training][tp]") {
  const auto m = gpt();
  const auto& t = *m.transformer;
  double bytes = 0.0;
  const auto c = compile(m, plan(2, false));
  const auto n = tp_collectives(c, "h.0.", &bytes);
  REQUIRE(n.size() == 2);
  REQUIRE(n.at({CollectiveOp::all_reduce, sim::Phase::forward}) == 2);
  REQUIRE(n.at({CollectiveOp::all_reduce, sim::Phase::backward}) == 2);
  REQUIRE(bytes == 2.0 * t.seq_len * 2 * t.hidden);  // b = 2, bf16
  // Every layer alike: 4 per layer, plus the embedding's forward, the LM head's input gradient
  // and the vocabulary-parallel loss's three small reductions.
  int all = 0;
  for (const auto& node : c.graph.nodes) all += node.rank == 0 && node.stream == strategy::streams::tensor_parallel;
  REQUIRE(all == 4 * t.layers + 2 + 3);
}

TEST_CASE("TP with SP: 2 AG + 2 RS forward, 4 AG + 2 RS backward, the same forward ring volume", "[training][tp]") {
  const auto m = gpt();
  const auto c = compile(m, plan(2, true));
  const auto n = tp_collectives(c, "h.0.");
  REQUIRE(n.at({CollectiveOp::all_gather, sim::Phase::forward}) == 2);
  REQUIRE(n.at({CollectiveOp::reduce_scatter, sim::Phase::forward}) == 2);
  REQUIRE(n.at({CollectiveOp::all_gather, sim::Phase::backward}) == 4);
  REQUIRE(n.at({CollectiveOp::reduce_scatter, sim::Phase::backward}) == 2);
  REQUIRE(n.count({CollectiveOp::all_reduce, sim::Phase::forward}) == 0);
  // Ring bus volume of a layer's forward: AR moves 2(n-1)/n S, AG and RS (n-1)/n S each (K22 §4.2.2).
  auto volume = [](const strategy::CompiledGraph& g) {
    double v = 0.0;
    for (const auto& node : g.graph.nodes) {
      if (node.rank != 0 || node.stream != strategy::streams::tensor_parallel || node.phase != sim::Phase::forward) continue;
      if (g.graph.names[node.name].find("h.0.") == std::string::npos) continue;
      v += node.bytes * (node.op == CollectiveOp::all_reduce ? 2.0 : 1.0) * 0.5;  // n = 2
    }
    return v;
  };
  REQUIRE(volume(c) == Approx(volume(compile(m, plan(2, false)))));
}

TEST_CASE("TP splits every GEMM t ways and shards the parameters", "[training][tp]") {
  const auto m = gpt();
  auto gemm_flops = [](const strategy::CompiledGraph& c, const std::string& prefix) {
    double f = 0.0;
    for (const auto& node : c.graph.nodes) {
      if (node.rank != 0 || node.kind != sim::OpKind::compute || node.signature >= c.graph.signatures.size()) continue;
      const auto& sig = c.graph.signatures[node.signature];
      if (sig.type == sim::OpType::gemm && c.graph.names[node.name].rfind(prefix, 0) == 0) f += sig.flops;
    }
    return f;
  };
  const auto c1 = compile(m, plan(1, false));
  const double layers = gemm_flops(c1, "h.");
  REQUIRE(gemm_flops(compile(m, plan(2, false)), "h.") == Approx(layers / 2).epsilon(1e-12));
  REQUIRE(gemm_flops(compile(m, plan(4, true)), "h.") == Approx(layers / 4).epsilon(1e-12));
  // The LM head over the vocabulary padded as Megatron pads it (to a multiple of 128 t).
  REQUIRE(strategy::tp_split(50257, 2) == 25216);  // ceil(50257 / 256) x 256 = 50432, over 2
  REQUIRE(strategy::tp_split(50257, 8) == 6400);
  // A vocabulary that t divides is padded too (Megatron's _vocab_size_with_padding always pads):
  // Llama 3's 128256 over 8 ranks is 16128 each (129024 in all), not 16032.
  REQUIRE(strategy::tp_vocab_split(128256, 8) == 16128);
  REQUIRE(strategy::tp_vocab_split(50258, 2) == 25216);
  REQUIRE(strategy::tp_vocab_split(51200, 8) == 6400);  // already a multiple of 1024: unchanged
  REQUIRE(gemm_flops(compile(m, plan(2, false)), "lm_head") ==
          Approx(gemm_flops(c1, "lm_head") * 25216.0 / 50257.0).epsilon(1e-12));
  // Memory-bound kernels: the attention scores of 1/t of the heads; norms whole without SP and
  // over 1/t of the sequence with it.
  auto kernel_bytes = [](const strategy::CompiledGraph& c, const std::string& name) {
    double b = 0.0;
    for (const auto& node : c.graph.nodes) {
      if (node.rank != 0 || node.kind != sim::OpKind::compute || node.signature >= c.graph.signatures.size()) continue;
      if (c.graph.names[node.name] == name) b += c.graph.signatures[node.signature].bytes;
    }
    return b;
  };
  const double softmax = kernel_bytes(c1, "h.0.attn.core.softmax_fwd");
  const double norm = kernel_bytes(c1, "h.0.ln_1.layernorm_fwd");
  REQUIRE(softmax > 0.0);
  REQUIRE(kernel_bytes(compile(m, plan(2, false)), "h.0.attn.core.softmax_fwd") == Approx(softmax / 2));
  REQUIRE(kernel_bytes(compile(m, plan(2, false)), "h.0.ln_1.layernorm_fwd") == Approx(norm));
  const double norm_sp = kernel_bytes(compile(m, plan(2, true)), "h.0.ln_1.layernorm_fwd");
  REQUIRE(norm_sp < 0.51 * norm);  // activations halved; the 2 x 768 parameters are read whole
  REQUIRE(norm_sp > 0.49 * norm);
  // Parameters per rank: all but the norms (and biases of row-parallel layers, counted with them
  // in Megatron; here with their layer) are split.
  double replicated = 0.0;
  for (const auto& l : m.layers) replicated += l.tp == strategy::TpRole::replicated ? static_cast<double>(l.params) : 0.0;
  const double total = static_cast<double>(m.params());
  REQUIRE(strategy::tp_rank_params(m, 4) == Approx(replicated + (total - replicated) / 4));
  // The simulated step is faster at TP 2 than alone, but not twice as fast (communication).
  const auto run = [&](int tp) {
    const auto c = compile(m, plan(tp, false));
    const auto r = sim::execute(c.graph, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::flow);
    return r.makespan.seconds();
  };
  const double t1 = run(1);
  const double t2 = run(2);
  REQUIRE(t2 < t1);
  REQUIRE(t2 > t1 / 2);
}

TEST_CASE("recompute adds one forward: of each block (full) or of the attention core (selective)", "[training][tp]") {
  const auto m = gpt();
  auto forwards = [&](strategy::Recompute r, const std::string& layer) {
    int n = 0;
    const auto c = compile(m, plan(2, false, r));
    for (const auto& node : c.graph.nodes) {
      if (node.rank == 0 && node.kind == sim::OpKind::compute && node.phase == sim::Phase::forward &&
          c.graph.names[node.name].rfind(layer, 0) == 0) {
        ++n;
      }
    }
    return n;
  };
  const int mlp = forwards(strategy::Recompute::none, "h.3.mlp.fc");
  const int core = forwards(strategy::Recompute::none, "h.3.attn.core");
  REQUIRE(mlp > 0);
  REQUIRE(forwards(strategy::Recompute::full, "h.3.mlp.fc") == 2 * mlp);
  REQUIRE(forwards(strategy::Recompute::full, "h.3.attn.core") == 2 * core);
  REQUIRE(forwards(strategy::Recompute::selective, "h.3.attn.core") == 2 * core);
  REQUIRE(forwards(strategy::Recompute::selective, "h.3.mlp.fc") == mlp);
  REQUIRE(forwards(strategy::Recompute::full, "lm_head") == forwards(strategy::Recompute::none, "lm_head"));
}

TEST_CASE("selective recompute inside a pipeline re-runs each attention core once", "[training][tp]") {
  const auto m = gpt();
  auto p = tp2_pipeline();
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  auto count = [&](strategy::Recompute r, const std::string& layer, double* peak = nullptr) {
    p.recompute = r;
    const auto c = strategy::compile_pipeline(m, p, dgx(), compute);
    if (peak != nullptr) *peak = c.rank_activation_peak_bytes[0];
    int n = 0;
    for (const auto& node : c.graph.nodes) {
      if (node.rank == 0 && node.kind == sim::OpKind::compute && node.phase == sim::Phase::forward &&
          c.graph.names[node.name].rfind(layer, 0) == 0) {
        ++n;
      }
    }
    REQUIRE(sim::execute(c.graph, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::analytical).makespan.seconds() > 0);
    return n;
  };
  double none_peak = 0.0, selective_peak = 0.0;
  const int core = count(strategy::Recompute::none, "h.0.attn.core", &none_peak);
  const int mlp = count(strategy::Recompute::none, "h.0.mlp.fc");
  REQUIRE(core > 0);
  REQUIRE(count(strategy::Recompute::selective, "h.0.attn.core", &selective_peak) == 2 * core);
  REQUIRE(count(strategy::Recompute::selective, "h.0.mlp.fc") == mlp);
  REQUIRE(count(strategy::Recompute::full, "h.0.mlp.fc") == 2 * mlp);
  // The s x s attention scores are not kept (K22 Table 2: 5as/ht of 34/t + 5as/ht per layer).
  REQUIRE(selective_peak < none_peak);
}

TEST_CASE("impossible tensor-parallel splits are clear errors", "[training][tp]") {
  const auto m = gpt();  // 12 heads
  REQUIRE_THROWS_WITH(compile(m, plan(8, false)), Catch::Matchers::Contains("12 attention heads are not divisible by tp = 8"));
  REQUIRE_THROWS_WITH(compile(test::toy_mlp(4, 256), plan(2, false)),
                      Catch::Matchers::Contains("tensor parallelism splits transformer layers"));
  auto p = plan(4, false);
  p.dp = 4;  // 16 ranks on an 8-GPU node
  REQUIRE_THROWS_WITH(compile(m, p), Catch::Matchers::Contains("dp x tp = 4 x 4 = 16 ranks need 16 GPUs, but the cluster has 8"));
}

TEST_CASE("TP splits a fused attention kernel by heads", "[training][tp]") {
  const auto m = strategy::with_fused_attention(gpt());
  auto flash = [&](int tp) {
    const auto c = compile(m, plan(tp, false));
    for (const auto& node : c.graph.nodes) {
      if (node.rank == 0 && c.graph.names[node.name] == "h.0.attn.core.flash_attn_fwd") {
        return c.graph.signatures[node.signature];
      }
    }
    FAIL("no fused attention kernel");
    return sim::OpSignature{};
  };
  const auto one = flash(1);
  const auto two = flash(2);
  REQUIRE(one.type == sim::OpType::attention);
  REQUIRE(two.flops == Approx(one.flops / 2));
  REQUIRE(two.shape[0] * 2 == one.shape[0]);  // heads x micro-batch
}

TEST_CASE("TP inside a 1F1B pipeline: TP innermost, p2p between the same TP rank of adjacent stages", "[training][tp]") {
  const auto m = gpt();
  auto p = tp2_pipeline();
  p.fold = false;  // every TP rank in the graph, to check their exchanges
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  const auto c = strategy::compile_pipeline(m, p, dgx(), compute);
  const auto& g = c.graph;
  REQUIRE(g.ranks() == 4);
  const auto& t = *m.transformer;
  int sends = 0;
  std::map<sim::RankId, int> tp_layers;  // rank -> TP collectives of h.0 (stage 0) or h.11 (stage 1)
  for (const auto& node : g.nodes) {
    if (node.kind == sim::OpKind::send) {
      // Stage 0 is ranks 0-1, stage 1 ranks 2-3: TP rank j talks to TP rank j.
      REQUIRE(node.peer == (node.rank < 2 ? node.rank + 2 : node.rank - 2));
      // Sequence parallelism: each TP rank sends its half of the sequence (Megatron's [s/t, b, h]).
      REQUIRE(node.bytes == Approx(2.0 * t.seq_len * 2 * t.hidden / 2));
      ++sends;
    }
    if (node.stream == strategy::streams::tensor_parallel) {
      const std::string& name = g.names[node.name];
      if (name.find(" h.0.") != std::string::npos || name.find(" h.11.") != std::string::npos) ++tp_layers[node.rank];
    }
  }
  REQUIRE(sends == 4 * 4);  // 4 micro-batches, activations down and gradients up, on 2 TP ranks each
  for (sim::RankId r = 0; r < 4; ++r) {
    INFO("rank " << r);
    REQUIRE(tp_layers[r] == 4 * (4 + 6));  // per micro-batch: 2 AG + 2 RS forward, 4 AG + 2 RS backward
  }
  const auto run = sim::execute(g, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::flow);
  REQUIRE(run.makespan.seconds() > 0.0);
  // The stage's memory holds half the parameters of a TP-free stage.
  REQUIRE(strategy::tp_rank_params(m, 2, c.rank_chunks[0][0].first, c.rank_chunks[0][0].second) <
          0.6 * strategy::tp_rank_params(m, 1, c.rank_chunks[0][0].first, c.rank_chunks[0][0].second));
}

TEST_CASE("gemm_efficiency stretches unprofiled matrix kernels and nothing else", "[training]") {
  const auto m = gpt();
  auto durations = [&](double efficiency) {
    auto p = plan(1, false);
    p.gemm_efficiency = efficiency;
    const auto c = compile(m, p);
    std::pair<double, double> gemm_other{0.0, 0.0};
    for (const auto& node : c.graph.nodes) {
      if (node.rank != 0 || node.kind != sim::OpKind::compute || node.signature >= c.graph.signatures.size()) continue;
      (c.graph.signatures[node.signature].type == sim::OpType::gemm ? gemm_other.first : gemm_other.second) +=
          node.duration.seconds();
    }
    return gemm_other;
  };
  const auto one = durations(1.0);
  const auto half = durations(0.5);
  REQUIRE(half.first == Approx(2.0 * one.first).epsilon(1e-9));
  REQUIRE(half.second == Approx(one.second).epsilon(1e-12));
}
