#pragma once
/// Server (node) presets: each adds one server's devices and links to a ClusterBuilder. The
/// numbers, and where they come from, are documented beside each constant in node_presets.cpp
/// and summarised here.
///
/// - dgx-a100 / dgx-a100-80gb (DGX A100 User Guide; DGX A100 System Architecture whitepaper):
///   8 A100-SXM4 (40 / 80 GB); the six NVSwitch2 chips as one merged nvswitch (nvls off), each
///   GPU joined to it by a duplex nvlink of 12 x 25 = 300 GB/s per direction; 4 PCIe Gen4
///   switches, switch k holding GPUs 2k, 2k+1 and ConnectX-6 HDR NICs (rails) 2k, 2k+1
///   (200 Gb/s = 25 GB/s ports); switches 0-1 under CPU 0 and 2-3 under CPU 1 (2x AMD EPYC 7742),
///   the CPUs joined by xGMI. The two storage NICs are not modelled (no training traffic).
/// - dgx-h100 (DGX H100 User Guide): 8 H100-SXM5-80GB, merged NVSwitch3 with nvls, 18 x 25 =
///   450 GB/s per direction per GPU; 8 ConnectX-7 NDR 400 Gb/s (50 GB/s) NICs paired with the
///   GPUs through 4 PCIe Gen5 switches as on DGX A100; 2x Intel Xeon 8480C joined by UPI.
/// - dgx-h200 (DGX H200 datasheet): dgx-h100 with H200-SXM-141GB GPUs.
/// - dgx-b200 (DGX B200 datasheet): 8 B200-SXM-180GB, merged NVLink5 switches with nvls,
///   18 x 50 = 900 GB/s per direction per GPU; 8 ConnectX-7 NDR NICs through 4 PCIe Gen5
///   switches as on DGX H100; 2x Xeon 8570 joined by UPI.
/// - gb200-nvl72 (GB200 NVL72 datasheet): one rack as one node of 72 GB200-NVL-186GB GPUs on one
///   merged NVSwitch with nvls (900 GB/s per direction per GPU); 36 superchips, each a Grace CPU
///   over a PCIe Gen5 switch holding 2 GPUs and their 2 NDR NICs (72 rails).
/// - pcie-8gpu: 8 A100-PCIE-40GB without NVLink; 2 Intel Xeon (Ice Lake) CPUs, each with 2 PCIe
///   Gen4 switches, each switch holding 2 GPUs and 1 HDR NIC (4 NICs, rails 0-3).
/// - pcie-h100: as pcie-8gpu with 8 H100-PCIE-80GB (H100 datasheet, PCIe column), PCIe Gen5,
///   NDR 400 Gb/s NICs and Sapphire Rapids CPUs joined by UPI; no NVLink bridges.
///
/// Device names: "n<node>.gpu<i>", "n<node>.nvswitch", "n<node>.pcie<k>", "n<node>.nic<rail>",
/// "n<node>.cpu<socket>".

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/units.hpp"
#include "topologies/cluster.hpp"
#include "topologies/gpu_spec.hpp"

namespace foresight::topo {

/// Default per-hop latencies of the presets and cluster builders (one direction).
namespace latency {
/// NVLink hop (GPU <-> NVSwitch, or GPU <-> GPU): an assumption of ~100 ns for SerDes, link and
/// switch-port traversal; NCCL's much larger per-hop protocol latencies (0.6-4 us,
/// reference/nccl-model.md section 4) belong to the collective model, not to the link.
inline constexpr sim::Time kNvlink = sim::Time::from_ps(100'000);
/// PCIe switch hop (GPU or CPU <-> PCIe switch): ~150 ns, the order of a Gen4/Gen5 switch's
/// cut-through port-to-port latency plus the link (an assumption of the same kind).
inline constexpr sim::Time kPcie = sim::Time::from_ps(150'000);
/// NIC <-> PCIe switch including the NIC's own processing: 0.5 us (ConnectX-6/7 product briefs
/// state "sub 0.6 usec" adapter latency).
inline constexpr sim::Time kNic = sim::Time::from_ps(500'000);
/// InfiniBand link plus the traversal of the switch it enters: 130 ns port-to-port (Mellanox
/// QM8700 datasheet) plus ~20 ns for a few metres of cable (~5 ns/m).
inline constexpr sim::Time kInfiniband = sim::Time::from_ps(150'000);
/// CPU socket to socket (xGMI, UPI): ~150 ns, an assumption of the same order as a PCIe hop.
inline constexpr sim::Time kCpuInterconnect = sim::Time::from_ps(150'000);
}  // namespace latency

/// What a node preset added.
struct NodeHandles {
  std::vector<DeviceId> gpus;  ///< by local index
  std::vector<DeviceId> nics;  ///< compute NICs by rail
  sim::Bandwidth nic_rate;     ///< line rate of each NIC's network port, one direction
};

/// The server presets.
enum class NodePreset : std::uint8_t {
  dgx_a100,
  dgx_a100_80gb,
  dgx_h100,
  dgx_h200,
  dgx_b200,
  gb200_nvl72,
  pcie_8gpu,
  pcie_h100
};

/// "dgx-a100", "dgx-a100-80gb", "dgx-h100", "dgx-h200", "dgx-b200", "gb200-nvl72", "pcie-8gpu".
std::string_view to_string(NodePreset preset);
/// The preset called `name` (exact, lower case), if any.
std::optional<NodePreset> find_node_preset(std::string_view name);
/// Every preset, in enum order.
std::span<const NodePreset> node_presets();
/// One line describing the preset, for `foresight --list`.
std::string_view describe(NodePreset preset);
/// GPUs per server of the preset: 8, or 72 for the gb200-nvl72 rack.
int gpus_per_node(NodePreset preset);

/// Adds server `node` built as `preset` and returns its GPUs and NICs.
NodeHandles add_node(ClusterBuilder& builder, NodePreset preset, int node);
/// A DGX A100 whose GPUs are `gpu` (A100-SXM4-40GB or A100-SXM4-80GB).
NodeHandles add_dgx_a100(ClusterBuilder& builder, int node, const GpuSpec& gpu);
/// A DGX H100 whose GPUs are `gpu` (H100-SXM5-80GB, or H200-SXM-141GB for a DGX H200).
NodeHandles add_dgx_h100(ClusterBuilder& builder, int node, const GpuSpec& gpu);
NodeHandles add_dgx_b200(ClusterBuilder& builder, int node);
NodeHandles add_gb200_nvl72(ClusterBuilder& builder, int node);
/// A PCIe server: 2 Intel CPUs, each with 2 PCIe switches of `generation` x16, each switch
/// holding 2 GPUs and 1 NIC of `nic_port`; no NVLink.
struct PcieServer {
  const GpuSpec& gpu;
  int generation = 4;
  sim::Bandwidth nic_port;
  sim::Bandwidth cpu_interconnect;
};
NodeHandles add_pcie_server(ClusterBuilder& builder, int node, const PcieServer& server);

}  // namespace foresight::topo
