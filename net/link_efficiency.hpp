#pragma once
/// The efficiency of each link class: the fraction of a link's line rate that data transfers
/// achieve (protocol overhead), a stated and documented parameter of both network models.

#include <array>
#include <vector>

#include "net/fabric.hpp"

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

}  // namespace foresight::sim
