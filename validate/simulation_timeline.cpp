#include "validate/simulation_timeline.hpp"

#include <fmt/core.h>

#include <vector>

#include "traces/chrome_trace.hpp"

namespace foresight::validate {

void write_simulation_timeline(std::ostream& os, const strategy::SimulationOutput& out, const std::string& scenario) {
  std::vector<std::string> names;
  std::vector<double> capacities;
  for (const sim::LinkId l : out.sampled_links) {
    names.push_back(out.cluster->link_name(l));
    capacities.push_back(out.cluster->link(l).capacity.bytes_per_second());
  }
  trace::TraceMetadata meta;
  meta.title = fmt::format("foresight simulate {}", scenario);
  meta.info = {{"scenario", scenario}, {"model", out.report.model}, {"cluster", out.report.cluster},
               {"plan", out.report.plan_summary}, {"iteration_time_s", fmt::format("{:.9g}", out.report.iteration_time_s)}};
  const auto counters = trace::link_utilization(out.result, names, capacities);
  trace::write_chrome_trace(os, out.compiled.graph, out.result, counters, meta);
}

}  // namespace foresight::validate
