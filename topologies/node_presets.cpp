#include "topologies/node_presets.hpp"

#include <fmt/core.h>

#include <array>
#include <string>

#include "common/error.hpp"

namespace foresight::topo {
namespace {

using sim::Bandwidth;
using sim::LinkClass;

constexpr std::array kPresets{NodePreset::dgx_a100, NodePreset::dgx_a100_80gb, NodePreset::dgx_h100,
                              NodePreset::dgx_h200,  NodePreset::dgx_b200,      NodePreset::gb200_nvl72,
                              NodePreset::pcie_8gpu, NodePreset::pcie_h100};

/// GB200 NVL72 (GB200 NVL72 datasheet): 18 compute trays of 2 GB200 superchips (a Grace CPU and
/// 2 Blackwell GPUs each) = 72 GPUs and 36 CPUs, all GPUs on one NVLink domain through 9 NVLink
/// switch trays.
constexpr int kNvl72Gpus = 72;

/// ConnectX-6 HDR InfiniBand: 200 Gb/s per port = 25 GB/s (ConnectX-6 VPI product brief; DGX
/// A100 User Guide lists 8 single-port ConnectX-6 for compute). Host side PCIe Gen4 x16.
constexpr Bandwidth kHdrPort = Bandwidth::gigabits_per_second(200.0);
/// ConnectX-7 NDR InfiniBand: 400 Gb/s per port = 50 GB/s (ConnectX-7 product brief; DGX H100
/// User Guide). Host side PCIe Gen5 x16.
constexpr Bandwidth kNdrPort = Bandwidth::gigabits_per_second(400.0);

/// AMD EPYC 7742 pair (DGX A100): four x16 xGMI-2 links between the sockets at up to 18 GT/s
/// (AMD EPYC 7002 series platform specification) = 4 x 16 x 18 / 8 = 144 GB/s per direction.
/// This is the line rate; GPU peer traffic through the CPUs achieves far less (NCCL models it as
/// 16 GB/s, AMD_BW in src/graph/topo.h), which the cpu-interconnect class efficiency, not this
/// figure, must express. No preset route crosses it except GPU peer traffic between sockets,
/// which the NVSwitch carries on DGX A100.
constexpr Bandwidth kXgmiRome = Bandwidth::gigabytes_per_second(4 * 16 * 18.0 / 8.0);
/// Intel Xeon Platinum 8480C pair (DGX H100): 4 UPI 2.0 links at 16 GT/s (Intel ARK, Xeon
/// Platinum 8480+), 2 bytes per transfer per direction = 4 x 32 = 128 GB/s per direction.
/// NCCL models Intel socket crossings as 10 GB/s for GPU traffic (SKL_QPI_BW, src/graph/topo.h).
constexpr Bandwidth kUpiSapphireRapids = Bandwidth::gigabytes_per_second(4 * 16.0 * 2.0);
/// Intel Xeon Platinum 8570 pair (Emerald Rapids, DGX B200): 4 UPI 2.0 links at 20 GT/s (Intel
/// ARK) x 2 bytes = 160 GB/s per direction.
constexpr Bandwidth kUpiEmeraldRapids = Bandwidth::gigabytes_per_second(4 * 20.0 * 2.0);
/// Intel Xeon Platinum 8380 pair (Ice Lake-SP, the PCIe Gen4 Xeon of A100 PCIe servers): 3 UPI
/// links at 11.2 GT/s (Intel ARK) x 2 bytes = 67.2 GB/s per direction.
constexpr Bandwidth kUpiIceLake = Bandwidth::gigabytes_per_second(3 * 11.2 * 2.0);

std::string dev(int node, std::string_view what) { return fmt::format("n{}.{}", node, what); }

LinkSpec nvlink(Bandwidth bw) { return {bw, latency::kNvlink, LinkClass::nvlink}; }
LinkSpec pcie(Bandwidth bw) { return {bw, latency::kPcie, LinkClass::pcie}; }
LinkSpec nic_pcie(Bandwidth bw) { return {bw, latency::kNic, LinkClass::pcie}; }
LinkSpec cpu_link(Bandwidth bw) {
  return {bw, latency::kCpuInterconnect, LinkClass::cpu_interconnect};
}

/// The DGX shape shared by DGX A100 and DGX H100: 8 GPUs on one merged NVSwitch, 4 PCIe
/// switches each holding GPUs 2k, 2k+1 and NICs 2k, 2k+1, switches 0-1 under CPU 0 and 2-3
/// under CPU 1 (DGX A100 User Guide, "Network Ports" and the system topology figure; DGX H100
/// User Guide, same pairing of each GPU with one compute NIC).
struct DgxShape {
  const GpuSpec* gpu = nullptr;
  bool nvls = false;
  Bandwidth pcie_rate;  ///< every PCIe link: GPU, NIC and CPU uplinks are x16 of one generation
  Bandwidth nic_port;
  sim::CpuVendor vendor = sim::CpuVendor::other;
  Bandwidth cpu_interconnect;
};

NodeHandles add_dgx(ClusterBuilder& b, int node, const DgxShape& shape) {
  NodeHandles h;
  h.nic_rate = shape.nic_port;
  const DeviceId nvs = b.add_nvswitch(dev(node, "nvswitch"), node, shape.nvls);
  const DeviceId cpu0 = b.add_cpu(dev(node, "cpu0"), node, shape.vendor);
  const DeviceId cpu1 = b.add_cpu(dev(node, "cpu1"), node, shape.vendor);
  b.add_duplex(cpu0, cpu1, cpu_link(shape.cpu_interconnect));
  for (int k = 0; k < 4; ++k) {
    const DeviceId sw = b.add_pcie_switch(dev(node, fmt::format("pcie{}", k)), node);
    b.add_duplex(sw, k < 2 ? cpu0 : cpu1, pcie(shape.pcie_rate));
    for (int i = 2 * k; i < 2 * k + 2; ++i) {
      const DeviceId gpu = b.add_gpu(dev(node, fmt::format("gpu{}", i)), node, i, *shape.gpu);
      b.add_duplex(gpu, nvs, nvlink(shape.gpu->nvlink_bandwidth()));
      b.add_duplex(gpu, sw, pcie(shape.pcie_rate));
      h.gpus.push_back(gpu);
    }
    for (int r = 2 * k; r < 2 * k + 2; ++r) {
      const DeviceId nic = b.add_nic(dev(node, fmt::format("nic{}", r)), node, r, shape.nic_port);
      b.add_duplex(nic, sw, nic_pcie(shape.pcie_rate));
      h.nics.push_back(nic);
    }
  }
  return h;
}

}  // namespace

std::string_view to_string(NodePreset preset) {
  switch (preset) {
    case NodePreset::dgx_a100:
      return "dgx-a100";
    case NodePreset::dgx_a100_80gb:
      return "dgx-a100-80gb";
    case NodePreset::dgx_h100:
      return "dgx-h100";
    case NodePreset::dgx_h200:
      return "dgx-h200";
    case NodePreset::dgx_b200:
      return "dgx-b200";
    case NodePreset::gb200_nvl72:
      return "gb200-nvl72";
    case NodePreset::pcie_8gpu:
      return "pcie-8gpu";
    case NodePreset::pcie_h100:
      return "pcie-h100";
  }
  return "unknown";
}

std::optional<NodePreset> find_node_preset(std::string_view name) {
  for (NodePreset p : kPresets) {
    if (to_string(p) == name) return p;
  }
  return std::nullopt;
}

std::span<const NodePreset> node_presets() { return kPresets; }

std::string_view describe(NodePreset preset) {
  switch (preset) {
    case NodePreset::dgx_a100:
      return "one DGX A100: 8x A100-SXM4-40GB on NVSwitch (300 GB/s per GPU each way), "
             "8x HDR 200 Gb/s NICs, 2x AMD EPYC 7742";
    case NodePreset::dgx_a100_80gb:
      return "one DGX A100 80GB: as dgx-a100 with A100-SXM4-80GB GPUs";
    case NodePreset::dgx_h100:
      return "one DGX H100: 8x H100-SXM5-80GB on NVSwitch with NVLink SHARP (450 GB/s per GPU "
             "each way), 8x NDR 400 Gb/s NICs, 2x Xeon 8480C";
    case NodePreset::dgx_h200:
      return "one DGX H200: as dgx-h100 with H200-SXM-141GB GPUs (141 GB at 4.8 TB/s)";
    case NodePreset::dgx_b200:
      return "one DGX B200: 8x B200-SXM-180GB on NVSwitch with NVLink SHARP (900 GB/s per GPU "
             "each way), 8x NDR 400 Gb/s NICs, 2x Xeon 8570";
    case NodePreset::gb200_nvl72:
      return "one GB200 NVL72 rack: 72x GB200-NVL-186GB on one NVLink domain (900 GB/s per GPU "
             "each way, NVLink SHARP), 36 Grace CPUs, 72x NDR 400 Gb/s NICs";
    case NodePreset::pcie_8gpu:
      return "one PCIe server: 8x A100-PCIE-40GB without NVLink, 2 PCIe Gen4 switches per "
             "socket, 4x HDR 200 Gb/s NICs, 2x Intel Xeon";
    case NodePreset::pcie_h100:
      return "one PCIe server: 8x H100-PCIE-80GB without NVLink bridges, 2 PCIe Gen5 switches per "
             "socket, 4x NDR 400 Gb/s NICs, 2x Intel Xeon (Sapphire Rapids)";
  }
  return "";
}

int gpus_per_node(NodePreset preset) { return preset == NodePreset::gb200_nvl72 ? kNvl72Gpus : 8; }

NodeHandles add_node(ClusterBuilder& builder, NodePreset preset, int node) {
  switch (preset) {
    case NodePreset::dgx_a100:
      return add_dgx_a100(builder, node, find_gpu_spec("A100-SXM4-40GB"));
    case NodePreset::dgx_a100_80gb:
      return add_dgx_a100(builder, node, find_gpu_spec("A100-SXM4-80GB"));
    case NodePreset::dgx_h100:
      return add_dgx_h100(builder, node, find_gpu_spec("H100-SXM5-80GB"));
    case NodePreset::dgx_h200:
      return add_dgx_h100(builder, node, find_gpu_spec("H200-SXM-141GB"));
    case NodePreset::dgx_b200:
      return add_dgx_b200(builder, node);
    case NodePreset::gb200_nvl72:
      return add_gb200_nvl72(builder, node);
    case NodePreset::pcie_8gpu:
      return add_pcie_server(builder, node,
                             {.gpu = find_gpu_spec("A100-PCIE-40GB"), .generation = 4, .nic_port = kHdrPort,
                              .cpu_interconnect = kUpiIceLake});
    case NodePreset::pcie_h100:
      return add_pcie_server(builder, node,
                             {.gpu = find_gpu_spec("H100-PCIE-80GB"), .generation = 5, .nic_port = kNdrPort,
                              .cpu_interconnect = kUpiSapphireRapids});
  }
  throw sim::InternalError("add_node: unknown preset");
}

NodeHandles add_dgx_a100(ClusterBuilder& builder, int node, const GpuSpec& gpu) {
  if (gpu.compute_capability != 80 || gpu.nvlink_lanes != 12) {
    throw sim::ConfigError(
        fmt::format("dgx-a100 preset: expected an A100 SXM4 GPU model, found \"{}\"", gpu.name));
  }
  // DGX A100: PCIe Gen4 throughout (A100 and ConnectX-6 are Gen4 x16).
  return add_dgx(builder, node,
                 {.gpu = &gpu,
                  .nvls = false,
                  .pcie_rate = pcie_line_rate(4, 16),
                  .nic_port = kHdrPort,
                  .vendor = sim::CpuVendor::amd,
                  .cpu_interconnect = kXgmiRome});
}

NodeHandles add_dgx_h100(ClusterBuilder& builder, int node, const GpuSpec& gpu) {
  if (gpu.compute_capability != 90 || gpu.nvlink_lanes != 18) {
    throw sim::ConfigError(
        fmt::format("dgx-h100 preset: expected a Hopper SXM GPU model, found \"{}\"", gpu.name));
  }
  // DGX H100 and DGX H200 (same system with H200 GPUs, DGX H200 datasheet): PCIe Gen5 (H100
  // SXM5 and ConnectX-7 are Gen5 x16); NVSwitch3 supports NVLink SHARP (H100 architecture
  // whitepaper).
  return add_dgx(builder, node,
                 {.gpu = &gpu,
                  .nvls = true,
                  .pcie_rate = pcie_line_rate(5, 16),
                  .nic_port = kNdrPort,
                  .vendor = sim::CpuVendor::intel,
                  .cpu_interconnect = kUpiSapphireRapids});
}

NodeHandles add_dgx_b200(ClusterBuilder& builder, int node) {
  // DGX B200 datasheet: 8 B200 on two NVLink5 switch chips (merged here, with NVLink SHARP),
  // 8 single-port ConnectX-7 400 Gb/s for compute, 2 Xeon Platinum 8570, PCIe Gen5.
  return add_dgx(builder, node,
                 {.gpu = &find_gpu_spec("B200-SXM-180GB"),
                  .nvls = true,
                  .pcie_rate = pcie_line_rate(5, 16),
                  .nic_port = kNdrPort,
                  .vendor = sim::CpuVendor::intel,
                  .cpu_interconnect = kUpiEmeraldRapids});
}

NodeHandles add_gb200_nvl72(ClusterBuilder& b, int node) {
  // One NVLink domain: the 18 NVSwitch chips of the 9 switch trays merged into one nvswitch
  // (as NCCL merges them), NVLink SHARP on. Each superchip k (Grace CPU k, GPUs 2k and 2k+1)
  // is modelled DGX-like: a PCIe Gen5 switch holding its two GPUs and their two ConnectX-7
  // NDR NICs (one 400 Gb/s compute NIC per GPU, rail = GPU index), uplinked to its Grace. The
  // GPU-Grace NVLink-C2C links carry no training traffic here and are not modelled.
  const GpuSpec& gpu = find_gpu_spec("GB200-NVL-186GB");
  const Bandwidth gen5 = pcie_line_rate(5, 16);
  NodeHandles h;
  h.nic_rate = kNdrPort;
  const DeviceId nvs = b.add_nvswitch(dev(node, "nvswitch"), node, true);
  for (int k = 0; k < kNvl72Gpus / 2; ++k) {
    const DeviceId cpu = b.add_cpu(dev(node, fmt::format("cpu{}", k)), node, sim::CpuVendor::other);
    const DeviceId sw = b.add_pcie_switch(dev(node, fmt::format("pcie{}", k)), node);
    b.add_duplex(sw, cpu, pcie(gen5));
    for (int i = 2 * k; i < 2 * k + 2; ++i) {
      const DeviceId g = b.add_gpu(dev(node, fmt::format("gpu{}", i)), node, i, gpu);
      b.add_duplex(g, nvs, nvlink(gpu.nvlink_bandwidth()));
      b.add_duplex(g, sw, pcie(gen5));
      h.gpus.push_back(g);
    }
    for (int r = 2 * k; r < 2 * k + 2; ++r) {
      const DeviceId nic = b.add_nic(dev(node, fmt::format("nic{}", r)), node, r, kNdrPort);
      b.add_duplex(nic, sw, nic_pcie(gen5));
      h.nics.push_back(nic);
    }
  }
  return h;
}

NodeHandles add_pcie_server(ClusterBuilder& b, int node, const PcieServer& server) {
  const Bandwidth line = pcie_line_rate(server.generation, 16);
  NodeHandles h;
  h.nic_rate = server.nic_port;
  const DeviceId cpu0 = b.add_cpu(dev(node, "cpu0"), node, sim::CpuVendor::intel);
  const DeviceId cpu1 = b.add_cpu(dev(node, "cpu1"), node, sim::CpuVendor::intel);
  b.add_duplex(cpu0, cpu1, cpu_link(server.cpu_interconnect));
  for (int k = 0; k < 4; ++k) {
    const DeviceId sw = b.add_pcie_switch(dev(node, fmt::format("pcie{}", k)), node);
    b.add_duplex(sw, k < 2 ? cpu0 : cpu1, pcie(line));
    for (int i = 2 * k; i < 2 * k + 2; ++i) {
      const DeviceId g = b.add_gpu(dev(node, fmt::format("gpu{}", i)), node, i, server.gpu);
      b.add_duplex(g, sw, pcie(line));
      h.gpus.push_back(g);
    }
    const DeviceId nic = b.add_nic(dev(node, fmt::format("nic{}", k)), node, k, server.nic_port);
    b.add_duplex(nic, sw, nic_pcie(line));
    h.nics.push_back(nic);
  }
  return h;
}

}  // namespace foresight::topo
