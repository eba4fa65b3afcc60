// foresight sweep SCENARIO --gpus 8,16,32 --micro-batch 16,32: every combination, on all cores,
// into a CSV (one row per configuration) and an SVG plot. Finished rows are appended as they come,
// so an interrupted sweep keeps them and --resume continues; the finished file is rewritten in
// configuration order, so the result does not depend on thread scheduling.
//
// Beyond one machine: --shard I/N runs every N-th configuration (a Slurm job array task each) into
// a shard file that `foresight sweep-merge` joins (cli/sweep_merge_command.cpp); --mpi spreads the
// configurations over the ranks of an MPI job (cli/sweep_mpi.cpp). Both write what the threaded
// sweep writes, byte for byte.
#include <fmt/core.h>

#include <cstdlib>
#include <memory>

#include "cli/commands.hpp"
#include "cli/inputs.hpp"
#include "cli/sweep_definition.hpp"
#include "cli/sweep_mpi.hpp"
#include "cli/sweep_session.hpp"
#include "common/error.hpp"

namespace foresight::cli {
namespace {

/// The size of the MPI job this process was started in by mpirun or srun, or 1.
long launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const char* value = std::getenv(name);
    if (value != nullptr) {
      if (const auto n = whole_integer(value)) return *n;
    }
  }
  return 1;
}

int run_sweep(const SweepOptions& o) {
  if (o.mpi) return run_sweep_mpi(o);
  // Every rank of an MPI job would run the whole sweep into the same file.
  if (const long ranks = launcher_world_size(); ranks > 1) {
    throw sim::ConfigError(
        fmt::format("sweep: started as one of {} MPI processes (mpirun -n {}) without --mpi: "
                    "pass --mpi to share the configurations among them",
                    ranks, ranks));
  }
  const SweepDefinition def = make_sweep_definition(o);
  SweepSession session(o, def);
  strategy::run_on_threads(def, session.todo(), session.inputs(), o.jobs,
                           [&session](std::size_t i, const strategy::ConfigResult& r) { session.record(i, r); });
  return session.finish();
}

/// A CLI11 check of --shard: a usage error (exit status 2) with parse_shard's message.
CLI::Validator shard_syntax() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          (void)parse_shard(value);
        } catch (const sim::ConfigError& e) {
          return e.what();
        }
        return {};
      },
      "I/N");
}

}  // namespace

void add_sweep_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Simulate a scenario over lists of GPU counts, micro-batch sizes or any plan field");
  cmd->add_option("scenario", o->scenario, "Scenario JSON file")->required();
  cmd->add_option("--gpus", o->gpus, "GPU counts, comma separated (sets cluster.gpus and plan.dp)");
  cmd->add_option("--micro-batch", o->micro_batch, "Micro-batch sizes, comma separated");
  cmd->add_option("--vary", o->vary, "Any field over values: PATH=V1,V2,... (repeatable)");
  o->flags.add_to(*cmd, false);
  cmd->add_option(
         "--csv", o->csv,
         "Results, one row per configuration (an existing default sweep.csv is kept: see --force)")
      ->capture_default_str()
      ->each([o](const std::string&) { o->csv_given = true; });
  cmd->add_flag("--force", o->force, "Overwrite an existing sweep.csv when --csv is not given");
  cmd->add_option("--plot", o->plot,
                  "SVG plot of iteration time and throughput vs GPUs, one line per micro-batch");
  cmd->add_flag("--resume", o->resume,
                "Keep the rows already in --csv and run only the missing configurations");
  cmd->add_option("--jobs", o->jobs, "Parallel simulations (default: all cores)")
      ->check(at_least(0));
  cmd->add_option("--shard", o->shard_text,
                  "Run only shard I of N (I from 0 to N-1: configurations I, I+N, I+2N, ...) into "
                  "a shard file "
                  "(default sweep-shard-I-of-N.csv) for `foresight sweep-merge`")
      ->check(shard_syntax());
  cmd->add_flag(
      "--mpi", o->mpi,
      "Under mpirun: rank 0 hands the configurations to the other ranks and writes the CSV");
  cmd->callback([o, &run] {
    // Usage errors (exit status 2), thrown inside parsing.
    if (!o->shard_text.empty() && o->mpi) {
      throw CLI::ValidationError(
          "--shard", "not with --mpi: run one MPI job per shard, or all of the sweep in one job");
    }
    if (!o->shard_text.empty() && !o->plot.empty()) {
      throw CLI::ValidationError(
          "--shard",
          "not with --plot: a shard holds part of the sweep; plot the merged one "
          "with `foresight sweep-merge OUT.csv SHARD.csv... --plot FILE`");
    }
    run = [o] { return run_sweep(*o); };
  });
}

}  // namespace foresight::cli
