// foresight topology PRESET|FILE: what a cluster holds and its bisection bandwidth.
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "topologies/cluster_builders.hpp"
#include "topologies/topology_json.hpp"
#include "topologies/topology_report.hpp"

namespace foresight::cli {
namespace {

struct TopologyOptions {
  std::string cluster;
  int gpus = 0;
  bool json = false;
  std::string output;
  std::string export_path;
};

int run_topology(const TopologyOptions& o) {
  const topo::Cluster cluster = topo::resolve_cluster(o.cluster, o.gpus);
  Outputs out;
  if (!o.export_path.empty()) out.emit(o.export_path, topo::topology_to_string(cluster));
  const auto report = topo::make_topology_report(cluster);
  out.emit(o.output, o.json ? topo::to_json(report).dump(1) + "\n" : topo::to_text(report));
  out.commit();
  return 0;
}

}  // namespace

void add_topology_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<TopologyOptions>();
  CLI::App* cmd = app.add_subcommand("topology", "Print a cluster's GPUs, nodes, links by class and bisection bandwidth");
  cmd->add_option("cluster", o->cluster, "Cluster preset (see --list) or topology JSON file")->required();
  cmd->add_option("--gpus", o->gpus, "Size a preset to this many GPUs (0: the preset's default)")->check(at_least(0));
  cmd->add_flag("--json", o->json, "Print the report as JSON");
  cmd->add_option("-o,--output", o->output, "Write the report to this file instead of standard output");
  cmd->add_option("--export", o->export_path, "Also write the cluster as a topology JSON file (a starting point to edit)");
  cmd->callback([o, &run] { run = [o] { return run_topology(*o); }; });
}

}  // namespace foresight::cli
