#pragma once
/// The executor's collectives and point-to-point transfers: when every member (both ends) has
/// arrived, which communication job runs it, and the plans that job is built from. Jobs are
/// numbered by what they are (a collective by communicator, send matrix, op, bytes, root and
/// algorithm; a transfer by sender, receiver and bytes), so that CommJobs can reuse a timing it
/// has already worked out. A folded collective runs for every group its communicator stands
/// for, a folded transfer for every mirror pair; a measured one (trace replay) takes its
/// recorded duration without the network.

#include <bit>
#include <cstdint>
#include <tuple>
#include <vector>

#include "collectives/collective_config.hpp"
#include "collectives/collective_plan.hpp"
#include "collectives/comm_jobs.hpp"
#include "common/flat_map.hpp"
#include "exec/execution_graph.hpp"
#include "exec/graph_check.hpp"
#include "sim/simulator.hpp"

namespace foresight::sim::detail {

class CommStarts {
 public:
  CommStarts(const ExecutionGraph& g, const GraphIndex& index, const Fabric& fabric, const CollectiveConfig& config,
             Simulator& sim, CommJobs& jobs);

  /// A member of collective `c` is ready: true when it was the last.
  bool arrive_collective(std::uint32_t c) { return ++coll_arrived_[c] == index_.members(c).size(); }
  /// An end of transfer `t` is ready: true when it was the second.
  bool arrive_transfer(std::uint32_t t) { return ++p2p_arrived_[t] == 2; }
  std::uint32_t arrived(std::uint32_t c) const { return coll_arrived_[c]; }

  /// Starts collective `c`, or transfer `t`; `done` is notified when it ends.
  void start_collective(std::uint32_t c, FlowNotify done);
  void start_transfer(std::uint32_t t, FlowNotify done);

 private:
  using JobKey = std::tuple<bool, std::uint32_t, std::uint32_t, int, double, int, int>;
  struct JobKeyHash {
    std::size_t operator()(const JobKey& k) const noexcept {
      const double bytes = std::get<4>(k);
      std::uint64_t h = bytes == 0.0 ? 0 : std::bit_cast<std::uint64_t>(bytes);  // 0.0 and -0.0 alike
      h ^= (std::uint64_t{std::get<1>(k)} << 32 | std::get<2>(k)) * 0x9e3779b97f4a7c15ull;
      h ^= (std::uint64_t(std::uint32_t(std::get<3>(k))) << 40) ^ (std::uint64_t(std::uint32_t(std::get<5>(k))) << 20) ^
           std::uint64_t(std::uint32_t(std::get<6>(k))) ^ (std::get<0>(k) ? 0x8000000000000000ull : 0);
      return static_cast<std::size_t>(h ^ (h >> 31));
    }
  };
  /// The job of `key`, numbered in the order keys first appear (looked up at every start).
  std::uint32_t job_id(const JobKey& key);

  const ExecutionGraph& g_;
  const GraphIndex& index_;
  const Fabric& fabric_;
  const CollectiveConfig& config_;
  Simulator& sim_;
  CommJobs& jobs_;
  std::vector<std::uint32_t> coll_arrived_;
  std::vector<std::uint32_t> p2p_arrived_;
  FlatMap<JobKey, std::uint32_t, JobKeyHash> job_ids_;
  /// Rings and trees routed for a communicator, reused at its other sizes.
  PlanShapes shapes_;
};

/// GraphError naming the first operations that never finished and why, when any did not.
void report_deadlock(const ExecutionGraph& g, const GraphIndex& index, const CommStarts& comms,
                     const LargeVector<std::uint8_t>& done, const LargeVector<std::uint8_t>& issued,
                     const LargeVector<std::uint32_t>& deps_left);

}  // namespace foresight::sim::detail
