#pragma once
/// Two traces of one program compared kernel for kernel: the same step recorded by two tracers
/// (libforesight_inject.so's CUPTI collector and PyTorch's profiler) should hold the same kernels
/// in the same launch order with about the same durations. A step's kernels are those whose
/// launching runtime or driver call lies inside its ProfilerStep range (a kernel may run past the
/// range's end; it still belongs to the step that launched it).

#include <cstddef>
#include <string>

#include "traces/kineto.hpp"

namespace foresight::trace {

struct KernelAgreement {
  std::size_t kernels_a = 0, kernels_b = 0;
  std::size_t same_name_in_order = 0;  ///< positions where both traces launched the same kernel
  std::size_t first_mismatch = 0;      ///< the first position that differs (== min count if none)
  std::string mismatch_a, mismatch_b;  ///< the kernels there, when they differ
  double total_a_us = 0.0, total_b_us = 0.0;
  /// Over kernels matched by position and name: duration in b over duration in a.
  double median_ratio = 0.0, p10_ratio = 0.0, p90_ratio = 0.0;
};

/// The kernels launched in step `index` (0-based among each trace's steps; -1: the last) of both
/// traces. TraceError when either has no such step (KinetoTrace::step_at).
KernelAgreement compare_step_kernels(const KinetoTrace& a, const KinetoTrace& b, int index = -1);

}  // namespace foresight::trace
