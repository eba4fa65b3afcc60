#include "models/model_builder.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <set>
#include <utility>

#include "common/error.hpp"

namespace foresight::strategy {
namespace {

// Forward FLOPs per element of memory-bound kernels, as DeepSpeed's flops profiler counts them
// (microsoft/DeepSpeed, deepspeed/profiling/flops_profiler/profiler.py). Memory-bound kernels
// are costed by their bytes; these FLOPs only enter the model's totals.
/// ReLU, ReLU6, SiLU, GELU: one per element (_relu_flops_compute, _relu6_flops_compute,
/// _silu_flops_compute, _gelu_flops_compute); tanh is counted alike.
constexpr double kActivationFlops = 1.0;
/// batch_norm in training mode and layer_norm, with an affine transform: 5 per element
/// (_batch_norm_flops_compute, _layer_norm_flops_compute).
constexpr double kAffineNormFlops = 5.0;
/// RMSNorm: layer_norm's 5 less the mean subtraction (inferred; DeepSpeed has no RMSNorm rule).
constexpr double kRmsNormFlops = 4.0;
/// softmax: one per element (_softmax_flops_compute); cross-entropy's log-softmax alike.
constexpr double kSoftmaxFlops = 1.0;
/// Pooling: one per input element (_pool_flops_compute).
constexpr double kPoolFlops = 1.0;
/// Elementwise add and mul: one per output element (_elementwise_flops_compute).
constexpr double kElementwiseFlops = 1.0;
/// Dropout and embedding gathers: none (_dropout_flops_compute, _embedding_flops_compute).
constexpr double kGatherFlops = 0.0;
/// Backward kernels of memory-bound ops: twice their forward's FLOPs (backward = 2x forward,
/// Korthikanti et al. 2022 App. A; Kaplan et al. 2020 §2.1).
constexpr double kBackwardFactor = 2.0;
/// RoPE: x cos + rotate_half(x) sin, 3 per element (Su et al. 2021, RoFormer, Eq. 34).
constexpr double kRopeFlops = 3.0;

double as_double(std::int64_t v) { return static_cast<double>(v); }

Dims with_batch(const Dims& dims) {
  Dims shape{1};
  shape.insert(shape.end(), dims.begin(), dims.end());
  return shape;
}

/// A memory-bound kernel over a per-sample shape {1, dims...}.
OpTemplate memory_op(std::string kernel, const Dims& dims, double flops, double act_elems,
                     double param_elems = 0.0) {
  OpTemplate t;
  t.type = sim::OpType::memory;
  t.math = MathKind::pointwise;
  t.kernel = std::move(kernel);
  t.shape = with_batch(dims);
  t.batch_axis = 0;
  t.flops = flops;
  t.act_elems = act_elems;
  t.param_elems = param_elems;
  return t;
}

/// A (batched) GEMM {m, n, k, count}: 2 m n k count FLOPs.
OpTemplate gemm_op(std::string kernel, std::int64_t m, std::int64_t n, std::int64_t k,
                   std::int64_t count, std::uint8_t batch_axis, double act_elems,
                   double param_elems) {
  OpTemplate t;
  t.type = sim::OpType::gemm;
  t.math = MathKind::matmul;
  t.kernel = std::move(kernel);
  t.shape = {m, n, k, count};
  t.batch_axis = batch_axis;
  t.flops = 2.0 * as_double(m) * as_double(n) * as_double(k) * as_double(count);
  t.act_elems = act_elems;
  t.param_elems = param_elems;
  return t;
}

/// A layer without kernels yet.
Layer make_layer(std::string name, std::string kind, std::int64_t params, double saved,
                 double output) {
  Layer l;
  l.name = std::move(name);
  l.kind = std::move(kind);
  l.params = params;
  l.saved_elems = saved;
  l.output_elems = output;
  return l;
}

/// Sets the layer's FLOPs to the sum of its kernels'.
Layer sealed(Layer l) {
  l.fwd_flops = 0.0;
  l.bwd_flops = 0.0;
  for (const OpTemplate& t : l.fwd) l.fwd_flops += t.flops;
  for (const OpTemplate& t : l.bwd) l.bwd_flops += t.flops;
  return l;
}

std::string_view activation_name(Activation a) {
  switch (a) {
    case Activation::relu:
      return "relu";
    case Activation::relu6:
      return "relu6";
    case Activation::gelu:
      return "gelu";
    case Activation::silu:
      return "silu";
    case Activation::tanh:
      break;
  }
  return "tanh";
}

}  // namespace

std::int64_t elements(const Dims& dims) {
  std::int64_t n = 1;
  for (const std::int64_t d : dims) n *= d;
  return n;
}

ImageShape conv_output(ImageShape in, const ConvSpec& spec) {
  if (spec.kernel <= 0 || spec.stride <= 0 || spec.pad < 0 || spec.groups <= 0 || spec.out <= 0) {
    throw sim::ModelError(
        fmt::format("convolution {}x{}/{} pad {} groups {} to {} channels: sizes must be positive",
                    spec.kernel, spec.kernel, spec.stride, spec.pad, spec.groups, spec.out));
  }
  if (in.c % spec.groups != 0 || spec.out % spec.groups != 0) {
    throw sim::ModelError(
        fmt::format("convolution of {} to {} channels: {} groups do not divide them", in.c,
                    spec.out, spec.groups));
  }
  const std::int64_t span_h = in.h + 2LL * spec.pad - spec.kernel;
  const std::int64_t span_w = in.w + 2LL * spec.pad - spec.kernel;
  if (span_h < 0 || span_w < 0) {
    throw sim::ModelError(fmt::format("a {}x{} window does not fit a {}x{} input with padding {}",
                                      spec.kernel, spec.kernel, in.h, in.w, spec.pad));
  }
  return {spec.out, span_h / spec.stride + 1, span_w / spec.stride + 1};
}

Layer conv_layer(std::string name, ImageShape in, const ConvSpec& spec, bool input_grad) {
  const ImageShape out = conv_output(in, spec);
  const std::int64_t k = spec.kernel;
  const std::int64_t weights = spec.out * (in.c / spec.groups) * k * k;
  const std::int64_t params = weights + (spec.bias ? spec.out : 0);
  const double flops = 2.0 * as_double(in.c / spec.groups) * as_double(k * k) *
                       as_double(spec.out) * as_double(out.h * out.w);
  const double act = as_double(in.elems() + out.elems());
  const auto op = [&](sim::OpType type, std::string kernel) {
    OpTemplate t;
    t.type = type;
    t.math = MathKind::conv;
    t.kernel = std::move(kernel);
    t.shape = {1, in.c, in.h, in.w, spec.out, k, k, spec.stride, spec.pad, spec.groups};
    t.batch_axis = 0;
    t.flops = flops;
    t.act_elems = act;
    t.param_elems = as_double(params);
    return t;
  };
  Layer l =
      make_layer(std::move(name), "conv", params, as_double(in.elems()), as_double(out.elems()));
  l.fwd.push_back(op(sim::OpType::conv_fprop, "conv2d"));
  if (input_grad) l.bwd.push_back(op(sim::OpType::conv_dgrad, "conv2d_dgrad"));
  l.bwd.push_back(op(sim::OpType::conv_wgrad, "conv2d_wgrad"));
  return sealed(std::move(l));
}

Layer batchnorm_layer(std::string name, ImageShape in) {
  const double n = as_double(in.elems());
  const double p = 2.0 * as_double(in.c);
  Layer l = make_layer(std::move(name), "batchnorm", 2 * in.c, n, n);
  // Forward reads x and writes y; backward reads dy and x and writes dx; both touch scale and
  // shift.
  l.fwd.push_back(memory_op("batchnorm_fwd", in.dims(), kAffineNormFlops * n, 2.0 * n, p));
  l.fwd.back().path = sim::MemoryPath::batchnorm_fwd;
  l.bwd.push_back(
      memory_op("batchnorm_bwd", in.dims(), kBackwardFactor * kAffineNormFlops * n, 3.0 * n, p));
  l.bwd.back().path = sim::MemoryPath::batchnorm_bwd;
  return sealed(std::move(l));
}

Layer activation_layer(std::string name, Activation act, const Dims& dims) {
  const double n = as_double(elements(dims));
  const std::string kernel(activation_name(act));
  Layer l = make_layer(std::move(name), kernel, 0, n, n);
  // Forward reads x, writes y; backward reads dy and the saved tensor, writes dx.
  l.fwd.push_back(memory_op(kernel + "_fwd", dims, kActivationFlops * n, 2.0 * n));
  l.bwd.push_back(
      memory_op(kernel + "_bwd", dims, kBackwardFactor * kActivationFlops * n, 3.0 * n));
  return sealed(std::move(l));
}

Layer swiglu_layer(std::string name, std::int64_t rows, std::int64_t ffn) {
  const double n = as_double(rows * ffn);
  Layer l = make_layer(std::move(name), "swiglu", 0, 2.0 * n, n);
  // silu(gate) * up: a SiLU and a multiply per output element. Forward reads gate and up, writes
  // y; backward reads dy, gate and up, writes dgate and dup.
  const double flops = (kActivationFlops + kElementwiseFlops) * n;
  l.fwd.push_back(memory_op("swiglu_fwd", {rows, ffn}, flops, 3.0 * n));
  l.bwd.push_back(memory_op("swiglu_bwd", {rows, ffn}, kBackwardFactor * flops, 5.0 * n));
  return sealed(std::move(l));
}

Layer router_layer(std::string name, std::int64_t seq, std::int64_t hidden, int experts, int top_k, bool bias) {
  const std::int64_t e = experts;
  const double probs = as_double(seq * e);
  // Logits h -> E per token (no bias), softmax over the experts and top-k selection (one pass
  // over the logits, as a fused router kernel does).
  // Its output is the tokens themselves, now routed: the experts layer reads h per token. Saves
  // its input, the probabilities and the top-k choices.
  Layer l = make_layer(std::move(name), "router", hidden * e + (bias ? e : 0), as_double(seq * hidden) + probs + as_double(seq * top_k),
                       as_double(seq * hidden));
  const double act = as_double(seq * hidden) + probs;
  l.fwd.push_back(gemm_op("router_fwd", seq, e, hidden, 1, 0, act, as_double(hidden * e)));
  l.fwd.push_back(memory_op("router_softmax_topk", {seq, e}, kSoftmaxFlops * probs, 2.0 * probs));
  l.bwd.push_back(memory_op("router_softmax_bwd", {seq, e}, kBackwardFactor * kSoftmaxFlops * probs, 3.0 * probs));
  l.bwd.push_back(gemm_op("router_dgrad", seq, hidden, e, 1, 0, act, as_double(hidden * e)));
  l.bwd.push_back(gemm_op("router_wgrad", e, hidden, seq, 1, 2, act, as_double(hidden * e)));
  return sealed(std::move(l));
}

Layer experts_layer(std::string name, std::int64_t seq, std::int64_t hidden, std::int64_t ffn, int experts, int top_k,
                    bool gated, bool bias) {
  if (experts <= 0 || top_k <= 0 || top_k > experts || ffn <= 0) {
    throw sim::ModelError(fmt::format("experts layer {}: expected 0 < top_k <= experts and ffn > 0, found top_k {}, "
                                      "{} experts, ffn {}", name, top_k, experts, ffn));
  }
  const std::int64_t up = gated ? 2 * ffn : ffn;
  const std::int64_t per_expert = hidden * up + ffn * hidden + (bias ? up + hidden : 0);
  const double assignments = as_double(seq) * top_k;
  // Saved per assignment: the expert's input, its up projection (the activation's input) and
  // the activation's output (the down projection's input).
  const double saved = assignments * as_double(hidden + up + ffn);
  Layer l = make_layer(std::move(name), "experts", per_expert * experts, saved, as_double(seq * hidden));
  l.experts = experts;
  l.top_k = top_k;
  // One token's kernels; the strategy runs them per expert at the tokens routed to it.
  const double h = as_double(hidden);
  l.fwd.push_back(memory_op("moe_permute", {1, hidden}, kGatherFlops * h, 2.0 * h));
  // Megatron-Core's alltoall dispatcher sorts the received tokens by local expert after the
  // dispatch and back before the combine (sort_chunks_by_idxs, token_dispatcher.py), where a rank
  // holds more than one expert: a copy of each token, no arithmetic. The strategy skips them
  // otherwise. Second and second to last, in both passes.
  const auto sort = [&](const char* kernel) { return memory_op(kernel, {1, hidden}, 0.0, 2.0 * h); };
  l.fwd.push_back(sort("moe_sort_chunks"));
  l.fwd.push_back(gemm_op("expert_up_fwd", 1, up, hidden, 1, 0, h + as_double(up), as_double(hidden * up)));
  const double f = as_double(ffn);
  const double act_flops = gated ? (kActivationFlops + kElementwiseFlops) * f : kActivationFlops * f;
  l.fwd.push_back(memory_op(gated ? "expert_swiglu_fwd" : "expert_gelu_fwd", {1, ffn}, act_flops, as_double(up) + f));
  l.fwd.push_back(gemm_op("expert_down_fwd", 1, hidden, ffn, 1, 0, f + h, as_double(ffn * hidden)));
  l.fwd.push_back(sort("moe_unsort_chunks"));
  l.fwd.push_back(memory_op("moe_unpermute", {1, hidden}, kElementwiseFlops * h, 2.0 * h));
  l.bwd.push_back(memory_op("moe_unpermute_bwd", {1, hidden}, kBackwardFactor * kElementwiseFlops * h, 2.0 * h));
  l.bwd.push_back(sort("moe_unsort_chunks_bwd"));
  l.bwd.push_back(gemm_op("expert_down_dgrad", 1, ffn, hidden, 1, 0, f + h, as_double(ffn * hidden)));
  l.bwd.push_back(gemm_op("expert_down_wgrad", hidden, ffn, 1, 1, 2, f + h, as_double(ffn * hidden)));
  l.bwd.push_back(memory_op(gated ? "expert_swiglu_bwd" : "expert_gelu_bwd", {1, ffn}, kBackwardFactor * act_flops,
                            as_double(up) + 2.0 * f));
  l.bwd.push_back(gemm_op("expert_up_dgrad", 1, hidden, up, 1, 0, h + as_double(up), as_double(hidden * up)));
  l.bwd.push_back(gemm_op("expert_up_wgrad", up, hidden, 1, 1, 2, h + as_double(up), as_double(hidden * up)));
  l.bwd.push_back(sort("moe_sort_chunks_bwd"));
  l.bwd.push_back(memory_op("moe_permute_bwd", {1, hidden}, kGatherFlops * h, 2.0 * h));
  l = sealed(std::move(l));
  // Totals over the sample's assignments (the kernels above are per token).
  l.fwd_flops *= assignments;
  l.bwd_flops *= assignments;
  return l;
}

Layer pool_layer(std::string name, Pool kind, ImageShape in, int kernel, int stride, int pad) {
  const ImageShape out = conv_output(in, ConvSpec{in.c, kernel, stride, pad, 1, false});
  const double n_in = as_double(in.elems());
  const double n_out = as_double(out.elems());
  const bool max = kind == Pool::max;
  const std::string base = max ? "maxpool" : "avgpool";
  // Max pooling also writes (forward) and reads (backward) one index per output element.
  const double indices = max ? n_out : 0.0;
  const Dims dims{in.c, in.h, in.w, kernel, stride, pad};
  Layer l = make_layer(std::move(name), base, 0, n_in, n_out);
  l.fwd.push_back(memory_op(base + "_fwd", dims, kPoolFlops * n_in, n_in + n_out + indices));
  l.bwd.push_back(
      memory_op(base + "_bwd", dims, kBackwardFactor * kPoolFlops * n_in, n_out + n_in + indices));
  return sealed(std::move(l));
}

Layer add_layer(std::string name, const Dims& dims) {
  const double n = as_double(elements(dims));
  Layer l = make_layer(std::move(name), "add", 0, 0.0, n);
  // Forward reads two operands and writes the sum. The gradient passes to both branches
  // unchanged; the backward kernel is the sum of the two branches' gradients where they fork.
  l.fwd.push_back(memory_op("add_fwd", dims, kElementwiseFlops * n, 3.0 * n));
  l.bwd.push_back(memory_op("add_bwd", dims, kBackwardFactor * kElementwiseFlops * n, 3.0 * n));
  return sealed(std::move(l));
}

Layer dropout_layer(std::string name, const Dims& dims) {
  const double n = as_double(elements(dims));
  Layer l = make_layer(std::move(name), "dropout", 0, 0.0, n);
  l.saved_mask_elems = n;  // the mask only: its output is what the next layer saves
  // Forward reads x, writes y and the mask; backward reads dy and the mask, writes dx.
  l.fwd.push_back(memory_op("dropout_fwd", dims, kGatherFlops * n, 3.0 * n));
  l.bwd.push_back(memory_op("dropout_bwd", dims, kGatherFlops * n, 3.0 * n));
  return sealed(std::move(l));
}

Layer linear_layer(std::string name, std::int64_t rows, std::int64_t in, std::int64_t out,
                   bool bias, bool tied) {
  if (rows <= 0 || in <= 0 || out <= 0) {
    throw sim::ModelError(fmt::format("linear layer {}: rows {}, in {}, out {} must be positive",
                                      name, rows, in, out));
  }
  const double weights = as_double(in * out) + (bias ? as_double(out) : 0.0);
  const std::int64_t params = tied ? 0 : in * out + (bias ? out : 0);
  const double act = as_double(rows * in + rows * out);
  Layer l =
      make_layer(std::move(name), "linear", params, as_double(rows * in), as_double(rows * out));
  if (tied) l.tied_params = in * out;
  l.fwd.push_back(gemm_op("linear_fwd", rows, out, in, 1, 0, act, weights));
  l.bwd.push_back(gemm_op("linear_dgrad", rows, in, out, 1, 0, act, as_double(in * out)));
  l.bwd.push_back(gemm_op("linear_wgrad", out, in, rows, 1, 2, act, weights));
  return sealed(std::move(l));
}

Layer norm_layer(std::string name, Norm kind, std::int64_t rows, std::int64_t hidden) {
  const bool rms = kind == Norm::rmsnorm;
  const double n = as_double(rows * hidden);
  const std::int64_t params = rms ? hidden : 2 * hidden;
  const double per_elem = rms ? kRmsNormFlops : kAffineNormFlops;
  const std::string base = rms ? "rmsnorm" : "layernorm";
  Layer l = make_layer(std::move(name), base, params, n, n);
  l.fwd.push_back(
      memory_op(base + "_fwd", {rows, hidden}, per_elem * n, 2.0 * n, as_double(params)));
  l.bwd.push_back(memory_op(base + "_bwd", {rows, hidden}, kBackwardFactor * per_elem * n, 3.0 * n,
                            as_double(params)));
  return sealed(std::move(l));
}

Layer embedding_layer(std::string name, std::int64_t seq, std::int64_t hidden,
                      const std::vector<std::int64_t>& table_rows) {
  if (table_rows.empty()) throw sim::ModelError(fmt::format("embedding {} has no table", name));
  const double n = as_double(seq * hidden);
  const double tables = as_double(static_cast<std::int64_t>(table_rows.size()));
  std::int64_t params = 0;
  for (const std::int64_t rows : table_rows) params += rows * hidden;
  Layer l = make_layer(std::move(name), "embedding", params, tables * as_double(seq), n);
  for (std::size_t i = 0; i < table_rows.size(); ++i) {
    const Dims dims{seq, hidden, table_rows[i]};
    // Gather: read seq indices and seq rows, write seq rows.
    l.fwd.push_back(memory_op("embedding_fwd", dims, kGatherFlops * n, as_double(seq) + 2.0 * n));
    if (i > 0) l.fwd.push_back(memory_op("add_fwd", {seq, hidden}, kElementwiseFlops * n, 3.0 * n));
  }
  for (const std::int64_t rows : table_rows) {
    // Scatter-add into the table's dense gradient (zeroed and written: rows x hidden parameter
    // elements): one add per gathered element (inferred).
    l.bwd.push_back(memory_op("embedding_bwd", {seq, hidden, rows}, kElementwiseFlops * n,
                              as_double(seq) + n, as_double(rows * hidden)));
  }
  return sealed(std::move(l));
}

Layer attention_layer(std::string name, const AttentionShape& a) {
  const std::int64_t s = a.seq;
  const std::int64_t d = a.head_dim;
  const std::int64_t h = a.heads;
  if (s <= 0 || d <= 0 || h <= 0 || a.kv_heads <= 0 || h % a.kv_heads != 0 || a.window < 0) {
    throw sim::ModelError(
        fmt::format("attention {}: seq {}, heads {}, kv heads {}, head dim {}: sizes must be "
                    "positive and the kv heads divide the heads",
                    name, s, h, a.kv_heads, d));
  }
  const double probs = as_double(h * s * s);                         // one s x s matrix per head
  const double qk_io = as_double(h) * as_double(2 * s * d + s * s);  // two s x d operands and s x s
  const double qkv = as_double(s * (h + 2 * a.kv_heads) * d);
  const double rope_elems = as_double(s * (h + a.kv_heads) * d);
  const Dims prob_dims{h, s, s};
  const Dims rope_dims{s, (h + a.kv_heads) * d};
  // Saved: Q, K and V; the softmax output; with dropout also its output, and its 1-byte mask
  // (K22 §4.1).
  const double saved = qkv + probs * (a.dropout ? 2.0 : 1.0) + (a.qk_norm ? rope_elems : 0.0);
  Layer l = make_layer(std::move(name), "attention", a.sinks ? h : 0, saved, as_double(s * h * d));
  l.saved_mask_elems = a.dropout ? probs : 0.0;
  l.saved_score_elems = probs * (a.dropout ? 2.0 : 1.0);
  l.saved_score_mask_elems = l.saved_mask_elems;
  l.tp = TpRole::sharded;  // heads split across the group
  l.attention_window = a.window;
  if (a.qk_norm) l.fwd.push_back(memory_op("qk_norm_fwd", rope_dims, kRmsNormFlops * rope_elems, 2.0 * rope_elems));
  if (a.rope)
    l.fwd.push_back(memory_op("rope_fwd", rope_dims, kRopeFlops * rope_elems, 2.0 * rope_elems));
  l.fwd.push_back(gemm_op("attn_scores", s, s, d, h, 3, qk_io, 0.0));
  // ALiBi unfused: the bias (heads x 1 x s, broadcast) added to the scores, one read and one
  // write of them (MPT's torch attention); its gradient passes through, no backward kernel.
  if (a.alibi) l.fwd.push_back(memory_op("alibi_bias_fwd", prob_dims, kElementwiseFlops * probs, 2.0 * probs));
  // Scale, causal mask and softmax in one kernel (Megatron's FusedScaleMaskSoftmax).
  l.fwd.push_back(memory_op("softmax_fwd", prob_dims, kSoftmaxFlops * probs, 2.0 * probs));
  if (a.dropout)
    l.fwd.push_back(memory_op("dropout_fwd", prob_dims, kGatherFlops * probs, 3.0 * probs));
  l.fwd.push_back(gemm_op("attn_context", s, d, s, h, 3, qk_io, 0.0));
  // Backward of O = P V: dP = dO V^T and dV = P^T dO; of S = Q K^T: dQ = dS K and dK = dS^T Q.
  l.bwd.push_back(gemm_op("attn_context_dgrad_probs", s, s, d, h, 3, qk_io, 0.0));
  l.bwd.push_back(gemm_op("attn_context_dgrad_values", s, d, s, h, 3, qk_io, 0.0));
  if (a.dropout)
    l.bwd.push_back(memory_op("dropout_bwd", prob_dims, kGatherFlops * probs, 3.0 * probs));
  l.bwd.push_back(
      memory_op("softmax_bwd", prob_dims, kBackwardFactor * kSoftmaxFlops * probs, 3.0 * probs));
  l.bwd.push_back(gemm_op("attn_scores_dgrad_query", s, d, s, h, 3, qk_io, 0.0));
  l.bwd.push_back(gemm_op("attn_scores_dgrad_key", s, d, s, h, 3, qk_io, 0.0));
  if (a.rope) {
    l.bwd.push_back(memory_op("rope_bwd", rope_dims, kBackwardFactor * kRopeFlops * rope_elems,
                              2.0 * rope_elems));
  }
  if (a.qk_norm) {
    l.bwd.push_back(
        memory_op("qk_norm_bwd", rope_dims, kBackwardFactor * kRmsNormFlops * rope_elems, 3.0 * rope_elems));
  }
  l = sealed(std::move(l));
  if (a.window > 0 && a.window < s) {
    // The model FLOPs (what MFU counts) take w keys per query where the unfused kernels compute
    // all s and mask the rest: the s x s work scaled by w / s, RoPE's whole.
    const double scale = as_double(a.window) / as_double(s);
    auto model_flops = [&](const std::vector<OpTemplate>& ops) {
      double total = 0.0;
      for (const OpTemplate& t : ops) {
        total += t.kernel.starts_with("rope") || t.kernel.starts_with("qk_norm") ? t.flops : t.flops * scale;
      }
      return total;
    };
    l.fwd_flops = model_flops(l.fwd);
    l.bwd_flops = model_flops(l.bwd);
  }
  return l;
}

Model with_fused_attention(Model model, std::int64_t kernel) {
  const bool causal = !model.transformer || model.transformer->causal;
  for (Layer& l : model.layers) {
    if (l.kind != "attention") continue;
    const OpTemplate* scores = find_op(l.fwd, "attn_scores");
    if (scores == nullptr) continue;  // already fused
    const std::int64_t s = scores->shape[0];
    const std::int64_t d = scores->shape[2];
    const std::int64_t h = scores->shape[3];
    const std::int64_t w = l.attention_window;
    const bool windowed = w > 0 && w < s;
    if (windowed && !causal) {
      throw sim::ModelError(fmt::format("{}: a sliding window of {} needs causal attention", l.name, w));
    }
    // Query i attends to min(i + 1, w) keys: s (s + 1) / 2 pairs causal, w s - w (w - 1) / 2
    // with the window (4 d FLOPs per pair and head: the two products).
    const double pairs = windowed ? as_double(w) * as_double(s) - as_double(w) * as_double(w - 1) / 2.0
                                  : as_double(s) * as_double(s) * (causal ? 0.5 : 1.0);
    const double fwd_flops = 4.0 * pairs * as_double(d) * as_double(h);
    const double qkvo = 4.0 * as_double(s * h * d);
    OpTemplate f;
    f.type = sim::OpType::attention;
    f.math = MathKind::matmul;
    f.kernel = "flash_attn_fwd";
    f.shape = {h, s, s, d, causal ? 1 : 0, kernel};
    if (windowed) f.shape.push_back(w);
    f.batch_axis = 0;
    f.flops = fwd_flops;
    f.act_elems = qkvo;  // read Q, K, V, write O
    OpTemplate b = f;
    b.kernel = "flash_attn_bwd";
    b.flops = 2.5 * fwd_flops;  // FlashAttention-2's count: 5 products against the forward's 2
    b.act_elems = 2.0 * qkvo;   // read Q, K, V, O, dO, write dQ, dK, dV
    auto keep_rope = [](std::vector<OpTemplate>& list) {  // and the QK norm
      std::erase_if(list, [](const OpTemplate& t) { return !t.kernel.starts_with("rope") && !t.kernel.starts_with("qk_norm"); });
    };
    keep_rope(l.fwd);
    keep_rope(l.bwd);
    l.fwd.push_back(f);
    l.bwd.insert(l.bwd.begin(), b);
    l.saved_elems -= l.saved_score_elems;
    l.saved_mask_elems -= l.saved_score_mask_elems;
    // Log-sum-exp per row and head, fp32: the kernel's own state, which a checkpointed core
    // (selective recompute's core_attn) does not keep; Q, K and V stay as its input.
    const double lse = 2.0 * as_double(s * h);
    l.saved_elems += lse;
    l.saved_score_elems = lse;
    l.saved_score_mask_elems = 0.0;
  }
  return model;
}

namespace {

/// with_fp8's cast of a 2-byte tensor {rows, width} to FP8 with its transpose: read 2 bytes and
/// write 1 + 1 per element, 2 elements of the activation dtype.
OpTemplate fp8_cast(const char* name, std::int64_t rows, std::int64_t width) {
  const double x = as_double(rows * width);
  return memory_op(name, {rows, width}, kElementwiseFlops * x, 2.0 * x);
}

/// The same of a weight {in, out}: once per micro-batch whatever its tokens.
OpTemplate fp8_weight_cast(const char* name, std::int64_t in, std::int64_t out) {
  const double w = as_double(in * out);
  OpTemplate t = memory_op(name, {in, out}, kElementwiseFlops * w, 0.0, 2.0 * w);
  t.batched = false;
  return t;
}

/// with_fp8 of a routed-experts layer (experts_layer's per-token kernels: permute, sort, up,
/// activation, down, unsort, unpermute and their backward): each expert's GEMMs in FP8, each
/// preceded by its input's cast and transpose (per token) and its weight's (once per expert and
/// micro-batch), the gradient GEMMs by the output gradient's. The permutations stay first and
/// last, the sorts second and second to last.
void experts_fp8(Layer& l) {
  const OpTemplate* up = find_op(l.fwd, "expert_up_fwd");
  const OpTemplate* down = find_op(l.fwd, "expert_down_fwd");
  if (up == nullptr || down == nullptr || up->math == MathKind::matmul_fp8) return;
  // gemm {1, out, in} per token.
  const std::int64_t up_out = up->shape[1], hidden = up->shape[2], ffn = down->shape[2];
  auto input_cast = [](const char* name, std::int64_t width) { return fp8_cast(name, 1, width); };
  std::vector<OpTemplate> fwd;
  for (OpTemplate t : l.fwd) {
    if (t.kernel == "expert_up_fwd") {
      fwd.push_back(input_cast("fp8_cast_transpose_expert_input", hidden));
      fwd.push_back(fp8_weight_cast("fp8_cast_transpose_expert_up_weight", hidden, up_out));
    } else if (t.kernel == "expert_down_fwd") {
      fwd.push_back(input_cast("fp8_cast_transpose_expert_hidden", ffn));
      fwd.push_back(fp8_weight_cast("fp8_cast_transpose_expert_down_weight", ffn, hidden));
    }
    if (t.kernel == "expert_up_fwd" || t.kernel == "expert_down_fwd") t.math = MathKind::matmul_fp8;
    fwd.push_back(std::move(t));
  }
  std::vector<OpTemplate> bwd;
  for (OpTemplate t : l.bwd) {
    if (t.kernel == "expert_down_dgrad") bwd.push_back(input_cast("fp8_cast_transpose_expert_down_grad", hidden));
    if (t.kernel == "expert_up_dgrad") bwd.push_back(input_cast("fp8_cast_transpose_expert_up_grad", up_out));
    if (t.kernel.starts_with("expert_") && (t.kernel.ends_with("_dgrad") || t.kernel.ends_with("_wgrad"))) {
      t.math = MathKind::matmul_fp8;
    }
    bwd.push_back(std::move(t));
  }
  const double fwd_flops = l.fwd_flops;
  const double bwd_flops = l.bwd_flops;
  l.fwd = std::move(fwd);
  l.bwd = std::move(bwd);
  l.fwd_flops = fwd_flops;  // model FLOPs: the casts are not model work
  l.bwd_flops = bwd_flops;
  // Saved per assignment (experts_layer): the two GEMMs' inputs as their FP8 transposes, 1 byte
  // each (as for linear layers), the activation's input in BF16 (FP8 needs a 2-byte precision).
  const double assignments = expert_assignments(l);
  l.saved_bytes = assignments * (as_double(hidden) + 2.0 * as_double(up_out) + as_double(ffn));
}

}  // namespace

bool is_fp8_weight_cast(std::string_view kernel) {
  const std::string_view tensor = fp8_cast_of(kernel);
  return tensor == "weight" || (tensor.starts_with("expert_") && tensor.ends_with("_weight"));
}

Model with_fp8(Model model) {
  for (Layer& l : model.layers) {
    if (l.kind == "experts" && l.block >= 0) experts_fp8(l);
    if (l.kind != "linear" || l.block < 0) continue;
    const OpTemplate* fwd = find_op(l.fwd, "linear_fwd");
    if (fwd == nullptr || fwd->math == MathKind::matmul_fp8) continue;
    const std::int64_t rows = fwd->shape[0];
    const std::int64_t out = fwd->shape[1];
    const std::int64_t in = fwd->shape[2];
    std::vector<OpTemplate> fwd_ops;
    fwd_ops.push_back(fp8_cast("fp8_cast_transpose_input", rows, in));
    fwd_ops.push_back(fp8_weight_cast("fp8_cast_transpose_weight", in, out));
    for (OpTemplate t : l.fwd) {
      if (t.kernel == "linear_fwd") t.math = MathKind::matmul_fp8;
      fwd_ops.push_back(std::move(t));
    }
    std::vector<OpTemplate> bwd_ops;
    bwd_ops.push_back(fp8_cast("fp8_cast_transpose_grad", rows, out));
    for (OpTemplate t : l.bwd) {
      if (t.kernel == "linear_dgrad" || t.kernel == "linear_wgrad") t.math = MathKind::matmul_fp8;
      bwd_ops.push_back(std::move(t));
    }
    const double fwd_flops = l.fwd_flops;
    const double bwd_flops = l.bwd_flops;
    l.fwd = std::move(fwd_ops);
    l.bwd = std::move(bwd_ops);
    l.fwd_flops = fwd_flops;  // the model FLOPs MFU counts: the casts are not model work
    l.bwd_flops = bwd_flops;
  }
  return model;
}

Layer loss_layer(std::string name, std::int64_t rows, std::int64_t classes) {
  const double n = as_double(rows * classes);
  const double r = as_double(rows);
  Layer l = make_layer(std::move(name), "loss", 0, n, r);
  // Forward: log-softmax (read the logits, write log-probabilities) and the negative log-likelihood
  // (read the labels, write a loss per row). Backward: read the log-probabilities and labels,
  // write the logits' gradient.
  l.fwd.push_back(
      memory_op("cross_entropy_fwd", {rows, classes}, kSoftmaxFlops * n, 2.0 * n + 2.0 * r));
  l.bwd.push_back(memory_op("cross_entropy_bwd", {rows, classes},
                            kBackwardFactor * kSoftmaxFlops * n, 2.0 * n + r));
  return sealed(std::move(l));
}

ModelBuilder::ModelBuilder(std::string name) { model_.name = std::move(name); }

void ModelBuilder::add(Layer layer) {
  layer.block = block_;
  model_.layers.push_back(std::move(layer));
}

Model ModelBuilder::finish(double input_elems, int seq_len,
                           std::optional<TransformerShape> transformer) {
  if (model_.layers.empty())
    throw sim::ModelError(fmt::format("model {} has no layers", model_.name));
  std::set<std::string, std::less<>> names;
  for (const Layer& l : model_.layers) {
    if (!names.insert(l.name).second) {
      throw sim::ModelError(fmt::format("model {}: layer name {} repeats", model_.name, l.name));
    }
    if (l.fwd.empty())
      throw sim::ModelError(
          fmt::format("model {}: layer {} has no forward kernel", model_.name, l.name));
  }
  if (model_.layers.back().kind != "loss") {
    throw sim::ModelError(fmt::format("model {}: the last layer is {} ({}), not the loss",
                                      model_.name, model_.layers.back().name,
                                      model_.layers.back().kind));
  }
  model_.input_elems = input_elems;
  model_.seq_len = seq_len;
  model_.transformer = transformer;
  Model out = std::move(model_);
  model_ = Model{};
  return out;
}

}  // namespace foresight::strategy
