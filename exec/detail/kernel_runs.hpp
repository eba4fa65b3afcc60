#pragma once
/// The executor's arithmetic on coalesced nodes (ExecutionGraph::add_kernel): when each of a
/// run's kernels would end had they run apart, and what launching the rest of a run costs.

#include <cstdint>

#include "exec/execution_graph.hpp"

namespace foresight::sim::detail {

/// Of coalesced node `n` (started at `start`), the kernels before its last that have ended by
/// `now`, and the end of the next one to end after `now` (Time::max() when none: only the node's
/// own end is left).
struct RunProgress {
  std::uint32_t ended = 0;
  Time next_end = Time::max();
};
RunProgress run_progress(const ExecutionGraph& g, const Node& n, Time start, Time now);

/// The host time to dispatch node `n`'s kernels from `first` on.
Time run_dispatch(const ExecutionGraph& g, const Node& n, std::uint32_t first);

}  // namespace foresight::sim::detail
