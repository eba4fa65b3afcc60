#pragma once
/// Kernel times measured on a lent GPU (validate/data/kernels/h200_kernel_sweep.json, made by
/// scripts/gpu/kernel_sweep.py) against the analytical compute model (models/compute_model.hpp),
/// one dataset per kernel family so that each family's error is reported on its own:
/// - gemm: torch.matmul, torch.bmm and torch._scaled_mm (FP8) as GEMM signatures {m, n, k, batch};
/// - attention: scaled_dot_product_attention forward (flash_attn_fwd) and forward + backward
///   (flash_attn_fwd + flash_attn_bwd), flops as the model builder counts them;
/// - conv: cuDNN forward (conv_fprop) and backward (conv_dgrad + conv_wgrad);
/// - memory: memory-bound kernels by the bytes they must move.
/// Every row is a prediction case unless the file's "calibration_cases" lists its id.

#include <array>
#include <string>
#include <span>
#include <vector>

#include "exec/op_signature.hpp"
#include "models/compute_model.hpp"
#include "validate/calibration.hpp"

namespace foresight::validate {

enum class KernelFamily : std::uint8_t { gemm, attention, conv, memory };

struct KernelCase {
  std::string id;  ///< e.g. "gemm/bf16/8192x6144x2048/nt"
  KernelFamily family = KernelFamily::gemm;
  /// The kernels the measured call runs (conv backward: dgrad and wgrad; attention forward and
  /// backward: two kernels); the prediction is the sum of their times.
  std::vector<sim::OpSignature> kernels;
  double measured_s = 0.0;
  std::string note;  ///< what was measured, e.g. "torch.bmm (qk)" or "sdpa flash causal"
  /// prediction unless the file's "calibration_cases" names the case (a constant was fitted on it)
  Role role = Role::prediction;
};

struct KernelSweep {
  std::string source;
  std::string gpu;  ///< catalog name
  std::vector<KernelCase> cases;
};

/// Reads the sweep; ConfigError naming file, pointer, expected and found otherwise (unknown
/// families or keys, a catalog GPU missing, non-positive times).
KernelSweep load_kernel_sweep(const std::string& path);

struct KernelResult {
  const KernelCase* c = nullptr;
  double predicted_s = 0.0;
};

/// The analytical compute model's time for every case of `family`.
std::vector<KernelResult> evaluate_kernel_sweep(const KernelSweep& sweep, KernelFamily family);

/// The 16-bit convolution constants (strategy::ConvConstants) solved from the sweep's declared
/// calibration rows, one row per constant (kConvCalibration): each constant is the ratio that
/// makes its row's predicted time equal the measured one, the overhead the measured time less
/// the rest of its row's; solved together by repeating that until nothing moves (they enter
/// each other's rows). ConfigError when a row of kConvCalibration is missing or is not declared
/// a calibration case.
struct ConvCalibrationRow {
  const char* constant;
  double strategy::ConvConstants::*member;  ///< null: the overhead
  const char* case_id;
};
extern const std::array<ConvCalibrationRow, 9> kConvCalibration;
/// The same roles for TF32 convolutions (NCHW) on the H100 sweep: the largest 3x3 (256 -> 256 at
/// 56 x 56) for compute, ResNet-50's 1x1 256 -> 64 at 56 x 56 for memory, its stem, the first
/// depthwise layer (32 channels at 112 x 112) and the smallest regular call.
extern const std::array<ConvCalibrationRow, 9> kConvCalibrationTf32;
strategy::ConvConstants fit_conv_constants(const KernelSweep& sweep,
                                           std::span<const ConvCalibrationRow> rows = kConvCalibration);

/// The Hopper fused-attention constants (strategy::FlashAttentionConstants), fitted on nine
/// declared calibration rows of an attention sweep (kAttentionCalibration: bf16, 16 heads, head
/// dim 128 unless named; the forward or forward-and-backward call): each constant is the value
/// that makes its row's predicted time equal the measured one with the others held (on
/// FlashAttention-2's rows the rate on the longest forward, the head-dim term on the same at head
/// dim 64, the row overheads on the shortest forward and a causal one of 2048, the backward's the
/// same on the calls with their backward; cuDNN's two speedups on its forward and its
/// forward-and-backward of 2048), repeated until nothing moves. ConfigError when a row is missing or is not declared
/// a calibration case.
struct AttentionCalibrationRow {
  const char* constant;
  double strategy::FlashAttentionConstants::*member;
  const char* case_id;
};
extern const std::array<AttentionCalibrationRow, 9> kAttentionCalibration;
strategy::FlashAttentionConstants fit_attention_constants(const KernelSweep& sweep);

/// The FP32 (no TF32) GEMM cap (strategy::ComputeConstants::gemm_cap_fp32) fitted on one declared
/// calibration row, the sweep's largest FP32 GEMM (kFp32GemmCalibration): the cap that makes its
/// predicted time equal the measured one. ConfigError when the row is missing or not declared.
inline constexpr const char* kFp32GemmCalibration = "gemm/fp32/16384x16384x16384/nn";
double fit_fp32_gemm_cap(const KernelSweep& sweep);

}  // namespace foresight::validate
