#pragma once
/// Internals of topo::Cluster: compressed adjacency lists and the routing tables precomputed at
/// build time. Included only by topologies/*.cpp.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "topologies/cluster.hpp"

namespace foresight::topo::detail {

/// "No such device / link / index" in the tables below.
inline constexpr std::uint32_t kNone = 0xFFFF'FFFFu;

/// Compressed adjacency lists: the links of device v are ids[offset[v] .. offset[v+1]), in
/// increasing link id.
struct Adjacency {
  std::vector<std::uint32_t> offset;
  std::vector<sim::LinkId> ids;
  std::span<const sim::LinkId> of(DeviceId v) const {
    return {ids.data() + offset[v], ids.data() + offset[v + 1]};
  }
};

/// Intra-node path costs, encoded as (GPU transits << 24) | weight so that comparing the integers
/// compares (transits, weight) lexicographically; kNone when unreachable inside the node. A link's
/// weight falls with its line rate (see link_weight), so the cheapest path is the widest one with
/// the fewest hops, as NCCL ranks its path types (NVLink before PCIe before the CPU).
inline constexpr std::uint32_t kGpuTransit = 1u << 24;

/// Routing weight of a link: ceil(1 TB/s / line rate), between 1 and 50000 (OSPF's
/// reference-bandwidth rule, RFC 2328 sec. C.3). NVLink 300 GB/s weighs 4, PCIe Gen4 x16 32.
std::uint32_t link_weight(sim::Bandwidth line_rate);

/// One node's devices and its all-pairs cost table, restricted to paths inside the node.
struct NodeTable {
  std::vector<DeviceId> devices;  ///< the node's devices in increasing id; local index = position
  std::vector<std::uint32_t>
      cost;  ///< cost[t * n + u]: from local u to local t (n = devices.size())
  std::uint32_t cost_to(std::uint32_t t, std::uint32_t u) const {
    return cost[static_cast<std::size_t>(t) * devices.size() + u];
  }
};

/// The switch fabric: hop distances between InfiniBand switches through switches only, which
/// switches lead into each NIC, and each switch's out-links sorted by target for fast lookup.
struct FabricTable {
  inline static constexpr std::uint16_t kFar = 0xFFFF;  ///< unreachable
  std::vector<std::uint32_t> switch_index;      ///< per device: index among switches, or kNone
  std::vector<DeviceId> switches;               ///< switch devices in increasing id
  /// Switches with a link into a device that is not a switch (a NIC): the only switches
  /// routes head for, so the only columns of the hop table.
  std::vector<std::uint32_t> target_index;      ///< per switch: index among targets, or kNone
  std::vector<std::uint16_t> hops;              ///< hops[t * S + a]: switch a to target t
  std::vector<std::uint32_t> nic_ordinal;  ///< per device: its index among devices with an attach
  std::vector<std::uint32_t> attach_offset;     ///< per device (V+1): switches with a link into it
  std::vector<DeviceId> attach;                 ///< sorted by device id within each device
  std::vector<std::uint32_t> by_target_offset;  ///< per switch index (S+1)
  std::vector<std::pair<DeviceId, sim::LinkId>> by_target;  ///< (target, link), sorted

  std::size_t switch_count() const { return switches.size(); }
  /// Hops from switch a to switch b, b a target (a switch with a NIC attached).
  std::uint16_t hop(std::uint32_t a, std::uint32_t b) const {
    return hops[static_cast<std::size_t>(target_index[b]) * switches.size() + a];
  }
  std::span<const DeviceId> attached(DeviceId nic) const {
    return {attach.data() + attach_offset[nic], attach.data() + attach_offset[nic + 1]};
  }
};

/// Everything a Cluster holds. Immutable once build() returns it.
struct ClusterImpl {
  std::string name;
  FabricRouting routing = FabricRouting::ecmp;

  std::vector<DeviceInfo> devices;
  DeviceNames by_name;

  std::vector<sim::LinkInfo> links;
  std::vector<std::uint32_t> weights;  ///< per link: link_weight(capacity)
  std::vector<std::uint32_t> pools;    ///< per link: its capacity pool (Cluster::link_pool)
  std::vector<LinkEnds> ends;
  std::vector<std::uint32_t> reverse;  ///< per link: its duplex twin, or kNone
  Adjacency out;
  Adjacency in;

  std::vector<DeviceId> gpu_devices;         ///< by GpuId
  std::vector<std::uint32_t> gpu_of_device;  ///< per device: GpuId, or kNone
  std::vector<sim::GpuFacts> gpu_facts;      ///< by GpuId
  std::vector<int> primary_rails;            ///< by GpuId
  std::vector<std::optional<std::pair<sim::LinkId, sim::LinkId>>> nvswitch_links;  ///< by GpuId

  std::vector<sim::NodeFacts> node_facts;
  std::vector<std::vector<DeviceId>> node_nics;  ///< [node][rail] -> NIC device
  std::vector<std::uint32_t> local_of;           ///< per device: index in its NodeTable, or kNone
  std::vector<NodeTable> node_tables;
  FabricTable fabric;
};

/// Fills local_of, node_tables, fabric and primary_rails from the graph (called by build()).
void build_route_tables(ClusterImpl& c);

/// Cluster::route's work; arguments already checked.
void compute_route(const ClusterImpl& c, sim::GpuId src, sim::GpuId dst, int src_rail, int dst_rail,
                   std::uint64_t salt, std::vector<sim::LinkId>& out);

}  // namespace foresight::topo::detail
