#pragma once
/// One iteration of a Kineto trace rebuilt as an execution graph of one rank (docs/architecture.md: a
/// measured trace can replace the strategy compiler).
///
/// The iteration is the chosen ProfilerStep's window, preceded by the steps that ran back to back
/// before it (each beginning within 1 ms of the previous one's end): replayed first, they leave
/// the GPU's queues as they were when the step began. The windows' CUDA runtime calls, from every
/// CPU thread in start order, drive one host thread:
/// - a call that launches GPU ops (by correlation id; a cudaGraphLaunch has several) becomes
///   those ops, the first with the measured gap since the previous call plus the call itself as
///   its dispatch cost, on the op's stream, with its measured duration (NCCL kernels too: on the
///   trace's own cluster their time is what was measured);
/// - cudaEventRecord marks the last GPU op issued; the GPU op after a cudaStreamWaitEvent waits
///   for it when it is on another stream (Kineto records neither event nor stream ids, so the
///   pairing is by order). Where no recorded event pairs with it, the next GPU op that the
///   waiting thread launches waits for the op the measured timeline shows it waited for: the op
///   on another stream that ended as it began, after it was held (traces/gpu_timeline.hpp);
/// - cudaDeviceSynchronize, cudaStreamSynchronize and cudaEventSynchronize block the host until
///   the GPU ops issued so far are done; cudaMemcpy, and cudaMemcpyAsync to pageable host
///   memory, until their copy is (CUDA Runtime API, "API synchronization behavior");
/// - other calls are host time: the gap before them and their duration.
/// A call that ran far longer than its kind's median (over 10x + 5 us) was blocked (a full
/// launch queue, a wait for the GPU): it counts as 10x its kind's median + 5 us, since the replay
/// makes its own waits (the executor's launch queue, the synchronizations above).
/// A step is measured as ProfilerStep ranges are: from the host's reaching its start to its
/// reaching its end (zero-duration sync nodes mark both).

#include <optional>
#include <string>
#include <vector>

#include "exec/execution_graph.hpp"
#include "traces/gpu_retime.hpp"
#include "traces/gpu_timeline.hpp"
#include "traces/kineto.hpp"

namespace foresight::trace {

/// One step of a replay and the host markers at its start and end.
struct ReplayedStep {
  int number = 0;           ///< N of ProfilerStep#N
  double measured_s = 0.0;  ///< its measured duration
  sim::NodeId begin = 0;
  sim::NodeId end = 0;
};

/// One rank's replayed steps: what was built for the measured step, and counted in it.
struct RankSteps {
  int step = 0;             ///< its ProfilerStep number
  double measured_s = 0.0;  ///< the step's measured duration
  std::size_t gpu_ops = 0;
  std::size_t nccl_ops = 0;
  /// GPU ops starting in the step whose launching call is not in the trace (a sampled or
  /// filtered trace): they cannot be replayed.
  std::size_t unlaunched = 0;
  std::size_t warmup_steps = 0;  ///< steps replayed before it (see replay_graph)
  RetimeCounts retimed;          ///< the step's GPU ops by how they were retimed, if they were
  /// The step's unexplained GPU stalls, longest first (traces/gpu_timeline.hpp).
  std::vector<GpuStall> stalls;
  std::size_t inferred_waits = 0;  ///< the step's cross-stream waits inferred from timing
  /// Host markers: where the rank's host thread is when the step begins and when it ends.
  sim::NodeId begin = 0;
  sim::NodeId end = 0;
  std::vector<ReplayedStep> window;  ///< the warm-up steps and the step, oldest first
};

struct ReplayGraph : RankSteps {
  sim::ExecutionGraph graph;
  std::size_t modelled_collectives = 0;  ///< NCCL kernels of the step replaced by collectives
};

/// How to replay.
struct ReplayOptions {
  /// > 0 (replay on another cluster): an NCCL kernel whose collective and message size Kineto
  /// recorded becomes that collective over GPUs 0 .. collective_gpus - 1 (see replay_graph and
  /// joint_replay_graph), timed by the target cluster's network.
  int collective_gpus = 0;
  /// The cluster's GPUs are another model: GPU ops take the times it gives them on its target
  /// (traces/gpu_retime.hpp); without, their measured times.
  const KernelRetimer* retime = nullptr;
  /// Keep each unexplained stall (traces/gpu_timeline.hpp) as GPU time of its measured length on
  /// its stream before the op it held: the work the trace lacks is assumed to take what it took.
  bool keep_stalls = false;
};

/// The graph of step `index` (0-based among the trace's steps; -1: the last) on GPU 0.
/// TraceError when the trace has no ProfilerStep or the index is out of range.
///
/// With `collective_gpus` > 0 (replay on another cluster), the one simulated rank stands for all
/// GPUs of its collectives (a folded communicator, as the job's ranks ran the same program).
ReplayGraph replay_graph(const KinetoTrace& trace, int index, const ReplayOptions& options = {});

/// One rank of a joint replay.
struct ReplayRank : RankSteps {
  std::string path;
  int rank = -1;          ///< the trace's distributedInfo.rank, or -1
  double offset_s = 0.0;  ///< when the rank's step began after the first rank's (shared clock)
};

/// Several ranks' steps in one graph (graph rank i is ranks[i], on GPU i), their NCCL kernels
/// matched across ranks.
struct JointReplayGraph {
  sim::ExecutionGraph graph;
  std::vector<ReplayRank> ranks;
  /// Whether the ranks' step starts were taken from a shared clock (their steps overlap in the
  /// traces' timestamps, as the ranks of one node's job do); otherwise every rank starts at 0.
  bool shared_clock = false;
  std::size_t matched_collectives = 0;   ///< collectives per rank
  std::size_t modelled_collectives = 0;  ///< of them, timed by the network model
};

/// The joint graph of the ProfilerStep numbered as `index` picks in the first trace (0-based
/// among its steps; -1: the last), taken from every trace. Ranks are ordered by their recorded
/// distributedInfo rank (file order when not recorded). Each rank's ops are built as in
/// replay_graph; then:
/// - on a shared clock, a rank whose step began later starts that much later (host time);
/// - the k-th NCCL kernel of every rank forms one collective over all ranks (NCCL runs a
///   communicator's collectives in the same order on each member). On the trace's own cluster
///   (`collective_gpus` 0) it starts when the last rank arrives and takes the shortest of the
///   ranks' measured kernel times: the last to arrive waited least, so its kernel time is the
///   transfer's. With `collective_gpus` > 0 (another cluster), a collective whose size Kineto
///   recorded is timed by that cluster's network instead (the largest rank's size). With `retime`,
///   every rank's other GPU ops are retimed as in replay_graph.
/// TraceError when a trace lacks the step, the traces' world sizes differ, two traces claim
/// one rank, or the ranks' NCCL kernels do not match (count or kind), naming file and position.
JointReplayGraph joint_replay_graph(const std::vector<KinetoTrace>& traces, int index,
                                    const ReplayOptions& options = {});

/// The replayed step (seconds): from the host's reaching the step's start to its reaching the
/// step's end, as ProfilerStep ranges measure it (`node_end`: ExecutionResult::end).
double replayed_seconds(const ReplayGraph& g, const sim::LargeVector<sim::Time>& node_end);

/// One replayed step of a window, measured the same way.
double replayed_seconds(const ReplayedStep& s, const sim::LargeVector<sim::Time>& node_end);

/// Mean measured and replayed step over a window's steady steps: all but the first when there
/// are several (the first starts with empty GPU queues, which the trace's run did not). Where the
/// host runs ahead of the GPU by a varying amount, single host windows split the GPU's work
/// unevenly between steps (the HTA recsys traces: 82-166 ms steps of one workload); their mean
/// is the iteration time.
struct StepMeans {
  double measured_s = 0.0;
  double replayed_s = 0.0;
  std::size_t steps = 0;
};
StepMeans steady_means(const std::vector<ReplayedStep>& window, const sim::LargeVector<sim::Time>& node_end);

/// Each joint rank's replayed step (seconds), measured as replayed_seconds does.
std::vector<double> rank_step_seconds(const JointReplayGraph& g, const sim::LargeVector<sim::Time>& node_end);

/// NCCL's collective for Kineto's "Collective name" (allreduce, broadcast, allgather,
/// reduce_scatter / reducescatter, reduce, alltoall); nullopt for others (send/recv).
std::optional<sim::CollectiveOp> kineto_collective(const std::string& name);
/// Bytes per element of Kineto's dtype names (Float, Half, BFloat16, Double, Int, Long, ...);
/// 0 when unknown.
int kineto_dtype_bytes(const std::string& dtype);

}  // namespace foresight::trace
