#include "topologies/gpu_spec.hpp"

#include <fmt/core.h>

#include <array>
#include <utility>
#include <cctype>

#include "common/error.hpp"

namespace foresight::topo {
namespace {

using sim::Bandwidth;
using sim::Bytes;
using sim::FlopRate;

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

/// PCI-SIG base specifications: 8 GT/s (Gen3), 16 GT/s (Gen4), 32 GT/s (Gen5) per lane.
constexpr double transfer_rate_gt(int generation) {
  switch (generation) {
    case 3:
      return 8.0;
    case 4:
      return 16.0;
    case 5:
      return 32.0;
    default:
      return 0.0;
  }
}

constexpr Bandwidth pcie_rate(int generation, int lanes) {
  // GT/s x lanes x 128/130 encoding / 8 bits -> GB/s.
  return Bandwidth::gigabytes_per_second(transfer_rate_gt(generation) * lanes * 128.0 / 130.0 /
                                         8.0);
}

/// NVLink 2, 3 and 4 all signal 25 GB/s per link per direction: V100 6 links = 300 GB/s
/// bidirectional, A100 12 links = 600 GB/s, H100 18 links = 900 GB/s (the datasheets below).
constexpr Bandwidth kNvlinkLane = Bandwidth::gigabytes_per_second(25.0);
/// NVLink 5 doubles it: 50 GB/s per link per direction, 18 links = 1.8 TB/s bidirectional per
/// Blackwell GPU (NVIDIA DGX B200 and GB200 NVL72 datasheets).
constexpr Bandwidth kNvlink5Lane = Bandwidth::gigabytes_per_second(50.0);

// Each entry's numbers come from the document named in its `source` field.
const std::array<GpuSpec, 9> kCatalog{{
    {
        .name = "V100-SXM2-32GB",
        .architecture = "Volta",
        .compute_capability = 70,
        .sm_count = 80,
        .memory = Bytes(32 * kGiB),
        .memory_bandwidth = Bandwidth::gigabytes_per_second(900.0),
        .fp32 = FlopRate::tera(15.7),
        .tf32 = FlopRate{},
        .fp16 = FlopRate::tera(125.0),
        .bf16 = FlopRate{},
        .fp8 = FlopRate{},
        .nvlink_generation = 2,
        .nvlink_lanes = 6,
        .nvlink_lane = kNvlinkLane,
        .pcie_generation = 3,
        .pcie_lanes = 16,
        .pcie = pcie_rate(3, 16),
        .source = "NVIDIA Tesla V100 GPU Accelerator datasheet (2018): SXM2 15.7 FP32 / 125 "
                  "tensor TFLOP/s, 32 GB HBM2 at 900 GB/s, NVLink 300 GB/s; Tesla V100 GPU "
                  "Architecture whitepaper (2017): 80 SMs, 6 NVLink2 links",
    },
    {
        .name = "A100-SXM4-40GB",
        .architecture = "Ampere",
        .compute_capability = 80,
        .sm_count = 108,
        .memory = Bytes(40 * kGiB),
        .memory_bandwidth = Bandwidth::gigabytes_per_second(1555.0),
        .fp32 = FlopRate::tera(19.5),
        .tf32 = FlopRate::tera(156.0),
        .fp16 = FlopRate::tera(312.0),
        .bf16 = FlopRate::tera(312.0),
        .fp8 = FlopRate{},
        .nvlink_generation = 3,
        .nvlink_lanes = 12,
        .nvlink_lane = kNvlinkLane,
        .pcie_generation = 4,
        .pcie_lanes = 16,
        .pcie = pcie_rate(4, 16),
        .source = "NVIDIA A100 Tensor Core GPU datasheet (2021): FP32 19.5, TF32 156, FP16/BF16 "
                  "312 TFLOP/s dense, 40 GB HBM2 at 1555 GB/s, NVLink 600 GB/s; A100 Tensor Core "
                  "GPU Architecture whitepaper (2020): 108 SMs, 12 NVLink3 links",
    },
    {
        .name = "A100-SXM4-80GB",
        .architecture = "Ampere",
        .compute_capability = 80,
        .sm_count = 108,
        .memory = Bytes(80 * kGiB),
        .memory_bandwidth = Bandwidth::gigabytes_per_second(2039.0),
        .fp32 = FlopRate::tera(19.5),
        .tf32 = FlopRate::tera(156.0),
        .fp16 = FlopRate::tera(312.0),
        .bf16 = FlopRate::tera(312.0),
        .fp8 = FlopRate{},
        .nvlink_generation = 3,
        .nvlink_lanes = 12,
        .nvlink_lane = kNvlinkLane,
        .pcie_generation = 4,
        .pcie_lanes = 16,
        .pcie = pcie_rate(4, 16),
        .source = "NVIDIA A100 Tensor Core GPU datasheet (2021): as A100-SXM4-40GB but 80 GB "
                  "HBM2e at 2039 GB/s",
    },
    {
        .name = "A100-PCIE-40GB",
        .architecture = "Ampere",
        .compute_capability = 80,
        .sm_count = 108,
        .memory = Bytes(40 * kGiB),
        .memory_bandwidth = Bandwidth::gigabytes_per_second(1555.0),
        .fp32 = FlopRate::tera(19.5),
        .tf32 = FlopRate::tera(156.0),
        .fp16 = FlopRate::tera(312.0),
        .bf16 = FlopRate::tera(312.0),
        .fp8 = FlopRate{},
        .nvlink_generation = 3,
        .nvlink_lanes = 12,
        .nvlink_lane = kNvlinkLane,
        .pcie_generation = 4,
        .pcie_lanes = 16,
        .pcie = pcie_rate(4, 16),
        .source = "NVIDIA A100 Tensor Core GPU datasheet (2021), PCIe 40 GB column: same peaks as "
                  "SXM4, 1555 GB/s, NVLink Bridge for 2 GPUs 600 GB/s (12 links; the pcie-8gpu "
                  "preset has no bridges)",
    },
    {
        .name = "H100-SXM5-80GB",
        .architecture = "Hopper",
        .compute_capability = 90,
        .sm_count = 132,
        .memory = Bytes(80 * kGiB),
        .memory_bandwidth = Bandwidth::gigabytes_per_second(3350.0),
        .fp32 = FlopRate::tera(67.0),
        .tf32 = FlopRate::tera(494.7),
        .fp16 = FlopRate::tera(989.4),
        .bf16 = FlopRate::tera(989.4),
        .fp8 = FlopRate::tera(1979.0),
        .nvlink_generation = 4,
        .nvlink_lanes = 18,
        .nvlink_lane = kNvlinkLane,
        .pcie_generation = 5,
        .pcie_lanes = 16,
        .pcie = pcie_rate(5, 16),
        .source = "NVIDIA H100 Tensor Core GPU datasheet (2023), SXM column: FP32 67, TF32 494.7, "
                  "BF16/FP16 989.4, FP8 1979 TFLOP/s dense (half the with-sparsity figures), 80 GB "
                  "HBM3 at 3.35 TB/s, NVLink 900 GB/s; H100 Tensor Core GPU Architecture "
                  "whitepaper (2022): 132 SMs, 18 NVLink4 links",
    },
    {
        .name = "H100-PCIE-80GB",
        .architecture = "Hopper",
        .compute_capability = 90,
        .sm_count = 114,
        .memory = Bytes(80 * kGiB),
        .memory_bandwidth = Bandwidth::gigabytes_per_second(2000.0),
        .fp32 = FlopRate::tera(51.0),
        .tf32 = FlopRate::tera(378.0),
        .fp16 = FlopRate::tera(756.5),
        .bf16 = FlopRate::tera(756.5),
        .fp8 = FlopRate::tera(1513.0),
        .nvlink_generation = 4,
        .nvlink_lanes = 12,
        .nvlink_lane = kNvlinkLane,
        .pcie_generation = 5,
        .pcie_lanes = 16,
        .pcie = pcie_rate(5, 16),
        .source = "NVIDIA H100 Tensor Core GPU datasheet (2022), PCIe column: FP32 51, TF32 378, "
                  "BF16/FP16 756.5, FP8 1513 TFLOP/s dense (half the with-sparsity 756, 1513 and "
                  "3026), 80 GB HBM2e at 2 TB/s, NVLink bridge 600 GB/s (12 links; the pcie-h100 "
                  "preset has no bridges), PCIe Gen5 x16; H100 PCIe product brief PB-11133-001 "
                  "(350 W); NVIDIA LaunchPad H100 MIG guide: 114 SMs, 5 HBM2e stacks",
    },
    {
        .name = "H200-SXM-141GB",
        .architecture = "Hopper",
        .compute_capability = 90,
        .sm_count = 132,
        .memory = Bytes(141 * kGiB),
        .memory_bandwidth = Bandwidth::gigabytes_per_second(4800.0),
        .fp32 = FlopRate::tera(67.0),
        .tf32 = FlopRate::tera(494.7),
        .fp16 = FlopRate::tera(989.4),
        .bf16 = FlopRate::tera(989.4),
        .fp8 = FlopRate::tera(1979.0),
        .nvlink_generation = 4,
        .nvlink_lanes = 18,
        .nvlink_lane = kNvlinkLane,
        .pcie_generation = 5,
        .pcie_lanes = 16,
        .pcie = pcie_rate(5, 16),
        .source = "NVIDIA H200 Tensor Core GPU datasheet (2024), SXM column: H100 SXM compute, "
                  "141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s",
    },
    {
        .name = "B200-SXM-180GB",
        .architecture = "Blackwell",
        .compute_capability = 100,
        .sm_count = 148,
        .memory = Bytes(180 * kGiB),
        .memory_bandwidth = Bandwidth::gigabytes_per_second(8000.0),
        .fp32 = FlopRate::tera(75.0),
        .tf32 = FlopRate::tera(1125.0),
        .fp16 = FlopRate::tera(2250.0),
        .bf16 = FlopRate::tera(2250.0),
        .fp8 = FlopRate::tera(4500.0),
        .nvlink_generation = 5,
        .nvlink_lanes = 18,
        .nvlink_lane = kNvlink5Lane,
        .pcie_generation = 5,
        .pcie_lanes = 16,
        .pcie = pcie_rate(5, 16),
        .source = "NVIDIA DGX B200 datasheet (2024): 8 GPUs, 1,440 GB HBM3e at 64 TB/s, 72 PFLOP/s "
                  "FP8 training and 14.4 TB/s NVLink (per GPU: 180 GB at 8 TB/s, FP8 4.5 PFLOP/s "
                  "dense, half the sparse figure); NVIDIA HGX B200 specifications: FP32 600, TF32 "
                  "18,000 and FP16/BF16 36,000 TFLOP/s sparse for 8 GPUs (75, 1,125, 2,250 dense "
                  "per GPU), 1,000 W; 148 SMs (Blackwell architecture technical brief, 2 dies of "
                  "74); host PCIe Gen5 x16",
    },
    {
        .name = "GB200-NVL-186GB",
        .architecture = "Blackwell",
        .compute_capability = 100,
        .sm_count = 148,
        .memory = Bytes(186 * kGiB),
        .memory_bandwidth = Bandwidth::gigabytes_per_second(8000.0),
        .fp32 = FlopRate::tera(80.0),
        .tf32 = FlopRate::tera(1250.0),
        .fp16 = FlopRate::tera(2500.0),
        .bf16 = FlopRate::tera(2500.0),
        .fp8 = FlopRate::tera(5000.0),
        .nvlink_generation = 5,
        .nvlink_lanes = 18,
        .nvlink_lane = kNvlink5Lane,
        .pcie_generation = 5,
        .pcie_lanes = 16,
        .pcie = pcie_rate(5, 16),
        .source = "NVIDIA GB200 NVL72 datasheet (2024), per rack of 72 GPUs: FP32 5,760 TFLOP/s, "
                  "TF32 180, FP16/BF16 360, FP8 720 PFLOP/s sparse, up to 13.4 TB HBM3e at "
                  "576 TB/s, NVLink 130 TB/s; per GPU 80 TFLOP/s FP32, 1,250 / 2,500 / 5,000 "
                  "TFLOP/s dense, 186 GB at 8 TB/s, 18 NVLink5 links (1.8 TB/s); the B200 die "
                  "pair at up to 1,200 W beside a Grace CPU",
    },
}};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

sim::Bandwidth pcie_line_rate(int generation, int lanes) {
  const bool lanes_ok = lanes == 1 || lanes == 2 || lanes == 4 || lanes == 8 || lanes == 16;
  if (transfer_rate_gt(generation) == 0.0 || !lanes_ok) {
    throw sim::ConfigError(fmt::format(
        "PCIe link: expected generation 3, 4 or 5 and 1, 2, 4, 8 or 16 lanes, found Gen{} x{}",
        generation, lanes));
  }
  return pcie_rate(generation, lanes);
}

std::span<const GpuSpec> gpu_catalog() { return kCatalog; }

const GpuSpec* try_find_gpu_spec(std::string_view name) noexcept {
  for (const auto& spec : kCatalog) {
    if (iequals(spec.name, name)) return &spec;
  }
  return nullptr;
}

const GpuSpec& find_gpu_spec(std::string_view name) {
  if (const GpuSpec* spec = try_find_gpu_spec(name)) return *spec;
  throw sim::TopologyError(
      fmt::format("unknown GPU model \"{}\"; known models: {}", name, known_gpu_models()));
}

const GpuSpec* find_gpu_by_device_name(std::string_view device_name) noexcept {
  if (device_name.empty()) return nullptr;
  const auto contains = [&](std::string_view part) {
    for (std::size_t at = 0; at + part.size() <= device_name.size(); ++at) {
      if (iequals(device_name.substr(at, part.size()), part)) return true;
    }
    return false;
  };
  for (const auto& spec : kCatalog) {
    if (contains(spec.name)) return &spec;
  }
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kBoards{{
      {"V100-SXM2-16GB", "V100-SXM2-32GB"},
      {"A100-PG509-200", "A100-SXM4-40GB"},
      {"H100 80GB HBM3", "H100-SXM5-80GB"},
      {"H100 PCIe", "H100-PCIE-80GB"},
      {"H200", "H200-SXM-141GB"},
      {"GB200", "GB200-NVL-186GB"},
      {"B200", "B200-SXM-180GB"},
  }};
  for (const auto& [board, model] : kBoards) {
    if (contains(board)) return try_find_gpu_spec(model);
  }
  return nullptr;
}

std::string known_gpu_models() {
  std::string out;
  for (const auto& spec : kCatalog) {
    if (!out.empty()) out += ", ";
    out += spec.name;
  }
  return out;
}

}  // namespace foresight::topo
