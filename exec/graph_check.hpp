#pragma once
/// Validation of an execution graph, and the index the executor runs it with: the stream of
/// each node, who depends on whom, which nodes form one collective, which send meets which
/// receive.

#include <cstdint>
#include <vector>

#include "exec/execution_graph.hpp"
#include "net/fabric.hpp"

namespace foresight::sim {

struct GraphIndex {
  /// Per node: index of its (rank, GPU stream) among all GPU streams; unused for the host stream.
  LargeVector<std::uint32_t> stream_of;
  std::uint32_t stream_count = 0;
  std::uint32_t host_count = 0;
  /// Dependents of node n: dependents[dependents_offset[n] .. dependents_offset[n + 1]).
  LargeVector<std::uint32_t> dependents_offset;
  LargeVector<NodeId> dependents;
  /// The k-th collective on a communicator of every member, matched.
  struct Collective {
    std::vector<NodeId> members;
  };
  std::vector<Collective> collectives;
  LargeVector<std::uint32_t> collective_of;  ///< per node, for collective nodes
  /// The k-th send from a to b with tag t and the k-th receive at b from a with tag t.
  struct Transfer {
    NodeId send;
    NodeId recv;
  };
  std::vector<Transfer> transfers;
  LargeVector<std::uint32_t> transfer_of;  ///< per node, for send and recv nodes
};

/// Checks `graph` and indexes it; GraphError naming the node and the problem otherwise.
GraphIndex check_graph(const ExecutionGraph& graph, const Fabric& fabric);

}  // namespace foresight::sim
