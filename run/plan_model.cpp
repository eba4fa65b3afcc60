#include "run/plan_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "common/error.hpp"
#include "exec/execution_graph.hpp"
#include "models/batchnorm_fusion.hpp"
#include "models/context_parallel.hpp"
#include "models/eager_kernels.hpp"
#include "models/megatron_softmax.hpp"
#include "models/model_builder.hpp"
#include "models/model_zoo.hpp"
#include "strategies/moe.hpp"

namespace foresight::strategy {

Model scenario_model(const Scenario& s) {
  if (!s.model.hf_config.empty()) return load_hf_config(s.model.hf_config, s.model.seq_len);
  return build_model(s.model.name, s.model.classes, s.model.seq_len);
}

namespace {

/// `model` with the kernels the plan runs: fused attention, FP8, Megatron-LM v2's softmax, fused
/// BatchNorm, eager PyTorch's.
Model with_plan_kernels(const Scenario& scenario, const Plan& plan, Model model) {
  // A checkpointed recompute module must find what it checkpoints (Megatron-Core leaves a module
  // without one alone; a plan that names it asks for nothing, and says so).
  for (const auto& [bit, name, what, span_of] :
       {std::tuple{kRecomputeMlp, "mlp", "a dense MLP", &dense_mlp},
        std::tuple{kRecomputeMoe, "moe", "a MoE layer", &moe_mlp},
        std::tuple{kRecomputeSharedExperts, "shared_experts", "shared experts", &shared_experts}}) {
    if (!plan.recomputes(bit)) continue;
    bool found = false;
    for (std::size_t i = 0; i < model.layers.size() && !found; ++i) found = span_of(model, i).has_value();
    if (!found) {
      throw sim::ConfigError(fmt::format("{}: /plan/recompute_modules: expected {} in {} for module {}, found none",
                                         scenario.path, what, model.name, name));
    }
  }
  if (plan.fused_attention) {
    if (!model.transformer) {
      throw sim::ConfigError(fmt::format("{}: /plan/fused_attention: expected false for {}, which has no attention",
                                         scenario.path, model.name));
    }
    model = with_fused_attention(std::move(model), static_cast<std::int64_t>(plan.attention_kernel));
  }
  if (plan.fp8) {
    if (!model.transformer) {
      throw sim::ConfigError(fmt::format("{}: /plan/fp8: expected false for {}: FP8 applies to transformer blocks",
                                         scenario.path, model.name));
    }
    if (plan.precision != Precision::bf16 && plan.precision != Precision::amp_bf16) {
      throw sim::ConfigError(fmt::format("{}: /plan/fp8: expected precision bf16 or amp_bf16 with it (FP8 GEMMs, "
                                         "BF16 elsewhere), found {}",
                                         scenario.path, to_string(plan.precision)));
    }
    model = with_fp8(std::move(model));
    if (plan.fp8_recipe == Fp8Recipe::current) model = with_fp8_current_scaling(std::move(model));
  }
  // Megatron-LM v2's attention softmax: its fused kernel where it takes the scores' shape,
  // PyTorch's passes elsewhere. Only 16-bit scores can take the kernel; fp32 ones keep the
  // model's one softmax kernel (PyTorch's three fp32 passes there are not modelled).
  const bool sixteen_bit = plan.precision != Precision::fp32;
  if (plan.kernel_generation == KernelGeneration::megatron_2021 && !plan.fused_attention &&
      plan.kernels == Kernels::fused && model.transformer && sixteen_bit) {
    model = with_megatron_softmax(std::move(model), plan.micro_batch, plan.tp);
  }
  if (plan.batchnorm_fusion != BatchNormFusion::none) {
    if (!has_fusable_batchnorm(model)) {
      throw sim::ConfigError(fmt::format("{}: /plan/batchnorm_fusion: expected \"none\" for {}, which has no BatchNorm "
                                         "followed by a ReLU or a residual add",
                                         scenario.path, model.name));
    }
    model = with_batchnorm_fusion(std::move(model), plan.batchnorm_fusion, activation_bytes(plan.precision));
  }
  if (plan.kernels != Kernels::fused) {
    const auto refuse = [&](const std::string& why) {
      throw sim::ConfigError(fmt::format("{}: /plan/kernels: expected \"fused\" {}, found \"{}\"", scenario.path, why,
                                         plan.kernels == Kernels::eager ? "eager" : "torchtitan"));
    };
    if (!model.transformer) refuse(fmt::format("for {}: eager kernels are those of Hugging Face transformers' modules", model.name));
    if (plan.tp > 1) refuse("with tp > 1: the eager kernel lists are for whole layers, not tensor-parallel shards");
    if (plan.fp8) refuse("with fp8: Transformer Engine's layers are fused");
    const bool hf = plan.kernels == Kernels::eager;
    // Hugging Face models train under torch.autocast; torchtitan's FSDP2 gathers bf16 parameters
    // and runs without it, with no KV cache and complex RoPE.
    const bool autocast = hf && (plan.precision == Precision::amp_fp16 || plan.precision == Precision::amp_bf16);
    model = with_eager_kernels(std::move(model), EagerOptions{.activation = activation_bytes(plan.precision),
                                                             .autocast = autocast,
                                                             .kv_cache = hf && plan.recompute == Recompute::none,
                                                             .rope = hf ? RopeStyle::hf : RopeStyle::complex});
  }
  return model;
}

/// One context-parallel rank's model (plan.cp > 1): the layers at s / cp tokens, the attention
/// layers' ring steps (with_context_parallel).
Model context_parallel_model(const Scenario& scenario, const Plan& plan, Model whole) {
  if (!whole.transformer) {
    throw sim::ConfigError(fmt::format("{}: /plan/cp: expected 1 for {}, which has no sequence, found {}", scenario.path,
                                       whole.name, plan.cp));
  }
  const int s = whole.transformer->seq_len;
  if (s % (2 * plan.cp) != 0) {
    throw sim::ConfigError(fmt::format("{}: /plan/cp: expected half the sequence length ({} tokens) to be a multiple of "
                                       "cp: Megatron splits each sequence into 2 x cp equal chunks, found {}",
                                       scenario.path, s, plan.cp));
  }
  Scenario part = scenario;
  part.model.seq_len = s / plan.cp;
  Model local = with_plan_kernels(scenario, plan, scenario_model(part));
  if (plan.cp_comm == CpComm::p2p) return with_context_parallel(whole, std::move(local), plan.cp);
  const TransformerShape& t = *whole.transformer;
  const int ways = plan.cp * plan.tp;
  if (t.heads % ways != 0 || t.kv_heads % ways != 0) {
    throw sim::ConfigError(fmt::format("{}: /plan/cp_comm: expected p2p for {}: a2a gives each of tp x cp = {} ranks "
                                       "whole heads, but it has {} heads and {} key-value heads",
                                       scenario.path, whole.name, ways, t.heads, t.kv_heads));
  }
  return with_context_parallel_a2a(whole, std::move(local), plan.cp);
}

}  // namespace

Model plan_model(const Scenario& scenario, const Plan& plan) {
  Model model = with_plan_kernels(scenario, plan, scenario_model(scenario));
  if (plan.cp > 1) model = context_parallel_model(scenario, plan, std::move(model));
  // Bounded work: every layer runs forward and backward once per micro-batch and step, so a
  // graph has at least this many nodes; a plan past the graph's limit fails before any is built.
  const double least_nodes = 2.0 * std::max(plan.steps, 1) * std::max(plan.grad_accum, 1) *
                             static_cast<double>(model.layers.size());
  if (least_nodes > static_cast<double>(sim::ExecutionGraph::kMaxNodes)) {
    throw sim::ConfigError(fmt::format(
        "{}: /plan: {} steps x {} micro-batches x {} layers x forward and backward is at least {:.0f} M "
        "execution-graph nodes, more than the {} M one simulation may hold: lower global_batch or steps, "
        "or raise micro_batch",
        scenario.path, plan.steps, plan.grad_accum, model.layers.size(), least_nodes / 1e6,
        sim::ExecutionGraph::kMaxNodes / 1'000'000));
  }
  const bool moe = std::any_of(model.layers.begin(), model.layers.end(), [](const Layer& l) { return l.experts > 0; });
  if (plan.ep > 1 && !moe) {
    throw sim::ConfigError(fmt::format("{}: /plan/ep: expected 1 for {}, which has no routed experts, found {}",
                                       scenario.path, model.name, plan.ep));
  }
  for (const Layer& l : model.layers) {
    if (l.experts > 0 && l.experts % plan.ep != 0) {
      throw sim::ConfigError(fmt::format("{}: /plan/ep: expected a divisor of the {} experts of {}, found {}",
                                         scenario.path, l.experts, l.name, plan.ep));
    }
  }
  try {
    check_routing(plan.routing, model);
  } catch (const sim::ModelError& e) {
    throw sim::ConfigError(fmt::format("{}: /plan/moe_routing: {}", scenario.path, e.what()));
  }
  return model;
}

}  // namespace foresight::strategy
