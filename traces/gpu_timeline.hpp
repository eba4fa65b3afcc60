#pragma once
/// What a trace's measured GPU timeline says about each GPU op's start: why it began when it did.
///
/// An op is ready once the runtime call that launched it has returned and the op before it on its
/// stream has ended. It is held when it began more than kHeldUs after that. A held op waited for
/// something the launch and stream order do not show:
/// - an op on another stream of its GPU that ended as it began (within kWaitBeforeUs before to
///   kWaitAfterUs after its start; CUPTI's timestamps put a few waiting ops microseconds before
///   the end they waited for): a cross-stream wait (cudaStreamWaitEvent, a CUDA graph's edge),
///   its op inferred from timing where the trace does not record the event (Kineto often records
///   no cudaEventRecord calls, and never event ids);
/// - nothing that ended then: an unexplained stall. The GPU had the work and idled: the trace lacks
///   what it waited for (kernels whose records CUPTI dropped, work outside the profiled process).
/// HTA's idle-time breakdown (HolisticTraceAnalysis, "idle_time_breakdown") makes the same split
/// into host wait, kernel wait and other idle; this is its per-op form.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "traces/kineto.hpp"

namespace foresight::trace {

constexpr double kHeldUs = 50.0;
constexpr double kWaitBeforeUs = 50.0;
constexpr double kWaitAfterUs = 10.0;

/// Per op of `KinetoTrace::gpu_ops` (same indices).
struct GpuTimeline {
  static constexpr std::ptrdiff_t kNone = -1;
  std::vector<double> ready_us;  ///< when it was ready; its own start where nothing is known
  /// For a held op: the op on another stream it waited for, or kNone (an unexplained stall).
  std::vector<std::ptrdiff_t> waited_on;
  bool held(std::size_t op, const KinetoTrace& t) const { return t.gpu_ops[op].ts_us - ready_us[op] > kHeldUs; }
};

GpuTimeline read_timeline(const KinetoTrace& trace);

/// An unexplained stall: op `op` held from `begin_us` to its start with nothing to wait for.
struct GpuStall {
  std::size_t op = 0;
  double begin_us = 0.0;
  double dur_us = 0.0;
};

/// The unexplained stalls overlapping step `s`'s window, longest first, each clipped to the window.
std::vector<GpuStall> unexplained_stalls(const KinetoTrace& trace, const GpuTimeline& timeline, const KinetoStep& s);

/// Their total (us).
double total_us(const std::vector<GpuStall>& stalls);

}  // namespace foresight::trace
