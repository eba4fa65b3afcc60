#pragma once
/// The execution graph: the contract between strategies/ and traces/ (which build it) and the
/// executor (which runs it). One node per operation of one rank (docs/architecture.md, "The execution
/// graph"). Cross-rank ordering comes only from communication: a node's dependencies are nodes
/// of its own rank.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectives/collective_types.hpp"
#include "net/fabric.hpp"
#include "common/chunked_vector.hpp"
#include "common/flat_map.hpp"
#include "common/large_vector.hpp"
#include "common/string_hash.hpp"
#include "exec/op_signature.hpp"
#include "common/units.hpp"

namespace foresight::sim {

using NodeId = std::uint32_t;
/// A rank (one GPU's process or part of one), 0 .. ExecutionGraph::ranks() - 1.
using RankId = std::uint32_t;
/// A rank's stream: kHostStream is its host thread; 1, 2, ... are GPU streams (by convention 1
/// computes and 2+ communicate, but any GPU stream may run any GPU op).
using StreamId = std::uint32_t;
inline constexpr StreamId kHostStream = 0;

enum class OpKind : std::uint8_t {
  compute,     ///< a GPU kernel of known duration
  collective,  ///< a collective over a communicator
  send,        ///< point-to-point send to `peer`
  recv,        ///< point-to-point receive from `peer`
  host,        ///< CPU work: on kHostStream it occupies the rank's main thread (which then issues
               ///< nothing else); on another stream it runs on a CPU worker thread of the rank
               ///< (a data-loader worker), in that stream's order, without blocking the host
  sync,        ///< zero-duration wait for its dependencies: on a GPU stream it holds the
               ///< stream (cudaStreamWaitEvent); on the host stream it blocks the host
               ///< (cudaStreamSynchronize, .item())
};
std::string_view to_string(OpKind k);

/// Which part of training an op belongs to, for reports and timelines.
enum class Phase : std::uint8_t { none, forward, backward, wgrad, optimizer, data, other };
std::string_view to_string(Phase p);

struct Node {
  // Fields are ordered by size so that a node takes 104 bytes: graphs reach millions of nodes.
  OpKind kind = OpKind::compute;
  /// collective: which (see `bytes`).
  CollectiveOp op = CollectiveOp::all_reduce;
  Phase phase = Phase::none;  ///< label for reports and the timeline
  /// collective: an optional algorithm hint.
  std::optional<Algorithm> algorithm;
  RankId rank = 0;
  StreamId stream = 1;
  /// compute, host: how long it runs (resolved by the compute model before simulation).
  /// collective: zero (the network model times it), or a measured time (trace replay on the
  /// trace's own cluster): it starts when every member has arrived and takes that long; every
  /// member names the same.
  Time duration;
  /// GPU ops: host time spent launching it (framework overhead + kernel launch); the host is
  /// busy that long before the op is enqueued on its stream.
  Time dispatch;
  /// The leading part of the op's host time (its dispatch, or a host op's duration) that holds
  /// its process's interpreter lock (Python's GIL): host threads of one process serialize on it.
  Time gil;
  /// send, recv, collective: payload bytes (NCCL's size convention).
  double bytes = 0.0;
  /// collective: index into ExecutionGraph::communicators; root (a rank index in it) for
  /// broadcast/reduce.
  std::uint32_t communicator = 0;
  int root = 0;
  /// all_to_all: index into ExecutionGraph::send_matrices of its per-destination byte counts
  /// (all_to_allv; every member names the same), or kNoMatrix for `bytes` split evenly.
  std::uint32_t matrix = 0xffffffffu;
  /// send, recv: the other rank and a tag; sends and receives of (source, destination, tag)
  /// match in program order.
  RankId peer = 0;
  std::uint32_t tag = 0;
  /// compute: index into ExecutionGraph::signatures of the kernel it runs, or kNoSignature.
  std::uint32_t signature = 0xffffffffu;
  /// Nodes earlier in the graph that must finish first: of the same rank, or of a rank whose
  /// host thread belongs to the same process (ExecutionGraph::host_process).
  DepList deps;
  // Labels for reports and the timeline.
  std::uint32_t name = 0;  ///< index into ExecutionGraph::names
  int layer = -1;
  int micro_batch = -1;
  /// compute: index into ExecutionGraph::runs when the node stands for a run of coalesced
  /// kernels (ExecutionGraph::add_kernel), else kNoRun. Its signature, name and layer are then
  /// the first kernel's, its duration the run's total and its dispatch the first kernel's.
  std::uint32_t run = 0xffffffffu;
};
static_assert(sizeof(Node) <= 104, "Node grew: graphs of millions of nodes pay for every byte");
inline constexpr std::uint32_t kNoSignature = 0xffffffffu;
inline constexpr std::uint32_t kNoMatrix = 0xffffffffu;
inline constexpr std::uint32_t kNoRun = 0xffffffffu;

/// The kernels a coalesced compute node stands for: parts [first, first + count) of
/// ExecutionGraph::part_duration, part_dispatch and part_signature, in launch order.
struct KernelRun {
  std::uint32_t first = 0;
  std::uint32_t count = 0;
};

struct Communicator {
  std::vector<RankId> ranks;  ///< the simulated members, in communicator rank order
  /// A folded graph (docs/architecture.md, "Identical ranks") simulates one rank for several identical
  /// ones. Then `groups` lists the real communicators this one stands for, each as its GPUs in
  /// communicator rank order (all of one size; a root indexes them): every group runs each
  /// collective when the simulated members reach it, and the collective ends when the last
  /// group's does. The simulated members' GPUs are in groups[0]. Empty: one group, the members'
  /// own GPUs.
  std::vector<std::vector<GpuId>> groups;
};

struct ExecutionGraph {
  /// Per rank: the GPU it runs on, and the host thread that drives it (ranks sharing a host have
  /// their dispatch serialized in graph order, as one Python process driving several GPUs).
  std::vector<GpuId> rank_gpu;
  std::vector<std::uint32_t> rank_host;
  /// Per host thread: the process it belongs to, whose interpreter lock its ops' `gil` parts
  /// take. Empty: every host thread is its own process.
  std::vector<std::uint32_t> host_process;
  /// Folded graphs: per rank, the GPUs of the identical ranks it stands for besides its own (the
  /// same count for ranks that exchange point-to-point messages). A transfer from rank a to rank
  /// b also moves its bytes from a's k-th mirror to b's k-th, at the same time, and ends when the
  /// last of these has. Empty: no rank has mirrors.
  std::vector<std::vector<GpuId>> rank_mirrors;
  std::vector<Communicator> communicators;
  /// all_to_allv send matrices: bytes from communicator rank i to rank j at [i * n + j].
  std::vector<std::vector<double>> send_matrices;
  /// Names of the streams for reports and timelines ("host", "compute", "nccl", "dataloader").
  std::map<StreamId, std::string> stream_names{{kHostStream, "host"}};
  /// Distinct kernels of compute nodes, referenced by Node::signature.
  std::vector<OpSignature> signatures;
  ChunkedVector<Node> nodes;  ///< program order: a rank's nodes in the order they appear
  std::vector<std::string> names{""};
  StringMap<std::uint32_t> name_index{{"", 0}};

  /// Coalesced kernels (docs/internals.md#coalesced-kernels): a node's kernels, for nodes with
  /// Node::run set. Each part is one kernel: its duration, its dispatch and its signature.
  std::vector<KernelRun> runs;
  LargeVector<Time> part_duration;
  LargeVector<Time> part_dispatch;
  LargeVector<std::uint32_t> part_signature;

  std::size_t ranks() const { return rank_gpu.size(); }
  /// Interns a kernel signature (same key and batch: same index) and returns its index.
  std::uint32_t add_signature(const OpSignature& sig);
  std::map<std::string, std::uint32_t, std::less<>> signature_index;
  /// Adds a rank on `gpu` driven by host `host`; returns its id.
  RankId add_rank(GpuId gpu, std::uint32_t host);
  std::uint32_t add_communicator(std::vector<RankId> ranks);
  /// Adds a folded communicator: simulated members `ranks`, standing for `groups`.
  std::uint32_t add_communicator(std::vector<RankId> ranks, std::vector<std::vector<GpuId>> groups);
  /// GPUs rank `r` stands for: 1 plus its mirrors.
  std::size_t represents(RankId r) const { return 1 + (r < rank_mirrors.size() ? rank_mirrors[r].size() : 0); }
  /// Interns a label and returns its index.
  std::uint32_t intern(std::string_view name);
  /// Appends a node; returns its id. Throws ConfigError past kMaxNodes, so that a plan too large
  /// to simulate fails with a message instead of exhausting memory. While coalescing, ids are
  /// the builder's own (one per add or add_kernel, in order) and its dependencies name them.
  NodeId add(Node node);
  /// Adds a compute kernel, which joins the node added just before it when that is a kernel of
  /// the same rank, stream and micro-batch added by add_kernel (its phase label is then the
  /// first kernel's: reports do not read phases, and timelines keep every kernel), nothing has named that
  /// kernel since, `node` waits for nothing but it (its deps are empty or that kernel), neither
  /// takes an interpreter lock, and that kernel runs at least as long as `node`'s dispatch (so
  /// `node` is always launched before its stream reaches it). The executor then runs the two as
  /// they would run apart: the stream back to back, the host paying each dispatch and waiting on
  /// a full launch queue as for each kernel. Only while coalescing; the caller must not add
  /// kernels that slow under communication or hold SMs (ExecutorOptions): the executor refuses them.
  NodeId add_kernel(Node node);
  /// Ends the open run, if any, at the kernel added last: a node added later will read that
  /// kernel's end after more kernels are added, so none may join it (only while coalescing).
  void end_run() {
    if (coalescing_) close_tail();
  }
  /// Starts coalescing (before any node is added).
  void start_coalescing();
  bool coalescing() const { return coalescing_; }
  /// The id the next add or add_kernel returns.
  NodeId next_id() const { return coalescing_ ? next_id_ : static_cast<NodeId>(nodes.size()); }
  /// The node a builder's id ended up in, for a reader of its end (`last` true) or of its start:
  /// where the id's kernel is not the node's last (first) one, the coalesced graph cannot answer
  /// exactly and coalescing_exact() turns false.
  NodeId node_of(NodeId id, bool last);
  /// Whether every id was read where a coalesced graph answers as the uncoalesced one would;
  /// false: the builder must build the graph again without coalescing.
  bool coalescing_exact() const { return exact_; }
  /// Ends coalescing: ids are node indices again (frees the builder's id map).
  void finish_coalescing();
  /// Part j's index into the part arrays of node `n`'s run.
  std::size_t part(const Node& n, std::uint32_t j) const { return runs[n.run].first + j; }
  /// How many kernels node `n` runs: its run's, or 1.
  std::uint32_t kernels(const Node& n) const { return n.run == kNoRun ? 1 : runs[n.run].count; }
  /// The most nodes one graph may hold (104 bytes each, ~140 with the executor's arrays).
  static constexpr std::size_t kMaxNodes = 60'000'000;

 private:
  NodeId append(Node node);
  /// The node `id` is part of, and whether it is that node's last kernel.
  std::pair<NodeId, bool> locate(NodeId id) const;
  /// Closes the tail to further kernels; a run it ends with shares an identical earlier run.
  void close_tail();
  bool coalescing_ = false;
  bool exact_ = true;
  bool tail_open_ = false;      ///< the last node may take the next kernel
  NodeId next_id_ = 0;          ///< the next builder id
  ChunkedVector<NodeId> first_id_;  ///< per node, the builder id of its first kernel (chunks: no copies as it grows)
  struct RunHash {
    std::size_t operator()(std::uint64_t h) const noexcept { return static_cast<std::size_t>(h); }
  };
  FlatMap<std::uint64_t, std::uint32_t, RunHash> run_by_hash_;  ///< closed runs by their parts' hash
};

}  // namespace foresight::sim
