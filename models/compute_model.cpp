#include "models/compute_model.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

#include "common/error.hpp"

namespace foresight::strategy {
namespace {

constexpr std::array kTiles{
    TileShape{256, 128, 1.0},  TileShape{128, 256, 1.0},  TileShape{128, 128, 0.92}, TileShape{256, 64, 0.92},
    TileShape{64, 256, 0.92},  TileShape{128, 64, 0.82},  TileShape{64, 128, 0.82},  TileShape{64, 64, 0.62},
};

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

double dim(const sim::OpSignature& s, std::size_t i) {
  if (i >= s.shape.size()) {
    throw sim::InternalError(fmt::format("kernel {}: shape has {} dimensions, {} needed", s.key(), s.shape.size(), i + 1));
  }
  return static_cast<double>(s.shape[i]);
}

}  // namespace

std::span<const TileShape> gemm_tiles() { return kTiles; }

ConvConstants hopper_conv_constants() {
  // Solved from the nine declared rows of validate/data/kernels/h200_kernel_sweep.json
  // (validate::kConvCalibration; tests/validate/conv_model_test.cpp solves them again).
  ConvConstants c;
  c.compute_fprop = 1.24597;  // VGG-19 512 -> 512 at 28 x 28: cuDNN above the model's GEMM cap
  c.compute_bwd = 1.32223;
  c.memory_fprop = 1.04669;  // ResNet-50 1x1 256 -> 64 at 56 x 56: the HBM copy rate
  c.memory_bwd = 0.80344;
  c.thin_fprop = 0.0657646;  // ResNet-50's 7x7 stem on 3 channels: a fifteenth of the GEMM rate
  c.thin_bwd = 0.512496;
  c.depthwise_fprop = 0.537966;  // MobileNetV2 depthwise 3x3 on 144 channels
  c.depthwise_bwd = 0.365326;
  c.overhead = sim::Time::from_ps(6'890'363);  // the smallest call, a 1x1 stride-2 at 16 x 16
  return c;
}

ConvConstants hopper_conv_tf32_constants() {
  // Solved from the nine declared TF32 rows of validate/data/kernels/h100_kernel_sweep.json
  // (validate::kConvCalibrationTf32; tests/validate/conv_model_test.cpp solves them again).
  ConvConstants c;
  c.compute_fprop = 0.861477;  // 3x3 256 -> 256 at 56 x 56: the implicit GEMM at 86% of the TF32 rate
  c.compute_bwd = 0.637614;
  c.memory_fprop = 1.48527;  // ResNet-50 1x1 256 -> 64 at 56 x 56
  c.memory_bwd = 1.31618;
  c.thin_fprop = 0.0960429;  // ResNet-50's 7x7 stem on 3 channels
  c.thin_bwd = 0.743562;
  c.depthwise_fprop = 0.351071;  // depthwise 3x3 on 32 channels at 112 x 112
  c.depthwise_bwd = 0.162249;
  c.overhead = sim::Time::from_ps(34'485'211);  // the smallest call, 3x3 128 -> 128 at 16 x 16
  return c;
}

FlashAttentionConstants hopper_attention_constants() {
  // Solved from the nine declared rows of validate/data/kernels/h200_kernel_sweep.json
  // (validate::kAttentionCalibration; tests/validate/attention_model_test.cpp solves them again).
  FlashAttentionConstants k;
  k.rate = 0.42089507;                   // the longest forward: 416 of 989 TFLOP/s for a large head dim
  k.head_extra = 21.5454697;             // head dim 64 against 128: a tile's softmax is 22 dims' work
  k.row_overhead = 0.941619809;          // one query block of 128: a tile's work again
  k.causal_row_overhead = 2.39982744;    // masked: 2.4 tiles per query block
  k.backward_rate = 0.886460606;         // the backward's FLOPs 11% slower than the forward's
  k.backward_row_overhead = 3.16294079;  // its per-block cost: dQ accumulated, dK and dV written
  k.backward_causal_row_overhead = 2.77679345;
  k.cudnn_speedup = 1.95966275;           // cuDNN's forward: twice FlashAttention-2's rate
  k.cudnn_backward_speedup = 1.98425472;  // and its backward
  return k;
}

ComputeConstants compute_constants(const topo::GpuSpec& gpu) {
  ComputeConstants c;
  if (gpu.compute_capability >= 90) {
    // Fitted on H100; Blackwell (sm100) takes them too, unmeasured (docs/limitations.md).
    c.gemm_cap = 1382.2 / 1979.0;
    c.hbm_fraction = 2.90 / 3.35;
    c.attention_cap = 327.9 / 989.4;
    if (gpu.compute_capability == 90) {  // measured on H100 and H200; not on Blackwell
      c.gemm_cap_fp32 = kHopperGemmCapFp32;
      c.comm_slowdown_gemm = kHopperCommSlowdownGemm;
      c.comm_slowdown_conv = kHopperCommSlowdownConv;
      c.comm_slowdown_attention = kHopperCommSlowdownAttention;
      c.comm_slowdown_memory = kHopperCommSlowdownMemory;
      c.comm_waits_for_gemm = true;
      c.unaligned_4_8_byte = kHopperUnaligned48Byte;
      c.unaligned_1_2_byte = kHopperUnaligned12Byte;
      c.conv16 = hopper_conv_constants();
      c.conv_tf32 = hopper_conv_tf32_constants();
      c.flash_attention = hopper_attention_constants();
      // The BatchNorm factors were measured on the H200 (4.8 TB/s, 67 TFLOP/s FP32).
      c.held_rate_per_flop = 4.8e12 * c.hbm_fraction / 67.0e12;
    }
  } else {
    c.gemm_cap = 256.5 / 312.0;
    c.hbm_fraction = 1.61 / 2.039;
    c.attention_cap = 179.5 / 312.0;
    // Volta: cuBLAS GEMMs on a Tesla V100's tensor cores reach 83 of 125 TFLOP/s in mixed
    // precision (Markidis et al., IPDPSW 2018, doi:10.1109/IPDPSW.2018.00091).
    if (gpu.compute_capability == 70) c.gemm_cap = 83.0 / 125.0;
  }
  return c;
}

int gemm_row_alignment_bytes(const sim::OpSignature& sig) {
  const std::size_t skip = sig.batch_axis == 2 ? 2 : 0;  // the edge that is not a leading dimension
  const auto elem = static_cast<std::int64_t>(sim::dtype_bytes(sig.dtype));
  int align = 16;
  for (std::size_t i = 0; i < 3 && i < sig.shape.size(); ++i) {
    if (i == skip) continue;
    const std::int64_t bytes = sig.shape[i] * elem;
    if (bytes <= 0) continue;
    align = std::min<std::int64_t>(align, bytes & -bytes);  // the lowest set bit: largest power of two
  }
  return align;
}

std::array<double, sim::kOpTypeCount> comm_slowdown_by_type(const ComputeConstants& c) {
  std::array<double, sim::kOpTypeCount> out{};
  const auto set = [&](sim::OpType t, double f) { out[static_cast<std::size_t>(t)] = f; };
  set(sim::OpType::gemm, c.comm_slowdown_gemm);
  set(sim::OpType::conv_fprop, c.comm_slowdown_conv);
  set(sim::OpType::conv_dgrad, c.comm_slowdown_conv);
  set(sim::OpType::conv_wgrad, c.comm_slowdown_conv);
  set(sim::OpType::attention, c.comm_slowdown_attention);
  set(sim::OpType::memory, c.comm_slowdown_memory);
  return out;
}

std::array<bool, sim::kOpTypeCount> comm_waits_by_type(const ComputeConstants& c) {
  std::array<bool, sim::kOpTypeCount> out{};
  out[static_cast<std::size_t>(sim::OpType::gemm)] = c.comm_waits_for_gemm;
  return out;
}

sim::Bandwidth achievable_hbm_bandwidth(const topo::GpuSpec& gpu) {
  return gpu.memory_bandwidth * compute_constants(gpu).hbm_fraction;
}

ComputeModel::ComputeModel(const topo::GpuSpec& gpu, const sim::ProfileDb* profiles)
    : gpu_(gpu), c_(compute_constants(gpu)), profiles_(profiles) {
  if (profiles_ != nullptr && profiles_->size() > 0 && !same_name(profiles_->gpu, gpu.name)) {
    throw sim::ConfigError(fmt::format("the profile database was measured on {} but the cluster's GPUs are {}",
                                       profiles_->gpu, gpu.name));
  }
}

sim::FlopRate ComputeModel::peak(sim::DType dtype) const {
  const auto fallback = [](sim::FlopRate r, sim::FlopRate f) { return r.per_second() > 0.0 ? r : f; };
  switch (dtype) {
    case sim::DType::fp32:
      return gpu_.fp32;
    case sim::DType::tf32:
      return fallback(gpu_.tf32, gpu_.fp32);
    case sim::DType::fp16:
      return gpu_.fp16;
    case sim::DType::bf16:
      return fallback(gpu_.bf16, gpu_.fp16);
    case sim::DType::fp8:
      return fallback(gpu_.fp8, gpu_.fp16);
  }
  return gpu_.fp32;
}

double ComputeModel::gemm_shape_efficiency(double m, double n, double k, double count) const {
  return gemm_split_efficiency(m, n, k, count, 1);
}

double ComputeModel::gemm_split_efficiency(double m, double n, double k, double count, int split) const {
  const double sms = gpu_.sm_count;
  const double slice = k / split;
  double best = 0.0;
  for (const TileShape& t : kTiles) {
    const double tm = std::ceil(m / t.m);
    const double tn = std::ceil(n / t.n);
    const double tiles = tm * tn * count * split;
    const double waves = std::ceil(tiles / sms);
    const double wave_eff = tiles / (waves * sms);
    const double tile_eff = (m * n) / (tm * t.m * tn * t.n);
    best = std::max(best, wave_eff * tile_eff * t.throughput);
  }
  return best * slice / (slice + c_.k0);
}

double ComputeModel::batchnorm_factor(const sim::OpSignature& sig) const {
  if (sig.type != sim::OpType::memory) return 1.0;
  const bool fwd = sig.path == sim::MemoryPath::batchnorm_fwd;
  if (!fwd && sig.path != sim::MemoryPath::batchnorm_bwd) return 1.0;
  if (sig.dtype == sim::DType::bf16) return c_.batchnorm_native_bf16[fwd ? 0 : 1];
  if (sig.dtype == sim::DType::fp16) return c_.batchnorm_cudnn16[fwd ? 0 : 1];
  if (sig.dtype == sim::DType::fp32) return c_.batchnorm_cudnn32[fwd ? 0 : 1];
  return 1.0;
}

double ComputeModel::memory_seconds(double bytes, sim::MemoryPath path, double sm_bound) const {
  const double vectorized = (gpu_.memory_bandwidth * c_.hbm_fraction).bytes_per_second();
  const double path_factor = c_.memory_path_factor[static_cast<std::size_t>(path)];
  const double rate = vectorized * path_factor;
  const double held = path_factor * sm_bound;
  if (held >= 1.0 || c_.held_rate_per_flop <= 0.0) return bytes / rate / sm_bound;
  return bytes / std::min(vectorized, held * c_.held_rate_per_flop * gpu_.fp32.per_second());
}

double ComputeModel::gemm_seconds(double m, double n, double k, double count, sim::DType dtype,
                                  double factor) const {
  if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return 0.0;
  const double flops = 2.0 * m * n * k * count;
  const double cap = dtype == sim::DType::fp32 && c_.gemm_cap_fp32 > 0.0 ? c_.gemm_cap_fp32 : c_.gemm_cap;
  const double rate = peak(dtype).per_second() * cap * factor;
  // Split-K: where the output's tiles leave SMs idle, cuBLAS and cuDNN split the K loop into
  // slices (CTAs computing partial products) and add the partials: each split writes and reads
  // back an fp32 m x n partial. The fastest split wins, in powers of two up to kMaxSplit, each
  // slice at least kMinSlice deep.
  constexpr int kMaxSplit = 64;
  constexpr double kMinSlice = 256.0;
  double best = flops / (rate * gemm_split_efficiency(m, n, k, count, 1));
  for (int split = 2; split <= kMaxSplit && k / split >= kMinSlice; split *= 2) {
    const double reduce = memory_seconds(2.0 * split * m * n * count * 4.0);
    best = std::min(best, flops / (rate * gemm_split_efficiency(m, n, k, count, split)) + reduce);
  }
  return best;
}

ComputeModel::ConvPass ComputeModel::conv_pass(const sim::OpSignature& sig) const {
  const double n = dim(sig, 0), c = dim(sig, 1), h = dim(sig, 2), w = dim(sig, 3), kf = dim(sig, 4);
  const double r = dim(sig, 5), s = dim(sig, 6), stride = dim(sig, 7), pad = dim(sig, 8), g = dim(sig, 9);
  const double p = std::floor((h + 2 * pad - r) / stride) + 1;
  const double q = std::floor((w + 2 * pad - s) / stride) + 1;
  const double cg = c / g, kg = kf / g;
  ConvPass out;
  if (cg <= 8 || kg <= 8) out.kind = g == 1 ? ConvPass::Kind::thin : ConvPass::Kind::depthwise;
  out.forward = sig.type == sim::OpType::conv_fprop;
  const double x = n * c * h * w, y = n * kf * p * q, weights = kf * cg * r * s;
  const double touched = std::min(1.0, r * s / (stride * stride));  // of the input, by the filter
  const double elem = sim::dtype_bytes(sig.dtype);
  if (sig.type == sim::OpType::conv_fprop) {
    out.gemm_s = gemm_seconds(n * p * q, kg, cg * r * s, g, sig.dtype, 1.0);
    out.bytes = elem * (x * touched + weights + y);
  } else if (sig.type == sim::OpType::conv_dgrad) {
    out.gemm_s = gemm_seconds(n * p * q, cg, kg * r * s, g, sig.dtype, 1.0);
    out.bytes = elem * (y + weights + x);
  } else {
    out.gemm_s = gemm_seconds(kg, cg * r * s, n * p * q, g, sig.dtype, 1.0);
    out.bytes = elem * (x * touched + y + weights);
  }
  return out;
}

double ComputeModel::conv_seconds(const ConvPass& pass, const ConvConstants& c) const {
  const double memory = memory_seconds(pass.bytes);
  double t = 0.0;
  switch (pass.kind) {
    case ConvPass::Kind::regular:
      t = std::max(pass.gemm_s / (pass.forward ? c.compute_fprop : c.compute_bwd),
                   memory / (pass.forward ? c.memory_fprop : c.memory_bwd));
      break;
    case ConvPass::Kind::thin:
      t = pass.gemm_s / (pass.forward ? c.thin_fprop : c.thin_bwd);
      break;
    case ConvPass::Kind::depthwise:
      t = memory / (pass.forward ? c.depthwise_fprop : c.depthwise_bwd);
      break;
  }
  return t + c.overhead.seconds();
}

double ComputeModel::attention_seconds(const sim::OpSignature& sig, const FlashAttentionConstants& k) const {
  constexpr double kTile = 128.0;  // FlashAttention-2's row blocks on Hopper: 128 queries
  const double heads = dim(sig, 0), sq = dim(sig, 1), sk = dim(sig, 2), d = dim(sig, 3);
  const bool causal = dim(sig, 4) != 0.0;
  const bool backward = sig.kernel.ends_with("_bwd");  // flash_attn_bwd; a trace's attention_bwd
  const double n = std::ceil(sq / kTile), m = std::ceil(sk / kTile);
  const double overhead = backward ? (causal ? k.backward_causal_row_overhead : k.backward_row_overhead)
                                   : (causal ? k.causal_row_overhead : k.row_overhead);
  double blocks = causal ? n * (m + 1.0) / 2.0 : n * m;  // key blocks the query blocks visit
  const double window = sig.shape.size() > 6 ? dim(sig, 6) : 0.0;
  if (causal && window > 0.0 && window < sk) {
    // Sliding window: query block i (queries iT .. iT + T - 1) visits the key blocks from the one
    // holding key iT - w + 1 to its own; the masked edge costs what a causal diagonal does.
    blocks = 0.0;
    for (double i = 0.0; i < n; i += 1.0) blocks += i - std::floor(std::max(0.0, i * kTile - window + 1.0) / kTile) + 1.0;
  }
  const double tiles = heads * (blocks + n * overhead);
  const bool cudnn = (sig.shape.size() > 5 ? sig.shape[5] : kAttentionDefault) != kAttentionFlash2;
  const double rate = k.rate * (cudnn ? (backward ? k.cudnn_backward_speedup : k.cudnn_speedup) : 1.0);
  const double tile_s = 4.0 * kTile * kTile * (d + k.head_extra) / (peak(sig.dtype).per_second() * rate);
  return tiles * tile_s * (backward ? 2.5 / k.backward_rate : 1.0);
}

bool ComputeModel::profiled(const sim::OpSignature& sig) const {
  return profiles_ != nullptr && profiles_->lookup(sig).has_value();
}

double ComputeModel::copy_to_kernel(const sim::OpSignature& sig) const {
  if (sig.type != sim::OpType::memory || !(sig.bytes > 0.0)) return 1.0;
  return memory_seconds(sig.bytes, sig.path, batchnorm_factor(sig)) / memory_seconds(sig.bytes);
}

sim::Time ComputeModel::duration(const sim::OpSignature& sig) const {
  if (profiles_ != nullptr) {
    if (const auto s = profiles_->lookup(sig)) {
      const bool copy = profiles_->memory_timing == sim::MemoryTiming::copy;
      return sim::Time::from_seconds(copy ? *s * copy_to_kernel(sig) : *s);
    }
  }
  return analytical(sig);
}

sim::Time ComputeModel::analytical(const sim::OpSignature& sig) const {
  double compute = 0.0;
  switch (sig.type) {
    case sim::OpType::gemm: {
      // Tensor-core GEMMs only: FP8 ones run only on aligned shapes (cuBLASLt needs multiples of
      // 16; Transformer Engine pads) and FP32 ones (no TF32) load element by element anyway.
      const bool tensor_core_16_32 = sig.dtype == sim::DType::bf16 || sig.dtype == sim::DType::fp16 ||
                                     sig.dtype == sim::DType::tf32;
      const int align = tensor_core_16_32 ? gemm_row_alignment_bytes(sig) : 16;
      const double factor = align >= 16 ? 1.0 : align >= 4 ? c_.unaligned_4_8_byte : c_.unaligned_1_2_byte;
      compute = gemm_seconds(dim(sig, 0), dim(sig, 1), dim(sig, 2), sig.shape.size() > 3 ? dim(sig, 3) : 1.0,
                             sig.dtype, factor);
      break;
    }
    case sim::OpType::conv_fprop:
    case sim::OpType::conv_dgrad:
    case sim::OpType::conv_wgrad: {
      if (c_.conv16 && (sig.dtype == sim::DType::bf16 || sig.dtype == sim::DType::fp16)) {
        return sim::Time::from_seconds(conv_seconds(conv_pass(sig), *c_.conv16)) + c_.launch_gap;
      }
      if (c_.conv_tf32 && sig.dtype == sim::DType::tf32) {
        return sim::Time::from_seconds(conv_seconds(conv_pass(sig), *c_.conv_tf32)) + c_.launch_gap;
      }
      // shape {n, c, h, w, k, r, s, stride, pad, groups}; implicit GEMM per group.
      const double n = dim(sig, 0), c = dim(sig, 1), h = dim(sig, 2), w = dim(sig, 3), kf = dim(sig, 4);
      const double r = dim(sig, 5), s = dim(sig, 6), stride = dim(sig, 7), pad = dim(sig, 8), g = dim(sig, 9);
      const double p = std::floor((h + 2 * pad - r) / stride) + 1;
      const double q = std::floor((w + 2 * pad - s) / stride) + 1;
      const double cg = c / g, kg = kf / g;
      if (cg <= 8 || kg <= 8) {
        // Depthwise and thin grouped convolutions are memory-bound: their bytes decide.
        compute = 0.0;
      } else if (sig.type == sim::OpType::conv_fprop) {
        compute = gemm_seconds(n * p * q, kg, cg * r * s, g, sig.dtype, c_.conv_factor);
      } else if (sig.type == sim::OpType::conv_dgrad) {
        compute = gemm_seconds(n * h * w, cg, kg * r * s, g, sig.dtype, c_.conv_factor);
      } else {
        compute = gemm_seconds(kg, cg * r * s, n * p * q, g, sig.dtype, c_.conv_factor);
      }
      break;
    }
    case sim::OpType::attention:
      // The tiles run 16-bit inputs only (fp32 takes SDPA's other kernels).
      compute = c_.flash_attention && sig.shape.size() >= 5 &&
                        (sig.shape.size() < 6 || sig.shape[5] != kAttentionOther) &&
                        (sig.dtype == sim::DType::bf16 || sig.dtype == sim::DType::fp16)
                    ? attention_seconds(sig, *c_.flash_attention)
                    : sig.flops / (peak(sig.dtype).per_second() * c_.attention_cap);
      break;
    case sim::OpType::memory:
      break;
  }
  const double seconds = std::max(
      compute, memory_seconds(sig.bytes, sig.type == sim::OpType::memory ? sig.path : sim::MemoryPath::vectorized,
                              batchnorm_factor(sig)));
  return sim::Time::from_seconds(seconds) + c_.launch_gap;
}

}  // namespace foresight::strategy
