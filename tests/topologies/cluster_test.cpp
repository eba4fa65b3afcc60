#include "topologies/cluster.hpp"

#include <catch2/catch.hpp>

#include "path_checks.hpp"
#include "common/error.hpp"

using namespace foresight;
using Catch::Contains;
using sim::LinkClass;
using topo::ClusterBuilder;
using topo::DeviceKind;

namespace {

const topo::GpuSpec& a100() { return topo::find_gpu_spec("A100-SXM4-40GB"); }

topo::LinkSpec nvlink(double gbps) {
  return {sim::Bandwidth::gigabytes_per_second(gbps), sim::Time::from_ps(100'000),
          LinkClass::nvlink};
}

/// Two GPUs of node 0 joined by a duplex link.
ClusterBuilder pair_builder() {
  ClusterBuilder b("pair");
  const auto g0 = b.add_gpu("g0", 0, 0, a100());
  const auto g1 = b.add_gpu("g1", 0, 1, a100());
  b.add_duplex(g0, g1, nvlink(100));
  return b;
}

}  // namespace

TEST_CASE("enumerations have one spelling each way", "[topologies]") {
  for (int k = 0; k < topo::kDeviceKindCount; ++k) {
    const auto kind = static_cast<DeviceKind>(k);
    REQUIRE(topo::parse_device_kind(topo::to_string(kind)) == kind);
  }
  REQUIRE_FALSE(topo::parse_device_kind("switch").has_value());
  for (int k = 0; k < sim::kLinkClassCount; ++k) {
    const auto cls = static_cast<LinkClass>(k);
    REQUIRE(topo::parse_link_class(sim::to_string(cls)) == cls);
  }
  REQUIRE(topo::parse_link_class("cpu_interconnect") == LinkClass::cpu_interconnect);
  REQUIRE(topo::parse_cpu_vendor("intel") == sim::CpuVendor::intel);
  REQUIRE_FALSE(topo::parse_cpu_vendor("arm").has_value());
}

TEST_CASE("the builder names links and keeps duplex pairs and parallel links", "[topologies]") {
  auto b = pair_builder();
  const auto g0 = *b.find_device("g0");
  const auto g1 = *b.find_device("g1");
  const auto extra = b.add_link(g0, g1, nvlink(50));  // parallel to the first link
  const auto c = b.build();
  REQUIRE(c.name() == "pair");
  REQUIRE(c.link_count() == 3);
  REQUIRE(c.link_name(0) == "g0->g1");
  REQUIRE(c.link_name(1) == "g1->g0");
  REQUIRE(c.link_name(extra) == "g0->g1#2");
  REQUIRE(c.reverse_link(0) == sim::LinkId{1});
  REQUIRE(c.reverse_link(1) == sim::LinkId{0});
  REQUIRE_FALSE(c.reverse_link(extra).has_value());
  REQUIRE(c.out_links(g0).size() == 2);
  REQUIRE(c.in_links(g0).size() == 1);
  REQUIRE(c.link_ends(extra).from == g0);
  REQUIRE(c.link_ends(extra).to == g1);
  // 100 + 50 GB/s of NVLink out of g0 = 6 lanes of 25 GB/s; g1 has 100 GB/s = 4 lanes.
  REQUIRE(c.gpu(0).nvlink_lanes == 6);
  REQUIRE(c.gpu(1).nvlink_lanes == 4);
  REQUIRE(c.gpu_id(g1) == sim::GpuId{1});
  REQUIRE_FALSE(c.nic(0, 0).has_value());
  REQUIRE(c.node(0).gpus == 2);
  REQUIRE_FALSE(c.node(0).nvswitch);
  REQUIRE(c.node(0).cpu == sim::CpuVendor::other);
  REQUIRE(c.node(0).nic.bytes_per_second() == 0.0);
  // The builder is empty after build().
  REQUIRE(b.device_count() == 0);
  REQUIRE(b.link_count() == 0);
}

TEST_CASE("GpuIds are node-major whatever order devices were added in", "[topologies]") {
  ClusterBuilder b("order");
  const auto late = b.add_gpu("n1.gpu0", 1, 0, a100());
  const auto second = b.add_gpu("n0.gpu1", 0, 1, a100());
  const auto first = b.add_gpu("n0.gpu0", 0, 0, a100());
  b.add_duplex(late, second, nvlink(25));
  b.add_duplex(second, first, nvlink(25));
  const auto c = b.build();
  REQUIRE(c.gpu_device(0) == first);
  REQUIRE(c.gpu_device(1) == second);
  REQUIRE(c.gpu_device(2) == late);
  REQUIRE(c.gpu(2).node == 1);
  REQUIRE(c.node_count() == 2);
}

TEST_CASE("copies share the cluster; bad indices are internal errors", "[topologies]") {
  const auto c = pair_builder().build();
  const topo::Cluster copy = c;  // NOLINT(performance-unnecessary-copy-initialization)
  REQUIRE(&copy.link(0) == &c.link(0));
  REQUIRE_THROWS_AS(c.link(2), sim::InternalError);
  REQUIRE_THROWS_AS(c.gpu(2), sim::InternalError);
  REQUIRE_THROWS_AS(c.node(1), sim::InternalError);
  REQUIRE_THROWS_AS(c.node(-1), sim::InternalError);
  REQUIRE_THROWS_AS(c.device(2), sim::InternalError);
  REQUIRE_THROWS_AS(c.primary_rail(5), sim::InternalError);
}

TEST_CASE("adding a bad device or link throws at once, naming it", "[topologies]") {
  auto b = pair_builder();
  const auto g0 = *b.find_device("g0");
  REQUIRE_THROWS_WITH(b.add_gpu("g0", 0, 2, a100()), Contains("duplicate") && Contains("g0"));
  REQUIRE_THROWS_WITH(b.add_gpu("", 0, 2, a100()), Contains("empty name"));
  REQUIRE_THROWS_WITH(b.add_gpu("g9", -1, 2, a100()), Contains("g9") && Contains("node"));
  REQUIRE_THROWS_WITH(b.add_gpu("g9", 0, -1, a100()), Contains("local_index"));
  REQUIRE_THROWS_WITH(b.add_nic("nic", 0, -1), Contains("rail"));
  topo::DeviceInfo leaf;
  leaf.name = "leaf";
  leaf.kind = DeviceKind::ib_leaf;
  leaf.node = 0;
  REQUIRE_THROWS_WITH(b.add_device(leaf), Contains("leaf") && Contains("no node"));
  topo::DeviceInfo modelless;
  modelless.name = "ghost";
  modelless.node = 0;
  modelless.local_index = 3;
  REQUIRE_THROWS_WITH(b.add_device(modelless), Contains("ghost") && Contains("model"));
  REQUIRE_THROWS_WITH(b.add_link(g0, g0, nvlink(1)), Contains("g0") && Contains("loop"));
  REQUIRE_THROWS_WITH(b.add_link(g0, 99, nvlink(1)), Contains("#99"));
  REQUIRE_THROWS_WITH(b.add_link(g0, 1, nvlink(0)), Contains("g0 -> g1") && Contains("positive"));
  topo::LinkSpec late = nvlink(1);
  late.latency = sim::Time::from_ps(-1);
  REQUIRE_THROWS_WITH(b.add_link(g0, 1, late), Contains("non-negative latency"));
  REQUIRE(b.device_count() == 2);  // nothing was added
  REQUIRE(b.link_count() == 2);
}

TEST_CASE("build() rejects inconsistent clusters, naming the culprit", "[topologies]") {
  SECTION("no GPU") {
    ClusterBuilder b("empty");
    b.add_ib_leaf("leaf");
    REQUIRE_THROWS_WITH(b.build(), Contains("no GPU"));
  }
  SECTION("a node number without a GPU") {
    auto b = pair_builder();
    b.add_cpu("n2.cpu0", 2, sim::CpuVendor::amd);
    REQUIRE_THROWS_WITH(b.build(), Contains("node 1 has no GPU"));
  }
  SECTION("duplicate local index") {
    auto b = pair_builder();
    b.add_duplex(b.add_gpu("g2", 0, 1, a100()), 0, nvlink(10));
    REQUIRE_THROWS_WITH(b.build(), Contains("g1") && Contains("g2") && Contains("local_index 1"));
  }
  SECTION("a gap in local indices") {
    auto b = pair_builder();
    b.add_duplex(b.add_gpu("g3", 0, 3, a100()), 0, nvlink(10));
    REQUIRE_THROWS_WITH(b.build(), Contains("g3") && Contains("local_index 2"));
  }
  SECTION("duplicate rails") {
    auto b = pair_builder();
    b.add_nic("nicA", 0, 0);
    b.add_nic("nicB", 0, 0);
    REQUIRE_THROWS_WITH(b.build(), Contains("nicA") && Contains("nicB") && Contains("rail 0"));
  }
  SECTION("two NVSwitches in a node") {
    auto b = pair_builder();
    b.add_nvswitch("nvs0", 0, false);
    b.add_nvswitch("nvs1", 0, false);
    REQUIRE_THROWS_WITH(b.build(), Contains("nvs0") && Contains("merged"));
  }
  SECTION("mixed CPU vendors") {
    auto b = pair_builder();
    b.add_cpu("c0", 0, sim::CpuVendor::amd);
    b.add_cpu("c1", 0, sim::CpuVendor::intel);
    REQUIRE_THROWS_WITH(b.build(), Contains("c0") && Contains("c1") && Contains("vendor"));
  }
  SECTION("a disconnected GPU") {
    auto b = pair_builder();
    b.add_gpu("lonely", 0, 2, a100());
    REQUIRE_THROWS_WITH(b.build(), Contains("lonely") && Contains("disconnected"));
    REQUIRE(b.device_count() == 3);  // a failed build leaves the builder as it was
  }
  SECTION("a GPU that can receive but not send") {
    ClusterBuilder b("one-way");
    const auto g0 = b.add_gpu("g0", 0, 0, a100());
    const auto g1 = b.add_gpu("g1", 0, 1, a100());
    b.add_link(g0, g1, nvlink(10));
    REQUIRE_THROWS_WITH(b.build(), Contains("g1") && Contains("cannot reach"));
  }
}
