#include "topologies/topology_report.hpp"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "path_checks.hpp"
#include "topologies/cluster_builders.hpp"

using namespace foresight;
using Catch::Contains;
using topo::DeviceKind;
using topo::NodePreset;

TEST_CASE("thetagpu report: counts and a 2400 GB/s bisection", "[topologies]") {
  const auto r = topo::make_topology_report(topo::build_thetagpu());
  REQUIRE(r.name == "thetagpu");
  REQUIRE(r.gpus == 192);
  REQUIRE(r.nodes == 24);
  // 22 nodes x 8 = 176 GPUs of 40 GB, 2 x 8 = 16 of 80 GB.
  REQUIRE(r.gpu_models == std::vector<std::pair<std::string, std::size_t>>{{"A100-SXM4-40GB", 176},
                                                                           {"A100-SXM4-80GB", 16}});
  REQUIRE(r.devices_per_kind[static_cast<int>(DeviceKind::gpu)] == 192);
  REQUIRE(r.devices_per_kind[static_cast<int>(DeviceKind::cpu)] == 48);
  REQUIRE(r.devices_per_kind[static_cast<int>(DeviceKind::nvswitch)] == 24);
  REQUIRE(r.devices_per_kind[static_cast<int>(DeviceKind::pcie_switch)] == 96);
  REQUIRE(r.devices_per_kind[static_cast<int>(DeviceKind::nic)] == 192);
  REQUIRE(r.devices_per_kind[static_cast<int>(DeviceKind::ib_leaf)] == 10);
  REQUIRE(r.devices_per_kind[static_cast<int>(DeviceKind::ib_spine)] == 5);
  // nvlink, pcie, infiniband, cpu-interconnect are present; ethernet is not.
  REQUIRE(r.link_classes.size() == 4);
  const auto& ib = r.link_classes[2];
  REQUIRE(ib.cls == sim::LinkClass::infiniband);
  REQUIRE(ib.count == 784);  // 2 x (192 NIC links + 200 uplinks)
  REQUIRE(ib.line_rates.size() == 1);
  REQUIRE(ib.line_rates[0].gigabytes_per_second() == Approx(25));
  REQUIRE(ib.total.gigabytes_per_second() == Approx(784 * 25));
  // Nodes 0-11 to nodes 12-23: limited by the 12 x 8 NIC links at 25 GB/s = 2400 GB/s.
  REQUIRE(r.bisection.gigabytes_per_second() == Approx(2400));
  REQUIRE(r.bisection_cut == "GPUs of nodes 0-11 -> GPUs of nodes 12-23");

  const std::string text = topo::to_text(r);
  REQUIRE_THAT(text, Contains("thetagpu") && Contains("176 x A100-SXM4-40GB") &&
                         Contains("2400 GB/s per direction") && Contains("infiniband"));
  const auto j = topo::to_json(r);
  REQUIRE(j.at("bisection_GBps").get<double>() == Approx(2400));
  REQUIRE(j.at("gpu_models").at("A100-SXM4-80GB") == 16);
  REQUIRE(j.at("devices").at("ib_spine") == 5);
  REQUIRE(j.at("links").size() == 4);
}

TEST_CASE("2:1 oversubscription halves the bisection", "[topologies]") {
  // 6 DGX A100 = 48 NICs. Radix 36, non-blocking: 18 down / 18 up, 3 leaves, 2 spines; the
  // first 3 nodes' 24 NICs all reach the other half: 24 x 25 = 600 GB/s.
  // Radix 36, 2:1: 24 down / 12 up, 2 leaves holding nodes 0-2 and 3-5; the cut is the 12
  // uplinks of a leaf: 12 x 25 = 300 GB/s.
  topo::FatTreeOptions full;
  full.leaf_radix = 36;
  topo::FatTreeOptions half = full;
  half.oversubscription = 2.0;
  const auto a = topo::build_fat_tree("full", 6, NodePreset::dgx_a100, full);
  const auto b = topo::build_fat_tree("half", 6, NodePreset::dgx_a100, half);
  REQUIRE(test::devices_of_kind(a, DeviceKind::ib_leaf) == 3);
  REQUIRE(test::devices_of_kind(b, DeviceKind::ib_leaf) == 2);
  const double full_bw = topo::bisection_bandwidth(a).first.gigabytes_per_second();
  const double half_bw = topo::bisection_bandwidth(b).first.gigabytes_per_second();
  REQUIRE(full_bw == Approx(600));
  REQUIRE(half_bw == Approx(300));
  REQUIRE(half_bw == Approx(full_bw / 2));
}

TEST_CASE("one-server bisection splits its GPUs", "[topologies]") {
  // DGX A100, GPUs 0-3 -> 4-7: 4 x 300 GB/s of NVLink into the NVSwitch, plus PCIe through the
  // CPUs, limited by CPU 0's two Gen4 x16 uplinks: 2 x 31.51 GB/s. 1200 + 63.02 = 1263.02.
  const auto dgx = topo::build_single_node(NodePreset::dgx_a100);
  const auto [bw, cut] = topo::bisection_bandwidth(dgx);
  REQUIRE(bw.gigabytes_per_second() == Approx(1200 + 2 * 31.5077).epsilon(1e-5));
  REQUIRE(cut == "GPUs 0-3 -> GPUs 4-7 of the single node");
  // pcie-8gpu: everything crosses the UPI, whose 67.2 GB/s exceeds CPU 0's two uplinks.
  const auto pcie = topo::build_single_node(NodePreset::pcie_8gpu);
  REQUIRE(topo::bisection_bandwidth(pcie).first.gigabytes_per_second() ==
          Approx(2 * 31.5077).epsilon(1e-5));
}

TEST_CASE("max flow between explicit GPU sets", "[topologies]") {
  // Ring of 4 GPUs at 100 GB/s: GPU 0 to GPU 2 has two disjoint paths = 200 GB/s.
  topo::ClusterBuilder b("ring");
  const auto& a100 = topo::find_gpu_spec("A100-SXM4-40GB");
  std::vector<topo::DeviceId> g;
  g.reserve(4);
  for (int i = 0; i < 4; ++i) g.push_back(b.add_gpu(fmt::format("g{}", i), 0, i, a100));
  for (int i = 0; i < 4; ++i) {
    b.add_duplex(
        g[static_cast<std::size_t>(i)], g[static_cast<std::size_t>((i + 1) % 4)],
        {sim::Bandwidth::gigabytes_per_second(100), sim::Time::zero(), sim::LinkClass::nvlink});
  }
  const auto c = b.build();
  REQUIRE(topo::max_flow(c, {0}, {2}).gigabytes_per_second() == Approx(200));
  REQUIRE(topo::max_flow(c, {0, 1}, {2, 3}).gigabytes_per_second() == Approx(200));
  REQUIRE(topo::max_flow(c, {}, {2}).bytes_per_second() == 0.0);
}
