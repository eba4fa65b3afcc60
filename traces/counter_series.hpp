#pragma once
/// Counter tracks for timelines: (time, value) series such as a link's utilization, and the
/// conversion of the executor's sampled cumulative link bytes into utilization in percent.

#include <string>
#include <utility>
#include <vector>

#include "exec/executor.hpp"
#include "common/units.hpp"

namespace foresight::trace {

/// A counter track: (time, value) points, e.g. a link's utilization in percent. A value holds
/// from its point's time until the next point; points are in non-decreasing time order.
struct CounterSeries {
  std::string name;  ///< track name, e.g. the link's name
  std::string unit;  ///< what the values measure ("percent"); the counter's key in the trace
  std::vector<std::pair<sim::Time, double>> points;
};

/// Turns sampled cumulative link bytes into utilization counters: for each sampled link i
/// (result.link_bytes[i]), a series named names[i] with unit "percent" whose value between two
/// consecutive samples (t0, b0), (t1, b1) is 100 * (b1 - b0) / ((t1 - t0) in s * capacity_Bps[i]),
/// placed at t0. A run's samples start at time 0 with 0 bytes (an implicit (0, 0) is assumed
/// when the first sample is later); the series ends with a 0 at the last sample. Consecutive
/// equal values are merged; zero-length intervals are skipped. `capacity_Bps` is in bytes per
/// second. TraceError when names or capacities do not match the sampled links, a capacity is not
/// positive, sample times decrease or carried bytes decrease.
std::vector<CounterSeries> link_utilization(const sim::ExecutionResult& result,
                                            const std::vector<std::string>& names,
                                            const std::vector<double>& capacity_Bps);

}  // namespace foresight::trace
