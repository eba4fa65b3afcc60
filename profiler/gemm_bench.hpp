#pragma once
/// GEMM signatures timed through cuBLASLt (built with CUDA and cuBLASLt): one cublasLtMatmul at
/// the signature's exact shape and dtype, with the first algorithm cublasLtMatmulAlgoGetHeuristic
/// proposes, as a framework's cuBLASLt path runs it.

#include <cstddef>

#include "profiler/bench_timer.hpp"
#include "profiler/device_buffer.hpp"
#include "exec/op_signature.hpp"

struct cublasLtContext;  // cuBLASLt's handle (cublasLtHandle_t), kept out of this header

namespace foresight::prof {

class GemmBench {
 public:
  /// `compute_capability` is the device's (major * 10 + minor): FP8 needs 89 or more.
  explicit GemmBench(int compute_capability);
  ~GemmBench();
  GemmBench(const GemmBench&) = delete;
  GemmBench& operator=(const GemmBench&) = delete;

  /// A GEMM signature {m, n, k[, count]}: count independent products of an m x n output over k,
  /// laid out as the framework runs them (profiler/gemm_layout.hpp: "tn" forward, "nn" input
  /// gradient, "nt" weight gradient, "tn" for FP8, with the framework's leading dimensions),
  /// batched through CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT and STRIDED_BATCH_OFFSET. Types:
  /// fp32 (compute 32F), tf32 (32F_FAST_TF32), fp16 and bf16 (inputs and output, compute 32F),
  /// fp8 (E4M3 inputs with scale pointers of 1, BF16 output, compute 32F). Inputs are finite
  /// random data. Not measured, with the reason: FP8 below sm_89, a shape no algorithm supports,
  /// too little memory.
  Measurement measure(const sim::OpSignature& s, BenchTimer& timer);

  /// cublasLtGetVersion().
  static std::size_t version();

 private:
  int compute_capability_;
  cublasLtContext* handle_ = nullptr;
  DeviceBuffer workspace_;
  DeviceBuffer scales_;  ///< two floats of 1: FP8's A and B scale factors
};

}  // namespace foresight::prof
