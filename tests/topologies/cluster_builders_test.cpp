#include "topologies/cluster_builders.hpp"

#include <catch2/catch.hpp>
#include <map>

#include "path_checks.hpp"
#include "common/error.hpp"
#include "tests/test_paths.hpp"

using namespace foresight;
using Catch::Contains;
using foresight::test::devices_of_kind;
using foresight::test::links_of_class;
using sim::LinkClass;
using topo::DeviceKind;
using topo::NodePreset;

namespace {

/// The switch a NIC's fabric link enters.
std::string leaf_of(const topo::Cluster& c, const std::string& nic) {
  for (auto l : c.out_links(*c.find_device(nic))) {
    const auto& to = c.device(c.link_ends(l).to);
    if (to.kind == DeviceKind::ib_leaf) return to.name;
  }
  return "";
}

/// Links from device `from` to device `to`.
std::size_t links_between(const topo::Cluster& c, const std::string& from, const std::string& to) {
  std::size_t n = 0;
  const auto target = *c.find_device(to);
  for (auto l : c.out_links(*c.find_device(from))) n += c.link_ends(l).to == target ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("fat tree sizing from radix and oversubscription", "[topologies]") {
  // Non-blocking 40-port leaves: 20 down, 20 up; 192 NICs -> 10 leaves; 200 uplinks / 40 = 5.
  auto s = topo::fat_tree_shape(192, {});
  REQUIRE(s.down == 20);
  REQUIRE(s.up == 20);
  REQUIRE(s.leaves == 10);
  REQUIRE(s.spines == 5);
  // 2:1: down = round(40 * 2/3) = 27, up = 13; ceil(192/27) = 8 leaves; ceil(8*13/40) = 3 spines.
  topo::FatTreeOptions two_to_one;
  two_to_one.oversubscription = 2.0;
  s = topo::fat_tree_shape(192, two_to_one);
  REQUIRE(s.down == 27);
  REQUIRE(s.up == 13);
  REQUIRE(s.leaves == 8);
  REQUIRE(s.spines == 3);
  // Director spines of radix 800: 154 leaves x 20 uplinks = 3080 -> 4 spines.
  topo::FatTreeOptions director;
  director.spine_radix = 800;
  s = topo::fat_tree_shape(3072, director);
  REQUIRE(s.leaves == 154);
  REQUIRE(s.spines == 4);
  // One leaf needs no spine.
  s = topo::fat_tree_shape(16, {});
  REQUIRE(s.leaves == 1);
  REQUIRE(s.spines == 0);

  topo::FatTreeOptions bad;
  bad.leaf_radix = 1;
  REQUIRE_THROWS_AS(topo::fat_tree_shape(8, bad), sim::ConfigError);
  bad = {};
  bad.oversubscription = 0.0;
  REQUIRE_THROWS_WITH(topo::fat_tree_shape(8, bad), Contains("oversubscription"));
  bad.oversubscription = 1000.0;  // every port down: fine for one leaf, impossible for two
  REQUIRE(topo::fat_tree_shape(8, bad).leaves == 1);
  REQUIRE_THROWS_WITH(topo::fat_tree_shape(80, bad), Contains("no uplink"));
}

TEST_CASE("thetagpu: 24 DGX A100, mixed GPU memory, 10 leaves and 5 spines", "[topologies]") {
  const auto c = topo::build_thetagpu();
  REQUIRE(c.name() == "thetagpu");
  REQUIRE(c.node_count() == 24);
  REQUIRE(c.gpu_count() == 192);
  REQUIRE(devices_of_kind(c, DeviceKind::nic) == 192);
  REQUIRE(devices_of_kind(c, DeviceKind::ib_leaf) == 10);
  REQUIRE(devices_of_kind(c, DeviceKind::ib_spine) == 5);
  // 192 NIC links + 10 leaves x 20 uplinks, each duplex.
  REQUIRE(links_of_class(c, LinkClass::infiniband) == std::size_t{2} * (192 + 200));
  // Nodes 0-21 have 40 GB GPUs, nodes 22-23 80 GB (GPU 8n + k is on node n).
  REQUIRE(c.gpu_model(175).name == "A100-SXM4-40GB");
  REQUIRE(c.gpu_model(176).name == "A100-SXM4-80GB");
  REQUIRE(c.gpu(176).node == 22);
  // NICs attach node-major, 20 per leaf: NIC #19 (n2.nic3) on leaf0, NIC #20 (n2.nic4) on leaf1.
  REQUIRE(leaf_of(c, "n0.nic0") == "leaf0");
  REQUIRE(leaf_of(c, "n2.nic3") == "leaf0");
  REQUIRE(leaf_of(c, "n2.nic4") == "leaf1");
  REQUIRE(leaf_of(c, "n23.nic7") == "leaf9");
  // 20 uplinks dealt round-robin over 5 spines: 4 parallel links per leaf-spine pair.
  REQUIRE(links_between(c, "leaf0", "spine0") == 4);
  REQUIRE(links_between(c, "leaf9", "spine4") == 4);
  REQUIRE(c.link(c.out_links(*c.find_device("leaf3")).front()).capacity.gigabytes_per_second() ==
          Approx(25));
  REQUIRE(c.node(23).nic.gigabytes_per_second() == Approx(25));
  REQUIRE_THROWS_AS(topo::build_thetagpu(25), sim::ConfigError);
}

TEST_CASE("selene sizes to 384 nodes with director spines", "[topologies]") {
  const auto c = topo::build_selene(384);
  REQUIRE(c.gpu_count() == 3072);
  REQUIRE(c.gpu_model(0).name == "A100-SXM4-80GB");
  // 3072 NICs / 20 = 154 leaves; 3080 uplinks / 800 = 4 spines.
  REQUIRE(devices_of_kind(c, DeviceKind::ib_leaf) == 154);
  REQUIRE(devices_of_kind(c, DeviceKind::ib_spine) == 4);
  std::vector<sim::LinkId> path;
  c.route(0, 3071, -1, -1, 1, path);
  // gpu-pcie-nic (2 hops), nic-leaf-spine-leaf-nic (4), nic-pcie-gpu (2).
  REQUIRE(path.size() == 8);
}

TEST_CASE("rail-optimized: one leaf per rail per scalable unit", "[topologies]") {
  // 40 servers, 40-port leaves non-blocking: units of 20 servers -> 2 units x 8 rails = 16
  // leaves, each with 20 uplinks -> 320 / 40 = 8 spines.
  const auto c = topo::build_rail_optimized("ro", 40, NodePreset::dgx_a100);
  REQUIRE(devices_of_kind(c, DeviceKind::ib_leaf) == 16);
  REQUIRE(devices_of_kind(c, DeviceKind::ib_spine) == 8);
  REQUIRE(leaf_of(c, "n0.nic3") == "leaf3");
  REQUIRE(leaf_of(c, "n19.nic3") == "leaf3");
  REQUIRE(leaf_of(c, "n21.nic3") == "leaf11");
  REQUIRE(leaf_of(c, "n39.nic7") == "leaf15");
  // Servers with different NIC counts cannot share rails.
  const topo::NodeFactory mixed = [](topo::ClusterBuilder& b, int node) {
    return topo::add_node(b, node == 0 ? NodePreset::dgx_a100 : NodePreset::pcie_8gpu, node);
  };
  REQUIRE_THROWS_WITH(topo::build_rail_optimized("mixed", 2, mixed), Contains("same rails"));
}

TEST_CASE("resolve_cluster sizes presets by GPU count", "[topologies]") {
  REQUIRE(topo::resolve_cluster("thetagpu", 0).gpu_count() == 192);
  REQUIRE(topo::resolve_cluster("thetagpu", 16).node_count() == 2);  // ceil(16 / 8)
  REQUIRE(topo::resolve_cluster("thetagpu", 17).node_count() == 3);
  REQUIRE_THROWS_AS(topo::resolve_cluster("thetagpu", 200), sim::ConfigError);
  REQUIRE_THROWS_WITH(topo::resolve_cluster("thetagpu", 200), Contains("192") && Contains("200"));
  REQUIRE(topo::resolve_cluster("selene", 0).node_count() == 1);
  REQUIRE(topo::resolve_cluster("selene", 64).node_count() == 8);
  const auto one = topo::resolve_cluster("dgx-a100", 4);
  REQUIRE(one.gpu_count() == 8);
  REQUIRE(one.name() == "dgx-a100");
  const auto two = topo::resolve_cluster("dgx-a100", 16);
  REQUIRE(two.name() == "dgx-a100-x2");
  REQUIRE(two.node_count() == 2);
  REQUIRE(devices_of_kind(two, DeviceKind::ib_leaf) == 1);  // 16 NICs fit one 40-port leaf
  // dgx-h100 uses 64-port QM9700: 72 NICs / 32 down = 3 leaves, 96 uplinks / 64 = 2 spines.
  const auto h = topo::resolve_cluster("dgx-h100", 72);
  REQUIRE(h.node_count() == 9);
  REQUIRE(devices_of_kind(h, DeviceKind::ib_leaf) == 3);
  REQUIRE(devices_of_kind(h, DeviceKind::ib_spine) == 2);
  REQUIRE(topo::resolve_cluster("pcie-8gpu", 0).gpu_count() == 8);
  REQUIRE_THROWS_WITH(topo::resolve_cluster("nope", 8),
                      Contains("nope") && Contains("thetagpu") && Contains("file"));
  REQUIRE_THROWS_AS(topo::resolve_cluster("selene", -1), sim::ConfigError);
  REQUIRE_THROWS_WITH(topo::resolve_cluster("missing/topology.json", 0),
                      Contains("missing/topology.json") && Contains("no such topology file"));

  const std::string ring = test::data_path("topologies/ring4.json");
  REQUIRE(topo::resolve_cluster(ring, 0).gpu_count() == 4);
  REQUIRE(topo::resolve_cluster(ring, 4).name() == "ring4");
  REQUIRE_THROWS_WITH(topo::resolve_cluster(ring, 8), Contains("4 GPUs") && Contains("8"));
}

TEST_CASE("every listed cluster preset resolves", "[topologies]") {
  const auto presets = topo::known_cluster_presets();
  REQUIRE(presets.size() == 10);
  for (const auto& p : presets) {
    INFO(p.name);
    REQUIRE_FALSE(p.description.empty());
    // 8 GPUs take one server (a whole 72-GPU rack for gb200-nvl72).
    REQUIRE(topo::resolve_cluster(p.name, 8).gpu_count() == (p.name == "gb200-nvl72" ? 72u : 8u));
  }
}

TEST_CASE("node presets build a connected fat tree at any size, with as many levels as it needs",
          "[topologies]") {
  // dgx-h100: 8 NDR NICs per node, 64-port switches: 32 down and 32 up per leaf. Two levels
  // join up to 64 leaves (2048 NICs); past that pods of 32 leaves share 32 middle switches,
  // each with 32 ports down and 32 up; past 64 pods, pods of pods (see build_fat_tree).
  struct Case {
    int gpus;
    int levels;
    int spines;  // derived by hand from the rule above
  };
  for (const Case& k : {Case{8, 1, 0}, Case{1024, 2, 16},
                        // 192 leaves: 6 pods x 32 middle + 32 planes x ceil(6 * 32 / 64)
                        Case{6144, 3, 6 * 32 + 32 * 3},
                        // 512 leaves: 16 pods x 32 + 32 planes x ceil(16 * 32 / 64)
                        Case{16384, 3, 16 * 32 + 32 * 8},
                        // 3125 leaves: 98 pods x 32; 4 pods of pods x 32 x 32; 1024 planes x 2
                        Case{100000, 4, 98 * 32 + 4 * 32 * 32 + 1024 * 2}}) {
    INFO(k.gpus << " GPUs");
    const auto c = topo::resolve_cluster("dgx-h100", k.gpus);  // build() checks reachability
    REQUIRE(c.gpu_count() == static_cast<std::size_t>(k.gpus));
    const auto shape = topo::fat_tree_shape(k.gpus, {.leaf_radix = 64});
    REQUIRE(shape.levels == k.levels);
    REQUIRE(shape.spines == k.spines);
    REQUIRE(devices_of_kind(c, DeviceKind::ib_spine) == static_cast<std::size_t>(k.spines));
    if (k.levels == 1) continue;
    // First GPU to last: up every level and down again, 2 x levels fabric links plus the two
    // NIC links, all InfiniBand.
    std::vector<sim::LinkId> route;
    c.route(0, static_cast<sim::GpuId>(k.gpus - 1), -1, -1, 0, route);
    std::size_t ib = 0;
    for (auto l : route) ib += c.link(l).cls == LinkClass::infiniband ? 1 : 0;
    REQUIRE(ib == static_cast<std::size_t>(2 * k.levels));
    if (k.levels < 3) continue;
    // Adaptive routing pools by level: the route's leaf -> middle and middle -> top links each
    // belong to their lower switch's uplink pool, which holds every uplink of that switch.
    std::size_t first_ib = 0;  // the NIC -> leaf link
    while (c.link(route[first_ib]).cls != LinkClass::infiniband) ++first_ib;
    for (std::size_t hop : {std::size_t{1}, std::size_t{2}}) {  // leaf -> middle, middle -> top
      const sim::LinkId up = route[first_ib + hop];
      const auto from = c.link_ends(up).from;
      std::size_t uplinks = 0, pooled = 0;
      for (auto l : c.out_links(from)) {
        if (c.device(c.link_ends(l).to).kind != DeviceKind::ib_spine) continue;
        ++uplinks;
        pooled += c.link_pool(l) == c.link_pool(up) ? 1 : 0;
      }
      REQUIRE(uplinks == 32);
      REQUIRE(pooled == 32);
    }
  }
}
