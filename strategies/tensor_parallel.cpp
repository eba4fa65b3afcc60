#include "strategies/tensor_parallel.hpp"

#include <fmt/core.h>

#include <algorithm>

#include "common/error.hpp"
#include "exec/execution_graph.hpp"
#include "models/model_builder.hpp"

namespace foresight::strategy {
namespace {

/// The shape axis tensor parallelism splits for kernel `t` of a layer with `role`, or -1.
int split_axis(const OpTemplate& t, TpRole role, bool sp) {
  const auto& k = t.kernel;
  // An FP8 cast, or under current scaling its amax pass (the same tensor): which tensor. A
  // scale kernel has one value.
  if (k.starts_with("fp8_scale_")) return -1;
  const std::string_view cast = fp8_cast_of(k);
  switch (role) {
    case TpRole::column:
      if (k == "linear_fwd") return 1;    // m = rows, n = out / t, k = in
      if (k == "linear_dgrad") return 2;  // m = rows, n = in, k = out / t
      if (k == "linear_wgrad") return 0;  // m = out / t, n = in, k = rows
      // FP8 casts (with_fp8), {1, dims...}: the weight {in, out / t} and the output gradient
      // {rows, out / t} are sharded; the input is whole on every rank.
      if (cast == "weight" || cast == "grad") return 2;
      return -1;
    case TpRole::row:
      if (k == "linear_fwd") return 2;    // k = in / t
      if (k == "linear_dgrad") return 1;  // n = in / t
      if (k == "linear_wgrad") return 1;  // n = in / t
      // FP8 casts: the input {rows, in / t} and the weight {in / t, out} are sharded; the output
      // gradient is whole.
      if (cast == "input") return 2;
      if (cast == "weight") return 1;
      return -1;
    case TpRole::sharded:
      if (t.type == sim::OpType::gemm) return 3;       // batched GEMMs {m, n, k, heads}
      if (t.type == sim::OpType::attention) return 0;  // fused attention {heads, s, s, d, causal}
      // Memory kernels are {batch, dims...}: per-head scores {batch, heads, s, s} split the heads,
      // the rest their features, last: {batch, s, ffn}, {batch, s, vocab}, rope {batch, s, qk}.
      return t.shape.size() == 4 ? 1 : static_cast<int>(t.shape.size()) - 1;
    case TpRole::vocab:
      return t.shape.size() == 4 ? 3 : -1;  // the table's rows {batch, seq, hidden, rows}
    case TpRole::expert:
      // One token's expert FFN (model_builder.cpp experts_layer): the up projection split by
      // its outputs, the down projection by its inputs, the activation by its features.
      if (k == "expert_up_fwd") return 1;
      if (k == "expert_up_dgrad") return 2;
      if (k == "expert_up_wgrad") return 0;
      if (k == "expert_down_fwd") return 2;
      if (k == "expert_down_dgrad" || k == "expert_down_wgrad") return 1;
      if (k.rfind("expert_", 0) == 0) return static_cast<int>(t.shape.size()) - 1;  // the activation {1, 1, ffn}
      // FP8 casts (with_fp8), {1, dims...}: the up weight {h, 2f / t} and the down weight {f / t, h}
      // are sharded, as are the down projection's input {1, f / t} and the up projection's output
      // gradient {1, 2f / t}; the expert's input and the down projection's output gradient are whole.
      if (cast == "expert_up_weight") return 2;
      if (cast == "expert_down_weight") return 1;
      if (cast == "expert_hidden" || cast == "expert_up_grad") return 2;
      return -1;                                 // permutation: whole tokens
    case TpRole::replicated:
      // Sequence parallelism splits the tokens: a memory kernel's first axis after the batch.
      if (!sp) return -1;
      return t.type == sim::OpType::memory ? (t.shape.size() > 1 ? 1 : -1) : static_cast<int>(t.batch_axis);
  }
  return -1;
}

double tensor_bytes(double elems, const Plan& plan) {
  return elems * plan.micro_batch * activation_bytes(plan.precision);
}

}  // namespace

void check_tensor_parallel(const Model& model, const Plan& plan) {
  if (plan.tp <= 1) return;
  if (!model.transformer) {
    throw sim::ConfigError(fmt::format("/plan/tp: expected 1 for {}: tensor parallelism splits transformer layers "
                                       "(heads, FFN, vocabulary), found {}",
                                       model.name, plan.tp));
  }
  const TransformerShape& s = *model.transformer;
  // The vocabulary is padded as Megatron pads it (tp_split); heads and the FFN must divide.
  for (const auto& [what, n] : {std::pair<std::string_view, int>{"attention heads", s.heads},
                                {"key/value heads", s.kv_heads},
                                {"FFN size", s.ffn},
                                {"expert FFN size", s.moe.experts > 0 ? s.moe.expert_ffn : plan.tp}}) {
    if (what == "expert FFN size" && n % plan.etp() != 0) {
      throw sim::ConfigError(fmt::format("/plan/expert_tp: {}'s {} {} are not divisible by expert_tp = {}", model.name,
                                         n, what, plan.etp()));
    }
    if (what != "expert FFN size" && n % plan.tp != 0) {
      throw sim::ConfigError(
          fmt::format("/plan/tp: {}'s {} {} are not divisible by tp = {}", model.name, n, what, plan.tp));
    }
  }
}

std::int64_t tp_split(std::int64_t n, int tp) {
  if (n % tp == 0) return n / tp;
  // Only a vocabulary may be padded (tp_shard checks the rest divide).
  // Megatron pads the vocabulary to a multiple of make-vocab-size-divisible-by (128) x tp.
  const std::int64_t unit = 128LL * tp;
  return (n + unit - 1) / unit * 128;
}

std::int64_t tp_vocab_split(std::int64_t n, int tp) {
  const std::int64_t unit = 128LL * tp;
  return (n + unit - 1) / unit * 128;
}

OpTemplate tp_shard(const OpTemplate& t, const Layer& layer, const Plan& plan) {
  const TpRole role = layer.tp;
  // Routed experts split over the expert TP group (plan.expert_tp), the rest over TP.
  const int tp = role == TpRole::expert ? plan.etp() : plan.tp;
  if (tp <= 1) return t;
  const bool vocabulary = role == TpRole::vocab || layer.kind == "loss" || layer.name == "lm_head";
  const bool sp = plan.sequence_parallel;
  const int axis = split_axis(t, role, sp);
  OpTemplate out = t;
  if (axis < 0) return out;
  if (static_cast<std::size_t>(axis) >= out.shape.size()) {
    throw sim::InternalError(fmt::format("tensor parallelism: kernel {} has no shape axis {}", t.kernel, axis));
  }
  std::int64_t& dim = out.shape[static_cast<std::size_t>(axis)];
  if (dim % tp != 0 && !vocabulary) {
    throw sim::ConfigError(fmt::format("/plan/tp: layer {}: kernel {} has {} along the axis tensor parallelism splits, "
                                       "not divisible by tp = {}",
                                       layer.name, t.kernel, dim, tp));
  }
  // A vocabulary is always padded as Megatron pads it (its rows stay 256-byte aligned).
  const std::int64_t share = vocabulary ? tp_vocab_split(dim, tp) : tp_split(dim, tp);
  const double factor = static_cast<double>(share) / static_cast<double>(dim);
  dim = share;
  out.flops *= factor;
  // A replicated layer under SP moves 1/t of its activations; a vocabulary slice 1/t of its table.
  if (role == TpRole::vocab) {
    out.param_elems *= factor;
  } else {
    out.act_elems *= factor;
    if (role != TpRole::replicated) out.param_elems *= factor;
  }
  return out;
}

double tp_layer_params(const Layer& layer, int tp, int ep, int etp) {
  const double p = static_cast<double>(layer.params);
  // Routed experts are spread over the EP group, and each split over the expert TP group.
  if (layer.experts > 0) return p / std::max(1, ep) / std::max(1, etp > 0 ? etp : tp);
  return layer.tp == TpRole::replicated || tp <= 1 ? p : p / tp;
}

double tp_rank_params(const Model& model, int tp, std::size_t first, std::size_t last, int ep, int etp) {
  if (last == 0) last = model.layers.size();
  double sum = 0.0;
  for (std::size_t i = first; i < last; ++i) sum += tp_layer_params(model.layers[i], tp, ep, etp);
  return sum;
}

double tp_rank_expert_params(const Model& model, int tp, std::size_t first, std::size_t last, int ep, int etp) {
  if (last == 0) last = model.layers.size();
  double sum = 0.0;
  for (std::size_t i = first; i < last; ++i) {
    if (model.layers[i].experts > 0) sum += tp_layer_params(model.layers[i], tp, ep, etp);
  }
  return sum;
}

double tp_tied_copy_params(const Model& model, int tp, const std::vector<std::pair<std::size_t, std::size_t>>& chunks) {
  const auto owner = std::find_if(model.layers.begin(), model.layers.end(), [](const Layer& l) { return l.kind == "embedding"; });
  if (owner == model.layers.end()) return 0.0;
  const auto o = static_cast<std::size_t>(owner - model.layers.begin());
  auto runs = [&](std::size_t i) {
    return std::any_of(chunks.begin(), chunks.end(), [&](const auto& c) { return c.first <= i && i < c.second; });
  };
  if (runs(o)) return 0.0;
  double sum = 0.0;
  for (const auto& [first, last] : chunks) {
    for (std::size_t i = first; i < last; ++i) {
      const Layer& l = model.layers[i];
      if (l.tied_params > 0) sum += static_cast<double>(l.tied_params) / (l.tp == TpRole::replicated ? 1 : std::max(1, tp));
    }
  }
  return sum;
}

TpExchanges tp_exchanges(const Model& model, std::size_t index, const Plan& plan) {
  TpExchanges x;
  if (plan.tp <= 1) return x;
  const Layer& l = model.layers[index];
  const double in = tensor_bytes(index == 0 ? model.input_elems : model.layers[index - 1].output_elems, plan);
  const double out = tensor_bytes(l.output_elems, plan);
  const bool sp = plan.sequence_parallel;
  using sim::CollectiveOp;
  switch (l.tp) {
    case TpRole::column:
      if (sp) {
        x.forward_before.push_back({CollectiveOp::all_gather, in, l.name + " input"});
        x.backward_before.push_back({CollectiveOp::all_gather, in, l.name + " input (for wgrad)"});
        x.backward_after_dgrad.push_back({CollectiveOp::reduce_scatter, in, l.name + " input gradient"});
      } else {
        x.backward_after_dgrad.push_back({CollectiveOp::all_reduce, in, l.name + " input gradient"});
      }
      break;
    case TpRole::row:
      if (sp) {
        x.forward_after.push_back({CollectiveOp::reduce_scatter, out, l.name + " output"});
        x.backward_before.push_back({CollectiveOp::all_gather, out, l.name + " output gradient"});
      } else {
        x.forward_after.push_back({CollectiveOp::all_reduce, out, l.name + " output"});
      }
      break;
    case TpRole::vocab:
      x.forward_after.push_back({sp ? CollectiveOp::reduce_scatter : CollectiveOp::all_reduce, out, l.name + " output"});
      break;
    case TpRole::sharded:
      if (l.kind == "loss") {
        // Vocabulary-parallel cross-entropy: max, target logit and sum of exponentials per token.
        const double tokens = l.output_elems * plan.micro_batch;
        for (const char* what : {"logits max", "target logit", "sum of exponentials"}) {
          x.forward_after.push_back({CollectiveOp::all_reduce, tokens * 4.0, fmt::format("{} {}", l.name, what)});
        }
      }
      break;
    case TpRole::expert:
      // Under sequence parallelism each TP rank routes its own tokens: with expert TP 1 to whole
      // experts through its EP group alone, with expert TP = TP gathered over the TP group after
      // the dispatch (LayerPass::experts). Without it, every TP rank routes the whole sequence to
      // experts split as an MLP's column-then-row pair: the outputs all-reduced after, the
      // input gradient in the backward pass.
      if (plan.etp() != plan.tp || sp) break;
      x.forward_after.push_back({CollectiveOp::all_reduce, out, l.name + " output"});
      x.backward_after_dgrad.push_back({CollectiveOp::all_reduce, in, l.name + " input gradient"});
      break;
    case TpRole::replicated:
      break;
  }
  // Above, each name says what moves; the label leads with the op.
  for (auto* list : {&x.forward_before, &x.forward_after, &x.backward_before, &x.backward_after_dgrad}) {
    for (TpCollective& c : *list) c.name = fmt::format("{} {}", sim::to_string(c.op), c.name);
  }
  return x;
}

std::vector<TpExchanges> tp_exchanges(const Model& model, const Plan& plan) {
  std::vector<TpExchanges> out;
  for (std::size_t i = 0; i < model.layers.size(); ++i) out.push_back(tp_exchanges(model, i, plan));
  return out;
}

void intern_labels(std::vector<TpExchanges>& exchanges, sim::ExecutionGraph& g) {
  for (TpExchanges& x : exchanges) {
    for (auto* list : {&x.forward_before, &x.forward_after, &x.backward_before, &x.backward_after_dgrad}) {
      for (TpCollective& c : *list) c.label = g.intern(c.name);
    }
  }
}

}  // namespace foresight::strategy
