#pragma once
/// How a framework lays out a GEMM signature's operands in memory, so that foresight-profile
/// times the kernel the framework runs. cuBLAS is column-major; PyTorch's row-major
/// Y (m x n) = X W^T is computed as Y^T (n x m, leading dimension n). The signature {m, n, k}
/// (models/model_builder.cpp) names the output's rows m and columns n and the reduced k:
///   forward  (*_fwd; and every other GEMM): Y^T = op_T(W) X^T    "tn", leading dims k, k, n
///   input gradient (*_dgrad):              dX^T = W^T dY^T       "nn", leading dims n, k, n
///   weight gradient (batch axis k, *_wgrad): dW^T = X^T op_T(dY) "nt", leading dims n, m, n
/// FP8 runs "tn" only (cuBLASLt's FP8 kernels on Hopper; Transformer Engine keeps transposed FP8
/// copies for the backward GEMMs), with the forward's leading dims. The leading dimensions decide
/// which kernels cuBLAS may use: one not a multiple of 16 bytes takes narrower vector loads
/// (ComputeModel's gemm_row_alignment_bytes models the same edges).
/// Measured before this layout (foresight-profile until 2026-11-28): every GEMM "tn" with leading
/// dims k, k, m, which timed GPT-2's LM-head forward (n = 50,257) as an aligned GEMM, 0.85 ms
/// against the 6.6 ms PyTorch's align-1 kernel took in the H200 step it was measured for.

#include <array>
#include <cstdint>

#include "exec/op_signature.hpp"

namespace foresight::prof {

struct GemmOperand {
  bool transposed = false;  ///< cuBLAS op: CUBLAS_OP_T
  std::uint64_t rows = 0;   ///< as stored, column-major
  std::uint64_t cols = 0;
  std::uint64_t ld = 0;  ///< leading dimension: rows
};

struct GemmLayout {
  std::uint64_t m = 0, n = 0, k = 0;  ///< cuBLAS's: D (m x n) = op(A) (m x k) op(B) (k x n)
  GemmOperand a, b, c;
  /// The largest power of two, up to 16, dividing every leading dimension in bytes.
  int alignment_bytes(int input_bytes, int output_bytes) const;
};

/// The layout of `sig` (a gemm signature {m, n, k[, count]}) as PyTorch (or Transformer Engine,
/// for fp8) runs it.
GemmLayout gemm_layout(const sim::OpSignature& sig);

}  // namespace foresight::prof
