#include "topologies/node_presets.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <catch2/catch.hpp>

#include "path_checks.hpp"
#include "topologies/cluster_builders.hpp"

using namespace foresight;
using foresight::test::devices_of_kind;
using foresight::test::links_of_class;
using sim::LinkClass;
using topo::DeviceKind;
using topo::NodePreset;

TEST_CASE("preset names round-trip and describe themselves", "[topologies]") {
  REQUIRE(topo::node_presets().size() == 8);
  for (NodePreset p : topo::node_presets()) {
    REQUIRE(topo::find_node_preset(topo::to_string(p)) == p);
    REQUIRE_FALSE(topo::describe(p).empty());
    REQUIRE(topo::gpus_per_node(p) == (p == NodePreset::gb200_nvl72 ? 72 : 8));
    REQUIRE(topo::build_single_node(p).gpu_count() == static_cast<std::size_t>(topo::gpus_per_node(p)));
  }
  REQUIRE_FALSE(topo::find_node_preset("dgx-b300").has_value());
}

TEST_CASE("dgx-a100: devices, links per class and facts", "[topologies]") {
  const auto c = topo::build_single_node(NodePreset::dgx_a100);
  REQUIRE(c.name() == "dgx-a100");
  REQUIRE(c.gpu_count() == 8);
  REQUIRE(c.node_count() == 1);
  REQUIRE(devices_of_kind(c, DeviceKind::gpu) == 8);
  REQUIRE(devices_of_kind(c, DeviceKind::nvswitch) == 1);  // six NVSwitch2 chips merged
  REQUIRE(devices_of_kind(c, DeviceKind::pcie_switch) == 4);
  REQUIRE(devices_of_kind(c, DeviceKind::nic) == 8);  // compute NICs only, storage not modelled
  REQUIRE(devices_of_kind(c, DeviceKind::cpu) == 2);
  // Directed links: 8 GPU<->NVSwitch duplex = 16 nvlink; PCIe: 8 GPU + 8 NIC + 4 uplinks,
  // each duplex = 40; xGMI duplex = 2.
  REQUIRE(links_of_class(c, LinkClass::nvlink) == 16);
  REQUIRE(links_of_class(c, LinkClass::pcie) == 40);
  REQUIRE(links_of_class(c, LinkClass::cpu_interconnect) == 2);
  REQUIRE(c.link_count() == 58);

  for (sim::GpuId g = 0; g < 8; ++g) {
    const auto& f = c.gpu(g);
    REQUIRE(f.node == 0);
    REQUIRE(f.local_index == static_cast<int>(g));
    REQUIRE(f.compute_capability == 80);
    REQUIRE(f.nvlink_lanes == 12);  // 300 GB/s / 25 GB/s per lane
    REQUIRE(f.nvlink_lane.gigabytes_per_second() == Approx(25));
    REQUIRE(f.pcie.gigabytes_per_second() == Approx(31.5077).epsilon(1e-4));
    REQUIRE(c.gpu_model(g).name == "A100-SXM4-40GB");
    REQUIRE(c.device(c.gpu_device(g)).name == fmt::format("n0.gpu{}", g));
  }
  const auto& n = c.node(0);
  REQUIRE(n.gpus == 8);
  REQUIRE(n.nvswitch);
  REQUIRE_FALSE(n.nvls);
  REQUIRE(n.nics == 8);
  REQUIRE(n.nic.gigabytes_per_second() == Approx(25));  // HDR 200 Gb/s
  REQUIRE(n.cpu == sim::CpuVendor::amd);

  // Switch k holds GPUs 2k, 2k+1 and NICs 2k, 2k+1: GPU 5 and NIC 4 share n0.pcie2.
  const auto shares_switch = [&](const std::string& a, const std::string& b) {
    for (sim::LinkId la : c.out_links(*c.find_device(a))) {
      for (sim::LinkId lb : c.out_links(*c.find_device(b))) {
        if (c.link_ends(la).to == c.link_ends(lb).to &&
            c.device(c.link_ends(la).to).kind == DeviceKind::pcie_switch) {
          return true;
        }
      }
    }
    return false;
  };
  REQUIRE(shares_switch("n0.gpu5", "n0.nic4"));
  REQUIRE(shares_switch("n0.gpu5", "n0.nic5"));
  REQUIRE_FALSE(shares_switch("n0.gpu5", "n0.nic6"));

  // Latencies: NIC hop includes NIC processing (0.5 us); NVLink hop 0.1 us.
  const auto nic0 = *c.find_device("n0.nic0");
  REQUIRE(c.link(c.out_links(nic0).front()).latency == topo::latency::kNic);
  const auto nvl = c.nvswitch_links(0);
  REQUIRE(nvl.has_value());
  REQUIRE(c.link(nvl->first).latency == topo::latency::kNvlink);
  REQUIRE(c.link(nvl->first).capacity.gigabytes_per_second() == Approx(300));
}

TEST_CASE("dgx-a100-80gb differs only in its GPU model", "[topologies]") {
  const auto c = topo::build_single_node(NodePreset::dgx_a100_80gb);
  REQUIRE(c.gpu_count() == 8);
  REQUIRE(c.link_count() == 58);
  REQUIRE(c.gpu_model(7).name == "A100-SXM4-80GB");
  REQUIRE(c.gpu(7).nvlink_lanes == 12);
}

TEST_CASE("dgx-h100: NVLink SHARP, 18 lanes, NDR NICs, Intel CPUs", "[topologies]") {
  const auto c = topo::build_single_node(NodePreset::dgx_h100);
  REQUIRE(c.gpu_count() == 8);
  REQUIRE(devices_of_kind(c, DeviceKind::nic) == 8);
  REQUIRE(devices_of_kind(c, DeviceKind::pcie_switch) == 4);
  REQUIRE(links_of_class(c, LinkClass::nvlink) == 16);
  for (sim::GpuId g = 0; g < 8; ++g) {
    REQUIRE(c.gpu(g).nvlink_lanes == 18);  // 450 GB/s / 25 GB/s
    REQUIRE(c.gpu(g).compute_capability == 90);
    REQUIRE(c.gpu(g).pcie.gigabytes_per_second() == Approx(63.0154).epsilon(1e-4));
  }
  const auto& n = c.node(0);
  REQUIRE(n.nvswitch);
  REQUIRE(n.nvls);
  REQUIRE(n.nic.gigabytes_per_second() == Approx(50));  // NDR 400 Gb/s
  REQUIRE(n.cpu == sim::CpuVendor::intel);
  REQUIRE(c.link(c.nvswitch_links(3)->second).capacity.gigabytes_per_second() == Approx(450));
}

TEST_CASE("dgx-h200 is dgx-h100 with H200 GPUs; dgx-b200 doubles the NVLink per GPU", "[topologies]") {
  const auto h200 = topo::build_single_node(NodePreset::dgx_h200);
  const auto h100 = topo::build_single_node(NodePreset::dgx_h100);
  REQUIRE(h200.gpu_model(0).name == "H200-SXM-141GB");
  REQUIRE(h200.device_count() == h100.device_count());
  REQUIRE(h200.link_count() == h100.link_count());
  REQUIRE(h200.node(0).nvls);

  const auto b200 = topo::build_single_node(NodePreset::dgx_b200);
  REQUIRE(b200.gpu_count() == 8);
  REQUIRE(b200.gpu_model(0).name == "B200-SXM-180GB");
  REQUIRE(b200.gpu(0).compute_capability == 100);
  REQUIRE(b200.node(0).nvls);
  REQUIRE(b200.node(0).nic.gigabytes_per_second() == Approx(50));  // ConnectX-7 400 Gb/s
  REQUIRE(b200.node(0).cpu == sim::CpuVendor::intel);
  // 18 NVLink5 links x 50 GB/s = 900 GB/s each way, twice the H100's.
  REQUIRE(b200.link(b200.nvswitch_links(3)->second).capacity.gigabytes_per_second() == Approx(900));
}

TEST_CASE("gb200-nvl72: 72 GPUs on one NVLink domain, a NIC per GPU; racks join on a fat tree", "[topologies]") {
  const auto rack = topo::build_single_node(NodePreset::gb200_nvl72);
  REQUIRE(rack.gpu_count() == 72);
  REQUIRE(rack.node_count() == 1);
  REQUIRE(devices_of_kind(rack, DeviceKind::nic) == 72);
  REQUIRE(devices_of_kind(rack, DeviceKind::cpu) == 36);
  REQUIRE(devices_of_kind(rack, DeviceKind::nvswitch) == 1);
  REQUIRE(links_of_class(rack, LinkClass::nvlink) == 144);
  REQUIRE(rack.node(0).nvls);
  // GPUs of different trays (0 and 71) talk over NVLink alone, through the switch.
  const auto path = test::checked_route(rack, 0, 71);
  REQUIRE(path.size() == 2);
  for (auto l : path) REQUIRE(rack.link(l).cls == LinkClass::nvlink);
  // Two racks: 144 GPUs on 2 nodes, 144 NICs on 64-port NDR leaves (32 down each: 5 leaves).
  const auto two = topo::resolve_cluster("gb200-nvl72", 144);
  REQUIRE(two.gpu_count() == 144);
  REQUIRE(two.node_count() == 2);
  REQUIRE(devices_of_kind(two, DeviceKind::ib_leaf) == 5);
  const auto across = test::checked_route(two, 0, 72);
  REQUIRE(std::any_of(across.begin(), across.end(),
                      [&](auto l) { return two.link(l).cls == LinkClass::infiniband; }));
}

TEST_CASE("pcie-8gpu: no NVLink, two switches per socket, four NICs", "[topologies]") {
  const auto c = topo::build_single_node(NodePreset::pcie_8gpu);
  REQUIRE(c.gpu_count() == 8);
  REQUIRE(devices_of_kind(c, DeviceKind::nvswitch) == 0);
  REQUIRE(devices_of_kind(c, DeviceKind::pcie_switch) == 4);
  REQUIRE(devices_of_kind(c, DeviceKind::nic) == 4);
  REQUIRE(devices_of_kind(c, DeviceKind::cpu) == 2);
  // PCIe: 8 GPU + 4 NIC + 4 uplinks, duplex = 32; UPI duplex = 2; no NVLink.
  REQUIRE(links_of_class(c, LinkClass::nvlink) == 0);
  REQUIRE(links_of_class(c, LinkClass::pcie) == 32);
  REQUIRE(links_of_class(c, LinkClass::cpu_interconnect) == 2);
  for (sim::GpuId g = 0; g < 8; ++g) {
    REQUIRE(c.gpu(g).nvlink_lanes == 0);
    REQUIRE_FALSE(c.nvswitch_links(g).has_value());
    REQUIRE(c.gpu_model(g).name == "A100-PCIE-40GB");
  }
  const auto& n = c.node(0);
  REQUIRE_FALSE(n.nvswitch);
  REQUIRE_FALSE(n.nvls);
  REQUIRE(n.nics == 4);
  REQUIRE(n.cpu == sim::CpuVendor::intel);
}

TEST_CASE("pcie-h100: pcie-8gpu's layout with H100 PCIe GPUs, PCIe Gen5 and NDR NICs", "[topologies]") {
  const auto c = topo::build_single_node(NodePreset::pcie_h100);
  REQUIRE(c.gpu_count() == 8);
  REQUIRE(devices_of_kind(c, DeviceKind::nvswitch) == 0);
  REQUIRE(devices_of_kind(c, DeviceKind::pcie_switch) == 4);
  REQUIRE(devices_of_kind(c, DeviceKind::nic) == 4);
  REQUIRE(links_of_class(c, LinkClass::nvlink) == 0);
  REQUIRE(links_of_class(c, LinkClass::pcie) == 32);
  // Every PCIe link is Gen5 x16: 32 GT/s x 16 lanes x 128/130 / 8 = 63.02 GB/s each way; each NIC
  // port is NDR, 400 Gb/s = 50 GB/s.
  const double gen5 = 32e9 * 16 * 128.0 / 130.0 / 8.0;
  for (sim::LinkId l = 0; l < c.link_count(); ++l) {
    if (c.link(l).cls == LinkClass::pcie) REQUIRE(c.link(l).capacity.bytes_per_second() == Approx(gen5).epsilon(1e-12));
  }
  for (sim::GpuId g = 0; g < 8; ++g) {
    REQUIRE(c.gpu_model(g).name == "H100-PCIE-80GB");
    REQUIRE(c.gpu(g).nvlink_lanes == 0);
  }
  REQUIRE(c.node(0).nics == 4);
  REQUIRE(c.node(0).nic.bytes_per_second() == Approx(50e9));
}
