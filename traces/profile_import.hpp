#pragma once
/// A profile database from a PyTorch-profiler trace recorded with shapes (record_shapes=True):
/// the GPU time of each matrix operator, keyed as the compute model's kernels are
/// (sim::OpSignature), so that `foresight simulate --profile` uses what the trace measured.
///
/// An operator's time is the sum of the GPU kernels launched by the CUDA runtime calls inside it
/// (same CPU thread, within its span, joined by correlation id); an operator's kernels count
/// once, for the innermost recognized operator. Recognized:
/// - aten::addmm, inputs (bias, x [m, k], w [k, n]): "linear_fwd" {m, n, k, 1}, batch axis 0;
/// - aten::mm inside an AddmmBackward0 / MmBackward0 / LinearBackward0 node: the input gradient
///   grad [m, n] x w [n, k] is "linear_dgrad" {m, k, n, 1}; the weight gradient x^T [k, m] x
///   grad [m, n] is "linear_wgrad" {n, k, m, 1}, batch axis 2. The weight gradient is the mm
///   whose second input is the node's gradient (the first input of its sibling); a node's lone
///   mm is the weight gradient (leaf inputs need no gradient);
/// - other aten::mm: "mm" {m, n, k, 1}; aten::bmm (a [b, m, k], b [b, k, n]): "bmm"
///   {m, n, k, b}, batch axis 3.
/// Element type from "Input type": float is fp32, or tf32 when its kernels ran on TF32 tensor
/// cores (their names say tf32 or s1688/s16816 tensorop); c10::Half fp16; c10::BFloat16 bf16.
/// Each signature's time is the median over its instances in the chosen steps.

#include <string>
#include <vector>

#include "exec/profile_db.hpp"
#include "traces/kineto.hpp"

namespace foresight::trace {

struct ImportedProfile {
  sim::ProfileDb db;
  std::size_t instances = 0;   ///< operator instances timed
  std::size_t no_shapes = 0;   ///< matrix operators without recorded shapes or known dtype
  std::size_t no_kernels = 0;  ///< matrix operators whose kernels are not in the trace
};

/// Imports the matrix operators of every ProfilerStep of `traces` (the whole trace when it has
/// none) measured on `gpu` (a catalog name, recorded as the database's GPU). TraceError when no
/// operator could be timed, saying why.
ImportedProfile import_profile(const std::vector<KinetoTrace>& traces, const std::string& gpu);

}  // namespace foresight::trace
