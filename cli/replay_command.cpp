// foresight replay TRACE: one iteration of a PyTorch-profiler (Kineto) trace rebuilt as an
// execution graph and simulated (traces/replay.hpp), beside the step it measured.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "sim/collective_config.hpp"
#include "sim/executor.hpp"
#include "topologies/cluster_builders.hpp"
#include "traces/kineto.hpp"
#include "traces/replay.hpp"

namespace foresight::cli {
namespace {

struct ReplayOptions {
  std::string trace;
  int step = -1;
  std::string cluster;
  int gpus = 0;
  bool json = false;
  std::string output;
};

int run_replay(const ReplayOptions& o) {
  const trace::KinetoTrace t = trace::load_kineto(o.trace);
  // Own cluster: every op at its measured time, on one GPU (the fabric only hosts the rank).
  // Another cluster: the recorded NCCL collectives over its first --gpus GPUs, timed there.
  const int gpus = o.gpus > 0 ? o.gpus : std::max(1, t.world_size);
  const bool other = !o.cluster.empty();
  const trace::ReplayGraph r = trace::replay_graph(t, o.step, 0, other ? gpus : 0);
  const topo::Cluster cluster = topo::resolve_cluster(other ? o.cluster : "dgx-a100", other ? gpus : 1);
  const sim::ExecutionResult result =
      sim::execute(r.graph, cluster, sim::CollectiveConfig{}, other ? sim::NetworkKind::flow : sim::NetworkKind::analytical);
  const double replayed = result.makespan.seconds();
  const double error = (replayed - r.measured_s) / r.measured_s * 100.0;
  if (o.json) {
    const nlohmann::json j = {{"trace", o.trace},       {"gpu", t.gpu_name},       {"step", r.step},
                              {"measured_s", r.measured_s}, {"replayed_s", replayed}, {"error_pct", error},
                              {"gpu_ops", r.gpu_ops},   {"nccl_ops", r.nccl_ops},
                              {"cluster", other ? o.cluster : std::string()},
                              {"modelled_collectives", r.modelled_collectives}};
    emit(o.output, j.dump(1) + "\n");
    return 0;
  }
  emit(o.output, fmt::format("trace       {} ({}{})\nstep        ProfilerStep#{}: {} GPU ops, {} of them NCCL\n"
                             "{}measured    {:.3f} ms\nreplayed    {:.3f} ms ({:+.1f}%)\n",
                             o.trace, t.gpu_name.empty() ? "GPU not recorded" : t.gpu_name,
                             t.world_size > 0 ? fmt::format(", rank {} of {}", t.rank, t.world_size) : "", r.step,
                             r.gpu_ops, r.nccl_ops,
                             other ? fmt::format("cluster     {} ({} GPUs): {} NCCL kernels timed as its collectives\n",
                                                 cluster.name(), gpus, r.modelled_collectives)
                                   : "",
                             r.measured_s * 1e3, replayed * 1e3, error));
  return 0;
}

}  // namespace

void add_replay_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<ReplayOptions>();
  CLI::App* cmd = app.add_subcommand("replay", "Replay one iteration of a PyTorch-profiler (Kineto) trace and compare it with its measured step");
  cmd->add_option("trace", o->trace, "Kineto trace (.json or .json.gz)")->required();
  cmd->add_option("--step", o->step, "Which ProfilerStep to replay, 0-based; negative counts from the end (default: the last)");
  cmd->add_option("--cluster", o->cluster, "Replay on this cluster (preset or topology file): recorded NCCL collectives are timed on its network");
  cmd->add_option("--gpus", o->gpus, "GPUs of the job on --cluster (default: the trace's world size)")->check(at_least(2));
  cmd->add_flag("--json", o->json, "Print {trace, gpu, step, measured_s, replayed_s, error_pct, gpu_ops, nccl_ops, cluster, modelled_collectives}");
  cmd->add_option("-o,--output", o->output, "Write to this file (atomically) instead of standard output");
  cmd->callback([o, &run] { run = [o] { return run_replay(*o); }; });
}

}  // namespace foresight::cli
