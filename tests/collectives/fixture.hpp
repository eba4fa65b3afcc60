#pragma once
// What the executor tests share: a collective configuration with a 10 us launch and pipelined
// fill on A100s (compute capability 80), and one DGX A100.

#include "collectives/collective_config.hpp"
#include "topologies/cluster_builders.hpp"

namespace foresight::test {

inline sim::CollectiveConfig executor_config() {
  sim::CollectiveConfig c;
  sim::CollectiveCalibration cal;
  cal.launch_us = 10;
  cal.pipelined = true;
  c.by_arch[80] = cal;
  return c;
}

/// One DGX A100 (8 GPUs), built once.
inline const topo::Cluster& dgx() {
  static const topo::Cluster c = topo::resolve_cluster("dgx-a100", 8);
  return c;
}

}  // namespace foresight::test
