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
};

/// The graph of step `index` (0-based among the trace's steps; -1: the last) on GPU `gpu`.
/// TraceError when the trace has no ProfilerStep or the index is out of range.
ReplayGraph replay_graph(const KinetoTrace& trace, int index, sim::GpuId gpu = 0);

}  // namespace foresight::trace
