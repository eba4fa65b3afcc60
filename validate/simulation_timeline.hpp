#pragma once
/// The Perfetto/Chrome timeline of a simulated scenario (`foresight simulate --trace`,
/// foresight.simulate(trace=...)): its steps, and the used links' utilization as counter tracks.

#include <ostream>
#include <string>

#include "common/units.hpp"
#include "run/simulation.hpp"

namespace foresight::validate {

/// How often the used links are sampled for the timeline's utilization tracks (10 us): set it as
/// SimulationInputs::link_sample_interval before simulating, so that the command and the module
/// draw the same tracks.
inline constexpr sim::Time kTimelineSampleInterval = sim::Time::from_ps(10'000'000);

/// Writes the timeline of `out` (simulated with link sampling on), titled with `scenario`.
void write_simulation_timeline(std::ostream& os, const strategy::SimulationOutput& out, const std::string& scenario);

}  // namespace foresight::validate
