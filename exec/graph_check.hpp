#pragma once
/// Validation of an execution graph, and the index the executor runs it with: the stream of
/// each node, who depends on whom, which nodes form one collective, which send meets which
/// receive.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "exec/execution_graph.hpp"
#include "net/fabric.hpp"

namespace foresight::sim {

struct GraphIndex {
  /// Per rank: its GPU streams and their indices among all GPU streams (numbered in the order
  /// each (rank, stream) first appears in the graph).
  std::vector<std::vector<std::pair<StreamId, std::uint32_t>>> rank_streams;
  /// The index of rank `r`'s GPU stream `s` (a rank has a few: a linear search).
  std::uint32_t stream_index(RankId r, StreamId s) const {
    for (const auto& [stream, index] : rank_streams[r]) {
      if (stream == s) return index;
    }
    return 0xffffffffu;
  }
  std::uint32_t stream_count = 0;
  std::uint32_t host_count = 0;
  /// Dependents of node n: dependents[dependents_offset[n] .. dependents_offset[n + 1]).
  LargeVector<std::uint32_t> dependents_offset;
  LargeVector<NodeId> dependents;
  /// The k-th collective on a communicator of every member, matched: collective c's member
  /// nodes are collective_members[collective_offset[c] .. collective_offset[c + 1]).
  LargeVector<std::uint32_t> collective_offset{0};
  LargeVector<NodeId> collective_members;
  std::uint32_t collective_count() const { return static_cast<std::uint32_t>(collective_offset.size() - 1); }
  std::span<const NodeId> members(std::uint32_t c) const {
    return {collective_members.data() + collective_offset[c], collective_offset[c + 1] - collective_offset[c]};
  }
  /// The k-th send from a to b with tag t and the k-th receive at b from a with tag t.
  struct Transfer {
    NodeId send;
    NodeId recv;
  };
  std::vector<Transfer> transfers;
  /// Per node: a collective node's index into `collectives`; a send's or receive's index into
  /// `transfers` plus the number of collectives; 0xffffffff for other nodes. The executor's
  /// result takes it as ExecutionResult::comm_instance.
  LargeVector<std::uint32_t> comm_of;
  std::uint32_t collective_of(NodeId n) const { return comm_of[n]; }
  std::uint32_t transfer_of(NodeId n) const { return comm_of[n] - collective_count(); }
};

/// Checks `graph` and indexes it; GraphError naming the node and the problem otherwise.
GraphIndex check_graph(const ExecutionGraph& graph, const Fabric& fabric);

}  // namespace foresight::sim
