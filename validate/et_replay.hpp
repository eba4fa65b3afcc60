#pragma once
/// `foresight replay` of PyTorch execution traces (host ETs, or Chakra's host+device ETs) and the
/// validation suite's use of them: the traces' graph (traces/pytorch_et_graph.hpp) simulated on a
/// cluster, host ETs' kernels timed by its GPU's compute model.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/executor.hpp"
#include "topologies/cluster.hpp"
#include "traces/pytorch_et_graph.hpp"

namespace foresight::validate {

struct EtReplaySettings {
  std::string cluster = "dgx-a100";  ///< preset or topology file
  int gpus = 0;                      ///< 0: the GPUs the traces' groups span
  std::string network = "flow";      ///< analytical | flow
  bool measured = true;              ///< host+device ETs: their recorded times (false: costs from shapes)
};

struct EtReplay {
  topo::Cluster cluster;
  trace::EtGraph graph;
  sim::ExecutionResult result;
  std::vector<double> replayed_s;  ///< per rank: its iteration
  double iteration_s = 0.0;        ///< the slowest rank's
};

/// Replays `ets` (rank i on GPU i). ConfigError for a cluster too small for them.
EtReplay replay_execution_traces(const std::vector<trace::PytorchEt>& ets, const EtReplaySettings& s);

/// {format, traces, schema, ranks, stands_for, timing, cluster, gpus, network, ops, kernels,
/// gemms, convolutions, attention, memory_kernels, collectives, collective_kinds, waits,
/// host_syncs, replayed_s (per rank), iteration_s, recorded_s, error_pct} (docs/usage.md).
nlohmann::json et_replay_json(const EtReplay& r, const std::vector<trace::PytorchEt>& ets, const EtReplaySettings& s);

}  // namespace foresight::validate
