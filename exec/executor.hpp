#pragma once
/// Runs an execution graph: host threads issue their ranks' ops in program order, paying each
/// GPU op's dispatch cost (and waiting while the op's stream's launch queue is full); GPU streams run ops in issue order once their dependencies are done;
/// collectives start when every member has reached them (rendezvous) and run on the collective
/// engine; sends and receives match by (source, destination, tag) in order and move as one
/// point-to-point transfer once both sides are ready.
///
/// A compute op slows down while its rank communicates, by a factor per kernel family: NCCL
/// kernels occupy SMs (one CTA per channel) and memory bandwidth.

#include <array>
#include <cstdint>
#include <vector>

#include "collectives/collective_config.hpp"
#include "exec/execution_graph.hpp"
#include "exec/graph_check.hpp"
#include "exec/op_signature.hpp"
#include "net/network_model.hpp"

namespace foresight::sim {

struct ExecutorOptions {
  /// While its rank runs a collective or transfer, a compute op progresses at 1 / (1 + factor)
  /// of its speed. Where this uniform factor is above 0 it applies to every compute op; otherwise
  /// an op with a kernel signature takes its family's factor from comm_compute_slowdown_by_type
  /// (the compute model's measured values, strategy::comm_slowdown_by_type) and an op without
  /// one (trace replay: its measured duration already includes any contention) none.
  double comm_compute_slowdown = 0.0;
  std::array<double, kOpTypeCount> comm_compute_slowdown_by_type{};
  /// Kernel families (by sim::OpType) whose kernels hold every SM until they end: a collective or
  /// transfer that becomes ready while such kernels run on its rank arrives (its kernel becomes
  /// resident) only when the last of them ends. Kernels without a signature never hold.
  std::array<bool, kOpTypeCount> comm_waits_for{};
  /// Per graph rank, where ranks run on GPU models of other factors (a mixed cluster): each
  /// rank's own comm_compute_slowdown_by_type and comm_waits_for, in place of the two above.
  /// Empty: every rank takes the two above.
  std::vector<std::array<double, kOpTypeCount>> comm_compute_slowdown_by_rank;
  std::vector<std::array<bool, kOpTypeCount>> comm_waits_for_by_rank;
  /// Links whose carried bytes are sampled every `sample_interval` (for utilization counters in
  /// timelines); none when empty or the interval is zero. A link keeps at most
  /// kMaxLinkSamples samples: when a run outlasts that many intervals, every other sample is
  /// dropped and the interval doubles (the samples are bytes carried so far, so the coarser
  /// series is exact over its wider intervals), so a long run costs bounded memory and events.
  std::vector<LinkId> sample_links;
  Time sample_interval;
  static constexpr std::size_t kMaxLinkSamples = std::size_t{1} << 15;
  /// A collective or transfer that starts alone on its links takes its closed-form time alone
  /// instead of running flow by flow, and continues flow by flow from where it stands if another
  /// later needs its links (collectives/comm_jobs.hpp): the same answer, with far fewer events. Off
  /// while links are sampled (their bytes need every flow).
  bool closed_form = true;
  /// How many GPU ops a stream holds issued but unfinished before the launch that would add one
  /// more blocks its host thread until one finishes (CUDA's launch queue; 0: unbounded). About
  /// 1000 per stream: launches of short kernels slow to the kernels' pace after ~1000 (NVIDIA
  /// forum thread 68937, "CUDA stream are blocked when launch lots of kernels (>1000)": three
  /// streams take ~1000 each), and the measured V100 ResNet trace the validation suite replays runs
  /// with 1021 launches in flight in its steady steps.
  std::uint32_t launch_queue_depth = 1024;
  /// Record every node's ready time (ExecutionResult::ready, for timelines); false keeps only
  /// receives' (reports' pipeline waits), 8 bytes a node less.
  bool ready_times = true;
};

struct RankTotals {
  Time compute;  ///< time compute ops ran (any stream)
  Time comm;     ///< time collectives and transfers ran (from their start, not their ready time)
  Time host;     ///< host thread busy: dispatch plus host ops
};

inline constexpr std::uint32_t kNoInstance = 0xffffffffu;

struct ExecutionResult {
  Time makespan;             ///< end of the last op
  /// Per node: when it was ready (at the head of its stream, dependencies done; for host ops,
  /// reached by the host), when it started running (collectives and transfers: when the last
  /// member arrived) and when it ended. start - ready is time spent waiting for peers.
  /// `ready` is empty when ExecutorOptions::ready_times is off; ready_at answers for receives
  /// either way.
  LargeVector<Time> ready;
  LargeVector<Time> start;
  LargeVector<Time> end;
  std::vector<RankTotals> ranks;
  /// Per node: the collective or transfer it is part of (members share the index), or
  /// kNoInstance for other nodes. Collectives are numbered first, then transfers.
  LargeVector<std::uint32_t> comm_instance;
  /// Without ready_times: each transfer's receive's ready time, by comm_instance less
  /// `first_transfer` (the number of collectives).
  LargeVector<Time> recv_ready;
  /// The same for each transfer's send (a send on a stream that computes blocks it until the
  /// receiver is ready: DeepSpeed's pipeline engine).
  LargeVector<Time> send_ready;
  std::uint32_t first_transfer = 0;
  /// Node `n`'s ready time: any node's with ready_times, else a receive's.
  Time ready_at(NodeId n) const { return ready.empty() ? recv_ready[comm_instance[n] - first_transfer] : ready[n]; }
  /// A send's ready time, with or without ready_times.
  Time send_ready_at(NodeId n) const { return ready.empty() ? send_ready[comm_instance[n] - first_transfer] : ready[n]; }
  /// Per sampled link: (time, bytes carried so far). Links of one capacity pool report the
  /// pool's bytes.
  std::vector<std::vector<std::pair<Time, double>>> link_bytes;
  std::uint64_t events = 0;
  std::uint64_t fingerprint = 0;
  /// Collectives and transfers (each with every group or mirror it stands for) that started
  /// alone and ran in closed form, that started among others and ran flow by flow, and that
  /// started alone and went on flow by flow when another needed their links; and how many
  /// times one running flow by flow went back to closed form once nothing crowded it; and the
  /// plans whose state a rebuild copied from an alike plan's replay instead of replaying them
  /// (collectives/plan_classes.hpp).
  std::uint64_t jobs_closed_form = 0;
  std::uint64_t jobs_flow_by_flow = 0;
  std::uint64_t jobs_rebuilt = 0;
  std::uint64_t jobs_returned = 0;
  std::uint64_t plans_copied = 0;
  /// Analytical network: plans whose time alone was an earlier alike plan's (CommJobs::Stats).
  std::uint64_t plans_alone_reused = 0;
  /// Folded collectives and transfers whose groups or mirrors did not all end at the same
  /// instant, and the longest time from one's first group's end to its last's (CommJobs::Stats).
  /// Zero: the folded run is the unfolded one; otherwise a replica it stands for would have run
  /// ahead of its representative by up to that much.
  std::uint64_t folded_uneven = 0;
  Time folded_spread;
};

/// Validates `graph` against `fabric` (GraphError naming the node and what is wrong: a dangling
/// dependency, one on another process's rank, a GPU op on the host stream, unmatched collectives
/// or transfers, members disagreeing on a collective) and simulates it. A run that cannot finish is a
/// deadlock, reported as a GraphError naming the ops left waiting.
ExecutionResult execute(const ExecutionGraph& graph, const Fabric& fabric,
                        const CollectiveConfig& config, NetworkKind network,
                        const ExecutorOptions& options = {});
/// The same, for a graph already checked: `index` is what check_graph(graph, fabric) returned.
ExecutionResult execute(const ExecutionGraph& graph, GraphIndex index, const Fabric& fabric,
                        const CollectiveConfig& config, NetworkKind network, const ExecutorOptions& options = {});

}  // namespace foresight::sim
