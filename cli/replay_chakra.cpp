#include "cli/replay_chakra.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/inputs.hpp"
#include "common/error.hpp"
#include "exec/executor.hpp"
#include "topologies/cluster_builders.hpp"
#include "traces/chakra_graph.hpp"
#include "traces/chrome_trace.hpp"

namespace foresight::cli {
namespace {

/// PREFIX of a workload's rank files (PREFIX.0.et).
std::string prefix_of(const std::string& rank0) {
  const std::string suffix = ".0.et";
  return rank0.substr(0, rank0.size() - suffix.size());
}

std::string unused_line(const std::map<std::string, std::size_t>& unused) {
  if (unused.empty()) return "";
  std::vector<std::pair<std::size_t, std::string>> by_count;
  for (const auto& [name, n] : unused) by_count.emplace_back(n, name);
  std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::string text;
  for (std::size_t i = 0; i < std::min<std::size_t>(6, by_count.size()); ++i) {
    text += fmt::format("{}{} ({})", i == 0 ? "" : ", ", by_count[i].second, by_count[i].first);
  }
  if (by_count.size() > 6) text += fmt::format(" and {} more", by_count.size() - 6);
  return fmt::format("unused      attributes no rule reads, with the nodes carrying them: {}\n", text);
}

}  // namespace

bool is_chakra_input(const std::string& path) { return trace::is_chakra_path(path); }

int replay_chakra(const ChakraReplayOptions& o) {
  const std::vector<std::string> files = trace::chakra_rank_files(o.path);
  std::vector<trace::ChakraTrace> ranks;
  ranks.reserve(files.size());
  for (const std::string& f : files) ranks.push_back(trace::read_chakra_trace(f));
  const std::string prefix = prefix_of(files.front());
  std::string groups_path = o.comm_groups;
  if (groups_path.empty() && std::filesystem::is_regular_file(prefix + ".comm_groups.json")) groups_path = prefix + ".comm_groups.json";
  trace::ChakraGroups groups;
  if (!groups_path.empty()) groups = trace::read_chakra_groups(groups_path);

  // The cluster first: generic ETs' compute nodes without durations take its GPU's roofline.
  const trace::ChakraTrace& first = ranks.front();
  const trace::ChakraAttr* recorded_cluster = first.metadata_attr("foresight.cluster");
  std::string spec = o.cluster;
  int gpus = o.gpus;
  if (spec.empty() && recorded_cluster != nullptr) {
    if (const auto* s = std::get_if<std::string>(&recorded_cluster->value); s != nullptr && !s->empty()) {
      spec = *s;
      if (gpus == 0 && first.metadata_attr("foresight.cluster_gpus") != nullptr) {
        gpus = static_cast<int>(trace::chakra_integer(*first.metadata_attr("foresight.cluster_gpus"), first.path, 0));
      }
    }
  }
  if (spec.empty()) spec = "dgx-a100";
  if (gpus == 0) gpus = static_cast<int>(ranks.size());
  if (gpus < static_cast<int>(ranks.size())) {
    throw sim::ConfigError(fmt::format("--gpus: expected at least the ETs' {} ranks, found {}", ranks.size(), gpus));
  }
  const topo::Cluster cluster = topo::resolve_cluster(spec, gpus);
  trace::ChakraImportOptions in;
  in.groups = groups_path.empty() ? nullptr : &groups;
  const topo::GpuSpec& gpu = cluster.gpu_model(0);
  in.peak_flops = gpu.bf16.per_second() > 0 ? gpu.bf16.per_second() : gpu.fp16.per_second();
  in.memory_bandwidth = gpu.memory_bandwidth.bytes_per_second();
  const trace::ChakraGraph g = trace::chakra_graph(ranks, in);
  for (std::size_t r = 0; r < g.graph.ranks(); ++r) {
    if (g.graph.rank_gpu[r] >= cluster.gpu_count()) {
      throw sim::ConfigError(fmt::format("{}: rank {} ran on GPU {}, but {} has {} GPUs (--gpus)", files[r], r, g.graph.rank_gpu[r],
                                         cluster.name(), cluster.gpu_count()));
    }
  }
  const std::string network = !o.network.empty() ? o.network : !g.network.empty() ? g.network : "flow";
  sim::ExecutorOptions options;
  options.comm_compute_slowdown = g.comm_compute_slowdown;
  options.comm_compute_slowdown_by_type = g.comm_compute_slowdown_by_type;
  options.comm_compute_slowdown_by_rank = g.comm_compute_slowdown_by_rank;
  options.comm_waits_for_by_rank = g.comm_waits_for_by_rank;
  options.comm_waits_for = g.comm_waits_for;
  const sim::ExecutionResult result =
      sim::execute(g.graph, cluster, ScenarioFlags{}.simulation_inputs().collectives, sim::parse_network_kind(network, "--network"), options);
  Outputs out;
  if (!o.trace.empty()) {
    trace::TraceMetadata meta;
    meta.title = fmt::format("foresight replay {}", o.path);
    meta.info = {{"cluster", cluster.name()}, {"makespan_s", fmt::format("{:.9g}", result.makespan.seconds())}};
    out.emit(o.trace, [&](std::ostream& os) { trace::write_chrome_trace(os, g.graph, result, {}, meta); });
  }
  const double replayed = trace::replayed_span(g, result);
  const double recorded = g.recorded_s.value_or(0.0);
  const double error = recorded > 0.0 ? (replayed - recorded) / recorded * 100.0 : 0.0;
  if (o.json) {
    nlohmann::json unused = nlohmann::json::object();
    for (const auto& [name, n] : g.unused_attrs) unused[name] = n;
    const nlohmann::json j = {{"format", "chakra"},
                              {"path", o.path},
                              {"prefix", prefix},
                              {"ranks", ranks.size()},
                              {"schema", first.version},
                              {"producer", g.producer},
                              {"comm_groups", groups_path},
                              {"cluster", cluster.name()},
                              {"gpus", cluster.gpu_count()},
                              {"network", network},
                              {"compute_ops", g.compute},
                              {"host_ops", g.host},
                              {"collectives", g.collectives},
                              {"transfers", g.transfers},
                              {"markers", g.markers},
                              {"roofline_ops", g.roofline},
                              {"recorded_s", g.recorded_s ? nlohmann::json(*g.recorded_s) : nlohmann::json(nullptr)},
                              {"replayed_s", replayed},
                              {"error_pct", g.recorded_s ? nlohmann::json(error) : nlohmann::json(nullptr)},
                              {"makespan_s", result.makespan.seconds()},
                              {"fingerprint", fmt::format("{:016x}", result.fingerprint)},
                              {"unused_attributes", unused}};
    out.emit(o.output, j.dump(1) + "\n");
    out.commit();
    return 0;
  }
  std::string text = fmt::format(
      "trace       {}: {} ranks, Chakra ET schema {}{}\n"
      "ops         {} GPU kernels, {} host ops, {} collectives, {} sends and receives, {} markers{}\n"
      "cluster     {} ({} GPUs), {} network{}\n",
      prefix, ranks.size(), first.version.empty() ? "not recorded" : first.version,
      g.producer.empty() ? "" : fmt::format(", written by {}", g.producer), g.compute, g.host, g.collectives, g.transfers,
      g.markers, g.roofline > 0 ? fmt::format(" ({} kernels without a duration timed by the {} roofline)", g.roofline, gpu.name) : "",
      cluster.name(), cluster.gpu_count(), network, groups_path.empty() ? "" : fmt::format("; groups from {}", groups_path));
  if (g.recorded_s) {
    text += fmt::format("recorded    {:.3f} ms (the ETs' own schedule)\nreplayed    {:.3f} ms ({:+.1f}%)\n", *g.recorded_s * 1e3,
                        replayed * 1e3, error);
  } else {
    text += fmt::format("replayed    {:.3f} ms (the ETs record no schedule to compare with)\n", replayed * 1e3);
  }
  text += unused_line(g.unused_attrs);
  out.emit(o.output, text);
  out.commit();
  return 0;
}

}  // namespace foresight::cli
