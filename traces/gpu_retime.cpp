#include "traces/gpu_retime.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <utility>

#include "common/error.hpp"

namespace foresight::trace {
namespace {

/// A copy over a link rather than within HBM: to, from or between hosts, or to another GPU
/// (Kineto: "Memcpy HtoD (Pageable -> Device)", "Memcpy PtoP (Device -> Device)").
bool link_copy(const KinetoGpuOp& op) {
  if (op.kind != KinetoGpuOp::Kind::memcpy) return false;
  for (const char* kind : {"HtoD", "DtoH", "HtoH", "PtoP"}) {
    if (op.name.find(kind) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

SmLimits sm_limits(int cc) {
  constexpr std::int64_t kKiB = 1024;
  // CUDA C++ Programming Guide, "Technical Specifications per Compute Capability": resident
  // blocks and threads per SM, 64 K registers per SM, shared memory per SM; from 8.0 on, 1 KB of
  // shared memory per block is reserved for the system.
  if (cc < 70) throw sim::ConfigError(fmt::format("compute capability {}.{}: expected 7.0 or later", cc / 10, cc % 10));
  if (cc < 75) return {32, 2048, 65536, 96 * kKiB, 0};
  if (cc < 80) return {16, 1024, 65536, 64 * kKiB, 0};
  if (cc < 86) return {32, 2048, 65536, 164 * kKiB, kKiB};
  if (cc < 89) return {16, 1536, 65536, 100 * kKiB, kKiB};
  if (cc < 90) return {24, 1536, 65536, 100 * kKiB, kKiB};
  return {32, 2048, 65536, 228 * kKiB, kKiB};
}

int resident_blocks(const KinetoGpuOp& op, const SmLimits& limits) {
  if (op.blocks <= 0 || op.threads_per_block <= 0) return 0;
  const int warps = (op.threads_per_block + 31) / 32;
  int blocks = std::min(limits.blocks, limits.threads / (warps * 32));
  if (op.registers_per_thread > 0) {
    // Registers are allocated per warp in units of 256.
    const int per_warp = (op.registers_per_thread * 32 + 255) / 256 * 256;
    blocks = std::min(blocks, limits.registers / per_warp / warps);
  }
  if (op.shared_bytes > 0) {
    blocks = std::min(blocks, static_cast<int>(limits.shared / (op.shared_bytes + limits.reserved)));
  }
  return std::max(blocks, 1);
}

KernelRetimer::KernelRetimer(RetimeGpu from, RetimeGpu to) : from_(std::move(from)), to_(std::move(to)) {
  for (const RetimeGpu* g : {&from_, &to_}) {
    if (g->sm_count <= 0 || g->hbm_bytes_per_s <= 0.0) {
      throw sim::ConfigError(fmt::format("retiming kernels for {}: expected its SM count and HBM bandwidth, found {} SMs "
                                         "and {} B/s", g->name, g->sm_count, g->hbm_bytes_per_s));
    }
  }
  from_limits_ = sm_limits(from_.compute_capability);
  to_limits_ = sm_limits(to_.compute_capability);
  factor_ = from_.hbm_bytes_per_s / to_.hbm_bytes_per_s;
}

KernelRetimer::Retimed KernelRetimer::retime(const KinetoGpuOp& op) const {
  if (op.nccl()) return {op.dur_us, RetimeRule::kept_nccl};
  if (link_copy(op)) return {op.dur_us, RetimeRule::kept_link_copy};
  if (op.kind == KinetoGpuOp::Kind::kernel) {
    const int on_from = resident_blocks(op, from_limits_);
    const int on_to = resident_blocks(op, to_limits_);
    if (on_from > 0 && op.blocks < static_cast<std::int64_t>(on_from) * from_.sm_count &&
        op.blocks < static_cast<std::int64_t>(on_to) * to_.sm_count) {
      return {op.dur_us, RetimeRule::kept_under_one_wave};
    }
  }
  return {op.dur_us * factor_, RetimeRule::scaled_bandwidth};
}

void RetimeCounts::add(RetimeRule r) {
  switch (r) {
    case RetimeRule::kept_under_one_wave:
      ++under_one_wave;
      break;
    case RetimeRule::scaled_bandwidth:
      ++scaled;
      break;
    case RetimeRule::kept_link_copy:
      ++link_copies;
      break;
    case RetimeRule::kept_nccl:
      ++nccl;
      break;
  }
}

}  // namespace foresight::trace
