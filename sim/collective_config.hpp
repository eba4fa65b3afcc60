#pragma once
/// Stated parameters of the collective model: link-class efficiencies, the timing mode, and the
/// per-GPU-generation calibration that turns NCCL's selector model into a predictor.

#include <array>
#include <map>
#include <string>
#include <vector>

#include "sim/collective_types.hpp"
#include "sim/fabric.hpp"

namespace foresight::sim {

/// Fraction of a link's line rate that data transfers achieve, per link class.
struct LinkEfficiency {
  std::array<double, kLinkClassCount> by_class{};
  double of(LinkClass c) const { return by_class[static_cast<std::size_t>(c)]; }
  /// The documented defaults:
  /// - nvlink 0.80: NCCL counts an sm80 NVLink lane (25 GB/s) as 20 GB/s (src/graph/topo.h
  ///   SM80_NVLINK_BW), and a DGX A100 ring's measured 231.6 GB/s busbw at 8 GiB is 77% of the
  ///   300 GB/s line rate (nccl_busbw.json).
  /// - pcie 0.762: NCCL counts PCIe Gen4 x16 (31.5 GB/s) as 24 GB/s (topo.cc).
  /// - infiniband 0.96: NCCL's search speed for HDR (25 GB/s) is 24; NDR NICs reach 46-49 of
  ///   50 GB/s busbw per NIC (nccl_busbw.json, NVIDIA/nccl-tests#267, #290).
  /// - cpu_interconnect 0.15: NCCL models GPU peer traffic across CPU sockets at 16 GB/s on AMD
  ///   xGMI and 10 GB/s on Intel UPI (AMD_BW, SKL_QPI_BW in src/graph/topo.h), 0.11-0.15 of our
  ///   presets' socket-link line rates (144 and 67.2 GB/s).
  /// - ethernet 0.90: an assumption, not yet checked against data.
  static LinkEfficiency defaults();
};

/// Effective capacities (bytes/s) of every link of `fabric`: line rate x class efficiency.
std::vector<double> effective_capacities(const Fabric& fabric, const LinkEfficiency& eff);

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
