#pragma once
/// Stated parameters of the collective model: link-class efficiencies, the timing mode, and the
/// per-GPU-generation calibration that turns NCCL's selector model into a predictor.

#include <array>
#include <map>
#include <string>
#include <vector>

#include "collectives/collective_types.hpp"
#include "net/fabric.hpp"
#include "net/link_efficiency.hpp"

namespace foresight::sim {

/// Constants fitted on measured nccl-tests curves for one GPU generation (validate/ fits and
/// stores them; see README "Collectives"). A collective with NCCL latency alpha takes
///   T = launch + (sqrt(T_bw) + sqrt(latency_scale x alpha))^2     (Simple protocol, pipelined)
///   T = launch + latency_scale x alpha + T_bw                       (LL, LL128, or not pipelined)
/// where T_bw, the time its transfers take alone, is the larger of S / (NCCL algbw x
/// efficiency[protocol]) and the time its flows take at the links' own (efficiency-scaled) speed.
/// The square is the time of a pipeline whose segment size balances per-segment latency against
/// fill (Johnsson & Ho, IEEE Trans. Computers 38(9), 1989: a pipelined broadcast on a path takes
/// (sqrt(d tau) + sqrt(M t_c))^2); NCCL's Simple protocol moves data in chunks that grow with the
/// message. LL and LL128 synchronize every 8- or 128-byte line with flags and have no such
/// trade-off. With launch 0, scale 1, efficiencies 1 and no pipelining, T is NCCL's own model.
struct CollectiveCalibration {
  std::string name = "nccl-model";  ///< provenance label shown in reports
  double launch_us = 0.0;           ///< per-call overhead: host launch, kernel start, completion
  double latency_scale = 1.0;
  std::array<double, kProtocolCount> efficiency{1.0, 1.0, 1.0};  ///< LL, LL128, Simple
  bool pipelined = false;
};

/// How a collective's time is built.
enum class CollectiveTiming : std::uint8_t {
  /// NCCL's choice and latencies, calibrated bandwidth per protocol, flows capped at NCCL's
  /// per-channel rate and limited by links (the default).
  nccl,
  /// The textbook model on the links alone: every step costs its path's wire latency plus bytes
  /// over the links' bandwidth; no NCCL tables, no caps, no launch cost. For idealized
  /// topologies and for checking the algorithms' step structure.
  link_level,
};

struct CollectiveConfig {
  CollectiveTiming timing = CollectiveTiming::nccl;
  LinkEfficiency links = LinkEfficiency::defaults();
  /// Calibrations by compute capability (80 = A100, 90 = H100); a communicator uses the entry of
  /// its lowest compute capability, else `fallback`.
  std::map<int, CollectiveCalibration> by_arch;
  CollectiveCalibration fallback;
  /// NCCL's PXN (P2P_PXN_LEVEL=2, default): point-to-point data to a remote GPU with local index
  /// k leaves through the NIC of local GPU k, relayed over NVLink (nccl-model.md sec. 8).
  bool pxn = true;

  const CollectiveCalibration& calibration_for(int compute_capability) const;
};

}  // namespace foresight::sim
