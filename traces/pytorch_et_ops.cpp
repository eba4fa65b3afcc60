#include "traces/pytorch_et_ops.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "common/error.hpp"

namespace foresight::trace {
/// Helpers (a named namespace: the unity build joins this file with others).
namespace et_ops_detail {

/// The element type of a tensor argument's type text.
sim::DType dtype_of(const std::string& type, bool convolution) {
  if (type.find("Half") != std::string::npos) return sim::DType::fp16;
  if (type.find("BFloat16") != std::string::npos) return sim::DType::bf16;
  if (type.find("Float8") != std::string::npos) return sim::DType::fp8;
  // fp32: cuDNN convolutions use TF32 by default (torch.backends.cudnn.allow_tf32), matmuls do
  // not since PyTorch 1.12 (torch.backends.cuda.matmul.allow_tf32).
  return convolution ? sim::DType::tf32 : sim::DType::fp32;
}

const EtArg* gpu_tensor_arg(const std::vector<EtArg>& args, std::size_t nth) {
  std::size_t seen = 0;
  for (const EtArg& a : args) {
    if (a.tensors.size() == 1 && a.tensors.front().on_gpu()) {
      if (seen++ == nth) return &a;
    }
  }
  return nullptr;
}

double dim(const std::vector<std::int64_t>& s, std::size_t i) { return i < s.size() ? static_cast<double>(s[i]) : 1.0; }

}  // namespace et_ops_detail
using namespace et_ops_detail;
using sim::OpSignature;
using sim::OpType;
using sim::TraceError;

/// Leaf ops that launch no kernel: views, metadata and allocations (the caching allocator).
bool et_launches_nothing(std::string_view name) {
  static const std::set<std::string_view> kNames{
      "aten::as_strided", "aten::view", "aten::_reshape_alias", "aten::reshape", "aten::_unsafe_view", "aten::slice",
      "aten::select", "aten::narrow", "aten::t", "aten::transpose", "aten::permute", "aten::expand", "aten::expand_as",
      "aten::unsqueeze", "aten::squeeze", "aten::detach", "aten::detach_", "detach", "detach_", "aten::alias",
      "aten::lift_fresh", "aten::result_type", "aten::is_same_size", "aten::empty", "aten::empty_strided",
      "aten::empty_like", "aten::resize_", "aten::set_", "aten::record_stream", "aten::size", "aten::stride",
      "aten::numel", "aten::unbind", "aten::split", "aten::split_with_sizes", "aten::chunk", "aten::view_as",
      "aten::_has_compatible_shallow_copy_type", "aten::unflatten", "aten::flatten", "aten::contiguous", "aten::to",
      "aten::_to_copy", "aten::lift", "aten::view_as_real", "aten::view_as_complex", "aten::_nested_tensor_from_mask",
      "aten::unfold", "aten::diagonal", "aten::movedim", "aten::swapaxes", "aten::squeeze_", "aten::unsqueeze_",
      "aten::is_nonzero", "aten::dim", "aten::sym_size", "aten::sym_stride", "aten::sym_numel", "aten::retain_grad"};
  return kNames.contains(name) || name.rfind("[pytorch|", 0) == 0 || name.rfind("nccl:", 0) == 0;
}

bool et_annotation(const EtNode& n) {
  return n.scope == 7 || n.name.rfind("## ", 0) == 0 || n.name.rfind("ProfilerStep", 0) == 0 ||
         n.name.rfind("[pytorch|", 0) == 0;
}

bool et_thread_root(const EtNode& n) {
  return n.name.find("|thread]") != std::string::npos && n.name.rfind("[pytorch|profiler|", 0) == 0;
}



bool et_touches_gpu(const EtNode& n) {
  for (const auto* args : {&n.inputs, &n.outputs}) {
    for (const EtArg& a : *args) {
      for (const EtTensor& t : a.tensors) {
        if (t.on_gpu()) return true;
      }
    }
  }
  return false;
}

/// Bytes an op moves: its GPU tensors read and written (a tensor once per side).
double et_moved_bytes(const EtNode& n) {
  double bytes = 0.0;
  for (const auto* args : {&n.inputs, &n.outputs}) {
    std::set<std::int64_t> seen;
    for (const EtArg& a : *args) {
      for (const EtTensor& t : a.tensors) {
        if (t.on_gpu() && seen.insert(t.id).second) bytes += t.bytes();
      }
    }
  }
  return bytes;
}

double et_output_bytes(const EtNode& n) {
  double bytes = 0.0;
  for (const EtArg& a : n.outputs) {
    for (const EtTensor& t : a.tensors) bytes += t.on_gpu() ? t.bytes() : 0.0;
  }
  return bytes;
}


std::string_view et_short_name(std::string_view name) {
  const auto at = name.find("::");
  return at == std::string_view::npos ? name : name.substr(at + 2);
}


EtCommInfo et_comm_info(const EtNode& n) {
  EtCommInfo c;
  std::string name = n.collective_name;
  for (const EtArg& a : n.inputs) {
    if (name.empty() && a.text) name = *a.text;
  }
  for (const char ch : name) {
    if (ch != '_') c.name.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  }
  // Inputs: [tensors, seq, group, rank, name, in_split, out_split, (world) ...]; a wait's first
  // input is the seq of the work it waits for.
  if (c.name == "wait") {
    if (!n.inputs.empty() && n.inputs.front().integer) c.seq = *n.inputs.front().integer;
  } else if (n.inputs.size() > 1 && n.inputs[1].integer) {
    c.seq = *n.inputs[1].integer;
  }
  if (n.pg_size > 0) {
    c.pg_size = n.pg_size;
  } else if (n.inputs.size() >= 8 && n.inputs.back().integer && *n.inputs.back().integer > 0) {
    c.pg_size = *n.inputs.back().integer;
  }
  c.pg_name = n.pg_name;
  for (const EtArg& a : n.inputs) {
    for (const EtTensor& t : a.tensors) c.bytes += t.bytes();
  }
  for (const EtArg& a : n.outputs) {
    for (const EtTensor& t : a.tensors) c.output_bytes += t.bytes();
  }
  if (n.inputs.size() > 5) c.in_split = n.inputs[5].integers;
  return c;
}

/// NCCL's collective for record_param_comms's name; nullopt for a wait, and a TraceError for
/// what Foresight does not model.
std::optional<sim::CollectiveOp> et_collective(const EtCommInfo& c, const std::string& where) {
  using sim::CollectiveOp;
  const std::string& n = c.name;
  if (n == "allreduce" || n == "allreducecoalesced" || n == "barrier") return CollectiveOp::all_reduce;
  if (n == "broadcast") return CollectiveOp::broadcast;
  if (n == "reduce") return CollectiveOp::reduce;
  if (n == "allgather" || n == "allgatherbase" || n == "allgatherintotensorcoalesced" || n == "allgathercoalesced") {
    return CollectiveOp::all_gather;
  }
  if (n == "reducescatter" || n == "reducescatterbase" || n == "reducescattertensorcoalesced") return CollectiveOp::reduce_scatter;
  if (n == "alltoall" || n == "alltoallv" || n == "alltoallbase") return CollectiveOp::all_to_all;
  if (n == "wait" || n == "coalesced" || n.empty()) return std::nullopt;
  throw TraceError(fmt::format("{}: collective \"{}\" (point-to-point, gather or scatter) is not one Foresight replays from "
                               "execution traces",
                               where, c.name));
}

std::optional<std::vector<OpSignature>> et_shaped_kernels(const EtNode& n) {
std::vector<OpSignature> out;
  const std::string_view op = et_short_name(n.name);
  const bool gemm = op == "mm" || op == "addmm" || op == "bmm" || op == "baddbmm";
  if (gemm) {
    const std::size_t first = (op == "addmm" || op == "baddbmm") ? 1 : 0;
    const EtArg* a = gpu_tensor_arg(n.inputs, first);
    const EtArg* b = gpu_tensor_arg(n.inputs, first + 1);
    if (a == nullptr || b == nullptr || a->shape.size() < 2 || b->shape.size() < 2) return std::nullopt;
    const bool batched = op == "bmm" || op == "baddbmm";
    const std::size_t o = batched ? 1 : 0;
    OpSignature s;
    s.type = OpType::gemm;
    s.dtype = dtype_of(a->type, false);
    s.kernel = std::string(op);
    const double m = dim(a->shape, o), k = dim(a->shape, o + 1), nn = dim(b->shape, o + 1), count = batched ? dim(a->shape, 0) : 1.0;
    s.shape = {static_cast<std::int64_t>(m), static_cast<std::int64_t>(nn), static_cast<std::int64_t>(k), static_cast<std::int64_t>(count)};
    s.flops = 2.0 * m * nn * k * count;
    s.bytes = et_moved_bytes(n);
    out.push_back(std::move(s));
    return out;
  }
  const bool conv_fwd = op.find("convolution") != std::string_view::npos && op.find("backward") == std::string_view::npos &&
                        op.find("transpose") == std::string_view::npos;
  if (conv_fwd || op == "convolution_backward") {
    // Forward: (input, weight, ...) -> output. Backward: (grad_output, input, weight, ...,
    // output_mask [input, weight, bias]).
    const std::size_t x = conv_fwd ? 0 : 1;
    const EtArg* in = gpu_tensor_arg(n.inputs, x);
    const EtArg* w = gpu_tensor_arg(n.inputs, x + 1);
    const EtArg* y = conv_fwd ? gpu_tensor_arg(n.outputs, 0) : gpu_tensor_arg(n.inputs, 0);
    if (in == nullptr || w == nullptr || y == nullptr || in->shape.size() != 4 || w->shape.size() != 4 || y->shape.size() != 4 ||
        w->shape[1] <= 0 || y->shape[2] <= 0 || y->shape[3] <= 0) {
      return std::nullopt;  // not a 2-D convolution on the GPU, or only its wrapper: its parts are costed
    }
    const std::vector<std::int64_t>& s = in->shape;
    const std::int64_t groups = std::max<std::int64_t>(1, s[1] / w->shape[1]);
    // Stride and padding from the shapes: out = floor((in + 2 pad - r) / stride) + 1.
    const std::int64_t stride = std::max<std::int64_t>(1, (s[2] + y->shape[2] / 2) / y->shape[2]);
    const std::int64_t pad = std::max<std::int64_t>(0, ((y->shape[2] - 1) * stride + w->shape[2] - s[2] + 1) / 2);
    OpSignature sig;
    sig.dtype = dtype_of(in->type, true);
    sig.shape = {s[0], s[1], s[2], s[3], w->shape[0], w->shape[2], w->shape[3], stride, pad, groups};
    const double flops = 2.0 * dim(y->shape, 0) * dim(y->shape, 1) * dim(y->shape, 2) * dim(y->shape, 3) *
                         dim(w->shape, 1) * dim(w->shape, 2) * dim(w->shape, 3);
    const double bytes = in->tensors.front().bytes() + w->tensors.front().bytes() + y->tensors.front().bytes();
    std::vector<bool> mask{true, true, false};
    if (!conv_fwd && !n.inputs.empty() && n.inputs.back().bools.size() == 3) mask = n.inputs.back().bools;
    const auto add = [&](OpType type, const char* kernel_name) {
      sig.type = type;
      sig.kernel = kernel_name;
      sig.flops = flops;
      sig.bytes = bytes;
      out.push_back(sig);
    };
    if (conv_fwd) {
      add(OpType::conv_fprop, "conv2d");
    } else {
      if (mask[0]) add(OpType::conv_dgrad, "conv2d_dgrad");
      if (mask[1]) add(OpType::conv_wgrad, "conv2d_wgrad");
      if (mask.size() > 2 && mask[2]) {
        OpSignature bias;
        bias.type = OpType::memory;
        bias.kernel = "conv_bias_grad";
        bias.bytes = y->tensors.front().bytes();
        out.push_back(std::move(bias));
      }
    }
    return out;
  }
  if (op.find("attention") != std::string_view::npos && (op.find("flash") != std::string_view::npos ||
                                                        op.find("efficient") != std::string_view::npos ||
                                                        op.find("cudnn") != std::string_view::npos)) {
    const EtArg* q = gpu_tensor_arg(n.inputs, 0);
    const EtArg* k = gpu_tensor_arg(n.inputs, 1);
    if (q == nullptr || k == nullptr || q->shape.size() != 4 || k->shape.size() != 4) return std::nullopt;
    // SDPA's (batch, heads, seq, head_dim); the _flash_attention_* ops' (batch, seq, heads, head_dim).
    const bool bshd = op.rfind("_flash_attention", 0) == 0 || op.rfind("_efficient_attention", 0) == 0;
    const double bh = dim(q->shape, 0) * dim(q->shape, bshd ? 2 : 1);
    const double sq = dim(q->shape, bshd ? 1 : 2), sk = dim(k->shape, bshd ? 1 : 2), d = dim(q->shape, 3);
    const bool bwd = op.find("backward") != std::string_view::npos;
    OpSignature sig;
    sig.type = OpType::attention;
    sig.dtype = dtype_of(q->type, false);
    sig.kernel = bwd ? "attention_bwd" : "attention_fwd";
    const std::int64_t kernel = op.find("cudnn") != std::string_view::npos   ? sim::kAttentionCudnn
                                : op.find("flash") != std::string_view::npos ? sim::kAttentionFlash2
                                                                             : sim::kAttentionOther;
    sig.shape = {static_cast<std::int64_t>(bh), static_cast<std::int64_t>(sq), static_cast<std::int64_t>(sk),
                 static_cast<std::int64_t>(d), 0, kernel};
    sig.flops = 4.0 * bh * sq * sk * d * (bwd ? 2.5 : 1.0);  // two GEMMs forward; five backward
    sig.bytes = et_moved_bytes(n);
    out.push_back(std::move(sig));
    return out;
  }
  return std::nullopt;
}

}  // namespace foresight::trace
