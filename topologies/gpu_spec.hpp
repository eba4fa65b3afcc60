#pragma once
/// The catalog of GPU models: datasheet numbers the topology (NVLink lanes, PCIe rate) and the
/// compute and memory models (SMs, peak FLOP/s, HBM size and bandwidth) read. Entries are
/// immutable; a `const GpuSpec&` from the catalog stays valid for the life of the program.

#include <span>
#include <string>
#include <string_view>

#include "common/units.hpp"

namespace foresight::topo {

/// Line rate of one direction of a PCIe link: GT/s per lane x lanes x 128/130 (the 128b/130b
/// encoding of Gen3 and later) / 8 bits. Gen3 x16 = 15.75 GB/s, Gen4 x16 = 31.5 GB/s,
/// Gen5 x16 = 63.0 GB/s (PCI-SIG base specifications 3.0, 4.0, 5.0: 8, 16 and 32 GT/s).
/// Throws sim::ConfigError for a generation other than 3, 4 or 5 or a lane count that is not
/// 1, 2, 4, 8 or 16.
sim::Bandwidth pcie_line_rate(int generation, int lanes);

/// One GPU model as its datasheet describes it. Peak rates are dense (no structured sparsity),
/// and zero where the GPU has no such mode (no TF32, BF16 or FP8 on V100; no FP8 on A100).
struct GpuSpec {
  std::string_view name;            ///< canonical catalog name, e.g. "A100-SXM4-40GB"
  std::string_view architecture;    ///< "Volta", "Ampere", "Hopper", "Blackwell"
  int compute_capability = 0;       ///< as NCCL encodes it: 70 V100, 80 A100, 90 H100/H200, 100 B200/GB200
  int sm_count = 0;                 ///< streaming multiprocessors enabled on the product
  sim::Bytes memory;                ///< HBM capacity (binary units: "40 GB" is 40 GiB)
  sim::Bandwidth memory_bandwidth;  ///< peak HBM bandwidth, decimal (1555 GB/s = 1.555e12 B/s)
  sim::FlopRate fp32;               ///< peak FP32 on CUDA cores (non-tensor), FLOP/s
  sim::FlopRate tf32;               ///< peak TF32 tensor-core rate, dense; 0 when none
  sim::FlopRate fp16;               ///< peak FP16 tensor-core rate (FP32 accumulate), dense
  sim::FlopRate bf16;               ///< peak BF16 tensor-core rate, dense; 0 when none
  sim::FlopRate fp8;                ///< peak FP8 tensor-core rate, dense; 0 when none
  int nvlink_generation = 0;        ///< 2, 3, 4, 5; 0 when the GPU has no NVLink
  int nvlink_lanes = 0;             ///< NVLink links ("lanes") the GPU has; 0 when none
  sim::Bandwidth nvlink_lane;       ///< line rate of one NVLink link, one direction
  int pcie_generation = 0;          ///< PCIe generation of the host interface (3, 4, 5)
  int pcie_lanes = 0;               ///< PCIe lanes of the host interface (16)
  sim::Bandwidth pcie;              ///< PCIe line rate, one direction (pcie_line_rate)
  std::string_view source;          ///< datasheet the numbers come from

  /// Total NVLink line rate, one direction: nvlink_lanes x nvlink_lane.
  sim::Bandwidth nvlink_bandwidth() const { return nvlink_lane * nvlink_lanes; }
};

/// Every model of the catalog, in a fixed order (by generation, then name).
std::span<const GpuSpec> gpu_catalog();

/// The catalog entry whose name equals `name`, ignoring case ("a100-sxm4-40gb" works).
/// Throws sim::TopologyError naming `name` and listing the known models.
const GpuSpec& find_gpu_spec(std::string_view name);

/// Like find_gpu_spec but returns nullptr instead of throwing.
const GpuSpec* try_find_gpu_spec(std::string_view name) noexcept;

/// The catalog model of a GPU as its driver names it (CUDA's deviceProperties name, which
/// PyTorch-profiler traces record): the catalog name it contains, ignoring case ("Tesla
/// V100-SXM2-32GB"), or a board the catalog holds under another name: "V100-SXM2-16GB" is the
/// 32 GB V100 but for memory size (the same 80 SMs and 900 GB/s), "A100-PG509-200" the 40 GB
/// A100 SXM4 board of Meta's servers, "H100 80GB HBM3" the H100 SXM5, "H200" the H200 SXM,
/// "GB200" the GPU of a GB200 superchip and "B200" the B200 SXM.
/// nullptr when none matches.
const GpuSpec* find_gpu_by_device_name(std::string_view device_name) noexcept;

/// The known model names, comma-separated, for error messages and `foresight --list`.
std::string known_gpu_models();

}  // namespace foresight::topo
