#include "topologies/cluster_builders.hpp"

#include <fmt/core.h>

#include <algorithm>

#include <array>
#include <cmath>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "topologies/topology_json.hpp"

namespace foresight::topo {
namespace {

int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

/// Mellanox QM8700: 40 HDR 200 Gb/s ports, 130 ns port-to-port (QM8700 datasheet).
constexpr int kQm8700Ports = 40;
/// NVIDIA QM9700: 64 NDR 400 Gb/s ports (QM9700 datasheet).
constexpr int kQm9700Ports = 64;
/// Mellanox CS8500 director switch: 800 HDR 200 Gb/s ports (CS8500 datasheet).
constexpr int kCs8500Ports = 800;
/// ThetaGPU (ALCF machine overview): 24 DGX A100, the last two with 80 GB GPUs.
constexpr int kThetaNodes = 24;
constexpr int kTheta40GbNodes = 22;

void check_nodes(int nodes, std::string_view what) {
  if (nodes < 1) {
    throw sim::ConfigError(fmt::format("{}: expected at least 1 server, found {}", what, nodes));
  }
}

int spine_radix(const FatTreeOptions& o) {
  return o.spine_radix == 0 ? o.leaf_radix : o.spine_radix;
}

/// Joins the leaves into one folded Clos network (fat tree) of switches with spine_radix ports.
/// A group of blocks, each with `tops` top switches of `up` free uplinks, is joined by a spine
/// layer when there are at most `radix` blocks: plane t (the t-th top switch of every block)
/// gets ceil(blocks * up / radix) spines and each top switch deals its uplinks round-robin over
/// its plane's spines, so it reaches every one of them (blocks <= radix keeps that count <= up).
/// More blocks than that are first grouped into pods of radix / 2 blocks under a middle layer,
/// non-blocking as in Leiserson's fat tree (and the k-ary fat tree of Al-Fares et al., SIGCOMM
/// 2008): each top switch of a block sends one uplink to each of `up` middle switches of its
/// plane, and every middle switch keeps radix / 2 ports for its pod and radix / 2 uplinks. The
/// fabric thus has as many levels as its size needs (two up to radix blocks of leaves, three up
/// to radix^2 / 2, ...) and every leaf reaches every other one.
void connect_spines(ClusterBuilder& b, const std::vector<DeviceId>& leaves, int up,
                    const FatTreeOptions& options, sim::Bandwidth rate) {
  if (leaves.size() <= 1) return;
  const int radix = spine_radix(options);
  const LinkSpec link{rate, options.latency, sim::LinkClass::infiniband};
  // blocks[i] = the top switches of block i, plane by plane; every block has the same count.
  std::vector<std::vector<DeviceId>> blocks;
  blocks.reserve(leaves.size());
  for (DeviceId leaf : leaves) blocks.push_back({leaf});
  int spine_count = 0;
  while (blocks.size() > static_cast<std::size_t>(radix)) {
    const int pod_size = radix / 2;
    const std::size_t planes = blocks.front().size();
    std::vector<std::vector<DeviceId>> pods;
    for (std::size_t first = 0; first < blocks.size(); first += static_cast<std::size_t>(pod_size)) {
      const std::size_t last = std::min(blocks.size(), first + static_cast<std::size_t>(pod_size));
      std::vector<DeviceId> middle;
      middle.reserve(planes * static_cast<std::size_t>(up));
      for (std::size_t t = 0; t < planes; ++t) {
        for (int k = 0; k < up; ++k) {
          const DeviceId m = b.add_ib_spine(fmt::format("spine{}", spine_count++));
          for (std::size_t i = first; i < last; ++i) b.add_duplex(blocks[i][t], m, link);
          middle.push_back(m);
        }
      }
      pods.push_back(std::move(middle));
    }
    blocks = std::move(pods);
    up = radix - pod_size;
  }
  const long long blocks_count = static_cast<long long>(blocks.size());
  const int per_plane = ceil_div(blocks_count * up, radix);
  for (std::size_t t = 0; t < blocks.front().size(); ++t) {
    std::vector<DeviceId> spines;
    spines.reserve(static_cast<std::size_t>(per_plane));
    for (int s = 0; s < per_plane; ++s) {
      spines.push_back(b.add_ib_spine(fmt::format("spine{}", spine_count++)));
    }
    long long j = 0;
    for (const auto& block : blocks) {
      for (int u = 0; u < up; ++u, ++j) {
        b.add_duplex(block[t], spines[static_cast<std::size_t>(j % per_plane)], link);
      }
    }
  }
}

std::vector<NodeHandles> add_nodes(ClusterBuilder& b, int nodes, const NodeFactory& factory) {
  std::vector<NodeHandles> handles;
  handles.reserve(static_cast<std::size_t>(nodes));
  for (int n = 0; n < nodes; ++n) handles.push_back(factory(b, n));
  if (handles.front().nics.empty()) {
    throw sim::ConfigError("a switched fabric needs servers with compute NICs; node 0 has none");
  }
  return handles;
}

NodeFactory preset_factory(NodePreset preset) {
  return [preset](ClusterBuilder& b, int node) { return add_node(b, preset, node); };
}

}  // namespace

FatTreeShape fat_tree_shape(int nics, const FatTreeOptions& o) {
  if (o.leaf_radix < 2) {
    throw sim::ConfigError(
        fmt::format("fat tree: expected a leaf radix >= 2, found {}", o.leaf_radix));
  }
  if (o.spine_radix < 0 || (o.spine_radix > 0 && o.spine_radix < 2)) {
    throw sim::ConfigError(
        fmt::format("fat tree: expected a spine radix >= 2 (or 0 for the leaf radix), found {}",
                    o.spine_radix));
  }
  if (!std::isfinite(o.oversubscription) || !(o.oversubscription > 0.0)) {
    throw sim::ConfigError(fmt::format(
        "fat tree: expected a positive oversubscription (down:up, 1 = non-blocking), found {}",
        o.oversubscription));
  }
  FatTreeShape shape;
  shape.down =
      static_cast<int>(std::lround(o.leaf_radix * o.oversubscription / (1.0 + o.oversubscription)));
  shape.up = o.leaf_radix - shape.down;
  if (shape.down < 1) {
    throw sim::ConfigError(
        fmt::format("fat tree: oversubscription {} leaves no down port on a {}-port leaf",
                    o.oversubscription, o.leaf_radix));
  }
  shape.leaves = ceil_div(std::max(nics, 1), shape.down);
  if (shape.leaves > 1) {
    if (shape.up < 1) {
      throw sim::ConfigError(fmt::format(
          "fat tree: oversubscription {} leaves no uplink on a {}-port leaf, but {} NICs need {} "
          "leaves",
          o.oversubscription, o.leaf_radix, nics, shape.leaves));
    }
    // The switch counts connect_spines builds: pods of radix / 2 blocks under middle layers
    // while more than radix blocks remain, then one spine layer.
    const long long radix = spine_radix(o);
    long long blocks = shape.leaves, planes = 1, up = shape.up, total = 0;
    shape.levels = 2;
    while (blocks > radix) {
      const long long pods = (blocks + radix / 2 - 1) / (radix / 2);
      total += pods * planes * up;
      planes *= up;
      up = radix - radix / 2;
      blocks = pods;
      ++shape.levels;
    }
    total += planes * ((blocks * up + radix - 1) / radix);
    shape.spines = static_cast<int>(total);
  }
  return shape;
}

Cluster build_fat_tree(std::string name, int nodes, const NodeFactory& factory,
                       const FatTreeOptions& options) {
  check_nodes(nodes, "fat tree");
  ClusterBuilder b(std::move(name));
  b.set_fabric_routing(options.routing);
  const auto handles = add_nodes(b, nodes, factory);
  int nics = 0;
  for (const auto& h : handles) nics += static_cast<int>(h.nics.size());
  const FatTreeShape shape = fat_tree_shape(nics, options);
  std::vector<DeviceId> leaves;
  leaves.reserve(static_cast<std::size_t>(shape.leaves));
  for (int l = 0; l < shape.leaves; ++l) leaves.push_back(b.add_ib_leaf(fmt::format("leaf{}", l)));
  int j = 0;
  for (const auto& h : handles) {
    for (DeviceId nic : h.nics) {
      b.add_duplex(nic, leaves[static_cast<std::size_t>(j++ / shape.down)],
                   {h.nic_rate, options.latency, sim::LinkClass::infiniband});
    }
  }
  connect_spines(b, leaves, shape.up, options, handles.front().nic_rate);
  return b.build();
}

Cluster build_fat_tree(std::string name, int nodes, NodePreset preset,
                       const FatTreeOptions& options) {
  return build_fat_tree(std::move(name), nodes, preset_factory(preset), options);
}

Cluster build_rail_optimized(std::string name, int nodes, const NodeFactory& factory,
                             const FatTreeOptions& options) {
  check_nodes(nodes, "rail-optimized fabric");
  ClusterBuilder b(std::move(name));
  b.set_fabric_routing(options.routing);
  const auto handles = add_nodes(b, nodes, factory);
  const std::size_t rails = handles.front().nics.size();
  for (std::size_t n = 0; n < handles.size(); ++n) {
    if (handles[n].nics.size() != rails) {
      throw sim::ConfigError(fmt::format(
          "rail-optimized fabric: node 0 has {} NICs but node {} has {}; every server needs the "
          "same rails",
          rails, n, handles[n].nics.size()));
    }
  }
  const FatTreeShape shape = fat_tree_shape(1, options);  // validates; gives down and up
  const int units = ceil_div(nodes, shape.down);
  std::vector<DeviceId> leaves;
  for (std::size_t l = 0; l < static_cast<std::size_t>(units) * rails; ++l) {
    leaves.push_back(b.add_ib_leaf(fmt::format("leaf{}", l)));
  }
  for (std::size_t n = 0; n < handles.size(); ++n) {
    const std::size_t unit = n / static_cast<std::size_t>(shape.down);
    for (std::size_t r = 0; r < rails; ++r) {
      b.add_duplex(handles[n].nics[r], leaves[unit * rails + r],
                   {handles[n].nic_rate, options.latency, sim::LinkClass::infiniband});
    }
  }
  if (leaves.size() > 1 && shape.up < 1) {
    throw sim::ConfigError(
        fmt::format("rail-optimized fabric: oversubscription {} leaves no "
                    "uplink on a {}-port leaf",
                    options.oversubscription, options.leaf_radix));
  }
  connect_spines(b, leaves, shape.up, options, handles.front().nic_rate);
  return b.build();
}

Cluster build_rail_optimized(std::string name, int nodes, NodePreset preset,
                             const FatTreeOptions& options) {
  return build_rail_optimized(std::move(name), nodes, preset_factory(preset), options);
}

Cluster build_single_node(NodePreset preset) {
  ClusterBuilder b{std::string(to_string(preset))};
  add_node(b, preset, 0);
  return b.build();
}

Cluster build_thetagpu(int nodes) {
  if (nodes < 1 || nodes > kThetaNodes) {
    throw sim::ConfigError(
        fmt::format("thetagpu: expected 1 to {} nodes, found {}", kThetaNodes, nodes));
  }
  const GpuSpec& a100_40 = find_gpu_spec("A100-SXM4-40GB");
  const GpuSpec& a100_80 = find_gpu_spec("A100-SXM4-80GB");
  const NodeFactory factory = [&](ClusterBuilder& b, int node) {
    return add_dgx_a100(b, node, node < kTheta40GbNodes ? a100_40 : a100_80);
  };
  FatTreeOptions options;
  options.leaf_radix = kQm8700Ports;
  return build_fat_tree("thetagpu", nodes, factory, options);
}

Cluster build_selene(int nodes) {
  check_nodes(nodes, "selene");
  FatTreeOptions options;
  options.leaf_radix = kQm8700Ports;
  options.spine_radix = kCs8500Ports;
  return build_fat_tree("selene", nodes, NodePreset::dgx_a100_80gb, options);
}

std::span<const ClusterPresetInfo> known_cluster_presets() {
  static constexpr std::array<ClusterPresetInfo, 10> kInfo{{
      {"thetagpu",
       "ALCF ThetaGPU: 24 DGX A100 (22 x 40 GB, 2 x 80 GB GPUs), 8 HDR per node, non-blocking "
       "fat tree of 40-port switches; --gpus keeps the first ceil(gpus/8) nodes (max 192 GPUs)"},
      {"selene",
       "Selene-like DGX A100 80 GB SuperPOD sized to --gpus (default 1 node), 8 HDR per node, "
       "fat tree of 40-port leaves and 800-port director spines"},
      {"dgx-a100", "one DGX A100 (8x A100-SXM4-40GB, NVSwitch, 8x HDR); more GPUs: a fat tree"},
      {"dgx-a100-80gb", "one DGX A100 80GB (8x A100-SXM4-80GB); more GPUs: a fat tree"},
      {"dgx-h100",
       "one DGX H100 (8x H100-SXM5-80GB, NVSwitch with NVLS, 8x NDR); more GPUs: a fat tree"},
      {"dgx-h200", "one DGX H200 (8x H200-SXM-141GB, as dgx-h100); more GPUs: a fat tree"},
      {"dgx-b200",
       "one DGX B200 (8x B200-SXM-180GB, NVLink5 switch with NVLS, 8x NDR); more GPUs: a fat tree"},
      {"gb200-nvl72",
       "one GB200 NVL72 rack (72x GB200-NVL-186GB on one NVLink domain, 72x NDR); more GPUs: racks "
       "on a fat tree"},
      {"pcie-8gpu",
       "one PCIe server (8x A100-PCIE-40GB, no NVLink, 4x HDR); more GPUs: a fat tree"},
      {"pcie-h100",
       "one PCIe server (8x H100-PCIE-80GB, PCIe Gen5, no NVLink bridges, 4x NDR); more GPUs: a fat tree"},
  }};
  return kInfo;
}

bool is_cluster_preset(std::string_view name) {
  const auto presets = known_cluster_presets();
  return std::any_of(presets.begin(), presets.end(), [&](const ClusterPresetInfo& p) { return p.name == name; });
}

Cluster resolve_cluster(std::string_view spec, int gpus) {
  if (gpus < 0) {
    throw sim::ConfigError(
        fmt::format("cluster \"{}\": expected a GPU count >= 0, found {}", spec, gpus));
  }
  if (gpus > kMaxPresetGpus && (spec == "selene" || find_node_preset(spec))) {
    throw sim::ConfigError(fmt::format(
        "cluster \"{}\": expected at most {} GPUs for a preset fabric, found {} (a fabric's routing "
        "tables grow with its switches squared; past this size building it alone takes minutes)",
        spec, kMaxPresetGpus, gpus));
  }
  if (spec == "thetagpu") {
    constexpr int kMaxGpus = kThetaNodes * 8;
    if (gpus > kMaxGpus) {
      throw sim::ConfigError(
          fmt::format("thetagpu has {} GPUs ({} DGX A100 x 8); {} GPUs were "
                      "asked for",
                      kMaxGpus, kThetaNodes, gpus));
    }
    return build_thetagpu(gpus == 0 ? kThetaNodes : ceil_div(gpus, 8));
  }
  if (spec == "selene") return build_selene(gpus == 0 ? 1 : ceil_div(gpus, 8));
  if (const auto preset = find_node_preset(spec)) {
    const int nodes = gpus == 0 ? 1 : ceil_div(gpus, gpus_per_node(*preset));
    if (nodes == 1) return build_single_node(*preset);
    FatTreeOptions options;
    const bool ndr = *preset == NodePreset::dgx_h100 || *preset == NodePreset::dgx_h200 ||
                     *preset == NodePreset::dgx_b200 || *preset == NodePreset::gb200_nvl72;
    options.leaf_radix = ndr ? kQm9700Ports : kQm8700Ports;
    return build_fat_tree(fmt::format("{}-x{}", spec, nodes), nodes, *preset, options);
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::path(spec), ec)) {
    const bool looks_like_path =
        spec.find('/') != std::string_view::npos || spec.ends_with(".json");
    if (looks_like_path) {
      throw sim::ConfigError(
          fmt::format("cluster \"{}\": no such topology file (or it is not a regular file)", spec));
    }
    std::string names;
    for (const auto& p : known_cluster_presets()) {
      if (!names.empty()) names += ", ";
      names += p.name;
    }
    throw sim::ConfigError(fmt::format(
        "cluster \"{}\": expected a preset ({}) or the path of a topology JSON file, found "
        "neither",
        spec, names));
  }
  Cluster cluster = load_topology_file(std::string(spec));
  if (static_cast<std::size_t>(gpus) > cluster.gpu_count()) {
    throw sim::ConfigError(fmt::format("topology {} has {} GPUs; {} GPUs were asked for", spec,
                                       cluster.gpu_count(), gpus));
  }
  return cluster;
}

}  // namespace foresight::topo
