#pragma once
// Helpers shared by the topologies tests: route checks and name lookups.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "topologies/cluster.hpp"

namespace foresight::test {

/// The device names a path visits, from its first link's source to its last link's target.
inline std::vector<std::string> path_devices(const topo::Cluster& c,
                                             const std::vector<sim::LinkId>& path) {
  std::vector<std::string> names;
  if (path.empty()) return names;
  names.push_back(c.device(c.link_ends(path.front()).from).name);
  for (sim::LinkId l : path) names.push_back(c.device(c.link_ends(l).to).name);
  return names;
}

/// Routes src -> dst and checks the links chain from src's device to dst's device.
inline std::vector<sim::LinkId> checked_route(const topo::Cluster& c, sim::GpuId src,
                                              sim::GpuId dst, int src_rail = -1, int dst_rail = -1,
                                              std::uint64_t salt = 0) {
  std::vector<sim::LinkId> path;
  c.route(src, dst, src_rail, dst_rail, salt, path);
  REQUIRE_FALSE(path.empty());
  REQUIRE(c.link_ends(path.front()).from == c.gpu_device(src));
  REQUIRE(c.link_ends(path.back()).to == c.gpu_device(dst));
  for (std::size_t i = 1; i < path.size(); ++i) {
    REQUIRE(c.link_ends(path[i - 1]).to == c.link_ends(path[i]).from);
  }
  return path;
}

/// The GpuId of the GPU device called `name`.
inline sim::GpuId gpu_named(const topo::Cluster& c, const std::string& name) {
  const auto dev = c.find_device(name);
  REQUIRE(dev.has_value());
  const auto gpu = c.gpu_id(*dev);
  REQUIRE(gpu.has_value());
  return *gpu;
}

/// Number of links of `cls` in the cluster.
inline std::size_t links_of_class(const topo::Cluster& c, sim::LinkClass cls) {
  std::size_t n = 0;
  for (sim::LinkId l = 0; l < c.link_count(); ++l) n += c.link(l).cls == cls ? 1 : 0;
  return n;
}

/// Number of devices of `kind` in the cluster.
inline std::size_t devices_of_kind(const topo::Cluster& c, topo::DeviceKind kind) {
  std::size_t n = 0;
  for (topo::DeviceId d = 0; d < c.device_count(); ++d) n += c.device(d).kind == kind ? 1 : 0;
  return n;
}

}  // namespace foresight::test
