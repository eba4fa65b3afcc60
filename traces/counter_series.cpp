#include "traces/counter_series.hpp"

#include <fmt/core.h>

#include <cmath>

#include "common/error.hpp"

namespace foresight::trace {

namespace {

void append_point(CounterSeries& series, sim::Time t, double value) {
  if (!series.points.empty() && series.points.back().second == value) return;
  series.points.emplace_back(t, value);
}

}  // namespace

std::vector<CounterSeries> link_utilization(const sim::ExecutionResult& result,
                                            const std::vector<std::string>& names,
                                            const std::vector<double>& capacity_Bps) {
  const std::size_t links = result.link_bytes.size();
  if (names.size() != links || capacity_Bps.size() != links) {
    throw sim::TraceError(fmt::format(
        "link utilization: {} sampled links but {} names and {} capacities (expected one of each "
        "per sampled link)",
        links, names.size(), capacity_Bps.size()));
  }
  std::vector<CounterSeries> out;
  out.reserve(links);
  for (std::size_t i = 0; i < links; ++i) {
    const double capacity = capacity_Bps[i];
    if (!(capacity > 0.0) || !std::isfinite(capacity)) {
      throw sim::TraceError(fmt::format(
          "link utilization: link '{}' has capacity {} B/s (expected a positive number)", names[i],
          capacity));
    }
    CounterSeries series{names[i], "percent", {}};
    const auto& samples = result.link_bytes[i];
    // Bytes carried so far at the previous sample; a run starts at time 0 with nothing carried.
    sim::Time prev_t = sim::Time::zero();
    double prev_b = 0.0;
    for (std::size_t j = 0; j < samples.size(); ++j) {
      const auto [t, b] = samples[j];
      if (t < prev_t) {
        throw sim::TraceError(fmt::format(
            "link utilization: link '{}' sample {} at {} ps is earlier than the one before ({} ps)",
            names[i], j, t.ps(), prev_t.ps()));
      }
      if (b < prev_b) {
        throw sim::TraceError(fmt::format(
            "link utilization: link '{}' sample {} carries {} bytes, fewer than the {} before",
            names[i], j, b, prev_b));
      }
      if (t > prev_t) {
        append_point(series, prev_t, 100.0 * (b - prev_b) / ((t - prev_t).seconds() * capacity));
      }
      prev_t = t;
      prev_b = b;
    }
    if (!samples.empty()) append_point(series, prev_t, 0.0);
    out.push_back(std::move(series));
  }
  return out;
}

}  // namespace foresight::trace
