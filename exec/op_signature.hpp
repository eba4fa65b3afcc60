#pragma once
/// What a GPU kernel is, precisely enough to cost it: its type, data type and shape. The compute
/// model turns a signature into a duration (a measured profile first, else an analytical model);
/// the profile database is keyed by it.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace foresight::sim {

/// Kernel families the compute model costs differently.
enum class OpType : std::uint8_t {
  gemm,         ///< shape {m, n, k, count}: count independent m x n x k products (batched GEMM)
  conv_fprop,   ///< shape {n, c, h, w, k, r, s, stride, pad, groups}: input n x c x h x w, k filters r x s
  conv_dgrad,   ///< same shape as its forward; computes the input gradient
  conv_wgrad,   ///< same shape as its forward; computes the filter gradient
  attention,    ///< fused (FlashAttention-style) attention, shape {batch*heads, seq_q, seq_k, head_dim, causal[, kernel]}
  memory,       ///< memory-bound: elementwise, normalization, softmax, pooling, loss, optimizer, copies
};
inline constexpr int kOpTypeCount = 6;
std::string_view to_string(OpType t);
/// Inverse of to_string(OpType); ConfigError naming `where` otherwise.
OpType parse_op_type(std::string_view text, std::string_view where);

/// Element types. tf32 is fp32 storage computed on TF32 tensor cores.
enum class DType : std::uint8_t { fp32, tf32, fp16, bf16, fp8 };
inline constexpr int kDTypeCount = 5;
std::string_view to_string(DType d);
DType parse_dtype(std::string_view text, std::string_view where);
/// Bytes per element (tf32: 4).
int dtype_bytes(DType d);

/// How a memory-bound kernel reaches memory: PyTorch's TensorIterator picks its code path from the
/// operands (aten/src/ATen/native/cuda/Loops.cuh, CUDALoops.cuh), and the paths differ in speed.
enum class MemoryPath : std::uint8_t {
  vectorized,   ///< contiguous operands of one dtype: vector loads (vectorized_elementwise_kernel);
                ///< also every fused or library kernel
  cast,         ///< operands of different dtypes: scalar loads with a dynamic cast per element
                ///< (unrolled_elementwise_kernel)
  broadcast,    ///< operands in one layout other than contiguous, or broadcast: an offset
                ///< calculation per element, sequential accesses (elementwise_kernel)
  strided,      ///< a layout change (a transposing copy, a permuted view): elementwise_kernel
                ///< with scattered accesses
  strided_cat,  ///< torch.cat of non-contiguous inputs (CatArrayBatchedCopy, not vectorized)
  batchnorm_fwd,  ///< training BatchNorm forward: statistics and normalization (cuDNN's or PyTorch's)
  batchnorm_bwd,  ///< training BatchNorm backward
};
inline constexpr int kMemoryPathCount = 7;

/// Which kernel a fused attention op runs (shape[5] of an attention OpSignature; absent: 0): the
/// GPU's default (cuDNN's on Hopper), FlashAttention-2, cuDNN's, or another (SDPA's
/// memory-efficient or math kernels, which the compute model's tiles do not describe).
inline constexpr std::int64_t kAttentionDefault = 0;
inline constexpr std::int64_t kAttentionFlash2 = 1;
inline constexpr std::int64_t kAttentionCudnn = 2;
inline constexpr std::int64_t kAttentionOther = 3;

struct OpSignature {
  OpType type = OpType::memory;
  DType dtype = DType::fp32;
  /// What the kernel does: "conv2d", "batchnorm_fwd", "relu", "sgd_step", "linear_fwd"...
  std::string kernel;
  /// Type-specific dimensions (see OpType).
  std::vector<std::int64_t> shape;
  /// The dimension that scales with the micro-batch, along which a profile interpolates: n for
  /// convolutions, m (rows: tokens or samples) for forward and input-gradient GEMMs, k for
  /// weight-gradient GEMMs, the count for per-sample batched GEMMs (attention heads x batch).
  std::uint8_t batch_axis = 0;
  double flops = 0.0;  ///< floating-point operations (a multiply-add is 2)
  double bytes = 0.0;  ///< bytes read plus written in HBM
  /// A memory-bound kernel's code path (not part of the key: the kernel name tells them apart).
  MemoryPath path = MemoryPath::vectorized;

  /// Canonical text of everything but the batch dimension ("conv2d tf32 _x64x32x32x64x3x3x1x1x1"):
  /// the profile database's key.
  std::string key() const;
  /// shape[batch_axis], or 1 when the shape has no such dimension.
  std::int64_t batch() const { return batch_axis < shape.size() ? shape[batch_axis] : 1; }
};

}  // namespace foresight::sim
