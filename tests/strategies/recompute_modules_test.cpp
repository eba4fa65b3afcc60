// Megatron-Core's selective recompute modules (plan.recompute_modules) on a MoE model and on a
// model with a dense layer: what each drops from the saved activations (derived from the shapes)
// and which forward kernels the backward pass reruns, and where; the errors.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "models/model_zoo.hpp"
#include "run/simulation.hpp"
#include "tests/test_paths.hpp"

using namespace foresight;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// tiny-mixtral: 4 layers, hidden 512, 8 experts of FFN 1024 (SwiGLU), top 2, RMSNorm; sequence
// 256. One GPU (ep 1: every expert local), micro-batch 2, 2 micro-batches per step, 1 step.
constexpr double kLayers = 4, kHidden = 512, kFfn = 1024, kTopK = 2, kSeq = 256, kMicro = 2, kHeads = 8;

json scenario(const json& plan, const std::string& config = "hf/tiny-mixtral/config.json") {
  json p = {{"micro_batch", 2}, {"global_batch", 4}, {"precision", "bf16"}, {"optimizer", "adam"},
            {"network", "analytical"}, {"steps", 1}, {"fused_attention", true}, {"fold", false}};
  p.update(plan);
  return {{"model", {{"hf_config", test::data_path(config)}}},
          {"cluster", {{"preset", "dgx-h100"}, {"gpus", 1}}},
          {"plan", p},
          {"workload", {{"steps", 1}}}};
}

strategy::SimulationOutput run(const json& doc) {
  return strategy::simulate_scenario(strategy::parse_scenario(doc, "recompute_modules.json"), {});
}

/// Rank 0's kernels in the order they were emitted: name and phase.
std::vector<std::pair<std::string, sim::Phase>> kernel_sequence(const strategy::SimulationOutput& out) {
  std::vector<std::pair<std::string, sim::Phase>> seq;
  const auto& g = out.compiled.graph;
  for (const auto& n : g.nodes) {
    if (n.rank == 0 && n.kind == sim::OpKind::compute) seq.emplace_back(g.names[n.name], n.phase);
  }
  return seq;
}

/// Rank 0's kernels by name: (count before the first backward kernel, count from it on).
std::map<std::string, std::pair<int, int>> kernel_counts(const strategy::SimulationOutput& out) {
  std::map<std::string, std::pair<int, int>> counts;
  bool backward = false;
  for (const auto& [name, phase] : kernel_sequence(out)) {
    if (phase == sim::Phase::backward || phase == sim::Phase::wgrad) backward = true;
    auto& c = counts[name];
    (backward ? c.second : c.first) += 1;
  }
  return counts;
}

/// How many kernels of `seq` end with `suffix` and `rerun` (given the one before) says are
/// reruns; each must be followed right away by the kernel `next` names (from its prefix).
int reruns_followed_by(const std::vector<std::pair<std::string, sim::Phase>>& seq, const std::string& suffix,
                       const std::function<bool(const std::pair<std::string, sim::Phase>&)>& rerun,
                       const std::function<std::string(const std::string&)>& next) {
  int found = 0;
  for (std::size_t k = 1; k + 1 < seq.size(); ++k) {
    const std::string& name = seq[k].first;
    if (!name.ends_with(suffix) || !rerun(seq[k - 1])) continue;
    REQUIRE(seq[k + 1].first == next(name.substr(0, name.size() - suffix.size())));
    ++found;
  }
  return found;
}

}  // namespace

TEST_CASE("recompute_modules: moe_act drops the experts' activation output, layernorm the MoE norm's",
          "[training][moe][recompute]") {
  const auto none = run(scenario({{"recompute", "none"}}));
  const auto attn = run(scenario({{"recompute", "selective"}}));  // core_attn
  const auto act = run(scenario({{"recompute", "selective"}, {"recompute_modules", {"moe_act"}}}));
  const auto norm = run(scenario({{"recompute", "selective"}, {"recompute_modules", {"layernorm"}}}));
  const auto both = run(scenario({{"recompute", "selective"}, {"recompute_modules", {"layernorm", "moe_act", "core_attn"}}}));
  const auto activations = [](const strategy::SimulationOutput& o) { return o.report.memory[0].bytes.activations; };
  // The activation's output, the down projection's input: tokens x top-k values of the FFN width
  // per MoE layer, bf16, for the micro-batch in flight. The norm's output: tokens x hidden.
  const double act_bytes = kLayers * kMicro * kSeq * kTopK * kFfn * 2.0;
  const double norm_bytes = kLayers * kMicro * kSeq * kHidden * 2.0;
  // The fused attention core, checkpointed, keeps Q, K and V (its input) but not the kernel's
  // fp32 log-sum-exp per query and head.
  const double lse_bytes = kLayers * kMicro * kSeq * kHeads * 4.0;
  REQUIRE(activations(none) - activations(attn) == Approx(lse_bytes));
  REQUIRE(activations(none) - activations(act) == Approx(act_bytes));
  REQUIRE(activations(none) - activations(norm) == Approx(norm_bytes));
  REQUIRE(activations(none) - activations(both) == Approx(act_bytes + norm_bytes + lse_bytes));

  // The backward pass reruns each expert's activation (8 experts x 4 layers x 2 micro-batches)
  // and each MoE layer's pre-MLP norm (4 x 2); nothing else.
  const auto base = kernel_counts(none);
  int other = 0;
  // Kernels a run adds from its first backward kernel on: those ending with `suffix`; the rest
  // go to `other`.
  const auto added = [&](const std::map<std::string, std::pair<int, int>>& with, const std::string& suffix) {
    int mine = 0;
    for (const auto& [name, c] : with) (name.ends_with(suffix) ? mine : other) += c.second - base.at(name).second;
    return mine;
  };
  const int act_reruns = added(kernel_counts(act), "expert_swiglu_fwd");
  const int norm_reruns = added(kernel_counts(norm), "ln_2.rmsnorm_fwd");
  // core_attn reruns the fused kernel (Transformer Engine's checkpointed core attention), not
  // RoPE, which Megatron applies before the checkpoint.
  const int attn_reruns = added(kernel_counts(attn), "attn.core.flash_attn_fwd");
  REQUIRE(act_reruns == 8 * 4 * 2);
  REQUIRE(norm_reruns == 4 * 2);
  REQUIRE(attn_reruns == 4 * 2);
  REQUIRE(other == 0);
  // Each rerun of an expert's activation (one not right after its up projection) comes right
  // before that expert's down projection's input gradient; each rerun of the norm (one right
  // after a backward kernel) right before its MLP's backward, the routed experts' first kernel.
  const auto not_after_up = [](const auto& before) { return !before.first.ends_with("expert_up_fwd"); };
  const auto after_backward = [](const auto& before) {
    return before.second == sim::Phase::backward || before.second == sim::Phase::wgrad;
  };
  REQUIRE(reruns_followed_by(kernel_sequence(act), "expert_swiglu_fwd", not_after_up,
                             [](const std::string& expert) { return expert + "expert_down_dgrad"; }) == act_reruns);
  REQUIRE(reruns_followed_by(kernel_sequence(norm), "ln_2.rmsnorm_fwd", after_backward,
                             [](const std::string& layer) { return layer + "mlp.experts.moe_unpermute_bwd"; }) ==
          norm_reruns);
  REQUIRE(reruns_followed_by(kernel_sequence(attn), "attn.core.flash_attn_fwd", after_backward,
                             [](const std::string& core) { return core + "attn.core.flash_attn_bwd"; }) == attn_reruns);
  // Unfused, the scores' kernels rerun (each layer's, once per micro-batch), RoPE still not.
  const auto unfused = kernel_counts(run(scenario({{"recompute", "none"}, {"fused_attention", false}})));
  for (const auto& [name, c] : kernel_counts(run(scenario({{"recompute", "selective"}, {"fused_attention", false}})))) {
    const int more = c.second - unfused.at(name).second;
    const bool score = name.ends_with("attn_scores") || name.ends_with("softmax_fwd") || name.ends_with("attn_context");
    INFO(name);
    REQUIRE(more == (score ? 2 : 0));
  }
  // With FP8 experts the down projection keeps its input as a 1-byte FP8 copy: that is what is
  // dropped, and its cast is rerun after the activation.
  const auto fp8 = run(scenario({{"recompute", "none"}, {"fp8", true}}));
  const auto fp8_act = run(scenario({{"recompute", "selective"}, {"recompute_modules", {"moe_act"}}, {"fp8", true}}));
  REQUIRE(activations(fp8) - activations(fp8_act) == Approx(act_bytes / 2));
  const auto fp8_base = kernel_counts(fp8);
  int casts = 0;
  for (const auto& [name, c] : kernel_counts(fp8_act)) {
    if (name.ends_with("fp8_cast_transpose_expert_hidden")) casts += c.second - fp8_base.at(name).second;
  }
  REQUIRE(casts == 8 * 4 * 2);
  // Time: more kernels, never less time.
  REQUIRE(both.report.iteration_time_s > none.report.iteration_time_s);
}

TEST_CASE("recompute_modules: errors name the key", "[training][moe][recompute]") {
  REQUIRE_THROWS_WITH(run(scenario({{"recompute", "full"}, {"recompute_modules", {"moe_act"}}})),
                      Contains("/plan/recompute_modules") && Contains("expected recompute selective"));
  REQUIRE_THROWS_WITH(
      run(scenario({{"recompute", "selective"}, {"recompute_modules", {"core_attn", "mla_up_proj"}}})),
      Contains("/plan/recompute_modules/1") &&
          Contains("expected core_attn, moe_act, layernorm, mlp, moe or shared_experts") &&
          Contains("\"mla_up_proj\""));
  // A checkpointed module that finds nothing to checkpoint is refused: mlp on a model whose
  // every MLP routes, moe and shared_experts on a dense model.
  REQUIRE_THROWS_WITH(run(scenario({{"recompute", "selective"}, {"recompute_modules", {"mlp"}}})),
                      Contains("/plan/recompute_modules") && Contains("expected a dense MLP") &&
                          Contains("for module mlp"));
  for (const char* module : {"moe", "shared_experts"}) {
    INFO(module);
    REQUIRE_THROWS_WITH(
        run(scenario({{"recompute", "selective"}, {"recompute_modules", {module}}}, "hf/tiny-sliding/config.json")),
        Contains("/plan/recompute_modules") && Contains(std::string("for module ") + module));
  }
  REQUIRE_THROWS_WITH(run(scenario({{"recompute", "selective"}, {"recompute_modules", {"shared_experts"}}})),
                      Contains("expected shared experts"));
  // The effective plan echoes the modules.
  const auto out = run(scenario({{"recompute", "selective"}, {"recompute_modules", {"moe_act", "layernorm"}}}));
  REQUIRE(out.plan.at("recompute_modules") == json({"moe_act", "layernorm"}));
}

TEST_CASE("recompute_modules: mlp reruns a dense layer's MLP with its norm, not a MoE layer's",
          "[training][moe][recompute]") {
  // tiny-deepseek: 4 layers of hidden 256, the first dense (SwiGLU MLP of 1024), the other three
  // MoE (16 routed experts of 128, top 4, 2 shared); sequence 128; micro-batch 2, 2 per step.
  constexpr double hidden = 256, ffn = 1024, seq = 128, micro = 2;
  const std::string config = "hf/tiny-deepseek/config.json";
  const auto none = run(scenario({{"recompute", "none"}}, config));
  const auto mlp = run(scenario({{"recompute", "selective"}, {"recompute_modules", {"mlp"}}}, config));
  // The dense MLP keeps its input (h per token, which its norm kept) and drops the rest: the
  // norm's output as the gate/up projection's input (h), the activation's input (2 ffn) and the
  // down projection's (ffn); bf16.
  const double dropped = micro * seq * (hidden + 3.0 * ffn) * 2.0;
  REQUIRE(none.report.memory[0].bytes.activations - mlp.report.memory[0].bytes.activations == Approx(dropped));
  // Reruns: the dense layer's norm, projections and activation, once per micro-batch, together
  // and right before the down projection's backward; the MoE layers' MLPs are left alone.
  const auto base = kernel_counts(none);
  std::map<std::string, int> more;
  for (const auto& [name, c] : kernel_counts(mlp)) {
    if (c.second != base.at(name).second) more[name] = c.second - base.at(name).second;
  }
  const std::map<std::string, int> expected{{"h.0.ln_2.rmsnorm_fwd", 2},
                                            {"h.0.mlp.gate_up.linear_fwd", 2},
                                            {"h.0.mlp.act.swiglu_fwd", 2},
                                            {"h.0.mlp.proj.linear_fwd", 2}};
  REQUIRE(more == expected);
  const auto seq_mlp = kernel_sequence(mlp);
  int groups = 0;
  for (std::size_t k = 0; k + 4 < seq_mlp.size(); ++k) {
    if (seq_mlp[k].first != "h.0.ln_2.rmsnorm_fwd" || k == 0 || seq_mlp[k - 1].second == sim::Phase::forward) continue;
    REQUIRE(seq_mlp[k + 1].first == "h.0.mlp.gate_up.linear_fwd");
    REQUIRE(seq_mlp[k + 2].first == "h.0.mlp.act.swiglu_fwd");
    REQUIRE(seq_mlp[k + 3].first == "h.0.mlp.proj.linear_fwd");
    REQUIRE(seq_mlp[k + 4].second != sim::Phase::forward);
    REQUIRE(seq_mlp[k + 4].first.starts_with("h.0.mlp.proj."));
    ++groups;
  }
  REQUIRE(groups == 2);
  REQUIRE(mlp.report.iteration_time_s > none.report.iteration_time_s);
  REQUIRE(mlp.plan.at("recompute_modules") == json({"mlp"}));
}

namespace {

/// Rank 0's all-to-alls (dispatch and combine) from its first backward kernel on.
int backward_all_to_alls(const strategy::SimulationOutput& out) {
  const auto& g = out.compiled.graph;
  bool backward = false;
  int n = 0;
  for (const auto& node : g.nodes) {
    if (node.rank != 0) continue;
    if (node.kind == sim::OpKind::compute && (node.phase == sim::Phase::backward || node.phase == sim::Phase::wgrad)) {
      backward = true;
    }
    if (backward && node.kind == sim::OpKind::collective && node.op == sim::CollectiveOp::all_to_all) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("recompute_modules: moe reruns a MoE layer from its input, shared_experts its shared experts",
          "[training][moe][recompute]") {
  // tiny-deepseek (above): three MoE layers (1-3) of 16 routed experts of 128 (SwiGLU), top 4,
  // router over 16, and 2 shared experts as one FFN of 256; hidden 256, sequence 128; micro-batch
  // 2, 2 micro-batches per step.
  constexpr double hidden = 256, seq = 128, micro = 2, experts = 16, top_k = 4, ffn = 128, shared = 256, moe_layers = 3;
  const std::string config = "hf/tiny-deepseek/config.json";
  const auto none = run(scenario({{"recompute", "none"}}, config));
  const auto moe = run(scenario({{"recompute", "selective"}, {"recompute_modules", {"moe"}}}, config));
  const auto sh = run(scenario({{"recompute", "selective"}, {"recompute_modules", {"shared_experts"}}}, config));
  const auto both = run(scenario({{"recompute", "selective"}, {"recompute_modules", {"moe", "shared_experts"}}}, config));
  const auto norm_too = run(scenario({{"recompute", "selective"}, {"recompute_modules", {"moe", "layernorm"}}}, config));
  const auto activations = [](const strategy::SimulationOutput& o) { return o.report.memory[0].bytes.activations; };
  // Per token and MoE layer, bf16. The shared experts keep their input (h, the router's too),
  // the activation's input (2 x 256) and the down projection's (256): their checkpoint keeps
  // none of it. The MoE layer keeps only its input (h): not the router's probabilities (16) and
  // choices (4), nor each of the 4 assignments' expert input, up projection and activation
  // output (256 + 256 + 128).
  const double per_token_shared = hidden + 3.0 * shared;
  const double per_token_moe = experts + top_k + top_k * (hidden + 2.0 * ffn + ffn) + per_token_shared;
  const double tokens = moe_layers * micro * seq;
  REQUIRE(activations(none) - activations(sh) == Approx(tokens * per_token_shared * 2.0));
  REQUIRE(activations(none) - activations(moe) == Approx(tokens * per_token_moe * 2.0));
  REQUIRE(activations(both) == activations(moe));
  // With layernorm too, the MoE layer's input, the norm's output, is dropped as well.
  REQUIRE(activations(moe) - activations(norm_too) == Approx(tokens * hidden * 2.0));

  // Reruns: each MoE layer's forward kernels (router, permutation, every expert, unpermutation,
  // shared experts) once per micro-batch; the shared experts' once more with shared_experts;
  // nothing of the dense layer or the attention.
  const auto base = kernel_counts(none);
  const auto check_added = [&](const strategy::SimulationOutput& out, int moe_times, int shared_times) {
    for (const auto& [name, c] : kernel_counts(out)) {
      const bool in_moe = (name.starts_with("h.1.mlp.") || name.starts_with("h.2.mlp.") || name.starts_with("h.3.mlp.")) &&
                          name.find(".mlp.residual.") == std::string::npos;
      const bool in_shared = in_moe && name.find(".mlp.shared.") != std::string::npos;
      // base.first: the kernel's forward runs in the first micro-batch (before any backward).
      const int expected = base.at(name).first * ((in_moe ? moe_times : 0) + (in_shared ? shared_times : 0));
      INFO(name);
      REQUIRE(c.second - base.at(name).second == expected);
    }
  };
  check_added(moe, 2, 0);
  check_added(sh, 0, 2);
  check_added(both, 2, 2);
  // Each MoE layer's rerun runs together, from its router to its shared experts' down
  // projection, right before that projection's backward.
  const auto seq_moe = kernel_sequence(moe);
  int groups = 0;
  for (std::size_t k = 1; k < seq_moe.size(); ++k) {
    const std::string& name = seq_moe[k].first;
    if (!name.ends_with("mlp.router.router_fwd") || seq_moe[k - 1].second == sim::Phase::forward) continue;
    const std::string layer = name.substr(0, name.find("mlp."));
    std::size_t end = k;
    while (end < seq_moe.size() && seq_moe[end].second == sim::Phase::forward) {
      REQUIRE(seq_moe[end].first.starts_with(layer + "mlp."));
      ++end;
    }
    REQUIRE(seq_moe[end - 1].first == layer + "mlp.shared.proj.linear_fwd");
    REQUIRE(seq_moe[end].first.starts_with(layer + "mlp.shared.proj."));
    ++groups;
  }
  REQUIRE(groups == moe_layers * 2);
  // Expert parallelism over 2 GPUs (global batch 8: still 2 micro-batches per rank): the rerun
  // dispatches and combines again (two all-to-alls per MoE layer and micro-batch).
  json ep = {{"recompute", "none"}, {"ep", 2}, {"global_batch", 8}};
  json ep_moe = {{"recompute", "selective"}, {"recompute_modules", {"moe"}}, {"ep", 2}, {"global_batch", 8}};
  auto on_two = [&](json plan) {
    json doc = scenario(plan, config);
    doc["cluster"]["gpus"] = 2;
    return run(doc);
  };
  REQUIRE(backward_all_to_alls(on_two(ep_moe)) - backward_all_to_alls(on_two(ep)) == moe_layers * 2 * 2);
  REQUIRE(moe.report.iteration_time_s > none.report.iteration_time_s);
}

TEST_CASE("recompute_modules: the spans they checkpoint, pre-norm and post-norm", "[training][recompute]") {
  using strategy::LayerSpan;
  const auto names = [](const strategy::Model& m, const std::optional<LayerSpan>& span) {
    std::vector<std::string> out;
    for (std::size_t k = span->first; k <= span->last; ++k) out.push_back(m.layers[k].name);
    return out;
  };
  // GPT-2 (pre-norm): the MLP with the norm before it, from any of its layers; none elsewhere.
  const strategy::Model gpt = strategy::build_model("gpt2");
  std::optional<LayerSpan> span;
  for (std::size_t i = 0; i < gpt.layers.size() && !span; ++i) span = strategy::dense_mlp(gpt, i);
  REQUIRE(span);
  REQUIRE(names(gpt, span) == std::vector<std::string>{"h.0.ln_2", "h.0.mlp.fc", "h.0.mlp.act", "h.0.mlp.proj"});
  for (std::size_t k = span->first + 1; k <= span->last; ++k) REQUIRE(strategy::dense_mlp(gpt, k)->first == span->first);
  REQUIRE(!strategy::moe_mlp(gpt, span->last));
  // BERT (post-norm): the attention's post-norm before the MLP is not the MLP's.
  const strategy::Model bert = strategy::build_model("bert-large");
  span.reset();
  for (std::size_t i = 0; i < bert.layers.size() && !span; ++i) span = strategy::dense_mlp(bert, i);
  REQUIRE(span);
  REQUIRE(names(bert, span) == std::vector<std::string>{"h.0.mlp.fc", "h.0.mlp.act", "h.0.mlp.proj"});
}
