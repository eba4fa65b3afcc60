#pragma once
/// Whole clusters: servers of a node preset joined by an InfiniBand fat tree or a rail-optimized
/// fabric, the named clusters (thetagpu, selene) and resolve_cluster, which turns a scenario's
/// "cluster" (a preset name or a topology file) and a GPU count into a Cluster.

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "common/units.hpp"
#include "topologies/cluster.hpp"
#include "topologies/node_presets.hpp"

namespace foresight::topo {

/// Adds server `node` to a builder and returns its GPUs and NICs.
using NodeFactory = std::function<NodeHandles(ClusterBuilder& builder, int node)>;

/// Shape parameters of a two-level (leaf-spine) fabric.
struct FatTreeOptions {
  /// Ports per leaf switch. 40 = Mellanox QM8700 (40 HDR 200 Gb/s ports, QM8700 datasheet).
  int leaf_radix = 40;
  /// Leaf down:up port ratio: 1.0 is non-blocking, 2.0 is 2:1. Down ports per leaf =
  /// round(leaf_radix * o / (1 + o)); up ports = leaf_radix - down.
  double oversubscription = 1.0;
  /// Ports per spine switch; 0 means leaf_radix. Director-class spines are larger (the Mellanox
  /// CS8500 has 800 HDR ports).
  int spine_radix = 0;
  /// Latency of each InfiniBand link, switch traversal included.
  sim::Time latency = latency::kInfiniband;
  /// Adaptive routing, as NVIDIA runs its InfiniBand fabrics (see FabricRouting).
  FabricRouting routing = FabricRouting::adaptive;
};

/// The switch counts a fabric of `nics` NICs gets.
struct FatTreeShape {
  int down = 0;  ///< NIC-facing ports per leaf
  int up = 0;    ///< uplink ports per leaf (unused when there is a single leaf)
  int leaves = 0;
  int spines = 0;  ///< switches above the leaves (every level); 0 when one leaf suffices
  int levels = 1;  ///< switch levels: 1 (one leaf), 2 (leaf-spine), 3 or more past radix leaves
};

/// Fat tree sizing: leaves = ceil(nics / down); one leaf needs no spine; up to spine_radix
/// leaves take one spine layer of ceil(leaves * up / spine_radix) switches; more leaves take
/// middle layers first (see build_fat_tree). Throws sim::ConfigError on a radix below 2, a
/// non-positive or non-finite oversubscription, or a split that leaves no down or no up port.
FatTreeShape fat_tree_shape(int nics, const FatTreeOptions& options);

/// `nodes` servers from `factory`, their NICs attached to the leaves node-major (node 0's rails
/// first, `down` NICs per leaf). Up to spine_radix leaves: each leaf's `up` uplinks dealt
/// round-robin over one spine layer as separate parallel links (the j-th uplink of the whole
/// fabric goes to spine j mod spines). More leaves: a folded Clos of as many levels as needed,
/// non-blocking above the leaves: pods of spine_radix / 2 leaves (then of pods) share a middle
/// layer of `up` switches per plane, each with half its ports down and half up, and the top
/// layer joins at most spine_radix blocks as above. Every leaf reaches every other.
/// Every fabric link is a duplex infiniband link: NIC-leaf at that NIC's port rate, leaf-spine
/// at node 0's NIC port rate. Names: "leaf<i>",
/// "spine<i>".
Cluster build_fat_tree(std::string name, int nodes, const NodeFactory& factory,
                       const FatTreeOptions& options = {});
Cluster build_fat_tree(std::string name, int nodes, NodePreset preset,
                       const FatTreeOptions& options = {});

/// Rail-optimized fabric: servers grouped in scalable units of `down` servers; rail r of every
/// server of unit u attaches to leaf u * rails + r ("leaf<i>"); the leaves are joined by spines
/// exactly as in build_fat_tree. All servers must have the same number of NICs.
Cluster build_rail_optimized(std::string name, int nodes, const NodeFactory& factory,
                             const FatTreeOptions& options = {});
Cluster build_rail_optimized(std::string name, int nodes, NodePreset preset,
                             const FatTreeOptions& options = {});

/// One server of `preset` alone, its NICs unconnected; the cluster is named after the preset.
Cluster build_single_node(NodePreset preset);

/// ThetaGPU at ALCF: 24 DGX A100, nodes 0-21 with A100-SXM4-40GB and nodes 22-23 with
/// A100-SXM4-80GB (ALCF ThetaGPU machine overview), 8 HDR 200 Gb/s compute ports per node, a
/// non-blocking fat tree of 40-port QM8700 switches. The real fabric has 20 such switches that
/// also carry the storage ports; only the compute ports are modelled, which gives 10 leaves and
/// 5 spines for 192 NICs. `nodes` (1 .. 24) keeps the first `nodes` servers.
Cluster build_thetagpu(int nodes = 24);

/// Selene-like: `nodes` DGX A100 80 GB, 8 HDR per node, a non-blocking fat tree of 40-port
/// QM8700 leaves and director-class spines of radix 800 (Mellanox CS8500), as in the DGX
/// SuperPOD reference architecture Megatron's runs used.
Cluster build_selene(int nodes);

/// A named cluster preset, for `foresight --list`.
struct ClusterPresetInfo {
  std::string_view name;
  std::string_view description;  ///< one line
};

/// thetagpu, selene and the node presets, in that order.
std::span<const ClusterPresetInfo> known_cluster_presets();
/// Whether `name` is one of known_cluster_presets() (else a cluster spec is a topology file).
bool is_cluster_preset(std::string_view name);

/// Resolves a scenario's cluster. `spec` is a preset name (known_cluster_presets) or the path of
/// a topology JSON file; `gpus` (0 = the preset's default) sizes presets with
/// nodes = ceil(gpus / GPUs per node):
/// - thetagpu: default 24 nodes; more than 192 GPUs is a sim::ConfigError naming the numbers;
/// - selene: default 1 node;
/// - a node preset: one server up to its GPU count, otherwise a non-blocking fat tree of that
///   many servers (40-port QM8700 leaves for HDR presets, 64-port QM9700 for the NDR ones), named
///   "<preset>-x<nodes>";
/// - a file: loaded as is; asking for more GPUs than it has is a sim::ConfigError.
/// A spec that is neither a preset nor an existing file is a sim::ConfigError (listing the presets,
/// or saying the file is missing when the spec looks like a path).
/// Throws sim::ConfigError for gpus < 0, sim::TopologyError for a bad file.
/// Presets build at most kMaxPresetGpus GPUs (a larger count is a sim::ConfigError): 131,072
/// GPUs take about 12 s and 1.3 GB to build.
Cluster resolve_cluster(std::string_view spec, int gpus);

inline constexpr int kMaxPresetGpus = 131072;

}  // namespace foresight::topo
