#pragma once
/// One iteration of a Kineto trace rebuilt as an execution graph of one rank (DESIGN.md: a
/// measured trace can replace the strategy compiler).
///
/// The iteration is the chosen ProfilerStep's window. Its CUDA runtime calls, from every CPU
/// thread in start order, drive one host thread:
/// - a call that launches a GPU op (by correlation id) becomes that op, with the measured gap
///   since the previous call plus the call itself as its dispatch cost, on the op's stream, with
///   its measured duration (NCCL kernels too: on the trace's own cluster their time is what was
///   measured);
/// - cudaEventRecord marks the last GPU op issued; the GPU op after a cudaStreamWaitEvent waits
///   for it when it is on another stream (Kineto records neither event nor stream ids, so the
///   pairing is by order);
/// - cudaDeviceSynchronize, cudaStreamSynchronize and cudaEventSynchronize block the host until
///   the GPU ops issued so far are done;
/// - other calls are host time: the gap before them and their duration.
/// A call that ran far longer than its kind's median (over 10x + 5 us) was blocked (a full
/// launch queue, a pinned-memory wait): it counts as its kind's median, since the replay makes
/// its own waits.

#include <optional>
#include <string>

#include "sim/execution_graph.hpp"
#include "traces/kineto.hpp"

namespace foresight::trace {

struct ReplayGraph {
  sim::ExecutionGraph graph;
  double measured_s = 0.0;  ///< the step's measured duration
  int step = 0;             ///< its ProfilerStep number
  std::size_t gpu_ops = 0;
  std::size_t nccl_ops = 0;
  /// GPU ops starting in the step whose launching call is not in the trace (a sampled or
  /// filtered trace): they cannot be replayed.
  std::size_t unlaunched = 0;
  std::size_t modelled_collectives = 0;  ///< NCCL kernels replaced by collectives
};

/// The graph of step `index` (0-based among the trace's steps; -1: the last) on GPU `gpu`.
/// TraceError when the trace has no ProfilerStep or the index is out of range.
///
/// With `collective_gpus` > 0 (replay on another cluster), an NCCL kernel whose collective and
/// message size Kineto recorded becomes that collective over GPUs 0 .. collective_gpus - 1: the
/// one simulated rank stands for all of them (a folded communicator, as the job's ranks ran the
/// same program), and the target cluster's network times it. Other kernels keep their measured
/// times (the same GPU model).
ReplayGraph replay_graph(const KinetoTrace& trace, int index, sim::GpuId gpu = 0, int collective_gpus = 0);

/// NCCL's collective for Kineto's "Collective name" (allreduce, broadcast, allgather,
/// reduce_scatter / reducescatter, reduce, alltoall); nullopt for others (send/recv).
std::optional<sim::CollectiveOp> kineto_collective(const std::string& name);
/// Bytes per element of Kineto's dtype names (Float, Half, BFloat16, Double, Int, Long, ...);
/// 0 when unknown.
int kineto_dtype_bytes(const std::string& dtype);

}  // namespace foresight::trace
