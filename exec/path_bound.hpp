#pragma once
/// A lower bound on the time between two nodes' ends, from the execution graph alone (no
/// simulation): the longest chain of what must happen one after another between them.
///
/// Whatever the network model, a run keeps these orders: an op starts after its dependencies
/// end; a stream runs its ops one at a time in issue order; a host thread walks its program in
/// order, spending each GPU op's dispatch before the op is issued and each host op's duration;
/// a collective (or a send with its receive) starts once every member has reached it and all of
/// them end together. Each op then lasts at least: a kernel or host op its duration (communication
/// only slows kernels), a measured collective its measured time, and any other communication the
/// bytes that must leave or enter one GPU over the rate of all that GPU's links (egress and
/// ingress): (n - 1) / n of the payload for all-reduce, all-gather, reduce-scatter and
/// all-to-all, the payload for broadcast, reduce and point-to-point, an all-to-allv's busiest
/// row or column; and for a group over several servers, the bytes that must leave or enter one
/// server over the rate of its links to the outside (an all-reduce's whole payload each
/// way, whichever algorithm: each element's sum is made on one side of the cut and needed on
/// both; the shards a reduce-scatter or an all-gather moves across; an all-to-all's traffic
/// between the server's members and the others). Everything else the executor models (launch
/// queues, interpreter locks, kernels holding SMs, contention, protocols, latencies) only
/// delays, so the longest such chain is never longer than the simulated time. The planner
/// (run/planner.cpp) prunes with it.

#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "common/units.hpp"
#include "exec/execution_graph.hpp"
#include "exec/graph_check.hpp"

namespace foresight::sim {

/// The rates of the links leaving and entering each GPU (by GpuId) and each server (by node
/// index: its links to devices outside it), and each GPU's server. The planner gives line rate x
/// class efficiency, what the network models move (net/link_efficiency.hpp); any rate at least
/// that keeps the bound a bound.
struct GpuLineRates {
  std::vector<Bandwidth> egress;
  std::vector<Bandwidth> ingress;
  std::vector<int> node;
  std::vector<Bandwidth> node_egress;
  std::vector<Bandwidth> node_ingress;
};

/// `from` for path_lower_bounds: the run's start (time zero) rather than a node's end.
inline constexpr NodeId kRunStart = 0xffffffffu;

/// For each (from, to): from the end of `from` to the end of `to` in a run of `graph` (checked,
/// `index`), the longest chain of the orders above, at least; `from` = kRunStart measures from
/// the run's start. nullopt where `to` does not wait for `from` through any such chain (nothing
/// is then known), or where the orders form a cycle (a run would deadlock).
std::vector<std::optional<Time>> path_lower_bounds(const ExecutionGraph& graph, const GraphIndex& index,
                                                   const GpuLineRates& rates,
                                                   std::span<const std::pair<NodeId, NodeId>> pairs);

/// What a communication op lasts at least (see above): collective instance `c` of `index`, or
/// for transfers, instance index.collective_count() + t.
Time comm_lower_bound(const ExecutionGraph& graph, const GraphIndex& index, const GpuLineRates& rates,
                      std::uint32_t instance);

}  // namespace foresight::sim
