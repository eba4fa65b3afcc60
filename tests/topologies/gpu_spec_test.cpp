#include "topologies/gpu_spec.hpp"

#include <catch2/catch.hpp>

#include "common/error.hpp"

using namespace foresight;
using topo::find_gpu_spec;

TEST_CASE("the GPU catalog holds the nine datasheet models", "[topologies]") {
  const auto catalog = topo::gpu_catalog();
  REQUIRE(catalog.size() == 9);
  for (const char* name : {"V100-SXM2-32GB", "A100-SXM4-40GB", "A100-SXM4-80GB", "A100-PCIE-40GB", "H100-SXM5-80GB",
                           "H100-PCIE-80GB", "H200-SXM-141GB", "B200-SXM-180GB", "GB200-NVL-186GB"}) {
    INFO(name);
    const auto& spec = find_gpu_spec(name);
    REQUIRE(spec.name == name);
    REQUIRE_FALSE(spec.source.empty());
    REQUIRE(spec.sm_count > 0);
    REQUIRE(spec.pcie.bytes_per_second() > 0.0);
  }
}

TEST_CASE("GPU lookup ignores case and names the known models when it fails", "[topologies]") {
  REQUIRE(&find_gpu_spec("a100-sxm4-40gb") == &find_gpu_spec("A100-SXM4-40GB"));
  REQUIRE(topo::try_find_gpu_spec("B300") == nullptr);
  REQUIRE_THROWS_AS(find_gpu_spec("B300"), sim::TopologyError);
  REQUIRE_THROWS_WITH(find_gpu_spec("B300"),
                      Catch::Contains("B300") && Catch::Contains("H100-SXM5-80GB"));
}

TEST_CASE("a driver's device name resolves to its catalog model", "[topologies]") {
  const auto named = [](std::string_view device) {
    const topo::GpuSpec* g = topo::find_gpu_by_device_name(device);
    return g == nullptr ? std::string("none") : std::string(g->name);
  };
  REQUIRE(named("Tesla V100-SXM2-32GB") == "V100-SXM2-32GB");
  REQUIRE(named("NVIDIA A100-SXM4-80GB") == "A100-SXM4-80GB");
  REQUIRE(named("nvidia a100-sxm4-40gb") == "A100-SXM4-40GB");
  // Boards the catalog holds under another name.
  REQUIRE(named("Tesla V100-SXM2-16GB") == "V100-SXM2-32GB");
  REQUIRE(named("NVIDIA A100-PG509-200") == "A100-SXM4-40GB");
  REQUIRE(named("NVIDIA H100 80GB HBM3") == "H100-SXM5-80GB");
  REQUIRE(named("NVIDIA H100 PCIe") == "H100-PCIE-80GB");
  REQUIRE(named("NVIDIA H200") == "H200-SXM-141GB");
  REQUIRE(named("NVIDIA B200") == "B200-SXM-180GB");
  REQUIRE(named("NVIDIA GB200") == "GB200-NVL-186GB");
  REQUIRE(named("NVIDIA GeForce RTX 4090") == "none");
  REQUIRE(named("") == "none");
}

TEST_CASE("PCIe line rates follow GT/s x lanes x 128/130 / 8", "[topologies]") {
  // Gen3: 8 x 16 x 128/130 / 8 = 15.754 GB/s; Gen4 twice that; Gen5 four times.
  REQUIRE(topo::pcie_line_rate(3, 16).gigabytes_per_second() == Approx(15.7538).epsilon(1e-4));
  REQUIRE(topo::pcie_line_rate(4, 16).gigabytes_per_second() == Approx(31.5077).epsilon(1e-4));
  REQUIRE(topo::pcie_line_rate(5, 16).gigabytes_per_second() == Approx(63.0154).epsilon(1e-4));
  REQUIRE(topo::pcie_line_rate(4, 8).gigabytes_per_second() == Approx(15.7538).epsilon(1e-4));
  REQUIRE_THROWS_AS(topo::pcie_line_rate(6, 16), sim::ConfigError);
  REQUIRE_THROWS_AS(topo::pcie_line_rate(4, 3), sim::ConfigError);
}

TEST_CASE("A100 and H100 carry their datasheet numbers", "[topologies]") {
  const auto& a100 = find_gpu_spec("A100-SXM4-40GB");
  REQUIRE(a100.compute_capability == 80);
  REQUIRE(a100.sm_count == 108);
  REQUIRE(a100.fp32.per_second() == Approx(19.5e12));
  REQUIRE(a100.tf32.per_second() == Approx(156e12));
  REQUIRE(a100.bf16.per_second() == Approx(312e12));
  REQUIRE(a100.fp8.per_second() == 0.0);
  REQUIRE(a100.memory.count() == 40LL << 30);
  REQUIRE(a100.memory_bandwidth.gigabytes_per_second() == Approx(1555));
  // 12 NVLink3 lanes x 25 GB/s = 300 GB/s each way (600 GB/s bidirectional).
  REQUIRE(a100.nvlink_bandwidth().gigabytes_per_second() == Approx(300));
  REQUIRE(find_gpu_spec("A100-SXM4-80GB").memory_bandwidth.gigabytes_per_second() == Approx(2039));

  const auto& h100 = find_gpu_spec("H100-SXM5-80GB");
  REQUIRE(h100.compute_capability == 90);
  REQUIRE(h100.sm_count == 132);
  REQUIRE(h100.bf16.per_second() == Approx(989.4e12));
  REQUIRE(h100.fp8.per_second() == Approx(1979e12));
  REQUIRE(h100.tf32.per_second() == Approx(494.7e12));
  // 18 NVLink4 lanes x 25 GB/s = 450 GB/s each way (900 GB/s bidirectional).
  REQUIRE(h100.nvlink_lanes == 18);
  REQUIRE(h100.nvlink_bandwidth().gigabytes_per_second() == Approx(450));
  REQUIRE(h100.pcie_generation == 5);

  const auto& h200 = find_gpu_spec("H200-SXM-141GB");
  REQUIRE(h200.bf16 == h100.bf16);
  REQUIRE(h200.memory_bandwidth.gigabytes_per_second() == Approx(4800));
  REQUIRE(h200.memory.count() == 141LL << 30);

  const auto& v100 = find_gpu_spec("V100-SXM2-32GB");
  REQUIRE(v100.compute_capability == 70);
  REQUIRE(v100.fp16.per_second() == Approx(125e12));
  REQUIRE(v100.bf16.per_second() == 0.0);
  REQUIRE(v100.tf32.per_second() == 0.0);
  REQUIRE(v100.nvlink_lanes == 6);
  REQUIRE(v100.pcie.gigabytes_per_second() == Approx(15.7538).epsilon(1e-4));
}

TEST_CASE("Blackwell GPUs carry the per-GPU share of their system datasheets", "[topologies]") {
  // DGX B200: 72 PFLOP/s FP8 sparse over 8 GPUs = 9 sparse, 4.5 dense; 1,440 GB and 64 TB/s over 8.
  const auto& b200 = find_gpu_spec("B200-SXM-180GB");
  REQUIRE(b200.compute_capability == 100);
  REQUIRE(b200.fp8.per_second() == Approx(72e15 / 8 / 2));
  REQUIRE(b200.bf16.per_second() == Approx(b200.fp8.per_second() / 2));
  REQUIRE(b200.memory.count() == 1440LL / 8 << 30);
  REQUIRE(b200.memory_bandwidth.gigabytes_per_second() == Approx(64000.0 / 8));
  // 18 NVLink5 links x 50 GB/s = 900 GB/s each way: 1.8 TB/s bidirectional, 14.4 TB/s over 8.
  REQUIRE(2 * 8 * b200.nvlink_bandwidth().gigabytes_per_second() == Approx(14400));
  // GB200 NVL72: 720 PFLOP/s FP8 sparse and 576 TB/s over 72 GPUs; 130 TB/s of NVLink
  // (72 x 1.8 = 129.6).
  const auto& gb200 = find_gpu_spec("GB200-NVL-186GB");
  REQUIRE(gb200.fp8.per_second() == Approx(720e15 / 72 / 2));
  REQUIRE(gb200.bf16.per_second() == Approx(360e15 / 72 / 2));
  REQUIRE(gb200.memory_bandwidth.gigabytes_per_second() == Approx(576000.0 / 72));
  REQUIRE(72 * 2 * gb200.nvlink_bandwidth().gigabytes_per_second() / 1000.0 == Approx(130).epsilon(0.01));
}

TEST_CASE("H100 PCIe: the datasheet's PCIe column, dense figures half the with-sparsity ones", "[topologies]") {
  const auto& pcie = find_gpu_spec("H100-PCIE-80GB");
  const auto& sxm = find_gpu_spec("H100-SXM5-80GB");
  REQUIRE(pcie.compute_capability == sxm.compute_capability);
  REQUIRE(pcie.sm_count == 114);
  REQUIRE(pcie.bf16.per_second() == Approx(1513e12 / 2));
  REQUIRE(pcie.fp8.per_second() == Approx(3026e12 / 2));
  REQUIRE(pcie.tf32.per_second() == Approx(756e12 / 2));
  REQUIRE(pcie.memory_bandwidth.bytes_per_second() == Approx(2.0e12));
  // NVLink bridge: 600 GB/s both ways = 12 links of 25 GB/s each way.
  REQUIRE(pcie.nvlink_lanes * pcie.nvlink_lane.bytes_per_second() * 2 == Approx(600e9));
}
