#pragma once
/// Where a collective's data goes on the topology: the communicator's members grouped by node,
/// NCCL's rings over NIC rails, double binary trees, NVLink SHARP transfers and PXN paths.
/// Internal to collectives/collective_plan.cpp.

#include <cstdint>
#include <map>
#include <vector>

#include "collectives/collective_plan.hpp"
#include "net/fabric.hpp"

namespace foresight::sim::detail {

struct Member {
  GpuId gpu = 0;
  int local = 0;
  int rail = -1;
};

/// The members of a communicator on one node, by local index, and the rails they use.
struct NodeGroup {
  int node = 0;
  std::vector<Member> members;
  std::vector<int> rails;
};

/// Members grouped by node, in node order.
std::vector<NodeGroup> group_by_node(const Fabric& fabric, const std::vector<GpuId>& ranks);
/// Sum of the latencies of a path's links.
Time wire_latency(const Fabric& fabric, const std::vector<LinkId>& path);
/// Rings for `channels` channels. One node: one ring by local index (every NCCL ring on an
/// NVSwitch has the same per-GPU traffic). Several nodes: ring c enters each node at the member
/// on rail c and leaves from the member nearest to that same NIC, so the inter-node hop stays on
/// rail c ("same NIC in and out", nccl-model.md sec. 5).
std::vector<PlannedRing> build_rings(const Fabric& fabric, const std::vector<NodeGroup>& nodes, int channels);
/// Each node's place in a list of NodeGroups, by node index.
using NodePositions = std::map<int, std::size_t>;
NodePositions node_positions(const std::vector<NodeGroup>& nodes);
/// A flow from `a` to `b` of `bytes` (payload), on the channel's rails; `pos` is
/// node_positions(nodes).
PlannedFlow flow(const Fabric& fabric, const std::vector<NodeGroup>& nodes, const NodePositions& pos, GpuId a,
                 GpuId b, double bytes, int channel);
/// Paths of the pipelined double-binary-tree all-reduce flows: per channel (tree `channel % 2`),
/// a chain inside each node from the channel's head (when `intra_chain`), and the tree across
/// nodes between heads; every edge both ways, up (reduce) and down (broadcast) at once.
std::vector<std::vector<LinkId>> tree_paths(const Fabric& fabric, const std::vector<NodeGroup>& nodes, int channels,
                                            bool intra_chain);
/// The tree flows on `paths` (from tree_paths over `nodes` nodes): each carries its channel's
/// share of `bytes`.
void add_tree_flows(const std::vector<std::vector<LinkId>>& paths, std::size_t nodes, int channels, double bytes,
                    std::vector<PlannedFlow>& out);
/// NVLink SHARP: per GPU, `up` bytes on its link into the NVSwitch and `down` bytes back.
void add_nvls_flows(const Fabric& fabric, const std::vector<NodeGroup>& nodes, double up, double down,
                    std::vector<PlannedFlow>& out);
/// Point-to-point path, through the NIC of the destination's rail (PXN) when enabled.
std::vector<LinkId> p2p_path(const Fabric& fabric, const std::vector<NodeGroup>& nodes, GpuId src, GpuId dst,
                             bool pxn, std::uint64_t salt);

}  // namespace foresight::sim::detail
