#pragma once
/// The execution graph: the contract between strategies/ and traces/ (which build it) and the
/// executor (which runs it). One node per operation of one rank (docs/architecture.md, "The execution
/// graph"). Cross-rank ordering comes only from communication: a node's dependencies are nodes
/// of its own rank.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "collectives/collective_types.hpp"
#include "net/fabric.hpp"
#include "common/chunked_vector.hpp"
#include "common/large_vector.hpp"
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
  // Fields are ordered by size so that a node takes 112 bytes: graphs reach millions of nodes.
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
};
static_assert(sizeof(Node) <= 112, "Node grew: graphs of millions of nodes pay for every byte");
inline constexpr std::uint32_t kNoSignature = 0xffffffffu;
inline constexpr std::uint32_t kNoMatrix = 0xffffffffu;

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
  std::map<std::string, std::uint32_t, std::less<>> name_index{{"", 0}};

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
  std::uint32_t intern(const std::string& name);
  /// Appends a node; returns its id.
  /// Appends a node; throws ConfigError past kMaxNodes, so that a plan too large to simulate
  /// fails with a message instead of exhausting memory.
  NodeId add(Node node);
  /// The most nodes one graph may hold (~112 bytes each, ~150 with the executor's arrays).
  static constexpr std::size_t kMaxNodes = 60'000'000;
};

}  // namespace foresight::sim
