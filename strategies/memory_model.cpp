#include "strategies/memory_model.hpp"

#include <algorithm>
#include <cmath>

#include "strategies/op_recompute.hpp"
#include "strategies/tensor_parallel.hpp"

namespace foresight::strategy {

namespace {

/// DeepSpeed's reduce_bucket_size default: 5e8 elements (deepspeed/runtime/zero/config.py).
constexpr double kZeroReduceBucketElems = 5e8;

/// Whether `l` is a linear layer whose GEMMs run in FP8 (with_fp8): Transformer Engine keeps the
/// FP8 transpose of its input for the weight gradient, 1 byte per element.
bool fp8_linear(const Layer& l) {
  return l.kind == "linear" &&
         std::any_of(l.fwd.begin(), l.fwd.end(), [](const OpTemplate& t) { return t.math == MathKind::matmul_fp8; });
}

/// How many ways a layer's saved tensors are split on a tensor-parallel rank.
double tp_divisor(TpRole role, int tp, bool sp) {
  switch (role) {
    case TpRole::sharded:
    case TpRole::row:
    case TpRole::expert:  // mostly the experts' sharded FFN activations
      return tp;
    case TpRole::column:
    case TpRole::replicated:
      return sp ? tp : 1;
    case TpRole::vocab:
      return 1;  // token ids
  }
  return 1;
}

}  // namespace

double layer_output_bytes(const Layer& l, double a) { return l.output_bytes.value_or(l.output_elems * a); }

MemoryBreakdown model_state_memory(double params, const Plan& plan, int shard, double expert_params) {
  MemoryBreakdown m;
  const double n = std::max(1, shard);
  m.weights = params * parameter_bytes(plan.precision);
  // torch.autocast caches the half-precision copy of each weight it casts during the forward pass.
  if (plan.precision == Precision::amp_fp16 || plan.precision == Precision::amp_bf16) m.weights += params * 2.0;
  m.gradients = params * gradient_bytes_per_param(plan);
  // SGD with momentum: one fp32 buffer; Adam: two. Pure half precision keeps fp32 master weights.
  double optimizer_per_param = plan.optimizer == Optimizer::sgd ? 4.0 : 8.0;
  if (plan.precision == Precision::fp16 || plan.precision == Precision::bf16) optimizer_per_param += 4.0;
  m.optimizer = params * optimizer_per_param;
  const double full_gradients = m.gradients;
  // DeepSpeed's BF16_Optimizer under its pipeline engine keeps the fp32 master weights and Adam's
  // states of this rank's 1/dp only (its own ZeRO-1), whatever the ZeRO stage.
  const bool ds_bf16 = plan.pipeline_engine == PipelineEngine::deepspeed && plan.precision == Precision::bf16;
  if (plan.zero >= 1 && plan.ep > 1) {
    // Dense states over every replica, the experts' over their expert-data-parallel group.
    m.optimizer = optimizer_per_param * plan.zero_owned_params(params, expert_params);
  } else if (plan.zero >= 1 || ds_bf16) {
    m.optimizer /= n;
  }
  if (plan.zero >= 2) m.gradients /= n;
  if (plan.zero >= 3) m.weights /= n;
  if (plan.replicas() > 1) {
    if (plan.zero >= 1) {
      m.buffers = std::min(full_gradients, kZeroReduceBucketElems * full_gradients / std::max(params, 1.0));
    } else {
      m.buffers = plan.framework == Framework::ddp ? full_gradients
                                                   : std::min(plan.fusion_threshold.as_double(), full_gradients);
    }
  }
  m.workspace = kWorkspaceBytes;
  return m;
}

namespace {

/// recompute_modules moe_act: the bytes per sample an experts layer keeps of its activation's
/// output (the down projection's input: 1 byte a value when that GEMM runs in FP8).
double discarded_expert_act_bytes(const Layer& l, double a) {
  const OpTemplate* down = find_op(l.fwd, "expert_down_fwd");  // {1, hidden, ffn} per token
  if (down == nullptr) return 0.0;
  return expert_assignments(l) * static_cast<double>(down->shape[2]) * (down->math == MathKind::matmul_fp8 ? 1.0 : a);
}

/// Of an experts layer's saved bytes per sample, its experts' inputs (the up projection's: 1 byte
/// a value in FP8). Split over an expert-TP group, each of its ranks runs every token its experts
/// receive (all the group's, gathered under sequence parallelism) and keeps these whole: only the
/// FFN's activations split.
double whole_expert_input_bytes(const Layer& l, double a) {
  const OpTemplate* up = find_op(l.fwd, "expert_up_fwd");  // {1, up, hidden} per token
  if (up == nullptr) return 0.0;
  return expert_assignments(l) * static_cast<double>(up->shape[2]) * (up->math == MathKind::matmul_fp8 ? 1.0 : a);
}

}  // namespace

double saved_activation_bytes(const Model& model, const Plan& plan, std::size_t first, std::size_t last,
                              bool block_checkpoints) {
  const double a = activation_bytes(plan.precision);
  const int t = std::max(1, plan.tp);
  const bool sp = plan.sequence_parallel && t > 1;
  const bool full = block_checkpoints && plan.recompute == Recompute::full;
  const bool selective = plan.recomputes(kRecomputeCoreAttn);
  const bool mlp = plan.recomputes(kRecomputeMlp);
  const bool moe = plan.recomputes(kRecomputeMoe);
  const bool per_op = block_checkpoints && plan.recompute == Recompute::selective_op;
  double bytes = 0.0;
  for (std::size_t i = first; i < last && i < model.layers.size(); ++i) {
    const Layer& l = model.layers[i];
    if (per_op && l.block >= 0) {
      // The block's input and what the per-op policy keeps (op_recompute.hpp): the outputs of
      // column-parallel and sharded layers are split t ways, the others with SP only.
      std::size_t end = i;
      while (end < last && end < model.layers.size() && model.layers[end].block == l.block) ++end;
      const std::vector<OpRecompute> kept = op_recompute_block(model, i, end);
      const double in = i == 0 ? model.input_elems : model.layers[i - 1].output_elems;
      bytes += in * a / (sp ? t : 1);
      for (std::size_t k = i; k < end; ++k) {
        const TpRole role = model.layers[k].tp;
        const bool split = role == TpRole::column || role == TpRole::sharded || role == TpRole::expert;
        bytes += kept[k - i].saved_elems * a / (split || sp ? t : 1);
      }
      i = end - 1;
      continue;
    }
    if (full && l.block >= 0) {
      // Only the block's input survives; the rest is recomputed before the block's backward.
      const bool starts_block = i == 0 || model.layers[i - 1].block != l.block;
      if (starts_block) {
        const double in = i == 0 ? model.input_elems * a : layer_output_bytes(model.layers[i - 1], a);
        bytes += in / (sp ? t : 1);
      }
      continue;
    }
    if (mlp) {
      // recompute_modules mlp: a dense MLP keeps only its input, the checkpoint's (held by its
      // norm, or its first linear); the rest is recomputed before its backward.
      if (const auto span = dense_mlp(model, is_norm(l) ? i + 1 : i); span && span->first <= i) {
        if (i == span->first) {
          const double in = i == 0 ? model.input_elems * a : layer_output_bytes(model.layers[i - 1], a);
          bytes += in / (sp ? t : 1);
        }
        continue;
      }
    }
    if (moe) {
      // recompute_modules moe: a MoE layer keeps only its input, the pre-MLP norm's output (the
      // router's), which layernorm drops too (Megatron frees it and recomputes it first).
      if (const auto span = moe_mlp(model, i)) {
        if (i == span->first && i > 0 && !plan.recomputes(kRecomputeLayernorm)) {
          bytes += layer_output_bytes(model.layers[i - 1], a) / tp_divisor(l.tp, t, sp);
        }
        continue;
      }
    }
    // shared_experts: their input is the router's, kept there.
    if (plan.recomputes(kRecomputeSharedExperts) && shared_experts(model, i)) continue;
    double elems = l.saved_elems;
    double masks = l.saved_mask_elems;
    if (selective) {
      elems -= l.saved_score_elems;
      masks -= l.saved_score_mask_elems;
    }
    double kept = l.saved_bytes.value_or(elems * (fp8_linear(l) ? 1.0 : a) + masks);
    if (l.experts > 0 && plan.recomputes(kRecomputeMoeAct)) kept -= discarded_expert_act_bytes(l, a);
    if (l.kind == "router" && plan.recomputes(kRecomputeLayernorm) && i > first) {
      // The MoE pre-MLP norm's output, which the router keeps as its input: dropped.
      const Layer& norm = model.layers[i - 1];
      if (is_norm(norm) && norm.block == l.block) kept -= norm.output_elems * a;
    }
    bytes += kept / tp_divisor(l.tp, t, sp);
    // Experts split over e TP ranks run e times the tokens of a rank's 1/t share, and keep their
    // inputs whole: (e - 1) / t more than the split above counts (0 with whole experts).
    if (l.experts > 0 && t > 1 && plan.etp() > 1) bytes += whole_expert_input_bytes(l, a) * (plan.etp() - 1.0) / t;
  }
  return bytes * plan.micro_batch;
}

MemoryBreakdown data_parallel_memory(const Model& model, const Plan& plan) {
  MemoryBreakdown m = model_state_memory(tp_rank_params(model, plan.tp, 0, 0, plan.ep, plan.etp()), plan, plan.shard_size(),
                                         tp_rank_expert_params(model, plan.tp, 0, 0, plan.ep, plan.etp()));
  const double a = activation_bytes(plan.precision);
  double largest_output = 0.0;  // bytes
  for (const Layer& l : model.layers) largest_output = std::max(largest_output, layer_output_bytes(l, a));
  // Saved activations and 1-byte dropout masks, plus the largest transient output and its
  // gradient (the tensors in flight at the turn from forward to backward).
  m.activations = saved_activation_bytes(model, plan, 0, model.layers.size(), true) +
                  2.0 * largest_output * plan.micro_batch;
  m.allocator = std::ceil(kAllocatorFraction * (m.activations + m.buffers));  // whole bytes
  return m;
}

MemoryBreakdown pipeline_rank_memory(double params, const Plan& plan, double activation_peak, int in_flight,
                                     double expert_params) {
  MemoryBreakdown m = model_state_memory(params, plan, plan.shard_size(), expert_params);
  if (plan.schedule == Schedule::pipedream) {
    // Weight stashing: one more version of the stage's weights per extra micro-batch in flight
    // (Narayanan et al. 2019, PipeDream section 3.3).
    m.weights += std::max(0, in_flight - 1) * params * parameter_bytes(plan.precision);
  }
  m.activations = activation_peak;
  m.allocator = std::ceil(kAllocatorFraction * (m.activations + m.buffers));
  return m;
}

}  // namespace foresight::strategy
