#pragma once
/// What the network models and collective algorithms need to know about a cluster, and nothing
/// more. topologies/ implements it on Boost.Graph (topo::Cluster); sim/ never sees the graph.

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "common/units.hpp"

namespace foresight::sim {

/// Index of a directed link, 0 .. Fabric::link_count()-1.
using LinkId = std::uint32_t;
/// Cluster-wide GPU index, 0 .. Fabric::gpu_count()-1, node-major (node 0's GPUs first).
using GpuId = std::uint32_t;

/// Link classes. Each has a stated efficiency (net/link_efficiency.hpp) that turns its line
/// rate into what data transfers achieve.
enum class LinkClass : std::uint8_t { nvlink, pcie, infiniband, ethernet, cpu_interconnect };
inline constexpr int kLinkClassCount = 5;
std::string_view to_string(LinkClass c);

/// Who made the host CPUs: NCCL's tuner uses it (net overhead, LL bandwidth row).
enum class CpuVendor : std::uint8_t { amd, intel, other };

/// One directed link.
struct LinkInfo {
  Bandwidth capacity;  ///< line rate in this direction
  Time latency;        ///< propagation and switching latency of this hop
  LinkClass cls = LinkClass::pcie;
};

/// Facts about one GPU.
struct GpuFacts {
  int node = 0;                ///< index of the server that holds it
  int local_index = 0;         ///< index among that server's GPUs
  int compute_capability = 0;  ///< 70 V100, 80 A100, 90 H100/H200
  int nvlink_lanes = 0;        ///< NVLink lanes leaving the GPU (12 on A100, 18 on H100)
  Bandwidth nvlink_lane;       ///< line rate of one lane, one direction (25 GB/s on A100/H100)
  Bandwidth pcie;              ///< line rate of the GPU's PCIe link, one direction
};

/// Facts about one server (node).
struct NodeFacts {
  int gpus = 0;
  bool nvswitch = false;  ///< GPUs reach each other through an NVSwitch fabric
  bool nvls = false;      ///< that NVSwitch supports NVLink SHARP (multicast + in-switch reduction)
  int nics = 0;           ///< compute NICs ("rails"), numbered 0 .. nics-1
  Bandwidth nic;          ///< line rate of one compute NIC, one direction
  CpuVendor cpu = CpuVendor::other;
};

class Fabric {
 public:
  virtual ~Fabric() = default;

  virtual std::size_t gpu_count() const = 0;
  virtual std::size_t node_count() const = 0;
  virtual std::size_t link_count() const = 0;
  virtual const LinkInfo& link(LinkId id) const = 0;
  virtual const GpuFacts& gpu(GpuId id) const = 0;
  virtual const NodeFacts& node(int index) const = 0;

  /// Rail (local NIC index) of the NIC nearest to `gpu`; ties go to the NIC whose index equals
  /// the GPU's local index, then to the lowest index. -1 when its node has no NIC.
  virtual int primary_rail(GpuId gpu) const = 0;

  /// Appends to `out` the directed links from `src` to `dst` (src != dst).
  /// - Same node: the cheapest path, each link weighing more the slower it is (so NVLink is
  ///   preferred to PCIe, and PCIe to the CPU interconnect, as NCCL ranks its path types), never
  ///   relaying through another GPU unless no other path exists.
  /// - Different nodes: src -> its node's NIC on rail `src_rail` -> the switch fabric -> the
  ///   destination node's NIC on rail `dst_rail` -> dst. A rail of -1 means the GPU's
  ///   primary rail. Among equal-cost fabric paths one is picked by a deterministic hash of
  ///   (src, dst, salt), as ECMP does.
  /// Const and thread-safe: simulations on several threads may share one Fabric.
  virtual void route(GpuId src, GpuId dst, int src_rail, int dst_rail, std::uint64_t salt,
                     std::vector<LinkId>& out) const = 0;

  /// The GPU's link into its node's NVSwitch and the NVSwitch's link back to it, when the node
  /// has an NVSwitch (NVLink SHARP moves data on exactly these two links).
  virtual std::optional<std::pair<LinkId, LinkId>> nvswitch_links(GpuId gpu) const = 0;

  /// Links that share one capacity pool: under adaptive routing, the equal-cost links between two
  /// switching stages carry traffic as one (packets are spread over them), so network models
  /// count them together. Pools are numbered 0 .. link_count()-1; by default every link is its
  /// own pool.
  virtual std::uint32_t link_pool(LinkId id) const { return id; }
};

}  // namespace foresight::sim
