#include "profiler/gemm_bench.hpp"

#include <cublasLt.h>
#include <fmt/format.h>

#include <optional>

#include "profiler/detail/cuda_check.hpp"
#include "profiler/detail/owned.hpp"
#include "profiler/gemm_layout.hpp"

namespace foresight::prof {
namespace {

/// The workspace a matmul may use: cuBLAS recommends at least 32 MiB on Hopper, 4 MiB before
/// (cuBLAS documentation, cublasSetWorkspace).
constexpr std::size_t kWorkspaceBytes = 32u << 20;

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    throw sim::Error(fmt::format("{}: cuBLASLt status {} ({})", what, static_cast<int>(s), cublasLtGetStatusString(s)));
  }
}

struct GemmTypes {
  cudaDataType_t inputs = CUDA_R_32F;  ///< A and B
  cudaDataType_t output = CUDA_R_32F;  ///< C and D
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  int input_bytes = 4;
  int output_bytes = 4;
};

GemmTypes types_of(sim::DType d) {
  switch (d) {
    case sim::DType::fp32: return {};
    case sim::DType::tf32: return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 4};
    case sim::DType::fp16: return {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, 2};
    case sim::DType::bf16: return {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2};
    case sim::DType::fp8: return {CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 1, 2};
  }
  return {};
}

using detail::Owned;
using MatmulDesc = Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using Layout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using Preference = Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

template <typename V>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const V& v) {
  check(cublasLtMatmulDescSetAttribute(d, a, &v, sizeof v), "cublasLtMatmulDescSetAttribute");
}

/// A column-major rows x cols matrix, `count` of them `rows * cols` elements apart.
Layout layout(cudaDataType_t type, std::uint64_t rows, std::uint64_t cols, std::int32_t count) {
  cublasLtMatrixLayout_t l = nullptr;
  check(cublasLtMatrixLayoutCreate(&l, type, rows, cols, static_cast<std::int64_t>(rows)), "cublasLtMatrixLayoutCreate");
  Layout owned(l);
  const auto stride = static_cast<std::int64_t>(rows * cols);
  check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
        "cublasLtMatrixLayoutSetAttribute (batch count)");
  check(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
        "cublasLtMatrixLayoutSetAttribute (batch stride)");
  return owned;
}

}  // namespace

GemmBench::GemmBench(int compute_capability) : compute_capability_(compute_capability) {
  check(cublasLtCreate(&handle_), "cublasLtCreate");
  std::optional<DeviceBuffer> w = DeviceBuffer::allocate(kWorkspaceBytes);
  std::optional<DeviceBuffer> s = DeviceBuffer::allocate(2 * sizeof(float));
  if (!w || !s) {
    cublasLtDestroy(handle_);
    throw sim::Error("cuBLASLt workspace: out of GPU memory");
  }
  workspace_ = std::move(*w);
  scales_ = std::move(*s);
  const float ones[2] = {1.0f, 1.0f};
  detail::check_cuda(cudaMemcpy(scales_.get(), ones, sizeof ones, cudaMemcpyHostToDevice), "cudaMemcpy (FP8 scales)");
}

GemmBench::~GemmBench() { cublasLtDestroy(handle_); }

std::size_t GemmBench::version() { return cublasLtGetVersion(); }

Measurement GemmBench::measure(const sim::OpSignature& s, BenchTimer& timer) {
  if (s.shape.size() < 3) return Measurement::skipped("GEMM shape without m, n, k");
  if (s.dtype == sim::DType::fp8 && compute_capability_ < 89) return Measurement::skipped("FP8 needs sm_89 or newer");
  const GemmTypes t = types_of(s.dtype);
  const GemmLayout l = gemm_layout(s);
  const std::uint64_t m = l.m, n = l.n, k = l.k;
  const auto count = static_cast<std::int32_t>(s.shape.size() > 3 ? s.shape[3] : 1);
  if (m == 0 || n == 0 || k == 0 || count < 1) return Measurement::skipped("empty GEMM");

  cublasLtMatmulDesc_t raw = nullptr;
  check(cublasLtMatmulDescCreate(&raw, t.compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const MatmulDesc op(raw);
  set(raw, CUBLASLT_MATMUL_DESC_TRANSA, l.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
  set(raw, CUBLASLT_MATMUL_DESC_TRANSB, l.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
  if (s.dtype == sim::DType::fp8) {
    // Per-tensor scales, as an FP8 training recipe passes them (1 here: the time does not
    // depend on the value).
    const void* a_scale = scales_.get();
    const void* b_scale = static_cast<const float*>(scales_.get()) + 1;
    set(raw, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scale);
    set(raw, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scale);
  }
  // As the framework stores them (profiler/gemm_layout.hpp); C = D.
  const Layout a = layout(t.inputs, l.a.rows, l.a.cols, count), b = layout(t.inputs, l.b.rows, l.b.cols, count),
               c = layout(t.output, l.c.rows, l.c.cols, count);

  cublasLtMatmulPreference_t raw_pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&raw_pref), "cublasLtMatmulPreferenceCreate");
  const Preference pref(raw_pref);
  const std::uint64_t workspace_limit = workspace_.bytes();
  check(cublasLtMatmulPreferenceSetAttribute(raw_pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_limit,
                                             sizeof workspace_limit),
        "cublasLtMatmulPreferenceSetAttribute");
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  const cublasStatus_t hs =
      cublasLtMatmulAlgoGetHeuristic(handle_, raw, a.get(), b.get(), c.get(), c.get(), raw_pref, 1, &heuristic, &found);
  if (hs == CUBLAS_STATUS_NOT_SUPPORTED || (hs == CUBLAS_STATUS_SUCCESS && found == 0)) {
    return Measurement::skipped("no cuBLASLt algorithm for this shape and dtype");
  }
  check(hs, "cublasLtMatmulAlgoGetHeuristic");

  const auto elems = [&](std::uint64_t rows, std::uint64_t cols) { return rows * cols * static_cast<std::uint64_t>(count); };
  std::optional<DeviceBuffer> da = DeviceBuffer::allocate(elems(l.a.rows, l.a.cols) * t.input_bytes);
  std::optional<DeviceBuffer> db = DeviceBuffer::allocate(elems(l.b.rows, l.b.cols) * t.input_bytes);
  std::optional<DeviceBuffer> dc = DeviceBuffer::allocate(elems(l.c.rows, l.c.cols) * t.output_bytes);
  if (!da || !db || !dc) return Measurement::skipped("out of GPU memory");
  da->fill_finite(t.input_bytes, 1);
  db->fill_finite(t.input_bytes, 2);
  const float alpha = 1.0f, beta = 0.0f;
  return timer.time([&] {
    // beta = 0: C is not read; D is written in place of it.
    check(cublasLtMatmul(handle_, raw, &alpha, da->get(), a.get(), db->get(), b.get(), &beta, dc->get(), c.get(),
                         dc->get(), c.get(), &heuristic.algo, workspace_.get(), heuristic.workspaceSize, nullptr),
          "cublasLtMatmul");
  });
}

}  // namespace foresight::prof
