#pragma once
/// Kernel times of a trace carried to another GPU model: Habitat's wave scaling for kernels whose
/// performance counters were not recorded (Yu et al., "Habitat: A Runtime-Based Computational
/// Performance Predictor for Deep Neural Network Training", USENIX ATC 2021; its
/// "resimplified" wave scaling):
/// - a kernel whose blocks fit in less than one wave on both GPUs (one wave: SMs x the blocks
///   one SM holds at once) is latency-bound: it keeps its measured time;
/// - any other kernel, and every memset and device-to-device copy, is bandwidth-bound: its time
///   scales by source / target achievable HBM bandwidth (peak x the measured copy fraction of
///   the compute model, strategy::achievable_hbm_bandwidth);
/// - a kernel without a recorded launch configuration counts as bandwidth-bound;
/// - copies to, from or between hosts and to other GPUs (PtoP) keep their time (the links are
///   not the GPU model), and NCCL kernels are left to the replay (timed by the target's network
///   where their size is known, else measured).
/// The blocks an SM holds follow the CUDA occupancy rules for the kernel's threads, registers
/// and shared memory per block, with the per-compute-capability limits of the CUDA C++
/// Programming Guide ("Technical Specifications per Compute Capability").

#include <cstdint>
#include <string>

#include "traces/kineto.hpp"

namespace foresight::trace {

/// What retiming reads of a GPU model (filled from the topology catalog and the compute model
/// by the caller: traces/ depends on sim only).
struct RetimeGpu {
  std::string name;
  int compute_capability = 0;  ///< 70, 80, 90, ...
  int sm_count = 0;
  double hbm_bytes_per_s = 0.0;  ///< achievable HBM bandwidth (strategy::achievable_hbm_bandwidth)
};

/// What one SM of a compute capability holds at once.
struct SmLimits {
  int blocks = 0;             ///< resident blocks
  int threads = 0;            ///< resident threads
  int registers = 0;          ///< 32-bit registers
  std::int64_t shared = 0;    ///< bytes of shared memory usable by blocks
  std::int64_t reserved = 0;  ///< shared memory the system reserves per block
};

/// The limits of compute capability `cc` (70, 75, 80, 86, 89, 90 and later as 90);
/// sim::ConfigError for one before Volta.
SmLimits sm_limits(int cc);

/// Blocks of `op` that one SM holds at once under `limits` (at least 1: a kernel that exceeds
/// a limit was built for another GPU and would be rebuilt); 0 when the trace did not record the
/// kernel's launch configuration.
int resident_blocks(const KinetoGpuOp& op, const SmLimits& limits);

/// How a GPU op's time was carried over.
enum class RetimeRule { kept_under_one_wave, scaled_bandwidth, kept_link_copy, kept_nccl };

/// Kernel times from one GPU model (the trace's) to another.
class KernelRetimer {
 public:
  /// sim::ConfigError when a model lacks SMs, bandwidth or a supported compute capability.
  KernelRetimer(RetimeGpu from, RetimeGpu to);

  struct Retimed {
    double dur_us = 0.0;
    RetimeRule rule = RetimeRule::scaled_bandwidth;
  };
  /// `op`'s duration on the target GPU.
  Retimed retime(const KinetoGpuOp& op) const;

  const RetimeGpu& from() const noexcept { return from_; }
  const RetimeGpu& to() const noexcept { return to_; }
  /// Source / target achievable HBM bandwidth: what a bandwidth-bound op's time is multiplied by.
  double bandwidth_factor() const noexcept { return factor_; }

 private:
  RetimeGpu from_;
  RetimeGpu to_;
  SmLimits from_limits_;
  SmLimits to_limits_;
  double factor_ = 1.0;
};

/// Counts of a replayed step's GPU ops by RetimeRule.
struct RetimeCounts {
  std::size_t under_one_wave = 0;
  std::size_t scaled = 0;
  std::size_t link_copies = 0;  ///< host and peer copies
  std::size_t nccl = 0;
  void add(RetimeRule r);
};

}  // namespace foresight::trace
