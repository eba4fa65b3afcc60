// The kernels eager PyTorch launches for Hugging Face transformers' modules. Each list follows
// the module's Python code (transformers 4.5x: GPT2MLP with NewGELUActivation, GPT2Attention
// and LlamaAttention with SDPA, LlamaRMSNorm, apply_rotary_pos_emb, ForCausalLMLoss), PyTorch's
// autograd formulas for its backward (tools/autograd/derivatives.yaml) and torch.autocast's op
// lists (pow, layer_norm, log_softmax run in fp32; mm and addmm in the lower dtype); the H200
// traces in validate/data/h200_single_gpu_steps/traces show each of them kernel by kernel.

#include "models/eager_kernels.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace foresight::strategy {
namespace {

using sim::MemoryPath;
constexpr double kFp32 = 4.0;

double as_double(std::int64_t v) { return static_cast<double>(v); }

/// Appends eager kernels over a per-sample {rows, width} tensor to one list.
class KernelList {
 public:
  explicit KernelList(std::vector<OpTemplate>& out) : out_(out) {}

  /// A kernel moving `bytes_per_elem` per element of the rows x width tensor, per sample.
  void add(std::string kernel, std::int64_t rows, std::int64_t width, double bytes_per_elem,
           MemoryPath path = MemoryPath::vectorized) {
    out_.push_back(make(std::move(kernel), rows, width, bytes_per_elem, path, true));
  }
  /// The same for a tensor that does not grow with the micro-batch (a weight).
  void add_weight(std::string kernel, double elems, double bytes_per_elem, MemoryPath path = MemoryPath::vectorized) {
    const auto n = static_cast<std::int64_t>(elems);
    out_.push_back(make(std::move(kernel), 1, n, bytes_per_elem, path, false));
  }

 private:
  static OpTemplate make(std::string kernel, std::int64_t rows, std::int64_t width, double bytes_per_elem,
                         MemoryPath path, bool batched) {
    OpTemplate t;
    t.type = sim::OpType::memory;
    t.math = MathKind::pointwise;
    t.kernel = "eager_" + std::move(kernel);
    t.shape = {1, rows, width};
    t.batch_axis = 0;
    t.batched = batched;
    const double n = as_double(rows) * as_double(width);
    t.flops = n;
    t.bytes = n * bytes_per_elem;
    t.path = path;
    return t;
  }

  std::vector<OpTemplate>& out_;
};

/// The rows and width of a memory kernel's per-sample shape {1, rows, width, ...}.
std::pair<std::int64_t, std::int64_t> rows_width(const OpTemplate& t) { return {t.shape.at(1), t.shape.at(2)}; }

struct Context {
  EagerOptions d;
  double a = 2.0;         ///< GEMM-output (activation) bytes
  double stream = 2.0;    ///< residual-stream bytes: fp32 under autocast
  const TransformerShape* shape = nullptr;
};

void linear(Layer& l, bool input_fp32, const Context& c) {
  const OpTemplate* gemm = find_op(l.fwd, "linear_fwd");
  if (gemm == nullptr) return;
  const std::int64_t rows = gemm->shape[0];
  const std::int64_t out = gemm->shape[1];
  const std::int64_t in = gemm->shape[2];
  const double weight = as_double(in) * as_double(out);
  const double bias = gemm->param_elems - weight;
  const int projections = std::max<int>(1, static_cast<int>(l.matmul_widths.size()));
  const bool cast_input = c.d.autocast && input_fp32;
  std::vector<OpTemplate> fwd;
  KernelList f(fwd);
  if (c.d.autocast) {  // the weight and the bias, each its own kernel
    f.add_weight("weight_cast", weight, kFp32 + c.a);
    if (bias > 0.0) f.add_weight("bias_cast", bias, kFp32 + c.a);
  }
  for (int i = 0; cast_input && i < projections; ++i) f.add("input_cast", rows, in, kFp32 + c.a);
  fwd.insert(fwd.end(), l.fwd.begin(), l.fwd.end());
  std::vector<OpTemplate> bwd = l.bwd;
  KernelList b(bwd);
  if (bias > 0.0) b.add("bias_grad", rows, out, c.a);  // sum of the output gradient over the rows
  if (c.d.autocast) {
    b.add_weight("weight_grad_cast", weight, c.a + kFp32, MemoryPath::cast);
    if (bias > 0.0) b.add_weight("bias_grad_cast", bias, c.a + kFp32, MemoryPath::cast);
  }
  for (int i = 0; cast_input && i < projections; ++i) b.add("input_grad_cast", rows, in, c.a + kFp32, MemoryPath::cast);
  const double grad = cast_input ? kFp32 : c.a;
  for (int i = 1; i < projections; ++i) b.add("input_grad_add", rows, in, 3.0 * grad);
  l.fwd = std::move(fwd);
  l.bwd = std::move(bwd);
  // Each projection's GEMM keeps its own cast copy of the input.
  if (cast_input) l.saved_bytes = projections * as_double(rows) * as_double(in) * c.a;
}

void layernorm(Layer& l, const Context& c) {
  const auto [rows, h] = rows_width(l.fwd.at(0));
  const double x = c.stream;
  l.fwd.clear();
  l.bwd.clear();
  KernelList(l.fwd).add("layernorm_fwd", rows, h, 2.0 * x);
  KernelList b(l.bwd);
  b.add("layernorm_bwd_input", rows, h, 3.0 * x);
  b.add("layernorm_bwd_params", rows, h, 2.0 * x, MemoryPath::strided);  // gamma and beta: a column reduction
  l.saved_bytes = as_double(rows) * (as_double(h) * x + 2.0 * kFp32);  // the input, mean and rstd
  l.output_bytes = as_double(rows) * as_double(h) * x;
}

void rmsnorm(Layer& l, const Context& c) {
  // LlamaRMSNorm: x.to(float32); variance = x.pow(2).mean(-1); x * rsqrt(variance + eps);
  // weight * x.to(input_dtype). Under autocast or fp32 the casts are no-ops.
  const auto [rows, h] = rows_width(l.fwd.at(0));
  const bool upcast = c.stream < kFp32;
  l.fwd.clear();
  l.bwd.clear();
  KernelList f(l.fwd);
  if (upcast) f.add("rmsnorm_upcast", rows, h, c.stream + kFp32, MemoryPath::cast);
  f.add("rmsnorm_pow", rows, h, 2.0 * kFp32);
  f.add("rmsnorm_mean", rows, h, kFp32);
  f.add("rmsnorm_add_eps", rows, 1, 2.0 * kFp32);
  f.add("rmsnorm_rsqrt", rows, 1, 2.0 * kFp32);
  f.add("rmsnorm_scale", rows, h, 2.0 * kFp32, MemoryPath::broadcast);
  if (upcast) f.add("rmsnorm_downcast", rows, h, kFp32 + c.stream);
  f.add("rmsnorm_weight", rows, h, 2.0 * c.stream, MemoryPath::broadcast);
  // Backward of weight * y, y = x * r, r = rsqrt(mean(x^2) + eps): dy = g w (broadcast), the
  // weight's gradient sum(g y) over rows; dx = dy r + x d(r) through the mean and the pow.
  KernelList b(l.bwd);
  b.add("rmsnorm_bwd_grad_weight", rows, h, 2.0 * kFp32, MemoryPath::broadcast);
  b.add("rmsnorm_bwd_grad_y", rows, h, 3.0 * kFp32);
  b.add("rmsnorm_bwd_weight_sum", rows, h, kFp32);
  b.add("rmsnorm_bwd_mul_x", rows, h, 3.0 * kFp32);
  b.add("rmsnorm_bwd_mul_r", rows, h, 2.0 * kFp32, MemoryPath::broadcast);
  b.add("rmsnorm_bwd_sum", rows, h, kFp32);
  b.add("rmsnorm_bwd_accumulate", rows, h, 3.0 * kFp32);
  b.add("rmsnorm_bwd_mean", rows, h, 2.0 * kFp32, MemoryPath::broadcast);
  b.add("rmsnorm_bwd_expand", rows, h, 2.0 * kFp32);
  b.add("rmsnorm_bwd_pow_scale", rows, h, 2.0 * kFp32);
  b.add("rmsnorm_bwd_pow", rows, h, 3.0 * kFp32);
  b.add("rmsnorm_bwd_accumulate_pow", rows, h, 3.0 * kFp32);
  if (upcast) b.add("rmsnorm_bwd_downcast", rows, h, kFp32 + c.stream);
  // pow and the first product keep the fp32 input, the weight's product the fp32 normalized
  // tensor, rsqrt its output per row.
  l.saved_bytes = as_double(rows) * (2.0 * as_double(h) * kFp32 + kFp32);
  l.output_bytes = as_double(rows) * as_double(h) * c.stream;
}

/// NewGELUActivation: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), one kernel per op.
/// Autocast runs pow in fp32, so the ops after it are fp32 and the output too.
void gelu_tanh(Layer& l, const Context& c) {
  const auto [rows, f] = rows_width(l.fwd.at(0));
  const double a = c.a;
  l.fwd.clear();
  l.bwd.clear();
  KernelList fw(l.fwd);
  KernelList bw(l.bwd);
  if (c.d.autocast) {
    fw.add("gelu_half_x", rows, f, 2.0 * a);
    fw.add("gelu_upcast", rows, f, a + kFp32, MemoryPath::cast);
    fw.add("gelu_pow", rows, f, 2.0 * kFp32);
    fw.add("gelu_mul_coef", rows, f, 2.0 * kFp32);
    fw.add("gelu_add_x", rows, f, a + 2.0 * kFp32, MemoryPath::cast);
    fw.add("gelu_mul_sqrt", rows, f, 2.0 * kFp32);
    fw.add("gelu_tanh", rows, f, 2.0 * kFp32);
    fw.add("gelu_add_one", rows, f, 2.0 * kFp32);
    fw.add("gelu_mul", rows, f, a + 2.0 * kFp32, MemoryPath::cast);
    // Backward, as autograd runs it: the two products' gradients, tanh's, the scalings, pow's,
    // each gradient cast back to the input's dtype where it meets the bf16 x, and the sums.
    bw.add("gelu_bwd_mul_half_x", rows, f, 2.0 * kFp32 + a, MemoryPath::cast);
    bw.add("gelu_bwd_mul_inner", rows, f, 3.0 * kFp32);
    bw.add("gelu_bwd_downcast", rows, f, kFp32 + a);
    bw.add("gelu_bwd_tanh", rows, f, 3.0 * kFp32);
    bw.add("gelu_bwd_mul_sqrt", rows, f, 2.0 * kFp32);
    bw.add("gelu_bwd_downcast", rows, f, kFp32 + a);
    bw.add("gelu_bwd_mul_coef", rows, f, 2.0 * kFp32);
    bw.add("gelu_bwd_pow", rows, f, 2.0 * kFp32);
    bw.add("gelu_bwd_mul_square", rows, f, 2.0 * kFp32);
    bw.add("gelu_bwd_mul_grad", rows, f, 3.0 * kFp32);
    bw.add("gelu_bwd_downcast", rows, f, kFp32 + a);
    bw.add("gelu_bwd_accumulate", rows, f, 3.0 * a);
    bw.add("gelu_bwd_mul_half", rows, f, 2.0 * a);
    bw.add("gelu_bwd_accumulate", rows, f, 3.0 * a);
    // Kept: pow's fp32 input, tanh's output, and the last product's operands (0.5 x in bf16,
    // 1 + tanh in fp32).
    l.saved_bytes = as_double(rows) * as_double(f) * (3.0 * kFp32 + a);
    l.output_bytes = as_double(rows) * as_double(f) * kFp32;
    return;
  }
  // One dtype throughout: eight kernels forward, eleven backward (each with its own name: the
  // graph interns signatures by kernel and shape).
  fw.add("gelu_half_x", rows, f, 2.0 * a);
  fw.add("gelu_pow", rows, f, 2.0 * a);
  fw.add("gelu_mul_coef", rows, f, 2.0 * a);
  fw.add("gelu_add_x", rows, f, 3.0 * a);
  fw.add("gelu_mul_sqrt", rows, f, 2.0 * a);
  fw.add("gelu_tanh", rows, f, 2.0 * a);
  fw.add("gelu_add_one", rows, f, 2.0 * a);
  fw.add("gelu_mul", rows, f, 3.0 * a);
  bw.add("gelu_bwd_mul_half_x", rows, f, 3.0 * a);
  bw.add("gelu_bwd_mul_inner", rows, f, 3.0 * a);
  bw.add("gelu_bwd_tanh", rows, f, 3.0 * a);
  bw.add("gelu_bwd_mul_sqrt", rows, f, 2.0 * a);
  bw.add("gelu_bwd_mul_coef", rows, f, 2.0 * a);
  bw.add("gelu_bwd_pow", rows, f, 2.0 * a);
  bw.add("gelu_bwd_mul_square", rows, f, 2.0 * a);
  bw.add("gelu_bwd_mul_grad", rows, f, 3.0 * a);
  bw.add("gelu_bwd_accumulate", rows, f, 3.0 * a);
  bw.add("gelu_bwd_mul_half", rows, f, 2.0 * a);
  bw.add("gelu_bwd_accumulate_half", rows, f, 3.0 * a);
  l.saved_bytes = 4.0 * as_double(rows) * as_double(f) * a;
}

/// LlamaMLP's act_fn(gate_proj(x)) * up_proj(x): SiLU, then the product; backward the product's
/// two gradients and SiLU's.
void swiglu(Layer& l, const Context& c) {
  const auto [rows, f] = rows_width(l.fwd.at(0));
  l.fwd.clear();
  l.bwd.clear();
  KernelList fw(l.fwd);
  fw.add("silu", rows, f, 2.0 * c.a);
  fw.add("swiglu_mul", rows, f, 3.0 * c.a);
  KernelList bw(l.bwd);
  bw.add("swiglu_bwd_mul_up", rows, f, 3.0 * c.a);
  bw.add("swiglu_bwd_mul_gate", rows, f, 3.0 * c.a);
  bw.add("silu_bwd", rows, f, 3.0 * c.a);
  l.saved_bytes = 3.0 * as_double(rows) * as_double(f) * c.a;  // the gate, SiLU's output and up
}

void residual_add(Layer& l, const Context& c) {
  const auto [rows, h] = rows_width(l.fwd.at(0));
  l.fwd.clear();
  l.bwd.clear();
  KernelList f(l.fwd);
  KernelList b(l.bwd);
  if (c.d.autocast) {
    f.add("residual_add", rows, h, c.a + 2.0 * kFp32, MemoryPath::cast);  // bf16 branch + fp32 stream
    b.add("residual_grad_add", rows, h, 3.0 * kFp32);
    b.add("branch_grad_cast", rows, h, kFp32 + c.a);
  } else {
    f.add("residual_add", rows, h, 3.0 * c.a);
    b.add("residual_grad_add", rows, h, 3.0 * c.a);
  }
  l.output_bytes = as_double(rows) * as_double(h) * c.stream;
}

void dropout(Layer& l, bool input_fp32, const Context& c) {
  const auto [rows, h] = rows_width(l.fwd.at(0));
  const double x = input_fp32 && c.d.autocast ? kFp32 : c.a;
  l.fwd.clear();
  l.bwd.clear();
  KernelList(l.fwd).add("dropout_fwd", rows, h, 2.0 * x + 1.0);  // and the 1-byte mask
  KernelList(l.bwd).add("dropout_bwd", rows, h, 2.0 * x + 1.0);
  l.output_bytes = as_double(rows) * as_double(h) * x;
}

/// apply_rotary_pos_emb for one of the query or key, `width` features per token:
/// x cos + rotate_half(x) sin, rotate_half = cat(-x2, x1), on the heads' permuted layout.
void rope_one(KernelList& f, KernelList& b, std::int64_t s, std::int64_t width, const Context& c) {
  const double a = c.a;
  const double p = c.d.autocast ? kFp32 : a;  // the products' dtype: cos and sin are fp32
  f.add("rope_mul_cos", s, width, a + p, MemoryPath::strided);
  f.add("rope_neg", s, width, a, MemoryPath::strided);  // half the features, read and written
  f.add("rope_cat", s, width, 2.0 * a, MemoryPath::strided_cat);
  f.add("rope_mul_sin", s, width, a + p, MemoryPath::strided);
  f.add("rope_add", s, width, 3.0 * p, MemoryPath::broadcast);
  if (c.d.autocast) f.add("rope_downcast", s, width, kFp32 + a);  // for SDPA
  if (c.d.autocast) b.add("rope_bwd_upcast", s, width, a + kFp32, MemoryPath::cast);
  b.add("rope_bwd_mul_sin", s, width, 2.0 * p, MemoryPath::broadcast);
  if (c.d.autocast) b.add("rope_bwd_downcast", s, width, kFp32 + a);
  b.add("rope_bwd_neg", s, width, a, MemoryPath::strided);
  for (int half = 0; half < 2; ++half) {  // cat's backward: each half sliced into a zeroed tensor
    b.add("rope_bwd_fill", s, width, a);
    b.add("rope_bwd_slice", s, width, a, MemoryPath::strided);
  }
  b.add("rope_bwd_add", s, width, 3.0 * a);
  b.add("rope_bwd_mul_cos", s, width, 2.0 * p, MemoryPath::broadcast);
  if (c.d.autocast) b.add("rope_bwd_downcast", s, width, kFp32 + a);
  b.add("rope_bwd_accumulate", s, width, 3.0 * a, MemoryPath::strided);
}

/// torchtitan's apply_rotary_emb for one of the query or key: x.float() viewed as complex, times
/// the (broadcast) complex frequencies, cast back with type_as; backward the same three steps.
void rope_complex(KernelList& f, KernelList& b, std::int64_t s, std::int64_t width, const Context& c) {
  const double a = c.a;
  if (a < kFp32) f.add("rope_upcast", s, width, a + kFp32, MemoryPath::cast);
  f.add("rope_complex_mul", s, width, 2.0 * kFp32, MemoryPath::broadcast);
  if (a < kFp32) f.add("rope_downcast", s, width, kFp32 + a);
  if (a < kFp32) b.add("rope_bwd_upcast", s, width, a + kFp32, MemoryPath::cast);
  b.add("rope_bwd_complex_mul", s, width, 2.0 * kFp32, MemoryPath::broadcast);
  if (a < kFp32) b.add("rope_bwd_downcast", s, width, kFp32 + a);
}

void attention(Layer& l, const Context& c) {
  const TransformerShape& t = *c.shape;
  const OpTemplate* rope = find_op(l.fwd, "rope_fwd");
  std::int64_t s = t.seq_len;
  std::int64_t d = t.hidden / t.heads;
  if (const OpTemplate* flash = find_op(l.fwd, "flash_attn_fwd")) {
    s = flash->shape[1];
    d = flash->shape[3];
  } else if (const OpTemplate* scores = find_op(l.fwd, "attn_scores")) {
    s = scores->shape[0];
    d = scores->shape[2];
  }
  const std::int64_t q = t.heads * d;
  const std::int64_t kv = t.kv_heads * d;
  std::vector<OpTemplate> fwd;
  std::vector<OpTemplate> bwd;
  KernelList f(fwd);
  KernelList b(bwd);
  // Qwen3's QK norm (one fused kernel each way, model_builder.cpp) normalizes before RoPE.
  if (const OpTemplate* norm = find_op(l.fwd, "qk_norm_fwd")) fwd.push_back(*norm);
  if (rope != nullptr) {
    const auto one = c.d.rope == RopeStyle::complex ? rope_complex : rope_one;
    one(f, b, s, q, c);
    one(f, b, s, kv, c);
  }
  if (t.causal && c.d.kv_cache) {  // a decoder's key and value appended to an empty cache
    f.add("cache_cat_key", s, kv, 2.0 * c.a, MemoryPath::strided_cat);
    f.add("cache_cat_value", s, kv, 2.0 * c.a, MemoryPath::strided_cat);
  }
  auto keep = [](const std::vector<OpTemplate>& list, std::vector<OpTemplate>& out) {
    for (const OpTemplate& op : list) {
      if (!op.kernel.starts_with("rope") && !op.kernel.starts_with("qk_norm")) out.push_back(op);
    }
  };
  keep(l.fwd, fwd);
  std::vector<OpTemplate> core_bwd;
  keep(l.bwd, core_bwd);
  // The query, key and value gradients copied from the heads' layout back to the tokens'.
  KernelList copies(core_bwd);
  copies.add("grad_layout_query", s, q, 2.0 * c.a, MemoryPath::strided);
  copies.add("grad_layout_key", s, kv, 2.0 * c.a, MemoryPath::strided);
  copies.add("grad_layout_value", s, kv, 2.0 * c.a, MemoryPath::strided);
  core_bwd.insert(core_bwd.end(), bwd.begin(), bwd.end());  // RoPE's backward after the core's
  if (const OpTemplate* norm = find_op(l.bwd, "qk_norm_bwd")) core_bwd.push_back(*norm);  // and the norm's last
  l.fwd = std::move(fwd);
  l.bwd = std::move(core_bwd);
}

/// HF's loss: logits.float(), then cross_entropy (log-softmax: a max pass, a sum pass and the
/// output pass, 3 reads and a write; nll); backward: the gradient zero-filled, nll's scatter,
/// log-softmax's backward (a sum pass and the output pass), the cast back to the logits' dtype.
void loss(Layer& l, const Context& c) {
  const auto [rows, classes] = rows_width(l.fwd.at(0));
  const bool upcast = c.a < kFp32;
  l.fwd.clear();
  l.bwd.clear();
  KernelList f(l.fwd);
  if (upcast) f.add("logits_upcast", rows, classes, c.a + kFp32, MemoryPath::cast);
  f.add("log_softmax", rows, classes, 4.0 * kFp32);
  f.add("nll_loss", rows, 1, 2.0 * kFp32);
  KernelList b(l.bwd);
  b.add("loss_grad_fill", rows, classes, kFp32);
  b.add("nll_loss_bwd", rows, 1, 2.0 * kFp32);
  b.add("log_softmax_bwd", rows, classes, 4.0 * kFp32);
  if (upcast) b.add("logits_grad_downcast", rows, classes, kFp32 + c.a);
  l.saved_bytes = as_double(rows) * as_double(classes) * kFp32;  // log-softmax's fp32 output
}

}  // namespace

Model with_eager_kernels(Model model, EagerOptions options) {
  if (!model.transformer) return model;
  Context c;
  c.d = options;
  c.a = options.activation;
  c.stream = options.autocast ? kFp32 : c.a;
  c.shape = &*model.transformer;
  // Under autocast: whether the previous layer's output is fp32 (the embedding's fp32 tables, a
  // norm, a residual add, NewGELU) or in the GEMM dtype (a GEMM, attention, SiLU).
  bool fp32 = false;
  for (Layer& l : model.layers) {
    const std::string& kind = l.kind;
    if (l.name.rfind("pooler.", 0) == 0) {
      // BERT's pooler, a side branch on the first token: the LM head after it reads the
      // encoder's output, so the stream's dtype is left as the encoder left it.
      if (kind == "linear") linear(l, fp32, c);
      continue;
    }
    if (kind == "embedding") {
      fp32 = true;
      if (options.autocast) l.output_bytes = l.output_elems * kFp32;  // fp32 tables
    } else if (kind == "linear") {
      linear(l, fp32, c);
      fp32 = false;
    } else if (kind == "layernorm") {
      layernorm(l, c);
      fp32 = true;
    } else if (kind == "rmsnorm") {
      rmsnorm(l, c);
      fp32 = true;
    } else if (kind == "gelu" && model.transformer->gelu_tanh) {
      gelu_tanh(l, c);
      fp32 = true;
    } else if (kind == "swiglu") {
      swiglu(l, c);
      fp32 = false;
    } else if (kind == "add") {
      residual_add(l, c);
      fp32 = true;
    } else if (kind == "dropout") {
      dropout(l, fp32, c);
    } else if (kind == "attention") {
      attention(l, c);
      fp32 = false;
    } else if (kind == "loss") {
      loss(l, c);
      // The loss holds the logits upcast to fp32, and their gradient is fp32 until cast back.
      if (&l != &model.layers.front() && c.a < kFp32) {
        Layer& logits = *(&l - 1);
        logits.output_bytes = logits.output_elems * kFp32;
      }
    } else {
      fp32 = false;  // other activations (erf GELU, tanh), routers, experts: their own kernels
    }
  }
  return model;
}

}  // namespace foresight::strategy
