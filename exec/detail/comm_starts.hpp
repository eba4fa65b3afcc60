#pragma once
/// The executor's collectives and point-to-point transfers: when every member (both ends) has
/// arrived, which communication job runs it, and the plans that job is built from. Jobs are
/// numbered by what they are (a collective by communicator, send matrix, op, bytes, root and
/// algorithm; a transfer by sender, receiver and bytes), so that CommJobs can reuse a timing it
/// has already worked out. A folded collective runs for every group its communicator stands
/// for, a folded transfer for every mirror pair; a measured one (trace replay) takes its
/// recorded duration without the network.

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "collectives/collective_config.hpp"
#include "collectives/comm_jobs.hpp"
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
  std::uint32_t job_id(const JobKey& key);

  const ExecutionGraph& g_;
  const GraphIndex& index_;
  const Fabric& fabric_;
  const CollectiveConfig& config_;
  Simulator& sim_;
  CommJobs& jobs_;
  std::vector<std::uint32_t> coll_arrived_;
  std::vector<std::uint32_t> p2p_arrived_;
  std::map<JobKey, std::uint32_t> job_ids_;
};

/// GraphError naming the first operations that never finished and why, when any did not.
void report_deadlock(const ExecutionGraph& g, const GraphIndex& index, const CommStarts& comms,
                     const LargeVector<std::uint8_t>& done, const LargeVector<std::uint8_t>& issued,
                     const LargeVector<std::uint32_t>& deps_left);

}  // namespace foresight::sim::detail
