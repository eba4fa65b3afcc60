// foresight collective: an nccl-tests-style sweep of one collective on a cluster.
#include <fmt/core.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "run/collective_sweep.hpp"

namespace foresight::cli {
namespace {

struct CollectiveOptions {
  run::CollectiveSweepOptions sweep;
  bool json = false;
  std::string output;
};

int run_collective(const CollectiveOptions& o) {
  const run::CollectiveSweep sweep = run::collective_sweep(o.sweep);
  emit(o.output, o.json ? sweep.rows.dump(1) + "\n" : sweep.text);
  return 0;
}

}  // namespace

void add_collective_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<CollectiveOptions>();
  CLI::App* cmd = app.add_subcommand("collective", "Sweep one collective over message sizes, as nccl-tests does");
  cmd->add_option("--cluster", o->sweep.cluster, "Cluster preset (see --list) or topology JSON file")->required();
  cmd->add_option("--op", o->sweep.op, "Collective: all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all, "
                                 "send_recv")->capture_default_str();
  cmd->add_option("--gpus", o->sweep.gpus, "GPUs taking part: the cluster's first N (0: all)")->check(at_least(0));
  cmd->add_option("--sizes", o->sweep.sizes, "MIN:MAX (stepping by --factor) or a comma list; sizes as in nccl-tests "
                                       "(all_gather/reduce_scatter: the total)")->capture_default_str();
  cmd->add_option("--factor", o->sweep.factor, "Size multiplier between steps")->capture_default_str();
  cmd->add_option("--algorithm", o->sweep.algorithm, "Force an algorithm (default: NCCL's choice)");
  cmd->add_option("--protocol", o->sweep.protocol, "Force a protocol: LL, LL128, Simple (default: NCCL's choice)");
  cmd->add_option("--root", o->sweep.root, "Root rank of broadcast and reduce")->capture_default_str();
  cmd->add_option("--network", o->sweep.network, "Network model: flow or analytical")->capture_default_str();
  cmd->add_option("--timing", o->sweep.timing, "Collective timing: nccl or link-level")->capture_default_str();
  cmd->add_option("--calibration", o->sweep.calibration, "Collective calibration file (default: the stored one)");
  cmd->add_flag("--json", o->json, "Print a JSON list of {size_bytes, time_s, algbw_GBps, busbw_GBps, algorithm, ...}");
  cmd->add_option("-o,--output", o->output, "Write to this file (atomically) instead of standard output");
  cmd->callback([o, &run] { run = [o] { return run_collective(*o); }; });
}

}  // namespace foresight::cli
