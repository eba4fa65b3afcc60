#include "traces/pytorch_et_graph.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <unordered_map>

#include "common/error.hpp"
#include "traces/pytorch_et_ops.hpp"

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
    EtCommInfo info;
    std::string where;
  };
  std::vector<Collective> collectives;

  void build() {
    std::vector<std::size_t> roots;
    for (std::size_t i = 0; i < et_.nodes.size(); ++i) {
      if (et_thread_root(et_.nodes[i])) roots.push_back(i);
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
      if (et_thread_root(et_.nodes[i])) todo.emplace_back(i, 0);
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
      if (et_annotation(n)) {
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
    if (!et_annotation(n)) host_pending_ += options_.op_overhead;
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
    const auto kernels = et_shaped_kernels(n);
    if (!kernels) return false;
    for (const OpSignature& s : *kernels) kernel(s, n.name);
    return true;
  }

  void leaf(const EtNode& n) {
    if (et_launches_nothing(n.name) || !et_touches_gpu(n)) return;
    const std::string_view op = et_short_name(n.name);
    if (op == "_local_scalar_dense") {  // .item(): a copy to the host, which waits for it
      memory_kernel(et_output_bytes(n) + 4.0, "item", n.name);
      host_sync(n.name);
      return;
    }
    if (op == "copy_" && n.inputs.size() >= 2 && n.inputs[0].tensors.size() == 1 && n.inputs[1].tensors.size() == 1 &&
        n.inputs[0].tensors.front().on_gpu() != n.inputs[1].tensors.front().on_gpu()) {
      host_copy(n);
      return;
    }
    double bytes = et_moved_bytes(n);
    if (op.find("embedding") != std::string_view::npos || op.find("index") != std::string_view::npos ||
        op.find("gather") != std::string_view::npos || op.find("lookup") != std::string_view::npos) {
      bytes = 2.0 * et_output_bytes(n);  // gathers read the rows they write, not whole tables
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
  }

  void kernel(const OpSignature& sig, const std::string& label) {
    if (!options_.kernel_time) throw TraceError(fmt::format("{}: a host execution trace needs a compute model to time its kernels", et_.path));
    Node n = make(OpKind::compute, kComputeStream, label);
    n.signature = g_.add_signature(sig);
    n.duration = options_.kernel_time(sig);
    launch_into(n);
    switch (sig.type) {
      case OpType::gemm: ++out_.gemms; break;
      case OpType::conv_fprop:
      case OpType::conv_dgrad:
      case OpType::conv_wgrad: ++out_.convolutions; break;
      case OpType::attention: ++out_.attention; break;
      case OpType::memory: ++out_.memory; break;
    }
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
    const EtCommInfo info = et_comm_info(e);
    const std::string where = fmt::format("{}: node {} (record_param_comms)", et_.path, e.id);
    ++out_.collective_kinds[info.name.empty() ? "(unnamed)" : info.name];
    const auto op = et_collective(info, where);
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
      const EtCommInfo info = et_comm_info(n);
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
    // The largest group replayed: a lone ET standing for more GPUs than any cluster holds would
    // otherwise be laid out GPU by GPU before the cluster refuses it.
    constexpr std::int64_t kMaxGroup = std::int64_t{1} << 20;
    const std::int64_t recorded = c0[k].info.pg_size;
    if (recorded == 0 || recorded < -1 || recorded > kMaxGroup) {
      throw TraceError(fmt::format("{}: expected a process group of 1 to {} GPUs, found {}", c0[k].where, kMaxGroup, recorded));
    }
    const int size = recorded > 0 ? static_cast<int>(recorded) : static_cast<int>(n);
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
        const EtCommInfo& info = builders[r].collectives[k].info;
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
