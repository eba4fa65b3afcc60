#include "validate/et_replay.hpp"

#include <fmt/core.h>

#include <algorithm>

#include "common/error.hpp"
#include "models/compute_model.hpp"
#include "run/calibration.hpp"
#include "topologies/cluster_builders.hpp"

namespace foresight::validate {

EtReplay replay_execution_traces(const std::vector<trace::PytorchEt>& ets, const EtReplaySettings& s) {
  if (ets.empty()) throw sim::ConfigError("replay: no execution trace given");
  // The cluster is resolved for the ranks first; the graph then says how many GPUs its groups
  // span (one ET standing for several ranks).
  int gpus = s.gpus > 0 ? s.gpus : static_cast<int>(std::max<std::size_t>(ets.size(), 1));
  topo::Cluster cluster = topo::resolve_cluster(s.cluster, std::max(gpus, 1));
  const strategy::ComputeModel model(cluster.gpu_model(0));
  trace::EtGraphOptions options;
  options.kernel_time = [&model](const sim::OpSignature& sig) { return model.duration(sig); };
  options.measured = s.measured;
  options.host_copy_bandwidth = cluster.gpu_model(0).pcie.bytes_per_second();
  trace::EtGraph graph = trace::pytorch_et_graph(ets, options);
  if (s.gpus > 0 && s.gpus < graph.stands_for) {
    throw sim::ConfigError(fmt::format("--gpus: the traces' collectives span {} GPUs, found {}", graph.stands_for, s.gpus));
  }
  if (s.gpus == 0 && graph.stands_for > gpus) {
    gpus = graph.stands_for;
    cluster = topo::resolve_cluster(s.cluster, gpus);
  }
  EtReplay r{std::move(cluster), std::move(graph), {}, {}, 0.0};
  r.result = sim::execute(r.graph.graph, r.cluster, run::default_collective_config(),
                          sim::parse_network_kind(s.network, "--network"));
  r.replayed_s = trace::et_rank_seconds(r.graph, r.result.end);
  r.iteration_s = *std::max_element(r.replayed_s.begin(), r.replayed_s.end());
  return r;
}

nlohmann::json et_replay_json(const EtReplay& r, const std::vector<trace::PytorchEt>& ets, const EtReplaySettings& s) {
  nlohmann::json paths = nlohmann::json::array();
  for (const trace::PytorchEt& e : ets) paths.push_back(e.path);
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [name, n] : r.graph.collective_kinds) kinds[name] = n;
  const trace::EtGraph& g = r.graph;
  const nlohmann::json recorded = g.recorded_s ? nlohmann::json(*g.recorded_s) : nlohmann::json(nullptr);
  const nlohmann::json error =
      g.recorded_s && *g.recorded_s > 0.0 ? nlohmann::json((r.iteration_s - *g.recorded_s) / *g.recorded_s * 100.0) : nlohmann::json(nullptr);
  return {{"format", "pytorch_et"},
          {"traces", paths},
          {"schema", ets.front().schema},
          {"ranks", ets.size()},
          {"stands_for", g.stands_for},
          {"timing", g.measured ? "measured" : "modelled"},
          {"cluster", r.cluster.name()},
          {"gpus", r.cluster.gpu_count()},
          {"network", s.network},
          {"ops", g.ops},
          {"kernels", g.kernels},
          {"gemms", g.gemms},
          {"convolutions", g.convolutions},
          {"attention", g.attention},
          {"memory_kernels", g.memory},
          {"collectives", g.collectives},
          {"collective_kinds", kinds},
          {"waits", g.waits},
          {"host_syncs", g.host_syncs},
          {"replayed_s", r.replayed_s},
          {"iteration_s", r.iteration_s},
          {"recorded_s", recorded},
          {"error_pct", error}};
}

}  // namespace foresight::validate
