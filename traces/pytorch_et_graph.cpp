#include "traces/pytorch_et_graph.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <unordered_map>

#include "common/error.hpp"

namespace foresight::trace {
/// Helpers (a named namespace: the unity build joins this file with others).
namespace et_graph_detail {

using sim::Node;
using sim::NodeId;
using sim::OpKind;
using sim::OpSignature;
using sim::OpType;
using sim::Time;
using sim::TraceError;

constexpr sim::StreamId kComputeStream = 1;
constexpr sim::StreamId kCommStream = 2;
constexpr NodeId kNone = 0xffffffffu;

/// Leaf ops that launch no kernel: views, metadata and allocations (the caching allocator).
bool launches_nothing(std::string_view name) {
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

bool is_annotation(const EtNode& n) {
  return n.scope == 7 || n.name.rfind("## ", 0) == 0 || n.name.rfind("ProfilerStep", 0) == 0 ||
         n.name.rfind("[pytorch|", 0) == 0;
}

bool is_thread_root(const EtNode& n) {
  return n.name.find("|thread]") != std::string::npos && n.name.rfind("[pytorch|profiler|", 0) == 0;
}

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

bool touches_gpu(const EtNode& n) {
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
double moved_bytes(const EtNode& n) {
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

double output_bytes(const EtNode& n) {
  double bytes = 0.0;
  for (const EtArg& a : n.outputs) {
    for (const EtTensor& t : a.tensors) bytes += t.on_gpu() ? t.bytes() : 0.0;
  }
  return bytes;
}

double dim(const std::vector<std::int64_t>& s, std::size_t i) { return i < s.size() ? static_cast<double>(s[i]) : 1.0; }

std::string_view short_name(std::string_view name) {
  const auto at = name.find("::");
  return at == std::string_view::npos ? name : name.substr(at + 2);
}

/// What a collective's record_param_comms says.
struct CommInfo {
  std::string name;  ///< lower case, without underscores: "allreduce", "allgather", "wait", ...
  std::int64_t seq = -1;
  int pg_size = -1;
  std::string pg_name;
  double bytes = 0.0;          ///< its tensors' bytes (inputs)
  double output_bytes = 0.0;
  std::vector<std::int64_t> in_split;
};

CommInfo comm_info(const EtNode& n) {
  CommInfo c;
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
    c.pg_size = static_cast<int>(n.pg_size);
  } else if (n.inputs.size() >= 8 && n.inputs.back().integer && *n.inputs.back().integer > 0) {
    c.pg_size = static_cast<int>(*n.inputs.back().integer);
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
std::optional<sim::CollectiveOp> collective_of(const CommInfo& c, const std::string& where) {
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

/// One rank's ops, in the order they began, and the costs of what they launch.
class RankBuilder {
 public:
  RankBuilder(const PytorchEt& et, sim::RankId rank, const EtGraphOptions& options, EtGraph& out)
      : et_(et), rank_(rank), options_(options), out_(out), g_(out.graph) {
    for (std::size_t i = 0; i < et.nodes.size(); ++i) index_.emplace(et.nodes[i].id, i);
    children_.resize(et.nodes.size());
    for (std::size_t i = 0; i < et.nodes.size(); ++i) {
      const EtNode& n = et.nodes[i];
      const auto p = index_.find(n.parent);
      if (p != index_.end() && n.parent != n.id) children_[p->second].push_back(i);
    }
    measured_ = options.measured && et.has_device_ops();
    check_depth();
  }

  struct Collective {
    NodeId node;
    sim::CollectiveOp op;
    CommInfo info;
    std::string where;
  };
  std::vector<Collective> collectives;

  void build() {
    std::vector<std::size_t> roots;
    for (std::size_t i = 0; i < et_.nodes.size(); ++i) {
      if (is_thread_root(et_.nodes[i])) roots.push_back(i);
    }
    if (roots.empty()) {
      throw TraceError(fmt::format("{}: no thread root ([pytorch|profiler|execution_trace|thread]): not an execution trace of "
                                   "a profiled run",
                                   et_.path));
    }
    std::vector<std::size_t> ops;
    for (const std::size_t r : roots) collect_ops(r, ops);
    std::sort(ops.begin(), ops.end());  // nodes are by id: the order ops began, over threads
    main_tid_ = et_.nodes[roots.front()].tid;
    begin_ = add_sync(sim::kHostStream, {}, "iteration begins");
    for (const std::size_t i : ops) op(i);
    std::vector<NodeId> last;
    if (last_compute_ != kNone) last.push_back(last_compute_);
    for (const auto& [stream, node] : last_on_stream_) last.push_back(node);
    if (last_comm_ != kNone) last.push_back(last_comm_);
    if (host_pending_ > Time::zero()) add_host(host_pending_, "host work");
    const NodeId end = add_sync(sim::kHostStream, last, "iteration ends (the host waits for the GPU)");
    out_.begin.push_back(begin_);
    out_.end.push_back(end);
    if (measured_ && first_ts_ < last_ts_) {
      out_.recorded_s = std::max(out_.recorded_s.value_or(0.0), (last_ts_ - first_ts_) * 1e-6);
    }
  }

 private:
  /// The walks below recurse along the op tree: a tree nested deeper than kMaxDepth (no
  /// profiled program nests its ranges so) is refused before they run.
  void check_depth() const {
    constexpr std::size_t kMaxDepth = 1000;
    std::vector<std::pair<std::size_t, std::size_t>> todo;  // (node, depth)
    for (std::size_t i = 0; i < et_.nodes.size(); ++i) {
      if (is_thread_root(et_.nodes[i])) todo.emplace_back(i, 0);
    }
    while (!todo.empty()) {
      const auto [i, depth] = todo.back();
      todo.pop_back();
      if (depth > kMaxDepth) {
        throw TraceError(fmt::format("{}: node {} (\"{}\"): expected ops nested at most {} deep, found deeper", et_.path,
                                     et_.nodes[i].id, et_.nodes[i].name, kMaxDepth));
      }
      for (const std::size_t c : children_[i]) todo.emplace_back(c, depth + 1);
    }
  }

  void collect_ops(std::size_t i, std::vector<std::size_t>& ops) const {
    for (const std::size_t c : children_[i]) {
      const EtNode& n = et_.nodes[c];
      if (n.gpu_op()) continue;
      if (is_annotation(n)) {
        collect_ops(c, ops);
      } else {
        ops.push_back(c);
      }
    }
  }

  bool backward(const EtNode& op) const {
    return op.tid != main_tid_ || op.name.rfind("autograd::engine::evaluate_function", 0) == 0 || op.scope == 1;
  }

  void op(std::size_t i) {
    const EtNode& n = et_.nodes[i];
    ++out_.ops;
    if (measured_) {
      measured_op(i);
      return;
    }
    if (!backward(n)) host_pending_ += options_.python_overhead;
    visit(i);
  }

  /// Host ETs: costs of the GPU work under node i.
  void visit(std::size_t i) {
    const EtNode& n = et_.nodes[i];
    if (n.gpu_op()) return;  // a host+device ET costed from shapes: its recorded kernels are not used
    if (!is_annotation(n)) host_pending_ += options_.op_overhead;
    if (n.name == "record_param_comms") {
      comm(n);
      return;
    }
    if (costed(n)) return;
    if (children_[i].empty()) {
      leaf(n);
      return;
    }
    for (const std::size_t c : children_[i]) visit(c);
  }

  /// GEMMs, convolutions and attention: kernels with their shapes. False for other ops.
  bool costed(const EtNode& n) {
    const std::string_view op = short_name(n.name);
    const bool gemm = op == "mm" || op == "addmm" || op == "bmm" || op == "baddbmm";
    if (gemm) {
      const std::size_t first = (op == "addmm" || op == "baddbmm") ? 1 : 0;
      const EtArg* a = gpu_tensor_arg(n.inputs, first);
      const EtArg* b = gpu_tensor_arg(n.inputs, first + 1);
      if (a == nullptr || b == nullptr || a->shape.size() < 2 || b->shape.size() < 2) return false;
      const bool batched = op == "bmm" || op == "baddbmm";
      const std::size_t o = batched ? 1 : 0;
      OpSignature s;
      s.type = OpType::gemm;
      s.dtype = dtype_of(a->type, false);
      s.kernel = std::string(op);
      const double m = dim(a->shape, o), k = dim(a->shape, o + 1), nn = dim(b->shape, o + 1), count = batched ? dim(a->shape, 0) : 1.0;
      s.shape = {static_cast<std::int64_t>(m), static_cast<std::int64_t>(nn), static_cast<std::int64_t>(k), static_cast<std::int64_t>(count)};
      s.flops = 2.0 * m * nn * k * count;
      s.bytes = moved_bytes(n);
      kernel(s, n.name);
      ++out_.gemms;
      return true;
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
        return false;  // not a 2-D convolution on the GPU, or only its wrapper: its parts are costed
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
        kernel(sig, n.name);
        ++out_.convolutions;
      };
      if (conv_fwd) {
        add(OpType::conv_fprop, "conv2d");
      } else {
        if (mask[0]) add(OpType::conv_dgrad, "conv2d_dgrad");
        if (mask[1]) add(OpType::conv_wgrad, "conv2d_wgrad");
        if (mask.size() > 2 && mask[2]) memory_kernel(y->tensors.front().bytes(), "conv_bias_grad", n.name);
      }
      return true;
    }
    if (op.find("attention") != std::string_view::npos && (op.find("flash") != std::string_view::npos ||
                                                          op.find("efficient") != std::string_view::npos ||
                                                          op.find("cudnn") != std::string_view::npos)) {
      const EtArg* q = gpu_tensor_arg(n.inputs, 0);
      const EtArg* k = gpu_tensor_arg(n.inputs, 1);
      if (q == nullptr || k == nullptr || q->shape.size() != 4 || k->shape.size() != 4) return false;
      // SDPA's (batch, heads, seq, head_dim); the _flash_attention_* ops' (batch, seq, heads, head_dim).
      const bool bshd = op.rfind("_flash_attention", 0) == 0 || op.rfind("_efficient_attention", 0) == 0;
      const double bh = dim(q->shape, 0) * dim(q->shape, bshd ? 2 : 1);
      const double sq = dim(q->shape, bshd ? 1 : 2), sk = dim(k->shape, bshd ? 1 : 2), d = dim(q->shape, 3);
      const bool bwd = op.find("backward") != std::string_view::npos;
      OpSignature sig;
      sig.type = OpType::attention;
      sig.dtype = dtype_of(q->type, false);
      sig.kernel = bwd ? "attention_bwd" : "attention_fwd";
      sig.shape = {static_cast<std::int64_t>(bh), static_cast<std::int64_t>(sq), static_cast<std::int64_t>(sk), static_cast<std::int64_t>(d), 0};
      sig.flops = 4.0 * bh * sq * sk * d * (bwd ? 2.5 : 1.0);  // two GEMMs forward; five backward
      sig.bytes = moved_bytes(n);
      kernel(sig, n.name);
      ++out_.attention;
      return true;
    }
    return false;
  }

  void leaf(const EtNode& n) {
    if (launches_nothing(n.name) || !touches_gpu(n)) return;
    const std::string_view op = short_name(n.name);
    if (op == "_local_scalar_dense") {  // .item(): a copy to the host, which waits for it
      memory_kernel(output_bytes(n) + 4.0, "item", n.name);
      host_sync(n.name);
      return;
    }
    if (op == "copy_" && n.inputs.size() >= 2 && n.inputs[0].tensors.size() == 1 && n.inputs[1].tensors.size() == 1 &&
        n.inputs[0].tensors.front().on_gpu() != n.inputs[1].tensors.front().on_gpu()) {
      host_copy(n);
      return;
    }
    double bytes = moved_bytes(n);
    if (op.find("embedding") != std::string_view::npos || op.find("index") != std::string_view::npos ||
        op.find("gather") != std::string_view::npos || op.find("lookup") != std::string_view::npos) {
      bytes = 2.0 * output_bytes(n);  // gathers read the rows they write, not whole tables
    }
    memory_kernel(bytes, std::string(op), n.name);
    // nonzero (and masked indexing through it) copies its count to the host and waits for it.
    if (op == "nonzero" || op == "masked_select" || op == "unique" || op == "_unique2") host_sync(n.name);
  }

  /// copy_(self, src, non_blocking) between host and GPU memory: at PCIe speed; a blocking copy
  /// returns to the host when it is done.
  void host_copy(const EtNode& n) {
    const double bytes = n.inputs[1].tensors.front().bytes();
    if (options_.host_copy_bandwidth > 0.0) {
      OpSignature s;
      s.type = OpType::memory;
      s.kernel = "host_copy";
      s.bytes = bytes;
      Node k = make(OpKind::compute, kComputeStream, n.name);
      k.signature = g_.add_signature(s);
      k.duration = Time::from_seconds(bytes / options_.host_copy_bandwidth);
      launch_into(k);
    } else {
      memory_kernel(2.0 * bytes, "host_copy", n.name);
    }
    ++out_.host_copies;
    const bool non_blocking = n.inputs.size() > 2 && n.inputs[2].boolean.value_or(false);
    if (!non_blocking) host_sync(n.name);
  }

  void memory_kernel(double bytes, const std::string& kernel_name, const std::string& label) {
    OpSignature s;
    s.type = OpType::memory;
    s.kernel = kernel_name;
    s.bytes = bytes;
    kernel(s, label);
    ++out_.memory;
  }

  void kernel(const OpSignature& sig, const std::string& label) {
    if (!options_.kernel_time) throw TraceError(fmt::format("{}: a host execution trace needs a compute model to time its kernels", et_.path));
    Node n = make(OpKind::compute, kComputeStream, label);
    n.signature = g_.add_signature(sig);
    n.duration = options_.kernel_time(sig);
    launch_into(n);
  }

  /// Adds a kernel on the compute stream, launched after the host time so far plus a launch.
  void launch_into(Node& n) {
    n.dispatch = host_pending_ + options_.launch;
    host_pending_ = Time::zero();
    if (wait_ != kNone) n.deps.push_back(wait_);
    wait_ = kNone;
    last_compute_ = g_.add(std::move(n));
    ++out_.kernels;
  }

  void comm(const EtNode& e) {
    const CommInfo info = comm_info(e);
    const std::string where = fmt::format("{}: node {} (record_param_comms)", et_.path, e.id);
    ++out_.collective_kinds[info.name.empty() ? "(unnamed)" : info.name];
    const auto op = collective_of(info, where);
    if (!op) {
      if (info.name != "wait") return;
      // The compute stream waits for the work (its seq), or the latest collective.
      NodeId awaited = last_comm_;
      for (auto it = collectives.rbegin(); it != collectives.rend() && info.seq >= 0; ++it) {
        if (it->info.seq == info.seq) {
          awaited = it->node;
          break;
        }
      }
      if (awaited == kNone) return;
      std::vector<NodeId> deps{awaited};
      if (wait_ != kNone) deps.push_back(wait_);
      wait_ = add_sync(kComputeStream, deps, "wait for " + g_.names[g_.nodes[awaited].name]);
      ++out_.waits;
      return;
    }
    Node n = make(OpKind::collective, kCommStream, "nccl:" + info.name);
    n.op = *op;
    n.dispatch = host_pending_ + options_.launch;
    host_pending_ = Time::zero();
    if (last_compute_ != kNone) n.deps.push_back(last_compute_);
    if (wait_ != kNone) n.deps.push_back(wait_);
    last_comm_ = g_.add(std::move(n));
    collectives.push_back({last_comm_, *op, info, where});
    ++out_.collectives;
  }

  /// Host+device ETs: the host's recorded time up to each GPU op's launch, then the op.
  void measured_op(std::size_t i) {
    const EtNode& n = et_.nodes[i];
    if (n.ts_us >= 0.0) advance_to(n.ts_us);  // the host's time since the previous op
    walk_measured(i);
    if (n.ts_us >= 0.0 && n.inclusive_us >= 0.0) {
      advance_to(n.ts_us + n.inclusive_us);
      recorded(n);
    }
  }

  /// Widens the recorded span to op `n`'s.
  void recorded(const EtNode& n) {
    first_ts_ = first_ts_ < 0.0 ? n.ts_us : std::min(first_ts_, n.ts_us);
    last_ts_ = std::max(last_ts_, n.ts_us + n.inclusive_us);
  }

  void walk_measured(std::size_t i) {
    const EtNode& n = et_.nodes[i];
    if (n.name == "record_param_comms") {
      const CommInfo info = comm_info(n);
      if (info.name == "wait") pending_wait_ = true;
    }
    for (const std::size_t c : children_[i]) {
      const EtNode& k = et_.nodes[c];
      if (!k.gpu_op()) {
        walk_measured(c);
        continue;
      }
      if (n.ts_us >= 0.0 && n.inclusive_us >= 0.0) advance_to(n.ts_us + n.inclusive_us);
      gpu_op(k);
    }
  }

  void advance_to(double us) {
    if (cursor_us_ < 0.0) cursor_us_ = us;
    if (us > cursor_us_) {
      host_pending_ += Time::from_seconds((us - cursor_us_) * 1e-6);
      cursor_us_ = us;
    }
  }

  void gpu_op(const EtNode& k) {
    const bool nccl = k.name.find("nccl") != std::string::npos;
    const auto it = stream_of_.try_emplace(k.stream, static_cast<sim::StreamId>(stream_of_.size() + 1)).first;
    Node n = make(OpKind::compute, it->second, k.name);
    n.duration = Time::from_seconds(k.inclusive_us * 1e-6);
    n.dispatch = host_pending_;
    host_pending_ = Time::zero();
    OpSignature s;
    s.type = OpType::memory;
    s.kernel = k.cat;
    n.signature = g_.add_signature(s);
    // NCCL's stream waits for the compute stream's work so far; a wait makes the next op on
    // another stream wait for the last NCCL kernel.
    if (nccl) {
      for (const auto& [stream, node] : last_on_stream_) {
        if (stream != it->second && node != kNone && !nccl_stream_.contains(stream)) n.deps.push_back(node);
      }
      nccl_stream_.insert(it->second);
    } else if (pending_wait_ && last_comm_ != kNone) {
      n.deps.push_back(last_comm_);
      pending_wait_ = false;
      ++out_.waits;
    }
    const NodeId id = g_.add(std::move(n));
    last_on_stream_[it->second] = id;
    if (nccl) last_comm_ = id;
    ++out_.kernels;
    recorded(k);
  }

  void add_host(Time t, const std::string& label) {
    Node n = make(OpKind::host, sim::kHostStream, label);
    n.duration = t;
    g_.add(std::move(n));
    host_pending_ = Time::zero();
  }

  void host_sync(const std::string& label) {
    if (host_pending_ > Time::zero()) add_host(host_pending_, "host work");
    std::vector<NodeId> deps;
    if (last_compute_ != kNone) deps.push_back(last_compute_);
    add_sync(sim::kHostStream, deps, label + " (the host waits for the GPU)");
    ++out_.host_syncs;
  }

  NodeId add_sync(sim::StreamId stream, std::vector<NodeId> deps, const std::string& label) {
    Node n = make(OpKind::sync, stream, label);
    n.deps = std::move(deps);
    return g_.add(std::move(n));
  }

  Node make(OpKind kind, sim::StreamId stream, const std::string& label) {
    Node n;
    n.kind = kind;
    n.rank = rank_;
    n.stream = stream;
    n.name = g_.intern(label);
    return n;
  }

  const PytorchEt& et_;
  sim::RankId rank_;
  const EtGraphOptions& options_;
  EtGraph& out_;
  sim::ExecutionGraph& g_;
  std::unordered_map<std::uint64_t, std::size_t> index_;
  std::vector<std::vector<std::size_t>> children_;
  bool measured_ = false;
  std::int64_t main_tid_ = 0;
  NodeId begin_ = kNone;
  NodeId last_compute_ = kNone;
  NodeId last_comm_ = kNone;
  NodeId wait_ = kNone;
  // Host+device ETs.
  std::map<std::int64_t, sim::StreamId> stream_of_;
  std::map<sim::StreamId, NodeId> last_on_stream_;
  std::set<sim::StreamId> nccl_stream_;
  bool pending_wait_ = false;
  double cursor_us_ = -1.0;
  Time host_pending_;
  double first_ts_ = -1.0;
  double last_ts_ = 0.0;
};

}  // namespace et_graph_detail
using namespace et_graph_detail;

EtGraph pytorch_et_graph(const std::vector<PytorchEt>& ranks, const EtGraphOptions& options) {
  if (ranks.empty()) throw TraceError("execution trace replay: no trace given");
  EtGraph out;
  sim::ExecutionGraph& g = out.graph;
  g.stream_names = {{sim::kHostStream, "host"}, {kComputeStream, "compute"}, {kCommStream, "nccl"}};
  std::vector<RankBuilder> builders;
  builders.reserve(ranks.size());
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    g.add_rank(static_cast<sim::GpuId>(r), static_cast<std::uint32_t>(r));
    builders.emplace_back(ranks[r], static_cast<sim::RankId>(r), options, out);
  }
  for (RankBuilder& b : builders) b.build();
  out.measured = options.measured && std::all_of(ranks.begin(), ranks.end(), [](const PytorchEt& e) { return e.has_device_ops(); });
  // Collectives: the k-th of every rank is one collective (NCCL's order), over a group of every
  // rank, or, from a lone ET, of the GPUs its groups span.
  const std::size_t n = ranks.size();
  const auto& c0 = builders.front().collectives;
  for (std::size_t r = 1; r < n; ++r) {
    const auto& cr = builders[r].collectives;
    if (cr.size() != c0.size()) {
      throw TraceError(fmt::format("{}: {} collectives, but {} has {}: the ranks' traces are not of one iteration", ranks[r].path,
                                   cr.size(), ranks.front().path, c0.size()));
    }
    for (std::size_t k = 0; k < cr.size(); ++k) {
      if (cr[k].op != c0[k].op) {
        throw TraceError(fmt::format("{}: collective {} is {}, but rank 0's is {}", cr[k].where, k, sim::to_string(cr[k].op),
                                     sim::to_string(c0[k].op)));
      }
    }
  }
  std::map<int, std::uint32_t> communicator_of;  // by group size
  for (std::size_t k = 0; k < c0.size(); ++k) {
    int size = c0[k].info.pg_size > 0 ? c0[k].info.pg_size : static_cast<int>(n);
    if (size != static_cast<int>(n) && n != 1) {
      throw TraceError(fmt::format("{}: a collective over a group of {} GPUs, but {} ranks' traces are given: replay takes every "
                                   "rank's trace (or one, standing for all)",
                                   c0[k].where, size, n));
    }
    out.stands_for = std::max(out.stands_for, size);
    auto it = communicator_of.find(size);
    if (it == communicator_of.end()) {
      std::uint32_t id = 0;
      if (n == 1 && size > 1) {
        std::vector<sim::GpuId> all;
        for (int m = 0; m < size; ++m) all.push_back(static_cast<sim::GpuId>(m));
        id = g.add_communicator({0}, {all});
      } else {
        std::vector<sim::RankId> members;
        for (std::size_t r = 0; r < n; ++r) members.push_back(static_cast<sim::RankId>(r));
        id = g.add_communicator(members);
      }
      it = communicator_of.emplace(size, id).first;
    }
    // Bytes in NCCL's convention: the whole buffer (all-gather: the output; reduce-scatter: the
    // input); all-to-all-v: each rank's row of its send splits.
    std::vector<double> row_bytes;
    for (std::size_t r = 0; r < n; ++r) {
      const RankBuilder::Collective& c = builders[r].collectives[k];
      Node& node = g.nodes[c.node];
      node.communicator = it->second;
      double bytes = c.info.bytes;
      if (c.op == sim::CollectiveOp::all_gather) bytes = std::max(c.info.output_bytes, c.info.bytes * size);
      node.bytes = bytes;
    }
    if (c0[k].op == sim::CollectiveOp::all_to_all && n > 1) {
      bool uneven = false;
      std::vector<double> matrix(n * n, 0.0);
      for (std::size_t r = 0; r < n && !uneven; ++r) {
        const CommInfo& info = builders[r].collectives[k].info;
        if (info.in_split.size() != n) {
          uneven = true;  // even splits
          break;
        }
        double rows = 0.0;
        for (const std::int64_t s : info.in_split) rows += static_cast<double>(s);
        for (std::size_t j = 0; j < n; ++j) matrix[r * n + j] = rows > 0.0 ? info.bytes * static_cast<double>(info.in_split[j]) / rows : 0.0;
      }
      if (!uneven) {
        g.send_matrices.push_back(std::move(matrix));
        for (std::size_t r = 0; r < n; ++r) g.nodes[builders[r].collectives[k].node].matrix = static_cast<std::uint32_t>(g.send_matrices.size() - 1);
      }
    }
  }
  return out;
}

std::vector<double> et_rank_seconds(const EtGraph& g, const sim::LargeVector<sim::Time>& node_end) {
  std::vector<double> out;
  for (std::size_t r = 0; r < g.end.size(); ++r) out.push_back((node_end[g.end[r]] - node_end[g.begin[r]]).seconds());
  return out;
}

}  // namespace foresight::trace
