// foresight simulate SCENARIO: one scenario, its report (text or JSON) and optionally its
// Perfetto timeline.
#include <fmt/core.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/inputs.hpp"
#include "common/error.hpp"
#include "run/simulation.hpp"
#include "traces/chakra_graph.hpp"
#include "validate/simulation_timeline.hpp"

namespace foresight::cli {
namespace {

struct SimulateOptions {
  std::string scenario;
  ScenarioFlags flags;
  bool json = false;
  std::string output;
  std::string trace;
  std::string chakra_out;  ///< directory for the per-rank Chakra ETs, when given
};

/// Refuses a --chakra-out directory that holds anything, before any simulation.
void check_chakra_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  if (!fs::is_directory(dir, ec) || !fs::is_empty(dir, ec)) {
    throw sim::ConfigError(fmt::format("--chakra-out: expected a new or empty directory, found \"{}\" {}", dir,
                                       fs::is_directory(dir, ec) ? "holding files (remove them or choose another)" : "is a file"));
  }
}

/// The ETs and their comm-group file for `dir`, all or nothing: written into a sibling
/// directory, which takes `dir`'s name when `out` is committed.
void write_chakra_dir(Outputs& out, const std::string& dir, const std::string& prefix, const trace::ChakraExport& x) {
  namespace fs = std::filesystem;
  const fs::path target = fs::path(dir).lexically_normal();
  const fs::path tmp = target.parent_path() / (target.filename().string() + ".tmp-chakra");
  std::error_code ec;
  fs::remove_all(tmp, ec);
  try {
    fs::create_directories(tmp);
    for (std::size_t r = 0; r < x.ranks.size(); ++r) {
      std::ofstream os(tmp / fmt::format("{}.{}.et", prefix, r), std::ios::binary);
      trace::write_chakra_trace(os, x.ranks[r]);
      if (!os.flush()) throw sim::ConfigError(fmt::format("--chakra-out: could not write {}", (tmp / fmt::format("{}.{}.et", prefix, r)).string()));
    }
    std::ofstream groups(tmp / (prefix + ".comm_groups.json"));
    groups << trace::chakra_groups_json(x.groups);
    if (!groups.flush()) throw sim::ConfigError(fmt::format("--chakra-out: could not write the comm-group file in {}", tmp.string()));
    groups.close();
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    throw sim::ConfigError(fmt::format("--chakra-out {}: {}", dir, e.what()));
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  out.stage(
      [dir, target, tmp] {
        std::error_code err;
        if (fs::exists(target, err)) fs::remove(target, err);  // empty (checked before simulating)
        fs::rename(tmp, target, err);
        if (err) throw sim::ConfigError(fmt::format("--chakra-out {}: cannot put it in place ({})", dir, err.message()));
      },
      [tmp] {
        std::error_code err;
        fs::remove_all(tmp, err);
      });
}

int run_simulate(const SimulateOptions& o) {
  std::vector<strategy::Override> overrides = o.flags.overrides();
  // Chakra ETs name every rank: the graph is compiled unfolded (the same answer, more work).
  if (!o.chakra_out.empty()) {
    check_chakra_dir(o.chakra_out);
    overrides.push_back({"plan.fold", "false"});
  }
  const strategy::Scenario scenario = strategy::load_scenario(o.scenario, overrides);
  strategy::SimulationInputs in = o.flags.simulation_inputs();
  if (!o.trace.empty()) in.link_sample_interval = validate::kTimelineSampleInterval;
  in.coalesce_kernels = o.chakra_out.empty();  // Chakra ETs list every kernel
  strategy::SimulationOutput out = strategy::simulate_scenario(scenario, in);
  // The measured run belongs to the scenario as written.
  out.report.measured.changed = !o.flags.overrides().empty();
  Outputs outputs;
  if (!o.trace.empty()) {
    outputs.emit(o.trace, [&](std::ostream& os) { validate::write_simulation_timeline(os, out, o.scenario); });
  }
  if (!o.chakra_out.empty()) {
    trace::ChakraExportInfo info;
    info.producer = fmt::format("simulate {}", o.scenario);
    info.network = std::string(sim::to_string(scenario.plan.network));
    info.comm_compute_slowdown = scenario.plan.comm_compute_slowdown;
    info.comm_compute_slowdown_by_type = strategy::plan_comm_slowdowns(scenario.plan, out.cluster->gpu_model(0));
    info.comm_waits_for = strategy::plan_comm_waits(scenario.plan, out.cluster->gpu_model(0));
    info.comm_compute_slowdown_by_rank = strategy::plan_comm_slowdowns_by_rank(scenario.plan, *out.cluster, out.compiled.graph);
    info.comm_waits_for_by_rank = strategy::plan_comm_waits_by_rank(scenario.plan, *out.cluster, out.compiled.graph);
    info.cluster = scenario.cluster.spec;
    info.cluster_gpus = scenario.cluster.gpus;
    write_chakra_dir(outputs, o.chakra_out, std::filesystem::path(o.scenario).stem().string(),
                     trace::to_chakra(out.compiled.graph, out.result, info));
  }
  outputs.emit(o.output, o.json ? strategy::to_json(out.report, out.plan).dump(1) + "\n" : strategy::to_text(out.report));
  outputs.commit();
  return 0;
}

}  // namespace

void add_simulate_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand("simulate", "Simulate a scenario: iteration time, run time, throughput, breakdown, memory");
  cmd->add_option("scenario", o->scenario, "Scenario JSON file (see examples/)")->required();
  o->flags.add_to(*cmd);
  cmd->add_flag("--json", o->json, "Print the report as JSON (keys in docs/usage.md)");
  cmd->add_option("-o,--output", o->output, "Write the report to this file (atomically) instead of standard output");
  cmd->add_option("--trace", o->trace, "Write a Perfetto/Chrome trace of the simulated steps to this file");
  cmd->add_option("--chakra-out", o->chakra_out,
                  "Write the scenario's execution graph as MLCommons Chakra ETs, one per rank (DIR/SCENARIO.RANK.et, with "
                  "DIR/SCENARIO.comm_groups.json), for ASTRA-sim or `foresight replay DIR`; the graph is simulated unfolded");
  cmd->callback([o, &run] { run = [o] { return run_simulate(*o); }; });
}

}  // namespace foresight::cli
