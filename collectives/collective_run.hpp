#pragma once
/// Runs one collective alone on a fresh simulator, as nccl-tests measures one: the building block
/// of `foresight collective`, of calibration and of the busbw checks.

#include <cstdint>

#include "collectives/collective_plan.hpp"
#include "net/network_model.hpp"

namespace foresight::sim {

struct CollectiveMeasurement {
  CollectivePlan plan;
  Time time;                     ///< from start to the last rank's completion
  double algbw_GBps = 0.0;       ///< bytes / time (nccl-tests' algbw)
  double busbw_GBps = 0.0;       ///< algbw x bus_bandwidth_factor (nccl-tests' busbw)
  std::uint64_t events = 0;
  std::uint64_t fingerprint = 0;
};

/// Plans `request` and simulates it alone on `fabric` with a network model of `network`.
CollectiveMeasurement measure_collective(const Fabric& fabric, const CollectiveConfig& config,
                                         NetworkKind network, const CollectiveRequest& request);

}  // namespace foresight::sim
