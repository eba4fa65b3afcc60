#pragma once
/// How long a kernel takes on a GPU. A measured duration from a profile database comes first;
/// otherwise the analytical model of docs/architecture.md:
/// - GEMMs and convolutions (as implicit GEMMs) run at peak x cap x shape efficiency. The shape
///   efficiency is the best, over cuBLAS-like tile shapes, of (wave quantization over the SMs) x
///   (tile quantization of the matrix edges) x (that tile's relative throughput), times a short-K
///   penalty; an output of too few tiles splits its K loop (split-K) when that is faster, paying
///   for the partial sums' traffic. The cap is a measured maximum (gemm_and_memory.json).
///   16-bit and TF32 convolutions on Hopper have measured models of their own (ConvConstants).
/// - Memory-bound kernels move their bytes at the achievable HBM bandwidth (measured copy), off
///   PyTorch's vectorized path and in 16-bit training BatchNorm at measured fractions of it.
/// - Every kernel adds a GPU-side launch gap.
/// The time is the larger of the compute and the memory estimate, plus the launch gap.

#include <array>
#include <optional>
#include <span>

#include "exec/op_signature.hpp"
#include "exec/profile_db.hpp"
#include "common/units.hpp"
#include "topologies/gpu_spec.hpp"

namespace foresight::strategy {

/// cuDNN convolutions in 16 bits (bf16, fp16; channels-last), pass by pass (forward, and the
/// input and weight gradients, which share the backward constants). A pass runs in
///   max(implicit GEMM / compute, its bytes / (achievable HBM x memory)) + overhead,
/// its GEMM as ComputeModel's at factor 1 (forward n.p.q x k x c.r.s; input gradient n.p.q x c x
/// k.r.s, the forward's work, as cuDNN decomposes a strided one; weight gradient k x c.r.s x
/// n.p.q) and its bytes from the shape (the input read as far as the filter touches it: a 1x1
/// stride-2 convolution reads a quarter). A thin convolution (at most 8 channels in or out per
/// group: an RGB stem) runs its implicit GEMM at `thin`; a depthwise one (groups, at most 8
/// channels per group) moves its bytes at `depthwise` of the HBM rate. Each is the ratio that
/// makes one declared calibration row of validate/data/kernels/h200_kernel_sweep.json exact
/// (solved together, as `overhead` enters each); tests/validate/conv_model_test.cpp solves them
/// again from the file.
struct ConvConstants {
  double compute_fprop = 1.0;
  double compute_bwd = 1.0;
  double memory_fprop = 1.0;
  double memory_bwd = 1.0;
  double thin_fprop = 1.0;
  double thin_bwd = 1.0;
  double depthwise_fprop = 1.0;
  double depthwise_bwd = 1.0;
  sim::Time overhead;  ///< per pass: cuDNN's fixed cost beyond the launch gap
};

/// The Hopper values of ConvConstants, fitted on the H200 sweep's declared rows.
ConvConstants hopper_conv_constants();
/// The same terms for TF32 convolutions in PyTorch's default NCHW layout (cuDNN transposes to
/// and from the layout its tensor-core kernels need, and picks other kernels than in 16 bits),
/// fitted on nine declared TF32 rows of the H100 sweep (validate::kConvCalibrationTf32).
ConvConstants hopper_conv_tf32_constants();

/// Fused attention as FlashAttention-2 runs it (PyTorch's SDPA flash backend), by its tiles.
/// Each (batch, head) splits its queries into n = ceil(s_q / 128) row blocks and its keys into
/// m = ceil(s_k / 128) column blocks; a row block computes a 128 x 128 tile per column block it
/// needs (all m; with a causal mask those up to the diagonal, (m + 1) / 2 on average) and pays a
/// fixed cost of its own (loading its queries, rescaling and writing its output and
/// statistics), counted in tiles: row_overhead, or causal_row_overhead with the mask (its
/// diagonal tiles are masked element by element). A tile's time grows with the head dim d as
/// d + head_extra (the softmax and rescaling of a tile do not scale with d): its 4 x 128^2 x d
/// FLOPs run at `rate` of the 16-bit dense peak in the limit of a large d. The backward kernel
/// does 2.5 times the forward's FLOPs per tile (five products against two) at backward_rate of
/// the forward's rate, with row overheads of its own. Each constant makes one declared
/// calibration row of validate/data/kernels/h200_kernel_sweep.json exact (solved together,
/// validate::kAttentionCalibration); tests/validate/attention_model_test.cpp solves them again.
struct FlashAttentionConstants {
  double rate = 1.0;
  /// cuDNN's fused attention (Transformer Engine's FusedAttention, recent PyTorch SDPA on Hopper):
  /// the same tiles, forward and backward at these multiples of FlashAttention-2's rates (Hopper's
  /// wgmma instructions against FA2's Ampere-style mma).
  double cudnn_speedup = 1.0;
  double cudnn_backward_speedup = 1.0;
  double head_extra = 0.0;
  double row_overhead = 0.0;
  double causal_row_overhead = 0.0;
  double backward_rate = 1.0;
  double backward_row_overhead = 0.0;
  double backward_causal_row_overhead = 0.0;
};

/// The Hopper values of FlashAttentionConstants, fitted on the H200 sweep's declared rows.
FlashAttentionConstants hopper_attention_constants();
/// The fused attention kernels (sim::kAttention*, exec/op_signature.hpp) in the strategy's names.
using sim::kAttentionCudnn;
using sim::kAttentionDefault;
using sim::kAttentionFlash2;
using sim::kAttentionOther;

/// ComputeConstants::batchnorm_*: ResNet-18 AMP fp16 at batch 256 (cuDNN) and ResNet-50 AMP
/// bf16 at batch 128 (PyTorch's kernels), both on the H200.
inline constexpr double kBatchnormCudnn16Fwd = 0.5111;
inline constexpr double kBatchnormCudnn16Bwd = 0.5307;
inline constexpr double kBatchnormNativeBf16Fwd = 0.1888;
inline constexpr double kBatchnormNativeBf16Bwd = 0.3441;
/// ComputeConstants::batchnorm_cudnn32: ResNet-50 fp32 at batch 64 (cuDNN's NCHW kernels), H200.
inline constexpr double kBatchnormCudnn32Fwd = 0.3649;
inline constexpr double kBatchnormCudnn32Bwd = 0.2651;
/// Hopper FP32 GEMMs' cap (ComputeConstants::gemm_cap_fp32): validate::fit_fp32_gemm_cap on the
/// H200 kernel sweep (tests/validate/kernel_sweep_test.cpp solves it again).
inline constexpr double kHopperGemmCapFp32 = 0.8130782331;

/// Constants of the analytical model for one GPU architecture, each with its source.
struct ComputeConstants {
  /// Fraction of the dtype's dense peak that the best large GEMM sustains: A100 FP16 cuBLASLt
  /// 16384^3 reaches 256.5 of 312 TFLOP/s (0.822); H100 FP8 32768^3 1382.2 of 1979 (0.698)
  /// (gemm_and_memory.json); V100 cuBLAS on tensor cores 83 of 125 (0.664; Markidis et al.,
  /// IPDPSW 2018). Other architectures take the A100 value (an assumption).
  double gemm_cap = 0.822;
  /// FP32 GEMMs without TF32 (CUDA-core FFMA kernels, not tensor cores) where measured: their
  /// own fraction of the FP32 peak, 0 to take gemm_cap. Hopper: the H200's FP32 16384^3 (the
  /// kernel sweep's declared calibration row, validate::kFp32GemmCalibration), 164.2 ms, 53.6 of
  /// 67 TFLOP/s; the tensor cores' FP8 cap made every large FP32 GEMM 13-16% slow on both Hopper
  /// GPUs.
  double gemm_cap_fp32 = 0.0;
  /// cuDNN implicit-GEMM convolutions relative to a cuBLAS GEMM of the same size: 0.85, an
  /// assumption (NCHW tensors need layout transforms for tensor cores). Not for 16-bit ones
  /// where conv16 is measured.
  double conv_factor = 0.85;
  /// Achievable fraction of HBM bandwidth: STREAM copy 1.61 of 2.039 TB/s on A100 80 GB (0.79),
  /// 2.90 of 3.35 TB/s on H100 (0.866) (gemm_and_memory.json).
  double hbm_fraction = 0.79;
  /// Fused attention: FlashAttention-2 reaches 179.5 of 312 TFLOP/s on A100 (0.575) and 327.9
  /// of 989.4 on H100 (0.331) (gemm_and_memory.json).
  double attention_cap = 0.575;
  /// GEMMs whose operands' leading dimensions are not 16-byte aligned. Hopper's fast kernels
  /// (TMA loads, wgmma) need 16-byte aligned rows; cuBLAS otherwise runs older kernels with 8-,
  /// 4- or 2-byte loads. The factor scales the aligned rate: 1 where not measured. Fitted on two
  /// declared calibration rows of validate/data/kernels/h100_gemm_align.json (bf16 4096 x 4097 x
  /// 4096 and 4096 x 4098 x 4096 against the aligned 4096 cube); the other 196 rows are predictions.
  double unaligned_4_8_byte = 1.0;  ///< leading dimensions aligned to 4 or 8 bytes, not 16
  double unaligned_1_2_byte = 1.0;  ///< aligned to 1 or 2 bytes only (an odd 16-bit edge)
  /// Memory-bound kernels off PyTorch's vectorized path (sim::MemoryPath) move their bytes at
  /// these fractions of the vectorized rate: the achieved bandwidth of each path's kernels over
  /// the vectorized kernels' (4.35 TB/s) in one declared calibration case, the H200 trace of
  /// GPT-2 AMP bf16 at batch 8 (validate/data/h200_single_gpu_steps; kernels of 10 us or more,
  /// bytes from their recorded shapes and dtypes): 236 cast kernels at 2.29 TB/s, the broadcast
  /// position add at 2.6, 48 transposing gradient copies at 1.26, 48 strided cats at 0.60.
  /// Their SMs hold these kernels back, not HBM (scalar loads, a cast or an offset per element):
  /// on GPUs of the H200's architecture they scale with the SMs as BatchNorm's do
  /// (held_rate_per_flop); other architectures take the same fractions of their own vectorized
  /// rate (an assumption: nothing of these paths was measured on them).
  std::array<double, sim::kMemoryPathCount> memory_path_factor{1.0, 2.29 / 4.35, 2.6 / 4.35, 1.26 / 4.35,
                                                              0.60 / 4.35, 1.0, 1.0};
  /// Training BatchNorm (MemoryPath::batchnorm_fwd and _bwd; other dtypes than bf16, fp16 and
  /// fp32 take memory_path_factor, 1): the bandwidth its kernels reach, over the vectorized
  /// kernels' 4.35 TB/s, forward and backward, for the model's bytes (forward 2, backward 3
  /// elements per activation element). PyTorch runs fp16 BatchNorm through cuDNN
  /// (batchnorm_fwtr/bwtr_nhwc_semiPersist) and bf16 through its own channels-last kernels: a
  /// per-channel statistics reduction at a fraction of HBM speed, then the normalization;
  /// backward a reduction and an elementwise pass. Each from one declared calibration case of
  /// validate/data/h200_single_gpu_steps, its Kineto trace (kBatchnorm* below;
  /// tests/validate/gpu_steps_test.cpp derives them again).
  std::array<double, 2> batchnorm_cudnn16{kBatchnormCudnn16Fwd, kBatchnormCudnn16Bwd};
  std::array<double, 2> batchnorm_native_bf16{kBatchnormNativeBf16Fwd, kBatchnormNativeBf16Bwd};
  /// FP32 BatchNorm, NCHW: cuDNN's bn_fw_tr_1C11 and bn_bw_1C11 kernels, as the others.
  std::array<double, 2> batchnorm_cudnn32{kBatchnormCudnn32Fwd, kBatchnormCudnn32Bwd};
  /// Where the memory-path and BatchNorm factors scale on GPUs of the calibration GPU's
  /// architecture, in bytes/s per FP32 FLOP/s. BatchNorm's kernels are reductions that reach 19-53%
  /// of the H200's vectorized rate, the other paths' kernels 14-60% of it: their SMs hold them
  /// back, not HBM. On a GPU of the same SM design their
  /// rate is the H200's times the SM throughput (SMs x clock, to which the FP32 peak is
  /// proportional within an architecture), never above the GPU's own vectorized rate: the same
  /// on an H100 SXM as on the H200 (132 SMs at 1.98 GHz both), 76% of it on an H100 PCIe. Set
  /// for Hopper: the H200's vectorized rate over its FP32 peak. 0 elsewhere (A100, V100,
  /// Blackwell: none of these kernels measured): the factors scale with HBM, an assumption.
  double held_rate_per_flop = 0.0;
  /// GPU-side time every kernel adds (launch and teardown between back-to-back kernels): 2 us,
  /// an assumption (the host-side launch, ~4-6 us, is the strategy's dispatch cost).
  sim::Time launch_gap = sim::Time::from_ps(2'000'000);
  /// Short-K penalty K / (K + k0): a GEMM's main loop has a prologue and epilogue of about one
  /// 32-deep k-tile (assumption).
  double k0 = 32.0;
  /// While a collective's kernel runs on the same GPU, a kernel progresses at 1 / (1 + its
  /// family's slowdown): NCCL's CTAs hold SMs (a resident CTA stalls a tile schedule sized to
  /// every SM) and share HBM. Measured on an H100 and an H200 beside an emulated NCCL kernel
  /// (validate/data/comm_compute_overlap): the median over both GPUs' rows at NCCL's two DGX
  /// H100 operating points (docs/models.md). 0 elsewhere: not measured.
  double comm_slowdown_gemm = 0.0;
  double comm_slowdown_conv = 0.0;  ///< forward, input and weight gradients alike
  double comm_slowdown_attention = 0.0;
  double comm_slowdown_memory = 0.0;
  /// A GEMM holds every SM until it ends: a collective launched meanwhile becomes resident when
  /// the running GEMM ends (H100 and H200: within one GEMM's duration, never behind the GEMMs
  /// queued after it; validate/data/comm_compute_overlap/h1?0-launch-wait.jsonl). False
  /// elsewhere: not measured.
  bool comm_waits_for_gemm = false;
  /// 16-bit (bf16, fp16) channels-last convolutions as cuDNN runs them, where measured
  /// (ConvConstants; Hopper). Absent: implicit GEMMs at conv_factor, thin ones memory-bound.
  std::optional<ConvConstants> conv16;
  /// TF32 convolutions (fp32 ones with TF32 allowed, NCHW) where measured (Hopper). Absent: the
  /// implicit GEMM at conv_factor of the TF32 rate.
  std::optional<ConvConstants> conv_tf32;
  /// Fused attention by FlashAttention-2's tiles, where measured (FlashAttentionConstants;
  /// Hopper). Absent: its FLOPs at attention_cap, whatever the shape.
  std::optional<FlashAttentionConstants> flash_attention;
};

/// The Hopper (H100 and H200) values of ComputeConstants::comm_slowdown_*;
/// tests/run/comm_contention_test.cpp derives them again from the measured files.
inline constexpr double kHopperCommSlowdownGemm = 0.358;       // 24 rows: cuBLAS and torch matmul
inline constexpr double kHopperCommSlowdownConv = 0.357;       // 16 rows: cuDNN, channels-last bf16
inline constexpr double kHopperCommSlowdownAttention = 0.162;  // 8 rows: FlashAttention fwd and bwd
inline constexpr double kHopperCommSlowdownMemory = 0.244;     // 8 rows: axpy and LayerNorm

/// The slowdown per kernel family (sim::OpType) while a collective runs: the executor's
/// ExecutorOptions::comm_compute_slowdown_by_type.
std::array<double, sim::kOpTypeCount> comm_slowdown_by_type(const ComputeConstants& c);
/// The families whose running kernels a collective waits for: ExecutorOptions::comm_waits_for.
std::array<bool, sim::kOpTypeCount> comm_waits_by_type(const ComputeConstants& c);

/// The Hopper values of ComputeConstants::unaligned_*: measured rate over the aligned cube's.
inline constexpr double kHopperUnaligned48Byte = 277.5 / 769.0;  // bf16 4096 x 4098 x 4096, nn
inline constexpr double kHopperUnaligned12Byte = 124.3 / 769.0;  // bf16 4096 x 4097 x 4096, nn

/// The byte alignment of a GEMM's operand rows, from its shape {m, n, k[, count]}: the largest
/// power of two up to 16 dividing every leading dimension times the element size. The leading
/// dimensions are the two edges other than the one that scales with the batch (batch_axis 0: n
/// and k, as PyTorch's forward (NT) and input-gradient (NN) GEMMs store them; 2: m and n, the
/// weight gradient's (TN)); any other batch axis takes n and k (a row-major matmul).
int gemm_row_alignment_bytes(const sim::OpSignature& sig);

/// The constants for `gpu`'s architecture.
ComputeConstants compute_constants(const topo::GpuSpec& gpu);

/// The HBM bandwidth memory-bound kernels reach on `gpu`: peak x hbm_fraction.
sim::Bandwidth achievable_hbm_bandwidth(const topo::GpuSpec& gpu);

/// The relative throughput of the tile shapes cuBLAS chooses among, largest first: 256x128 and
/// 128x256 1.0; 128x128, 256x64 and 64x256 0.92; 128x64 and 64x128 0.82; 64x64 0.62. An
/// assumption from CUTLASS profiler results on A100 (smaller tiles reuse less data per SM).
struct TileShape {
  int m;
  int n;
  double throughput;
};
std::span<const TileShape> gemm_tiles();

class ComputeModel {
 public:
  /// `profiles` (may be null) must have been measured on `gpu` (ConfigError otherwise).
  explicit ComputeModel(const topo::GpuSpec& gpu, const sim::ProfileDb* profiles = nullptr);

  /// The kernel's duration: profiled when the database has its key, else analytical. A
  /// memory-bound entry timed as a copy (sim::MemoryTiming::copy) is carried to the kernel's code
  /// path: times copy_to_kernel(sig).
  sim::Time duration(const sim::OpSignature& sig) const;
  /// How much longer a memory-bound kernel takes than a vectorized copy of the same bytes: its
  /// path's factor and BatchNorm's (1 for a vectorized kernel; 1 for other kernel types).
  double copy_to_kernel(const sim::OpSignature& sig) const;
  /// The analytical estimate alone.
  sim::Time analytical(const sim::OpSignature& sig) const;
  /// Whether the profile database covers `sig`.
  bool profiled(const sim::OpSignature& sig) const;
  /// Shape efficiency of `count` m x n x k GEMMs (without the cap): tiles, waves, short K.
  double gemm_shape_efficiency(double m, double n, double k, double count) const;
  /// The same with the K loop split into `split` slices run as separate tiles (split-K): waves
  /// over tiles x split, the short-K penalty on k / split.
  double gemm_split_efficiency(double m, double n, double k, double count, int split) const;
  /// One convolution pass by ConvConstants' terms, for calibration: its kind, its
  /// implicit GEMM's time at factor 1 (thin: the same GEMM) and its bytes.
  struct ConvPass {
    enum class Kind { regular, thin, depthwise } kind = Kind::regular;
    bool forward = true;
    double gemm_s = 0.0;
    double bytes = 0.0;
  };
  ConvPass conv_pass(const sim::OpSignature& sig) const;
  /// The pass's time under `c` (the launch gap not included).
  double conv_seconds(const ConvPass& pass, const ConvConstants& c) const;
  /// A fused attention kernel's time under `k` (flash_attn_fwd or flash_attn_bwd; shape {batch x
  /// heads, s_q, s_k, head dim, causal[, kernel]}), the launch gap not included.
  double attention_seconds(const sim::OpSignature& sig, const FlashAttentionConstants& k) const;
  /// Dense peak for a data type (tf32 without tensor cores falls back to fp32, bf16 to fp16 and
  /// fp8 to fp16 where the GPU lacks them).
  sim::FlopRate peak(sim::DType dtype) const;
  const topo::GpuSpec& gpu() const noexcept { return gpu_; }
  const ComputeConstants& constants() const noexcept { return c_; }

 private:
  double gemm_seconds(double m, double n, double k, double count, sim::DType dtype, double factor) const;
  /// Seconds to move `bytes` on `path`; a kernel held back by its SMs at its path's factor times
  /// `sm_bound` (BatchNorm's factor), below 1, of the calibration GPU's rate scales as
  /// held_rate_per_flop says.
  double memory_seconds(double bytes, sim::MemoryPath path = sim::MemoryPath::vectorized,
                        double sm_bound = 1.0) const;
  /// BatchNorm's factor for `sig` (ComputeConstants::batchnorm_*), 1 for anything else.
  double batchnorm_factor(const sim::OpSignature& sig) const;

  const topo::GpuSpec& gpu_;
  ComputeConstants c_;
  const sim::ProfileDb* profiles_;
};

}  // namespace foresight::strategy
