// ClusterBuilder::build(): whole-cluster validation, derived facts and routing tables.

#include <fmt/core.h>

#include <algorithm>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "topologies/cluster.hpp"
#include "topologies/detail/cluster_impl.hpp"

namespace foresight::topo {
namespace {

using detail::ClusterImpl;
using detail::kNone;

/// The devices of one node, grouped by kind.
struct NodeDevices {
  std::vector<DeviceId> all;
  std::vector<DeviceId> gpus;
  std::vector<DeviceId> nics;
  std::vector<DeviceId> nvswitches;
  std::vector<DeviceId> cpus;
};

std::string list_names(const std::vector<DeviceInfo>& devices, const std::vector<DeviceId>& ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size() && i < 8; ++i) {
    if (!out.empty()) out += ", ";
    out += devices[ids[i]].name;
  }
  if (ids.size() > 8) out += ", ...";
  return out;
}

/// Sorts `ids` by `index(device)` and checks the indices are exactly 0 .. size-1.
template <typename Index>
void check_indices(const std::vector<DeviceInfo>& devices, std::vector<DeviceId>& ids, int node,
                   std::string_view what, std::string_view field, Index index) {
  std::stable_sort(ids.begin(), ids.end(),
                   [&](DeviceId a, DeviceId b) { return index(devices[a]) < index(devices[b]); });
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const int value = index(devices[ids[i]]);
    if (i > 0 && value == index(devices[ids[i - 1]])) {
      throw sim::TopologyError(fmt::format("node {}: {}s \"{}\" and \"{}\" both have {} {}", node,
                                           what, devices[ids[i - 1]].name, devices[ids[i]].name,
                                           field, value));
    }
    if (value != static_cast<int>(i)) {
      throw sim::TopologyError(fmt::format(
          "node {}: the {} {}s must have {} 0 .. {}, found {} on \"{}\" and no {} with {} {}", node,
          ids.size(), what, field, ids.size() - 1, value, devices[ids[i]].name, what, field, i));
    }
  }
}

std::vector<NodeDevices> group_by_node(const std::vector<DeviceInfo>& devices) {
  int max_node = -1;
  for (const auto& d : devices) max_node = std::max(max_node, d.node);
  std::vector<NodeDevices> nodes(static_cast<std::size_t>(max_node + 1));
  for (DeviceId v = 0; v < devices.size(); ++v) {
    const auto& d = devices[v];
    if (d.node < 0) continue;
    auto& nd = nodes[static_cast<std::size_t>(d.node)];
    nd.all.push_back(v);
    if (d.kind == DeviceKind::gpu) nd.gpus.push_back(v);
    if (d.kind == DeviceKind::nic) nd.nics.push_back(v);
    if (d.kind == DeviceKind::nvswitch) nd.nvswitches.push_back(v);
    if (d.kind == DeviceKind::cpu) nd.cpus.push_back(v);
  }
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    auto& nd = nodes[n];
    const int node = static_cast<int>(n);
    if (nd.gpus.empty()) {
      throw sim::TopologyError(fmt::format(
          "node {} has no GPU{}; nodes must be numbered 0 .. N-1 and each must hold a GPU", n,
          nd.all.empty() ? std::string(" (no device names it)")
                         : fmt::format(" (its devices: {})", list_names(devices, nd.all))));
    }
    check_indices(devices, nd.gpus, node, "GPU", "local_index",
                  [](const DeviceInfo& d) { return d.local_index; });
    check_indices(devices, nd.nics, node, "NIC", "rail",
                  [](const DeviceInfo& d) { return d.rail; });
    if (nd.nvswitches.size() > 1) {
      throw sim::TopologyError(fmt::format(
          "node {} has {} nvswitch devices ({}); model a node's NVSwitch chips as one merged "
          "nvswitch device, as NCCL does",
          n, nd.nvswitches.size(), list_names(devices, nd.nvswitches)));
    }
    for (DeviceId cpu : nd.cpus) {
      if (devices[cpu].vendor != devices[nd.cpus.front()].vendor) {
        throw sim::TopologyError(fmt::format(
            "node {}: CPUs \"{}\" ({}) and \"{}\" ({}) have "
            "different vendors",
            n, devices[nd.cpus.front()].name, to_string(devices[nd.cpus.front()].vendor),
            devices[cpu].name, to_string(devices[cpu].vendor)));
      }
    }
  }
  return nodes;
}

detail::Adjacency make_adjacency(std::size_t vertex_count, const std::vector<LinkEnds>& ends,
                                 bool outgoing) {
  detail::Adjacency adj;
  adj.offset.assign(vertex_count + 1, 0);
  for (const auto& e : ends) ++adj.offset[(outgoing ? e.from : e.to) + 1];
  for (std::size_t v = 0; v < vertex_count; ++v) adj.offset[v + 1] += adj.offset[v];
  adj.ids.resize(ends.size());
  std::vector<std::uint32_t> fill(adj.offset.begin(), adj.offset.end() - 1);
  for (sim::LinkId l = 0; l < ends.size(); ++l) {
    adj.ids[fill[outgoing ? ends[l].from : ends[l].to]++] = l;  // increasing l: sorted
  }
  return adj;
}

/// Throws unless every GPU reaches GPU 0 and GPU 0 reaches every GPU (then all pairs connect):
/// a breadth-first search from GPU 0 along the links, then against them.
void check_connected(const ClusterImpl& c) {
  if (c.gpu_devices.size() < 2) return;
  using Graph = boost::compressed_sparse_row_graph<boost::directedS>;
  const DeviceId root = c.gpu_devices.front();
  const auto unreached = [&](bool reversed) -> std::optional<DeviceId> {
    std::vector<std::pair<DeviceId, DeviceId>> edges;
    edges.reserve(c.ends.size());
    for (const LinkEnds& e : c.ends) edges.emplace_back(reversed ? e.to : e.from, reversed ? e.from : e.to);
    const Graph g(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), c.devices.size());
    std::vector<boost::default_color_type> colors(c.devices.size(), boost::white_color);
    boost::breadth_first_search(
        g, root, boost::color_map(boost::make_iterator_property_map(colors.begin(), boost::get(boost::vertex_index, g))));
    for (DeviceId gpu : c.gpu_devices) {
      if (colors[gpu] == boost::white_color) return gpu;
    }
    return std::nullopt;
  };
  if (const auto g = unreached(false)) {
    throw sim::TopologyError(fmt::format(
        "GPU \"{}\" cannot be reached from GPU \"{}\": no directed path of links leads to it "
        "(disconnected GPU)",
        c.devices[*g].name, c.devices[root].name));
  }
  if (const auto g = unreached(true)) {
    throw sim::TopologyError(fmt::format(
        "GPU \"{}\" cannot reach GPU \"{}\": no directed path of links leaves it towards the "
        "other GPUs (disconnected GPU)",
        c.devices[*g].name, c.devices[root].name));
  }
}

void derive_gpu_facts(ClusterImpl& c) {
  c.gpu_facts.resize(c.gpu_devices.size());
  c.nvswitch_links.assign(c.gpu_devices.size(), std::nullopt);
  for (std::size_t g = 0; g < c.gpu_devices.size(); ++g) {
    const DeviceId v = c.gpu_devices[g];
    const DeviceInfo& d = c.devices[v];
    const GpuSpec& model = *d.model;
    double nvlink = 0.0;
    for (sim::LinkId l : c.out.of(v)) {
      if (c.links[l].cls == sim::LinkClass::nvlink)
        nvlink += c.links[l].capacity.bytes_per_second();
    }
    const double lane = model.nvlink_lane.bytes_per_second();
    if (nvlink > 0.0 && !(lane > 0.0)) {
      throw sim::TopologyError(
          fmt::format("GPU \"{}\" ({}) has nvlink links but its model has "
                      "no NVLink",
                      d.name, model.name));
    }
    auto& f = c.gpu_facts[g];
    f.node = d.node;
    f.local_index = d.local_index;
    f.compute_capability = model.compute_capability;
    f.nvlink_lanes = nvlink > 0.0 ? static_cast<int>(std::lround(nvlink / lane)) : 0;
    f.nvlink_lane = model.nvlink_lane;
    f.pcie = model.pcie;
  }
}

void derive_node_facts(ClusterImpl& c, const std::vector<NodeDevices>& nodes) {
  c.node_facts.resize(nodes.size());
  c.node_nics.resize(nodes.size());
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const NodeDevices& nd = nodes[n];
    auto& f = c.node_facts[n];
    f.gpus = static_cast<int>(nd.gpus.size());
    f.nvswitch = !nd.nvswitches.empty();
    f.nvls = f.nvswitch && c.devices[nd.nvswitches.front()].nvls;
    f.nics = static_cast<int>(nd.nics.size());
    f.cpu = nd.cpus.empty() ? sim::CpuVendor::other : c.devices[nd.cpus.front()].vendor;
    c.node_nics[n] = nd.nics;  // sorted by rail
    // A NIC's line rate is the capacity of its links out of the node; without such links, its
    // declared port rate. The node's figure is the smallest over its NICs.
    double rate = 0.0;
    for (DeviceId nic : nd.nics) {
      double fabric = 0.0;
      for (sim::LinkId l : c.out.of(nic)) {
        if (c.devices[c.ends[l].to].node != static_cast<int>(n)) {
          fabric += c.links[l].capacity.bytes_per_second();
        }
      }
      const double r = fabric > 0.0 ? fabric : c.devices[nic].port_rate.bytes_per_second();
      if (r > 0.0 && (rate == 0.0 || r < rate)) rate = r;
    }
    f.nic = sim::Bandwidth::bytes_per_second(rate);
    // NVLink SHARP links: the GPU's first link into the node's NVSwitch and the first back.
    if (!f.nvswitch) continue;
    const DeviceId sw = nd.nvswitches.front();
    for (DeviceId gpu : nd.gpus) {
      std::uint32_t up = kNone;
      std::uint32_t down = kNone;
      for (sim::LinkId l : c.out.of(gpu)) {
        if (c.ends[l].to == sw) {
          up = l;
          break;
        }
      }
      for (sim::LinkId l : c.in.of(gpu)) {
        if (c.ends[l].from == sw) {
          down = l;
          break;
        }
      }
      if (up != kNone && down != kNone) c.nvswitch_links[c.gpu_of_device[gpu]] = {{up, down}};
    }
  }
}

}  // namespace

Cluster ClusterBuilder::build() {
  auto impl = std::make_shared<ClusterImpl>();
  ClusterImpl& c = *impl;
  c.name = name_;
  c.routing = routing_;
  const auto nodes = group_by_node(devices_);
  if (nodes.empty()) {
    throw sim::TopologyError(fmt::format("cluster \"{}\" has no GPU", name_));
  }
  // The devices and their names move into the cluster, and back if a check below fails.
  c.devices = std::move(devices_);
  c.by_name = std::move(by_name_);
  try {
    c.gpu_of_device.assign(c.devices.size(), kNone);
    for (const auto& nd : nodes) {
      for (DeviceId g : nd.gpus) {
        c.gpu_of_device[g] = static_cast<std::uint32_t>(c.gpu_devices.size());
        c.gpu_devices.push_back(g);
      }
    }
    c.links.reserve(links_.size());
    c.ends.reserve(links_.size());
    c.reverse.reserve(links_.size());
    for (const auto& l : links_) {
      c.links.push_back(l.info);
      c.ends.push_back({l.from, l.to});
      c.reverse.push_back(l.reverse ? *l.reverse : kNone);
    }
    c.out = make_adjacency(c.devices.size(), c.ends, true);
    c.in = make_adjacency(c.devices.size(), c.ends, false);

    check_connected(c);
    derive_gpu_facts(c);
    derive_node_facts(c, nodes);
    detail::build_route_tables(c);
  } catch (...) {
    devices_ = std::move(c.devices);
    by_name_ = std::move(c.by_name);
    throw;
  }
  devices_.clear();  // moved from: left empty, as documented
  by_name_.clear();
  links_.clear();
  return Cluster(std::move(impl));
}

}  // namespace foresight::topo
