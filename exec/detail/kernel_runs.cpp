#include "exec/detail/kernel_runs.hpp"

namespace foresight::sim::detail {

RunProgress run_progress(const ExecutionGraph& g, const Node& n, Time start, Time now) {
  RunProgress p;
  Time t = start;
  for (std::uint32_t j = 0; j + 1 < g.kernels(n); ++j) {
    t += g.part_duration[g.part(n, j)];
    if (t > now) {
      p.next_end = t;
      break;
    }
    ++p.ended;
  }
  return p;
}

Time run_dispatch(const ExecutionGraph& g, const Node& n, std::uint32_t first) {
  Time dispatch;
  for (std::uint32_t j = first; j < g.kernels(n); ++j) dispatch += g.part_dispatch[g.part(n, j)];
  return dispatch;
}

}  // namespace foresight::sim::detail
