#include "collectives/detail/collective_layout.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "common/error.hpp"

namespace foresight::sim::detail {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

int channel_rail(const NodeGroup& ng, int channel) {
  return ng.rails.empty() ? -1 : ng.rails[static_cast<std::size_t>(channel) % ng.rails.size()];
}

/// The member that talks to the network for `channel`: the one whose NIC is the channel's rail.
const Member& head(const NodeGroup& ng, int channel) {
  const int rail = channel_rail(ng, channel);
  for (const Member& m : ng.members) {
    if (m.rail == rail) return m;
  }
  return ng.members[static_cast<std::size_t>(channel) % ng.members.size()];
}

std::vector<LinkId> route(const Fabric& fabric, GpuId a, GpuId b, int rail_a, int rail_b,
                          std::uint64_t salt) {
  std::vector<LinkId> out;
  fabric.route(a, b, rail_a, rail_b, salt, out);
  return out;
}

bool crosses_cpus(const Fabric& fabric, const std::vector<LinkId>& path) {
  return std::any_of(path.begin(), path.end(),
                     [&](LinkId l) { return fabric.link(l).cls == LinkClass::cpu_interconnect; });
}

/// Path between two members; across nodes on the channel's rails. A sender whose way to the
/// channel's NIC crosses the CPUs' interconnect sends through the member on that NIC's rail over
/// NVLink instead, as NCCL's PXN does (NCCL_PXN_DISABLE=0, its default since 2.12): a
/// communicator with one GPU per PCIe switch (a data-parallel group of a TP x DP layout) leaves
/// each node from a GPU that is not the channel's.
std::vector<LinkId> hop_path(const Fabric& fabric, const std::vector<NodeGroup>& nodes,
                             const std::map<int, std::size_t>& node_pos, GpuId a, GpuId b,
                             int channel) {
  const int na = fabric.gpu(a).node;
  const int nb = fabric.gpu(b).node;
  const auto salt = static_cast<std::uint64_t>(channel);
  if (na == nb) return route(fabric, a, b, -1, -1, salt);
  const NodeGroup& from = nodes[node_pos.at(na)];
  const int rail_a = channel_rail(from, channel);
  const int rail_b = channel_rail(nodes[node_pos.at(nb)], channel);
  auto direct = route(fabric, a, b, rail_a, rail_b, salt);
  if (!crosses_cpus(fabric, direct) || fabric.gpu(a).nvlink_lanes == 0 || !fabric.node(na).nvswitch) return direct;
  const Member& relay = head(from, channel);
  if (relay.gpu == a || relay.rail != rail_a) return direct;
  auto path = route(fabric, a, relay.gpu, -1, -1, salt);
  const auto rest = route(fabric, relay.gpu, b, rail_a, rail_b, salt);
  if (crosses_cpus(fabric, path) || crosses_cpus(fabric, rest)) return direct;
  path.insert(path.end(), rest.begin(), rest.end());
  return path;
}

}  // namespace

Time wire_latency(const Fabric& fabric, const std::vector<LinkId>& path) {
  Time t;
  for (const LinkId l : path) t += fabric.link(l).latency;
  return t;
}


std::vector<NodeGroup> group_by_node(const Fabric& fabric, const std::vector<GpuId>& ranks) {
  std::map<int, NodeGroup> by_node;
  for (const GpuId g : ranks) {
    const GpuFacts& gf = fabric.gpu(g);
    NodeGroup& ng = by_node[gf.node];
    ng.node = gf.node;
    ng.members.push_back(Member{g, gf.local_index, fabric.primary_rail(g)});
  }
  std::vector<NodeGroup> out;
  for (auto& [node, ng] : by_node) {
    std::sort(ng.members.begin(), ng.members.end(),
              [](const Member& a, const Member& b) { return a.local < b.local; });
    std::set<int> rails;
    for (const Member& m : ng.members) {
      if (m.rail >= 0) rails.insert(m.rail);
    }
    ng.rails.assign(rails.begin(), rails.end());
    out.push_back(std::move(ng));
  }
  return out;
}


/// Rings for `channels` channels. One node: one ring by local index (every NCCL ring on an
/// NVSwitch has the same per-GPU traffic). Several nodes: ring c enters each node at the member
/// on rail c and leaves from the member nearest to that same NIC, so the inter-node hop stays on
/// rail c ("same NIC in and out", nccl-model.md sec. 5).
std::vector<PlannedRing> build_rings(const Fabric& fabric, const std::vector<NodeGroup>& nodes,
                                     int channels) {
  const NodePositions node_pos = node_positions(nodes);
  std::vector<PlannedRing> rings;
  const int count = nodes.size() == 1 ? 1 : channels;
  for (int c = 0; c < count; ++c) {
    PlannedRing ring;
    if (nodes.size() == 1) {
      for (const Member& m : nodes[0].members) ring.order.push_back(m.gpu);
    } else {
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        const NodeGroup& ng = nodes[i];
        const NodeGroup& next = nodes[(i + 1) % nodes.size()];
        const Member& entry = head(ng, c);
        const Member* exit = &entry;
        std::size_t best = std::numeric_limits<std::size_t>::max();
        for (const Member& m : ng.members) {
          if (m.gpu == entry.gpu) continue;
          const std::size_t hops =
              route(fabric, m.gpu, head(next, c).gpu, channel_rail(ng, c), channel_rail(next, c),
                    static_cast<std::uint64_t>(c))
                  .size();
          if (hops < best) {
            best = hops;
            exit = &m;
          }
        }
        ring.order.push_back(entry.gpu);
        for (const Member& m : ng.members) {
          if (m.gpu != entry.gpu && m.gpu != exit->gpu) ring.order.push_back(m.gpu);
        }
        if (exit->gpu != entry.gpu) ring.order.push_back(exit->gpu);
      }
    }
    const std::size_t n = ring.order.size();
    for (std::size_t p = 0; p < n; ++p) {
      ring.hops.push_back(hop_path(fabric, nodes, node_pos, ring.order[p], ring.order[(p + 1) % n], c));
      ring.hop_latency.push_back(wire_latency(fabric, ring.hops.back()));
    }
    rings.push_back(std::move(ring));
  }
  return rings;
}

NodePositions node_positions(const std::vector<NodeGroup>& nodes) {
  NodePositions pos;
  for (std::size_t i = 0; i < nodes.size(); ++i) pos[nodes[i].node] = i;
  return pos;
}

PlannedFlow flow(const Fabric& fabric, const std::vector<NodeGroup>& nodes, const NodePositions& pos, GpuId a,
                 GpuId b, double bytes, int channel) {
  PlannedFlow f;
  f.path = hop_path(fabric, nodes, pos, a, b, channel);
  f.bytes = bytes;
  return f;
}

std::vector<std::vector<LinkId>> tree_paths(const Fabric& fabric, const std::vector<NodeGroup>& nodes, int channels,
                                            bool intra_chain) {
  const int n_nodes = static_cast<int>(nodes.size());
  const int count = n_nodes == 1 ? 1 : channels;
  const NodePositions pos = node_positions(nodes);
  std::vector<std::vector<LinkId>> out;
  const auto both = [&](GpuId a, GpuId b, int c) {
    out.push_back(hop_path(fabric, nodes, pos, a, b, c));
    out.push_back(hop_path(fabric, nodes, pos, b, a, c));
  };
  for (int c = 0; c < count; ++c) {
    if (intra_chain) {
      for (const NodeGroup& ng : nodes) {
        std::vector<GpuId> chain{head(ng, c).gpu};
        for (const Member& m : ng.members) {
          if (m.gpu != chain.front()) chain.push_back(m.gpu);
        }
        for (std::size_t k = 0; k + 1 < chain.size(); ++k) both(chain[k + 1], chain[k], c);
      }
    }
    for (int i = 0; i < n_nodes; ++i) {
      const int parent = double_tree_parent(i, n_nodes, c % 2);
      if (parent < 0) continue;
      both(head(nodes[static_cast<std::size_t>(i)], c).gpu, head(nodes[static_cast<std::size_t>(parent)], c).gpu, c);
    }
  }
  return out;
}

void add_tree_flows(const std::vector<std::vector<LinkId>>& paths, std::size_t nodes, int channels, double bytes,
                    std::vector<PlannedFlow>& out) {
  const double share = bytes / (nodes == 1 ? 1 : channels);
  for (const auto& path : paths) {
    PlannedFlow f;
    f.path = path;
    f.bytes = share;
    out.push_back(std::move(f));
  }
}

/// NVLink SHARP: per GPU, `up` bytes on its link into the NVSwitch and `down` bytes back.
void add_nvls_flows(const Fabric& fabric, const std::vector<NodeGroup>& nodes, double up,
                    double down, std::vector<PlannedFlow>& out) {
  for (const NodeGroup& ng : nodes) {
    for (const Member& m : ng.members) {
      const auto links = fabric.nvswitch_links(m.gpu);
      if (!links) throw InternalError(fmt::format("NVLS planned for GPU {} without an NVSwitch", m.gpu));
      out.push_back(PlannedFlow{{links->first}, up, kInf, Time{}});
      out.push_back(PlannedFlow{{links->second}, down, kInf, Time{}});
    }
  }
}

/// Point-to-point path, through the NIC of the destination's rail (PXN) when enabled.
std::vector<LinkId> p2p_path(const Fabric& fabric, const std::vector<NodeGroup>& nodes, GpuId src,
                             GpuId dst, bool pxn, std::uint64_t salt) {
  const GpuFacts& s = fabric.gpu(src);
  const GpuFacts& d = fabric.gpu(dst);
  if (s.node == d.node) return route(fabric, src, dst, -1, -1, salt);
  if (pxn) {
    for (const NodeGroup& ng : nodes) {
      if (ng.node != s.node) continue;
      for (const Member& m : ng.members) {
        if (m.local == d.local_index && m.gpu != src) {
          auto path = route(fabric, src, m.gpu, -1, -1, salt);
          const auto rest = route(fabric, m.gpu, dst, m.rail, fabric.primary_rail(dst), salt);
          path.insert(path.end(), rest.begin(), rest.end());
          return path;
        }
      }
    }
  }
  return route(fabric, src, dst, -1, -1, salt);
}

}  // namespace foresight::sim::detail
