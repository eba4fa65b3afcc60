// Context parallelism (plan.cp) as Megatron-Core runs it through Transformer Engine: each rank's
// 1/cp of every sequence, the attention ring's blocks and exchanges, and what a sample counts for.
#include "models/context_parallel.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "models/model_builder.hpp"
#include "models/model_zoo.hpp"
#include "run/calibration.hpp"
#include "run/scenario.hpp"
#include "run/simulation.hpp"
#include "strategies/rank_emitter.hpp"

using namespace foresight;
using namespace foresight::strategy;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

json cp_doc(const json& plan_extra) {
  json doc{{"model", {{"name", "llama3-8b"}, {"seq_len", 4096}}},
           {"cluster", {{"preset", "dgx-h100"}, {"gpus", 8}}},
           {"plan",
            {{"tp", 2},
             {"cp", 2},
             {"dp", 2},
             {"micro_batch", 1},
             {"global_batch", 4},
             {"precision", "bf16"},
             {"optimizer", "adam"},
             {"fused_attention", true},
             {"zero", 1},
             {"steps", 2},
             {"network", "analytical"}}},
           {"workload", {{"steps", 2}}}};
  for (const auto& [k, v] : plan_extra.items()) doc["plan"][k] = v;
  return doc;
}

SimulationOutput simulate_cp(const json& plan_extra) {
  SimulationInputs inputs;
  inputs.collectives = run::default_collective_config();
  return simulate_scenario(parse_scenario(cp_doc(plan_extra), "cp.json"), inputs);
}

double op_flops(const std::vector<OpTemplate>& ops, std::string_view prefix) {
  double f = 0.0;
  for (const OpTemplate& t : ops) {
    if (t.kernel.rfind(prefix, 0) == 0) f += t.flops;
  }
  return f;
}

}  // namespace

TEST_CASE(
    "context parallelism: each rank runs 1/cp of every layer's work, the ring's blocks included",
    "[cp]") {
  const Model whole = with_fused_attention(build_model("llama3-8b", 0, 4096));
  for (const int cp : {2, 4, 8}) {
    CAPTURE(cp);
    const Model part = with_context_parallel(
        whole, with_fused_attention(build_model("llama3-8b", 0, 4096 / cp)), cp);
    REQUIRE(part.layers.size() == whole.layers.size());
    // A sample is still a whole sequence: its tokens and its model FLOPs (throughput, MFU).
    REQUIRE(part.seq_len == 4096);
    REQUIRE(part.fwd_flops() == whole.fwd_flops());
    REQUIRE(part.bwd_flops() == whole.bwd_flops());
    int rings = 0;
    for (std::size_t i = 0; i < whole.layers.size(); ++i) {
      const Layer& w = whole.layers[i];
      const Layer& p = part.layers[i];
      CAPTURE(w.name);
      if (w.kind == "linear") {
        // Token-wise work: 1/cp of the tokens.
        REQUIRE(op_flops(p.fwd, "linear_fwd") * cp ==
                Approx(op_flops(w.fwd, "linear_fwd")).epsilon(1e-12));
      }
      if (w.kind != "attention") continue;
      ++rings;
      // The own block (causal over s / cp) and cp - 1 blocks of half another rank's keys: 1/cp
      // of the whole causal attention, forward and backward (Megatron's load balancing).
      REQUIRE(op_flops(p.fwd, "flash_attn") * cp ==
              Approx(op_flops(w.fwd, "flash_attn")).epsilon(1e-12));
      REQUIRE(op_flops(p.bwd, "flash_attn") * cp ==
              Approx(op_flops(w.bwd, "flash_attn")).epsilon(1e-12));
      int remote = 0;
      for (const OpTemplate& t : p.fwd) remote += t.kernel == kCpAttentionFwd ? 1 : 0;
      REQUIRE(remote == cp - 1);
      // Each step passes the rank's keys and values: 2 x s/cp x kv heads x head dim, bf16.
      const OpTemplate* local = find_op(p.fwd, "flash_attn_fwd");
      const TransformerShape& t = *whole.transformer;
      const double head_dim = static_cast<double>(t.hidden) / t.heads;
      REQUIRE(cp_kv_bytes(*local, t, 3, 2, 2.0) ==
              Approx(2.0 * 3 * (4096.0 / cp) * (t.kv_heads / 2.0) * head_dim * 2.0));
    }
    REQUIRE(rings == whole.transformer->layers);
  }
}

TEST_CASE(
    "context parallelism: the ring's exchanges per layer and micro-batch, and the blocks that wait "
    "for them",
    "[cp]") {
  for (const int cp : {2, 4}) {
    CAPTURE(cp);
    const SimulationOutput out = simulate_cp({{"cp", cp}, {"dp", 4 / cp}});
    const sim::ExecutionGraph& g = out.compiled.graph;
    const sim::ExecutionResult& r = out.result;
    const TransformerShape& t = *out.model.transformer;
    // Per micro-batch of one sequence: K and V of s / cp tokens, kv heads over tp = 2, bf16.
    const double kv =
        2.0 * (4096.0 / cp) * (t.kv_heads / 2.0) * (static_cast<double>(t.hidden) / t.heads) * 2.0;
    std::map<std::pair<int, sim::Phase>, double>
        sent;  // bytes each rank sends, per layer and phase
    std::map<std::pair<int, sim::Phase>, int> steps;
    for (sim::NodeId n = 0; n < g.nodes.size(); ++n) {
      const sim::Node& node = g.nodes[n];
      if (node.rank != 0 || node.stream != streams::context_parallel || node.micro_batch != 0)
        continue;
      REQUIRE(node.kind == sim::OpKind::collective);
      REQUIRE(node.op == sim::CollectiveOp::all_gather);
      REQUIRE(g.communicators[node.communicator].groups.front().size() ==
              static_cast<std::size_t>(cp));
      // An all-gather of N bytes over cp ranks sends (cp - 1) / cp x N per rank.
      sent[{node.layer, node.phase}] += node.bytes * (cp - 1) / cp;
      ++steps[{node.layer, node.phase}];
    }
    REQUIRE_FALSE(sent.empty());
    for (const auto& [key, bytes] : sent) {
      CAPTURE(key.first);
      if (key.second == sim::Phase::forward) {
        // cp - 1 hops of the keys and values (twice per step with full recompute: none here).
        REQUIRE(steps[key] == (cp - 1) * 2);  // two steps simulated
        REQUIRE(bytes == Approx(2.0 * (cp - 1) * kv));
      } else {
        // Backward: the keys and values again and their gradients, cp - 1 hops each, and home.
        REQUIRE(key.second == sim::Phase::backward);
        REQUIRE(steps[key] == cp * 2);
        REQUIRE(bytes == Approx(2.0 * 2.0 * (cp - 1) * kv));
      }
    }
    // Every block of another rank starts after the step that brought its keys and values.
    int checked = 0;
    for (sim::NodeId n = 0; n < g.nodes.size(); ++n) {
      const sim::Node& node = g.nodes[n];
      if (node.rank != 0 || node.kind != sim::OpKind::compute ||
          node.signature >= g.signatures.size())
        continue;
      if (g.signatures[node.signature].kernel != kCpAttentionFwd) continue;
      bool after_step = false;
      for (const sim::NodeId d : node.deps) {
        if (g.nodes[d].stream == streams::context_parallel) {
          after_step = true;
          REQUIRE(r.start[n] >= r.end[d]);
        }
      }
      REQUIRE(after_step);
      ++checked;
    }
    REQUIRE(checked > 0);
  }
}

TEST_CASE("context parallelism: folded and unfolded runs agree bit for bit, on both networks",
          "[cp]") {
  for (const char* network : {"analytical", "flow"}) {
    for (const int zero : {1, 3}) {
      for (const char* exchange : {"p2p", "a2a"}) {
        CAPTURE(network, zero, exchange);
        const json plan{{"network", network}, {"zero", zero}, {"cp_comm", exchange}};
        json unfolded = plan;
        unfolded["fold"] = false;
        const SimulationOutput folded = simulate_cp(plan);
        const SimulationOutput whole = simulate_cp(unfolded);
        REQUIRE(folded.compiled.graph.ranks() < whole.compiled.graph.ranks());
        REQUIRE(folded.report.iteration_time_s == whole.report.iteration_time_s);
      }
    }
  }
}

TEST_CASE("context parallelism: FSDP (ZeRO-3) shards and gathers over dp x cp", "[cp]") {
  // torchtitan's dp_shard_cp mesh: the cp ranks hold shards of the weights as data-parallel ranks
  // do.
  const SimulationOutput z1 = simulate_cp({});
  const SimulationOutput z3 = simulate_cp({{"zero", 3}});
  REQUIRE(z3.report.memory.front().bytes.weights ==
          Approx(z1.report.memory.front().bytes.weights / 4.0));
  // Every parameter gather and gradient reduce-scatter runs over the 4 GPUs of dp x cp (tp 2).
  const sim::ExecutionGraph& g = z3.compiled.graph;
  int collectives = 0;
  for (const sim::Node& n : g.nodes) {
    if (n.kind != sim::OpKind::collective || n.stream != streams::nccl) continue;
    if (n.op != sim::CollectiveOp::all_gather && n.op != sim::CollectiveOp::reduce_scatter)
      continue;
    REQUIRE(g.communicators[n.communicator].groups.front().size() == 4);
    ++collectives;
  }
  REQUIRE(collectives > 0);
}

TEST_CASE("context parallelism: what a step counts, and what a rank holds", "[cp]") {
  const SimulationOutput cp2 = simulate_cp({});
  const SimulationOutput cp1 = simulate_cp({{"cp", 1}, {"dp", 4}, {"global_batch", 8}});
  // Samples per step are dp x micro-batch x accumulation: the cp ranks share theirs.
  REQUIRE(cp2.report.gpus == 8);
  REQUIRE(cp2.report.tokens_per_s ==
          Approx(4.0 * 4096 / cp2.report.iteration_time_s).epsilon(1e-12));
  // Model FLOPs: the whole model's per sample, whatever the split.
  REQUIRE(cp2.report.model_fwd_flops == cp1.report.model_fwd_flops);
  REQUIRE(cp2.report.tflops_per_gpu == Approx((cp1.model.fwd_flops() + cp1.model.bwd_flops()) * 4 /
                                              cp2.report.iteration_time_s / 8 * 1e-12));
  // Activations: each rank keeps its s / cp tokens' (fused attention keeps no s x s scores).
  REQUIRE(cp2.report.memory.front().bytes.activations ==
          Approx(0.5 * cp1.report.memory.front().bytes.activations).epsilon(1e-9));
  // Megatron's distributed optimizer shards over dp x cp.
  REQUIRE(cp2.report.memory.front().bytes.optimizer ==
          Approx(cp1.report.memory.front().bytes.optimizer));
}

TEST_CASE("context parallelism: what it does not combine with is refused", "[cp]") {
  const auto parse = [](const json& extra) { return parse_scenario(cp_doc(extra), "cp.json"); };
  REQUIRE_THROWS_WITH(parse({{"fused_attention", false}}),
                      Contains("/plan/cp: expected 1 without fused_attention"));
  REQUIRE_THROWS_WITH(parse({{"shard_group", 2}}),
                      Contains("/plan/cp: expected 1 with shard_group"));
  REQUIRE_THROWS_WITH(
      parse({{"dp", 4}}),
      Contains("dp x tp x pp x ep x cp = 4 x 2 x 1 x 1 x 2 = 16, but cluster.gpus is 8"));
  // Without dp, data parallelism takes what tp x cp leave.
  json doc = cp_doc({});
  doc["plan"].erase("dp");
  REQUIRE(parse_scenario(doc, "cp.json").plan.dp == 2);
  // Megatron splits each sequence into 2 cp chunks.
  json odd = cp_doc({{"cp", 4}, {"dp", 1}});
  odd["model"]["seq_len"] = 4100;
  SimulationInputs inputs;
  REQUIRE_THROWS_WITH(
      simulate_scenario(parse_scenario(odd, "cp.json"), inputs),
      Contains("/plan/cp: expected half the sequence length (4100 tokens) to be a multiple of cp"));
}

TEST_CASE("context parallelism over all-to-alls (Ulysses): whole sequences on 1/cp of the heads",
          "[cp]") {
  const Model whole = with_fused_attention(build_model("llama3-8b", 0, 4096));
  const Model part = with_context_parallel_a2a(
      whole, with_fused_attention(build_model("llama3-8b", 0, 4096 / 2)), 2);
  REQUIRE(part.fwd_flops() == whole.fwd_flops());
  for (std::size_t i = 0; i < whole.layers.size(); ++i) {
    if (whole.layers[i].kind != "attention") continue;
    const OpTemplate* w = find_op(whole.layers[i].fwd, "flash_attn_fwd");
    const OpTemplate* p = find_op(part.layers[i].fwd, "flash_attn_fwd");
    REQUIRE(p->shape[0] * 2 == w->shape[0]);  // half the heads
    REQUIRE(p->shape[1] == 4096);             // over the whole sequence
    REQUIRE(p->flops * 2 == Approx(w->flops));
    REQUIRE(find_op(part.layers[i].fwd, kCpAttentionFwd) == nullptr);
  }
  // Per layer and micro-batch: Q, K, V out and the output back in forward; the output gradient
  // out and dQ, dK, dV back in backward. A rank's buffers: its s / cp tokens' heads over tp.
  const SimulationOutput out = simulate_cp({{"cp_comm", "a2a"}});
  const sim::ExecutionGraph& g = out.compiled.graph;
  const TransformerShape& t = *out.model.transformer;
  const double head_dim = static_cast<double>(t.hidden) / t.heads;
  const double q = 2048.0 * (t.heads / 2.0) * head_dim * 2.0;
  const double kv = 2.0 * 2048.0 * (t.kv_heads / 2.0) * head_dim * 2.0;
  std::map<std::pair<int, sim::Phase>, std::vector<double>> sizes;
  for (sim::NodeId n = 0; n < g.nodes.size(); ++n) {
    const sim::Node& node = g.nodes[n];
    if (node.rank != 0 || node.stream != streams::context_parallel || node.micro_batch != 0)
      continue;
    REQUIRE(node.op == sim::CollectiveOp::all_to_all);
    sizes[{node.layer, node.phase}].push_back(node.bytes);
  }
  REQUIRE(sizes.size() == 2 * static_cast<std::size_t>(t.layers));
  for (const auto& [key, list] : sizes) {
    REQUIRE(list.size() == 4);  // two per pass, two steps simulated
    if (key.second == sim::Phase::forward) {
      REQUIRE(list[0] == Approx(q + kv));
      REQUIRE(list[1] == Approx(q));
    } else {
      REQUIRE(list[0] == Approx(q));
      REQUIRE(list[1] == Approx(q + kv));
    }
  }
  // Whole heads per tp x cp rank, or refused.
  json odd = cp_doc({{"cp_comm", "a2a"}, {"cp", 4}, {"dp", 1}, {"tp", 4}, {"global_batch", 2}});
  odd["cluster"]["gpus"] = 16;
  SimulationInputs inputs;
  REQUIRE_THROWS_WITH(
      simulate_scenario(parse_scenario(odd, "cp.json"), inputs),
      Contains("/plan/cp_comm: expected p2p for llama3-8b: a2a gives each of tp x cp = 16 ranks "
               "whole heads"));
}
