#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <thread>

#include "path_checks.hpp"
#include "common/error.hpp"
#include "tests/test_paths.hpp"
#include "topologies/cluster_builders.hpp"
#include "topologies/topology_json.hpp"

using namespace foresight;
using foresight::test::checked_route;
using foresight::test::gpu_named;
using foresight::test::path_devices;
using sim::LinkClass;
using topo::DeviceKind;
using topo::NodePreset;

namespace {

/// Names of the devices of kind `kind` on the path, in order.
std::vector<std::string> visited(const topo::Cluster& c, const std::vector<sim::LinkId>& path,
                                 DeviceKind kind) {
  std::vector<std::string> out;
  for (const auto& name : path_devices(c, path)) {
    if (c.device(*c.find_device(name)).kind == kind) out.push_back(name);
  }
  return out;
}

}  // namespace

TEST_CASE("DGX intra-node routes are GPU -> NVSwitch -> GPU", "[topologies]") {
  for (NodePreset p : {NodePreset::dgx_a100, NodePreset::dgx_h100}) {
    const auto c = topo::build_single_node(p);
    const auto path = checked_route(c, 0, 5);
    REQUIRE(path.size() == 2);
    REQUIRE(c.link(path[0]).cls == LinkClass::nvlink);
    REQUIRE(c.link(path[1]).cls == LinkClass::nvlink);
    REQUIRE(path_devices(c, path) == std::vector<std::string>{"n0.gpu0", "n0.nvswitch", "n0.gpu5"});
    // The same links NVLink SHARP uses.
    REQUIRE(path[0] == c.nvswitch_links(0)->first);
    REQUIRE(path[1] == c.nvswitch_links(5)->second);
  }
}

TEST_CASE("intra-node routes prefer the widest path over an equally short one", "[topologies]") {
  // On a DGX, GPUs 0 and 1 share a PCIe switch: GPU -> PCIe switch -> GPU is as short (2 hops) as
  // GPU -> NVSwitch -> GPU, but runs at 31.5 instead of 300 GB/s. NCCL uses NVLink (path type
  // NVL before PIX); so must we: both links of the route are NVLink.
  for (NodePreset p : {NodePreset::dgx_a100, NodePreset::dgx_h100}) {
    const auto c = topo::build_single_node(p);
    for (sim::GpuId pair = 0; pair < 8; pair += 2) {
      const auto path = checked_route(c, pair, pair + 1);
      REQUIRE(path.size() == 2);
      for (const sim::LinkId l : path) REQUIRE(c.link(l).cls == LinkClass::nvlink);
    }
  }
}

TEST_CASE("pcie-8gpu routes stay under a switch, a socket, or cross both CPUs", "[topologies]") {
  const auto c = topo::build_single_node(NodePreset::pcie_8gpu);
  // Same switch: GPU0 -> pcie0 -> GPU1.
  REQUIRE(path_devices(c, checked_route(c, 0, 1)) ==
          std::vector<std::string>{"n0.gpu0", "n0.pcie0", "n0.gpu1"});
  // Same socket, other switch: GPU0 -> pcie0 -> cpu0 -> pcie1 -> GPU2.
  REQUIRE(path_devices(c, checked_route(c, 0, 2)) ==
          std::vector<std::string>{"n0.gpu0", "n0.pcie0", "n0.cpu0", "n0.pcie1", "n0.gpu2"});
  // Across sockets: both CPUs, over the UPI link.
  const auto path = checked_route(c, 0, 7);
  REQUIRE(path_devices(c, path) == std::vector<std::string>{"n0.gpu0", "n0.pcie0", "n0.cpu0",
                                                            "n0.cpu1", "n0.pcie3", "n0.gpu7"});
  REQUIRE(c.link(path[2]).cls == LinkClass::cpu_interconnect);
}

TEST_CASE("a GPU relays only when no path avoids it", "[topologies]") {
  // gpu0 - gpu1 - gpu2 by NVLink (2 hops through gpu1), and gpu0 - sw0 - sw1 - gpu2 by PCIe
  // (3 hops, no GPU): the PCIe path wins. The ring has no alternative: gpu0 -> gpu2 relays.
  topo::ClusterBuilder b("relay");
  const auto& a100 = topo::find_gpu_spec("A100-SXM4-40GB");
  const auto g0 = b.add_gpu("g0", 0, 0, a100);
  const auto g1 = b.add_gpu("g1", 0, 1, a100);
  const auto g2 = b.add_gpu("g2", 0, 2, a100);
  const auto s0 = b.add_pcie_switch("s0", 0);
  const auto s1 = b.add_pcie_switch("s1", 0);
  const topo::LinkSpec nv{sim::Bandwidth::gigabytes_per_second(100), sim::Time::zero(),
                          LinkClass::nvlink};
  const topo::LinkSpec pc{sim::Bandwidth::gigabytes_per_second(16), sim::Time::zero(),
                          LinkClass::pcie};
  b.add_duplex(g0, g1, nv);
  b.add_duplex(g1, g2, nv);
  b.add_duplex(g0, s0, pc);
  b.add_duplex(s0, s1, pc);
  b.add_duplex(s1, g2, pc);
  const auto c = b.build();
  REQUIRE(path_devices(c, checked_route(c, 0, 2)) ==
          std::vector<std::string>{"g0", "s0", "s1", "g2"});
  REQUIRE(checked_route(c, 0, 1).size() == 1);

  const auto ring = topo::load_topology_file(test::data_path("topologies/ring4.json"));
  const auto relayed = checked_route(ring, 0, 2);
  REQUIRE(relayed.size() == 2);  // through gpu1 or gpu3
  const auto middle = path_devices(ring, relayed)[1];
  REQUIRE((middle == "n0.gpu1" || middle == "n0.gpu3"));
}

TEST_CASE("inter-node routes leave and arrive on the requested rails", "[topologies]") {
  const auto c = topo::build_thetagpu();
  const sim::GpuId src = gpu_named(c, "n0.gpu0");
  const sim::GpuId dst = gpu_named(c, "n5.gpu3");
  const auto path = checked_route(c, src, dst, 2, 6);
  const auto nics = visited(c, path, DeviceKind::nic);
  REQUIRE(nics == std::vector<std::string>{"n0.nic2", "n5.nic6"});
  // The only GPUs on the path are its ends: no relaying through a peer GPU.
  REQUIRE(visited(c, path, DeviceKind::gpu) == std::vector<std::string>{"n0.gpu0", "n5.gpu3"});
  // n0.gpu0 reaches n0.nic2 (switch 1) via pcie0 -> cpu0 -> pcie1; the fabric part is
  // nic -> leaf -> spine -> leaf -> nic (nic2 of node 0 is on leaf 0, nic6 of node 5 is
  // NIC #46 on leaf 2).
  const auto leaves = visited(c, path, DeviceKind::ib_leaf);
  REQUIRE(leaves == std::vector<std::string>{"leaf0", "leaf2"});
  REQUIRE(visited(c, path, DeviceKind::ib_spine).size() == 1);
  std::size_t ib = 0;
  for (auto l : path) ib += c.link(l).cls == LinkClass::infiniband ? 1 : 0;
  REQUIRE(ib == 4);

  // Rails -1 mean the primary rails: GPU k of a DGX A100 uses rail k.
  const auto by_default = checked_route(c, src, gpu_named(c, "n1.gpu5"));
  REQUIRE(visited(c, by_default, DeviceKind::nic) ==
          std::vector<std::string>{"n0.nic0", "n1.nic5"});
  // Same leaf (nodes 0 and 1 share leaf 0): nic -> leaf -> nic, no spine.
  REQUIRE(visited(c, by_default, DeviceKind::ib_spine).empty());
}

TEST_CASE("ECMP spreads salts over parallel uplinks, deterministically", "[topologies]") {
  topo::FatTreeOptions ecmp;
  ecmp.routing = topo::FabricRouting::ecmp;
  const auto c = topo::build_fat_tree("thetagpu-ecmp", 24, NodePreset::dgx_a100, ecmp);
  const sim::GpuId src = gpu_named(c, "n0.gpu0");
  const sim::GpuId dst = gpu_named(c, "n23.gpu0");  // NIC #184, on leaf 9
  std::set<sim::LinkId> uplinks;
  std::set<std::string> spines;
  std::size_t length = 0;
  for (std::uint64_t salt = 0; salt < 200; ++salt) {
    const auto path = checked_route(c, src, dst, 0, 0, salt);
    if (length == 0) length = path.size();
    REQUIRE(path.size() == length);  // equal cost whatever the choice
    for (auto l : path) {
      const auto ends = c.link_ends(l);
      if (c.device(ends.from).name == "leaf0" && c.device(ends.to).kind == DeviceKind::ib_spine) {
        uplinks.insert(l);
        spines.insert(c.device(ends.to).name);
      }
    }
    // Same inputs, same route.
    REQUIRE(checked_route(c, src, dst, 0, 0, salt) == path);
  }
  // leaf0 has 20 uplinks, 4 to each of 5 spines; 200 salts use most of them.
  REQUIRE(uplinks.size() >= 15);
  REQUIRE(spines.size() == 5);
}

TEST_CASE("primary rails: nearest NIC, then the GPU's own index, then the lowest", "[topologies]") {
  const auto dgx = topo::build_single_node(NodePreset::dgx_a100);
  for (sim::GpuId g = 0; g < 8; ++g) REQUIRE(dgx.primary_rail(g) == static_cast<int>(g));
  const auto pcie = topo::build_single_node(NodePreset::pcie_8gpu);
  for (sim::GpuId g = 0; g < 8; ++g) REQUIRE(pcie.primary_rail(g) == static_cast<int>(g / 2));

  // Two NICs equally near a switch with GPUs 0 and 1 and a third NIC farther away: GPU 1 takes
  // rail 1 (its own index), GPU 0 rail 0; a GPU with index 2 (no tie winner) takes rail 0.
  topo::ClusterBuilder b("rails");
  const auto& a100 = topo::find_gpu_spec("A100-SXM4-40GB");
  const auto sw = b.add_pcie_switch("sw", 0);
  const auto far = b.add_pcie_switch("far", 0);
  const topo::LinkSpec pc{sim::Bandwidth::gigabytes_per_second(16), sim::Time::zero(),
                          LinkClass::pcie};
  for (int g = 0; g < 3; ++g) b.add_duplex(b.add_gpu(fmt::format("g{}", g), 0, g, a100), sw, pc);
  b.add_duplex(b.add_nic("nic0", 0, 0), sw, pc);
  b.add_duplex(b.add_nic("nic1", 0, 1), sw, pc);
  b.add_duplex(sw, far, pc);
  b.add_duplex(b.add_nic("nic2", 0, 2), far, pc);
  const auto c = b.build();
  REQUIRE(c.primary_rail(0) == 0);
  REQUIRE(c.primary_rail(1) == 1);
  REQUIRE(c.primary_rail(2) == 0);

  const auto ring = topo::load_topology_file(test::data_path("topologies/ring4.json"));
  REQUIRE(ring.primary_rail(0) == -1);  // no NIC
}

TEST_CASE("rail-optimized fabrics keep same-rail traffic on one leaf", "[topologies]") {
  // 40-port leaves, non-blocking: 20 servers per scalable unit. 24 servers -> 2 units x 8 rails.
  const auto c = topo::build_rail_optimized("ro", 24, NodePreset::dgx_a100);
  const auto same_unit = checked_route(c, gpu_named(c, "n0.gpu3"), gpu_named(c, "n7.gpu3"), 3, 3);
  REQUIRE(visited(c, same_unit, DeviceKind::ib_leaf) == std::vector<std::string>{"leaf3"});
  REQUIRE(visited(c, same_unit, DeviceKind::ib_spine).empty());
  // Unit 1's rail 3 leaf is leaf 1 * 8 + 3 = 11; crossing units goes through a spine.
  const auto cross_unit = checked_route(c, gpu_named(c, "n0.gpu3"), gpu_named(c, "n21.gpu3"), 3, 3);
  REQUIRE(visited(c, cross_unit, DeviceKind::ib_leaf) ==
          std::vector<std::string>{"leaf3", "leaf11"});
  REQUIRE(visited(c, cross_unit, DeviceKind::ib_spine).size() == 1);
  // Another rail at the destination: through a spine even inside the unit.
  const auto cross_rail = checked_route(c, gpu_named(c, "n0.gpu3"), gpu_named(c, "n7.gpu4"), 3, 4);
  REQUIRE(visited(c, cross_rail, DeviceKind::ib_leaf) ==
          std::vector<std::string>{"leaf3", "leaf4"});
}

TEST_CASE("route appends, checks its arguments and is safe to share between threads",
          "[topologies]") {
  const auto c = topo::build_thetagpu(4);
  std::vector<sim::LinkId> out{12345};
  c.route(0, 9, -1, -1, 7, out);
  REQUIRE(out.front() == 12345);
  REQUIRE(out.size() > 1);
  REQUIRE(c.link_ends(out[1]).from == c.gpu_device(0));

  std::vector<sim::LinkId> ignored;
  REQUIRE_THROWS_AS(c.route(3, 3, -1, -1, 0, ignored), sim::InternalError);
  REQUIRE_THROWS_AS(c.route(0, 9, 8, -1, 0, ignored), sim::InternalError);
  REQUIRE_THROWS_AS(c.route(0, 9, -1, -2, 0, ignored), sim::InternalError);
  REQUIRE_THROWS_AS(c.route(0, 32, -1, -1, 0, ignored), sim::InternalError);

  // Four threads route every pair with several salts; each must match the single-threaded answer.
  const auto all_routes = [&c](std::vector<std::vector<sim::LinkId>>& result) {
    for (sim::GpuId s = 0; s < c.gpu_count(); ++s) {
      for (sim::GpuId d = 0; d < c.gpu_count(); ++d) {
        if (s == d) continue;
        for (std::uint64_t salt = 0; salt < 3; ++salt) {
          result.emplace_back();
          c.route(s, d, -1, -1, salt, result.back());
        }
      }
    }
  };
  std::vector<std::vector<sim::LinkId>> expected;
  all_routes(expected);
  std::vector<std::vector<std::vector<sim::LinkId>>> results(4);
  std::vector<std::thread> threads;
  threads.reserve(results.size());
  for (auto& r : results) threads.emplace_back(all_routes, std::ref(r));
  for (auto& t : threads) t.join();
  for (const auto& r : results) REQUIRE(r == expected);
}

TEST_CASE("nodes without NICs route over whatever joins them", "[topologies]") {
  // Two one-GPU nodes joined GPU to GPU: no NIC, so the whole-graph shortest path is used.
  topo::ClusterBuilder b("direct");
  const auto& h100 = topo::find_gpu_spec("H100-SXM5-80GB");
  const auto a = b.add_gpu("a", 0, 0, h100);
  const auto z = b.add_gpu("z", 1, 0, h100);
  const auto sw = b.add_ib_leaf("sw");
  b.add_duplex(
      a, sw, {sim::Bandwidth::gigabytes_per_second(50), sim::Time::zero(), LinkClass::infiniband});
  b.add_duplex(
      sw, z, {sim::Bandwidth::gigabytes_per_second(50), sim::Time::zero(), LinkClass::infiniband});
  const auto c = b.build();
  REQUIRE(c.node_count() == 2);
  REQUIRE(path_devices(c, checked_route(c, 0, 1)) == std::vector<std::string>{"a", "sw", "z"});
}

TEST_CASE("destination routing spreads a leaf's flows to distinct destinations over distinct uplinks",
          "[topologies]") {
  // InfiniBand D-mod-k: the uplink depends only on the destination. Ring neighbours across the
  // leaf boundary of thetagpu (node 2 -> node 3, all 8 rails, leaving leaf 0 or 1) must not share
  // an uplink, whatever the salt; and salts change nothing.
  topo::FatTreeOptions by_destination;
  by_destination.routing = topo::FabricRouting::destination;
  const auto c = topo::build_fat_tree("thetagpu-dmodk", 24, NodePreset::dgx_a100, by_destination);
  std::set<sim::LinkId> uplinks;
  std::size_t up_hops = 0;
  for (int rail = 0; rail < 8; ++rail) {
    const sim::GpuId src = gpu_named(c, fmt::format("n2.gpu{}", rail));
    const sim::GpuId dst = gpu_named(c, fmt::format("n3.gpu{}", rail));
    const auto a = checked_route(c, src, dst, rail, rail, 1);
    REQUIRE(a == checked_route(c, src, dst, rail, rail, 12345));
    for (auto l : a) {
      const auto ends = c.link_ends(l);
      if (c.device(ends.from).kind == DeviceKind::ib_leaf && c.device(ends.to).kind == DeviceKind::ib_spine) {
        ++up_hops;
        uplinks.insert(l);
      }
    }
  }
  REQUIRE(up_hops > 0);
  REQUIRE(uplinks.size() == up_hops);
}

TEST_CASE("adaptive routing pools a leaf's uplinks and the links into a leaf", "[topologies]") {
  const auto c = topo::build_thetagpu();  // built fat trees route adaptively
  REQUIRE(c.fabric_routing() == topo::FabricRouting::adaptive);
  std::map<std::string, std::set<std::uint32_t>> pools;  // "leaf0 up", "leaf0 down" -> pools seen
  std::size_t up_links = 0;
  for (sim::LinkId l = 0; l < c.link_count(); ++l) {
    const auto ends = c.link_ends(l);
    const auto& from = c.device(ends.from);
    const auto& to = c.device(ends.to);
    if (from.kind == DeviceKind::ib_leaf && to.kind == DeviceKind::ib_spine) {
      pools[from.name + " up"].insert(c.link_pool(l));
      if (from.name == "leaf0") ++up_links;
    } else if (from.kind == DeviceKind::ib_spine && to.kind == DeviceKind::ib_leaf) {
      pools[to.name + " down"].insert(c.link_pool(l));
    } else {
      REQUIRE(c.link_pool(l) == l);  // every other link is alone
    }
  }
  REQUIRE(up_links == 20);  // 40-port leaves, non-blocking: 20 up
  std::set<std::uint32_t> all;
  for (const auto& [name, ids] : pools) {
    INFO(name);
    REQUIRE(ids.size() == 1);  // one pool per leaf and direction
    REQUIRE(all.insert(*ids.begin()).second);  // and distinct from every other
  }
}

TEST_CASE("fabric routes cross the fewest switches between their leaves", "[topologies]") {
  // Three-level fat trees: the switch hop table the routes follow (breadth-first searches from
  // every leaf, run 64 leaves at a time) must give each route a shortest switch path, found
  // here by a breadth-first search of its own over the cluster's links.
  for (const auto& [preset, gpus] : {std::pair{"dgx-a100", 4096}, std::pair{"dgx-h100", 6144}}) {
    INFO(preset << " " << gpus);
    const auto c = topo::resolve_cluster(preset, gpus);
    const auto is_switch = [&](topo::DeviceId d) {
      return c.device(d).kind == DeviceKind::ib_leaf || c.device(d).kind == DeviceKind::ib_spine;
    };
    const auto switch_distance = [&](topo::DeviceId from, topo::DeviceId to) {
      std::map<topo::DeviceId, int> dist{{from, 0}};
      std::vector<topo::DeviceId> frontier{from};
      while (!frontier.empty() && dist.count(to) == 0) {
        std::vector<topo::DeviceId> next;
        for (const topo::DeviceId d : frontier) {
          for (const sim::LinkId l : c.out_links(d)) {
            const topo::DeviceId e = c.link_ends(l).to;
            if (is_switch(e) && dist.emplace(e, dist[d] + 1).second) next.push_back(e);
          }
        }
        frontier.swap(next);
      }
      REQUIRE(dist.count(to) == 1);
      return dist[to];
    };
    int checked = 0;
    std::set<int> lengths;
    for (std::uint64_t k = 0; k < 60; ++k) {
      const auto src = static_cast<sim::GpuId>((k * 7919) % static_cast<std::uint64_t>(gpus));
      const auto dst = static_cast<sim::GpuId>((k * 104729 + 13) % static_cast<std::uint64_t>(gpus));
      if (c.gpu(src).node == c.gpu(dst).node) continue;
      std::vector<sim::LinkId> route;
      c.route(src, dst, -1, -1, k, route);
      std::vector<topo::DeviceId> switches;  // the switches the route passes, in order
      int between = 0;                       // its links from a switch to a switch
      for (const sim::LinkId l : route) {
        const auto ends = c.link_ends(l);
        if (is_switch(ends.to)) switches.push_back(ends.to);
        if (is_switch(ends.from) && is_switch(ends.to)) ++between;
      }
      REQUIRE(switches.size() >= 1);
      REQUIRE(between == switch_distance(switches.front(), switches.back()));
      lengths.insert(between);
      ++checked;
    }
    REQUIRE(checked > 40);
    REQUIRE(lengths.size() >= 2);  // pairs under one leaf, one pod and across the top level
  }
}
