#pragma once
/// Building blocks of hand-made execution graphs, shared by the tests that write them.

#include <utility>
#include <vector>

#include "exec/execution_graph.hpp"

namespace foresight::test {

/// A node of `kind` on `rank`'s `stream`, after `deps`; the caller sets the rest.
inline sim::Node op(sim::OpKind kind, sim::RankId rank, sim::StreamId stream, std::vector<sim::NodeId> deps = {}) {
  sim::Node n;
  n.kind = kind;
  n.rank = rank;
  n.stream = stream;
  n.deps = std::move(deps);
  return n;
}

}  // namespace foresight::test
