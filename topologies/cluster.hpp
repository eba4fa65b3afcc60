#pragma once
/// A GPU cluster as a directed multigraph of devices (GPUs, CPUs, NVSwitches, PCIe switches,
/// NICs, InfiniBand switches) joined by links with a line rate, a latency and a class. Built
/// through ClusterBuilder, immutable afterwards, and seen by the simulator as a sim::Fabric.
/// The graph (Boost.Graph) and the routing tables live behind a pointer to detail::ClusterImpl.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "net/fabric.hpp"
#include "common/large_vector.hpp"
#include "common/string_hash.hpp"
#include "common/units.hpp"
#include "topologies/gpu_spec.hpp"

namespace foresight::topo {

namespace detail {
struct ClusterImpl;
}

/// Index of a device, 0 .. Cluster::device_count()-1, in the order the builder added them.
using DeviceId = std::uint32_t;

/// What a device is. Devices of a server carry its node index; ib_leaf and ib_spine do not.
enum class DeviceKind : std::uint8_t {
  gpu,          ///< a GPU (has a local index and a GpuSpec)
  cpu,          ///< a host CPU socket (has a vendor)
  nvswitch,     ///< a node's NVSwitch chips merged into one device, as NCCL merges them
  pcie_switch,  ///< a PCIe switch
  nic,          ///< a compute NIC; its rail is its index among the node's NICs
  ib_leaf,      ///< an InfiniBand leaf (edge) switch
  ib_spine,     ///< an InfiniBand spine (core) switch
};
inline constexpr int kDeviceKindCount = 7;

/// How the switch fabric picks among equal-cost links.
enum class FabricRouting : std::uint8_t {
  /// Per flow, by a deterministic hash of (source, destination, salt): Ethernet/RoCE ECMP. Flows
  /// may collide on one uplink while another idles.
  ecmp,
  /// Adaptive routing: the switches spread packets over all equal-cost links toward a
  /// destination, so the uplinks of a leaf to the spine layer form one capacity pool, and so do
  /// the links from the spine layer into a leaf (sim::Fabric::link_pool). NVIDIA enables it on
  /// its InfiniBand fabrics and NCCL uses it by default where the switches support it (Quantum
  /// HDR/NDR; NCCL_IB_ADAPTIVE_ROUTING). The default of built fat trees.
  adaptive,
  /// By destination: link (destination index mod candidates), the same for every source and
  /// salt. InfiniBand's subnet manager routes per destination LID and OpenSM's fat-tree routing
  /// balances destinations over uplinks this way ("D-mod-k"), which keeps shift patterns such as
  /// ring neighbours free of contention (Zahavi et al., "Optimized InfiniBand fat-tree routing
  /// for shift all-to-all communication patterns", CCPE 22(2), 2010).
  destination,
};
/// "ecmp", "destination", "adaptive".
std::string_view to_string(FabricRouting routing);
/// Inverse of to_string(FabricRouting); nullopt for an unknown word.
std::optional<FabricRouting> parse_fabric_routing(std::string_view text);

/// "gpu", "cpu", "nvswitch", "pcie_switch", "nic", "ib_leaf", "ib_spine" (the JSON spelling).
std::string_view to_string(DeviceKind kind);
/// Inverse of to_string(DeviceKind); nullopt for an unknown word.
std::optional<DeviceKind> parse_device_kind(std::string_view text);
/// "amd", "intel", "other".
std::string_view to_string(sim::CpuVendor vendor);
/// Inverse of to_string(CpuVendor); nullopt for an unknown word.
std::optional<sim::CpuVendor> parse_cpu_vendor(std::string_view text);
/// Inverse of sim::to_string(LinkClass) ("nvlink", "pcie", "infiniband", "ethernet",
/// "cpu-interconnect"; "cpu_interconnect" is accepted too); nullopt for an unknown word.
std::optional<sim::LinkClass> parse_link_class(std::string_view text);

/// One device. Fields that do not apply to its kind keep their defaults.
struct DeviceInfo {
  std::string name;  ///< unique, readable: "n3.gpu5", "leaf2"
  DeviceKind kind = DeviceKind::gpu;
  int node = -1;                   ///< server index (>= 0) for server devices; -1 for switches
  int local_index = -1;            ///< gpu: index among its node's GPUs (0 ..)
  int rail = -1;                   ///< nic: index among its node's NICs (0 ..)
  const GpuSpec* model = nullptr;  ///< gpu: its catalog entry (never null for a GPU)
  sim::CpuVendor vendor = sim::CpuVendor::other;  ///< cpu: who made it
  bool nvls = false;                              ///< nvswitch: supports NVLink SHARP
  sim::Bandwidth port_rate;  ///< nic: line rate of its network port, one direction; zero
                             ///< when not stated (then only its fabric links define it)
};

/// Line rate, latency and class of a link to add; the same for both directions of a duplex link.
struct LinkSpec {
  sim::Bandwidth bandwidth;  ///< line rate, one direction; must be positive
  sim::Time latency;         ///< per-hop latency; must be non-negative
  sim::LinkClass cls = sim::LinkClass::pcie;
};

/// Both ends of a directed link.
struct LinkEnds {
  DeviceId from = 0;
  DeviceId to = 0;
};

/// Device ids by name, looked up by string_view.
using DeviceNames = StringMap<DeviceId>;

/// An immutable cluster. Copies share the same immutable data; every member is const and safe to
/// call from several threads at once.
///
/// Routing (route): inside a node, the path with the fewest GPU transits and then the least total
/// link weight (ceil(1 TB/s / line rate) per link, so the widest path with the fewest hops),
/// using only that node's devices; across nodes, src -> the NIC of rail src_rail (the
/// primary rail when -1) -> InfiniBand switches only -> the NIC of rail dst_rail -> dst, each of
/// the three segments shortest in the same sense. Among equal-cost next hops (sorted by link id)
/// one is chosen by the cluster's FabricRouting: a hash of (src, dst, salt, hop index), as ECMP does, or by destination, as InfiniBand routes. When that recipe finds no
/// path (a node without NIC, a NIC with no path to the other, a node whose GPUs connect only
/// through the outside), the route is the shortest path over the whole graph, with the same cost
/// and tie-breaking, computed on the fly.
class Cluster final : public sim::Fabric {
 public:
  ~Cluster() override;
  Cluster(const Cluster&);
  Cluster(Cluster&&) noexcept;
  Cluster& operator=(const Cluster&);
  Cluster& operator=(Cluster&&) noexcept;

  // sim::Fabric
  std::size_t gpu_count() const override;
  std::size_t node_count() const override;
  std::size_t link_count() const override;
  /// Throws sim::InternalError for an id out of range (as do the other indexed accessors).
  const sim::LinkInfo& link(sim::LinkId id) const override;
  const sim::GpuFacts& gpu(sim::GpuId id) const override;
  const sim::NodeFacts& node(int index) const override;
  int primary_rail(sim::GpuId gpu) const override;
  /// See the class comment. Throws sim::InternalError when src == dst, an id is out of range
  /// or a rail is neither -1 nor a rail of the node.
  void route(sim::GpuId src, sim::GpuId dst, int src_rail, int dst_rail, std::uint64_t salt,
             std::vector<sim::LinkId>& out) const override;
  std::optional<std::pair<sim::LinkId, sim::LinkId>> nvswitch_links(sim::GpuId gpu) const override;
  std::uint32_t link_pool(sim::LinkId id) const override;

  /// The name the cluster was built with ("thetagpu", a file's "name").
  const std::string& name() const;
  /// How its switch fabric picks among equal-cost links.
  FabricRouting fabric_routing() const;
  std::size_t device_count() const;
  const DeviceInfo& device(DeviceId id) const;
  /// The device called `name`, if any.
  std::optional<DeviceId> find_device(std::string_view name) const;
  /// The device of a GPU (GpuIds are node-major: node 0's GPUs by local index first).
  DeviceId gpu_device(sim::GpuId gpu) const;
  /// The GpuId of a GPU device; nullopt for other kinds.
  std::optional<sim::GpuId> gpu_id(DeviceId device) const;
  /// The catalog entry of a GPU's model.
  const GpuSpec& gpu_model(sim::GpuId gpu) const;
  /// Whether the first `gpus` GPUs are all of one model (same catalog name and memory).
  bool uniform_gpus(int gpus) const;
  /// The NIC of rail `rail` in node `node`, if any.
  std::optional<DeviceId> nic(int node, int rail) const;

  /// "n0.gpu0->n0.nvswitch"; parallel links get "#2", "#3", ... appended (in increasing id).
  /// Made from the devices' names when asked, not stored.
  std::string link_name(sim::LinkId id) const;
  LinkEnds link_ends(sim::LinkId id) const;
  /// The opposite direction of a link added as duplex; nullopt for a link added alone.
  std::optional<sim::LinkId> reverse_link(sim::LinkId id) const;
  /// Links leaving / entering a device, in increasing id order.
  std::span<const sim::LinkId> out_links(DeviceId id) const;
  std::span<const sim::LinkId> in_links(DeviceId id) const;

 private:
  friend class ClusterBuilder;
  explicit Cluster(std::shared_ptr<const detail::ClusterImpl> impl);
  std::shared_ptr<const detail::ClusterImpl> impl_;
};

/// Collects devices and links, then validates them and builds a Cluster. Each add_* checks what
/// it can at once (unique non-empty names, indices, endpoints, bandwidth > 0, latency >= 0) and
/// throws sim::TopologyError naming the element; build() checks the whole: nodes numbered
/// 0 .. N-1 each with a GPU, GPU local indices 0 .. g-1 and NIC rails 0 .. r-1 without
/// duplicates, at most one (merged) NVSwitch per node, one CPU vendor per node, and every GPU able
/// to reach every other GPU.
class ClusterBuilder {
 public:
  explicit ClusterBuilder(std::string name);

  /// Adds any device. The kind's required fields must be set (gpu: node, local_index, model;
  /// cpu, nvswitch, pcie_switch: node; nic: node, rail); ib switches must have node -1.
  DeviceId add_device(DeviceInfo info);
  DeviceId add_gpu(std::string name, int node, int local_index, const GpuSpec& model);
  DeviceId add_cpu(std::string name, int node, sim::CpuVendor vendor);
  DeviceId add_nvswitch(std::string name, int node, bool nvls);
  DeviceId add_pcie_switch(std::string name, int node);
  /// `port_rate` may be zero (not stated); see DeviceInfo::port_rate.
  DeviceId add_nic(std::string name, int node, int rail, sim::Bandwidth port_rate = {});
  DeviceId add_ib_leaf(std::string name);
  DeviceId add_ib_spine(std::string name);

  /// One directed link from -> to (from != to). Parallel links are allowed.
  sim::LinkId add_link(DeviceId from, DeviceId to, const LinkSpec& spec);
  /// Two directed links a -> b and b -> a with the same spec; returns (a->b, b->a), whose ids
  /// are consecutive.
  std::pair<sim::LinkId, sim::LinkId> add_duplex(DeviceId a, DeviceId b, const LinkSpec& spec);

  /// How the fabric picks among equal-cost links (default: ecmp).
  void set_fabric_routing(FabricRouting routing) { routing_ = routing; }

  std::optional<DeviceId> find_device(std::string_view name) const;
  std::size_t device_count() const { return devices_.size(); }
  std::size_t link_count() const { return links_.size(); }
  const DeviceInfo& device(DeviceId id) const;

  /// Validates everything and returns the cluster (see the class comment). The builder is left
  /// empty when it succeeds and unchanged when it throws.
  Cluster build();

 private:
  struct PendingLink {
    DeviceId from;
    DeviceId to;
    sim::LinkInfo info;
    std::optional<sim::LinkId> reverse;
  };

  std::string name_;
  FabricRouting routing_ = FabricRouting::ecmp;
  std::vector<DeviceInfo> devices_;
  DeviceNames by_name_;
  sim::LargeVector<PendingLink> links_;  ///< 0.4 M for 16,384 GPUs: grown in whole huge pages
};

}  // namespace foresight::topo
