// foresight simulate SCENARIO: one scenario, its report (text or JSON) and optionally its
// Perfetto timeline.
#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/inputs.hpp"
#include "run/simulation.hpp"
#include "traces/chrome_trace.hpp"

namespace foresight::cli {
namespace {

struct SimulateOptions {
  std::string scenario;
  ScenarioFlags flags;
  bool json = false;
  std::string output;
  std::string trace;
};

int run_simulate(const SimulateOptions& o) {
  const strategy::Scenario scenario = strategy::load_scenario(o.scenario, o.flags.overrides());
  strategy::SimulationInputs in = o.flags.simulation_inputs();
  if (!o.trace.empty()) in.link_sample_interval = sim::Time::from_ps(10'000'000);  // 10 us
  strategy::SimulationOutput out = strategy::simulate_scenario(scenario, in);
  // The measured run belongs to the scenario as written.
  out.report.measured.changed = !o.flags.overrides().empty();
  if (!o.trace.empty()) {
    std::vector<std::string> names;
    std::vector<double> capacities;
    for (const sim::LinkId l : out.sampled_links) {
      names.push_back(out.cluster->link_name(l));
      capacities.push_back(out.cluster->link(l).capacity.bytes_per_second());
    }
    trace::TraceMetadata meta;
    meta.title = fmt::format("foresight simulate {}", o.scenario);
    meta.info = {{"scenario", o.scenario}, {"model", out.report.model}, {"cluster", out.report.cluster},
                 {"plan", out.report.plan_summary}, {"iteration_time_s", fmt::format("{:.9g}", out.report.iteration_time_s)}};
    const auto counters = trace::link_utilization(out.result, names, capacities);
    emit(o.trace, [&](std::ostream& os) { trace::write_chrome_trace(os, out.compiled.graph, out.result, counters, meta); });
  }
  emit(o.output, o.json ? strategy::to_json(out.report, out.plan).dump(1) + "\n" : strategy::to_text(out.report));
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
  cmd->callback([o, &run] { run = [o] { return run_simulate(*o); }; });
}

}  // namespace foresight::cli
