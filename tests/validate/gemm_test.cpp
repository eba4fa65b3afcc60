// The analytical compute model against measured cuBLASLt GEMM and HBM throughput
// (validate/data/gemm_and_memory.json).
#include <catch2/catch.hpp>

#include <cmath>

#include "common/error.hpp"

#include "models/compute_model.hpp"
#include "validate/gemm_dataset.hpp"

using namespace foresight;

namespace {

const std::vector<validate::ThroughputCase>& cases() {
  static const auto c = validate::load_gemm_dataset(validate::data_dir() + "/gemm_and_memory.json");
  return c;
}

}  // namespace

TEST_CASE("A100 FP16 GEMMs from 2048^3 up are predicted within 15%", "[validate]") {
  const auto results = validate::evaluate_gemm_dataset(cases());
  std::size_t checked = 0;
  for (const auto& r : results) {
    const auto& c = *r.c;
    if (c.gpu != "A100-SXM4-80GB" || c.kind != "gemm" || c.m != c.n || c.n != c.k || c.m < 2048) continue;
    INFO(c.id << " measured " << c.measured << " predicted " << r.predicted << " TFLOP/s");
    REQUIRE(std::abs(r.error_pct) <= 15.0);
    checked += c.role == validate::Role::prediction ? 1 : 0;
  }
  REQUIRE(checked == 3);  // 2048^3, 4096^3, 8192^3 (16384^3 sets the cap)
}

TEST_CASE("the calibration cases are reproduced and declared", "[validate]") {
  // The cap (16384^3, 32768^3) and the copy bandwidths are what the constants were set from.
  for (const auto& r : validate::evaluate_gemm_dataset(cases())) {
    if (r.c->role != validate::Role::calibration) continue;
    INFO(r.c->id << " measured " << r.c->measured << " predicted " << r.predicted);
    REQUIRE(std::abs(r.error_pct) <= 1.0);
  }
}

TEST_CASE("a V100's large GEMMs run at the cuBLAS rate measured on its tensor cores", "[strategies]") {
  // Markidis et al. (IPDPSW 2018): cuBLAS reaches 83 of the V100's 125 TFLOP/s in mixed
  // precision. 80 SMs, 256x128 tiles: 8192^3 has 2048 tiles in 26 waves of 80 (2048 / 2080), no
  // edge waste, K penalty 8192 / (8192 + 32); the A100's own cap stays 256.5 of 312.
  const double n = 8192.0;
  sim::OpSignature g;
  g.type = sim::OpType::gemm;
  g.dtype = sim::DType::fp16;
  g.shape = {8192, 8192, 8192, 1};
  const auto tflops = [&](const strategy::ComputeModel& m) {
    return 2.0 * n * n * n / (m.analytical(g).seconds() - m.constants().launch_gap.seconds());
  };
  const strategy::ComputeModel v100(topo::find_gpu_spec("V100-SXM2-32GB"));
  const double shape = 2048.0 / 2080.0 * n / (n + 32.0);
  REQUIRE(v100.gemm_shape_efficiency(n, n, n, 1) == Approx(shape));
  REQUIRE(tflops(v100) == Approx(83e12 * shape).epsilon(1e-9));
  const strategy::ComputeModel a100(topo::find_gpu_spec("A100-SXM4-80GB"));
  REQUIRE(tflops(a100) == Approx(256.5e12 * a100.gemm_shape_efficiency(n, n, n, 1)).epsilon(1e-9));
}

TEST_CASE("tile and wave quantization follow the SM count", "[strategies]") {
  const strategy::ComputeModel a100(topo::find_gpu_spec("A100-SXM4-80GB"));
  // 8192^3 with 256x128 tiles: 32 x 64 = 2048 tiles on 108 SMs = 18.96 waves -> 19: 2048/2052,
  // no edge waste; K penalty 8192 / (8192 + 32).
  REQUIRE(a100.gemm_shape_efficiency(8192, 8192, 8192, 1) == Approx(2048.0 / 2052.0 * 8192.0 / 8224.0));
  // One 128x128 tile of work: a single wave of 108 slots holds 1 tile (64x64 tiles: 4 of 108).
  const double one = a100.gemm_shape_efficiency(128, 128, 4096, 1);
  REQUIRE(one == Approx(std::max({1.0 / 108 * 0.92, 4.0 / 108 * 0.62, 2.0 / 108 * 0.82}) * 4096.0 / 4128.0));
  // A 109th tile costs a whole second wave: 109 tiles of 256x128 -> 109/216.
  REQUIRE(a100.gemm_shape_efficiency(109 * 256, 128, 1 << 20, 1) < a100.gemm_shape_efficiency(108 * 256, 128, 1 << 20, 1));
}

TEST_CASE("an output of too few tiles splits its K loop and pays for the partial sums", "[strategies]") {
  const auto& gpu = topo::find_gpu_spec("A100-SXM4-80GB");
  const strategy::ComputeModel a100(gpu);
  sim::OpSignature g;
  g.type = sim::OpType::gemm;
  g.dtype = sim::DType::fp16;
  g.shape = {128, 128, 1 << 20, 1};
  // 128 x 128 x 2^20: unsplit, one 128x128 tile (or four 64x64) on 108 SMs. Split 64 ways (the
  // most allowed; slices of 16384 >= 256): 64 tiles of 128x128 in one wave, 64/108 x 0.92, which
  // beats 256 64x64 tiles in 3 waves (256/324 x 0.62) and 128 128x64 ones in 2 (128/216 x 0.82).
  // The partial sums: 64 fp32 128x128 partials written and read back at the HBM rate.
  const double flops = 2.0 * 128 * 128 * double(1 << 20);
  const double rate = a100.peak(sim::DType::fp16).per_second() * a100.constants().gemm_cap;
  const double eff = 64.0 / 108.0 * 0.92 * 16384.0 / (16384.0 + 32.0);
  const double reduce = 2.0 * 64 * 128 * 128 * 4 / strategy::achievable_hbm_bandwidth(gpu).bytes_per_second();
  REQUIRE(a100.gemm_split_efficiency(128, 128, 1 << 20, 1, 64) == Approx(eff));
  const double expected = flops / (rate * eff) + reduce + a100.constants().launch_gap.seconds();
  REQUIRE(a100.analytical(g).seconds() == Approx(expected).epsilon(1e-9));
  const double unsplit = flops / (rate * a100.gemm_shape_efficiency(128, 128, 1 << 20, 1));
  REQUIRE(unsplit > 20.0 * expected);
  // A GEMM that fills the SMs is not split: 8192^3 takes its unsplit time.
  g.shape = {8192, 8192, 8192, 1};
  const double square = 2.0 * 8192.0 * 8192.0 * 8192.0 / (rate * a100.gemm_shape_efficiency(8192, 8192, 8192, 1));
  REQUIRE(a100.analytical(g).seconds() == Approx(square + a100.constants().launch_gap.seconds()).epsilon(1e-12));
}

TEST_CASE("memory-bound kernels move bytes at the achievable HBM bandwidth plus a launch gap", "[strategies]") {
  const auto& gpu = topo::find_gpu_spec("A100-SXM4-40GB");
  const strategy::ComputeModel m(gpu);
  sim::OpSignature relu;
  relu.kernel = "relu";
  relu.shape = {128, 64, 32, 32};
  relu.bytes = 2.0 * 128 * 64 * 32 * 32 * 4;  // read and write fp32
  // 1555 GB/s x 0.79 (STREAM copy fraction), + 2 us.
  const double expect = relu.bytes / (1555e9 * 1.61 / 2.039) + 2e-6;
  REQUIRE(m.analytical(relu).seconds() == Approx(expect).epsilon(1e-6));
}

TEST_CASE("a profile database takes precedence and interpolates along the batch", "[strategies]") {
  const auto& gpu = topo::find_gpu_spec("A100-SXM4-40GB");
  sim::ProfileDb db;
  db.gpu = "A100-SXM4-40GB";
  sim::OpSignature s;
  s.type = sim::OpType::gemm;
  s.dtype = sim::DType::fp16;
  s.kernel = "linear_fwd";
  s.shape = {64, 4096, 4096, 1};
  db.add(s, 100e-6);
  s.shape[0] = 256;
  db.add(s, 300e-6);
  const strategy::ComputeModel m(gpu, &db);
  s.shape[0] = 128;  // between 64 and 256: 100 + (128-64)/(256-64) x 200 = 166.67 us
  REQUIRE(m.duration(s).seconds() == Approx(166.6667e-6).epsilon(1e-6));
  REQUIRE(m.profiled(s));
  s.shape[0] = 512;  // above: constant throughput, 300 x 2
  REQUIRE(m.duration(s).seconds() == Approx(600e-6));
  s.shape[0] = 16;   // below: the smallest batch's time
  REQUIRE(m.duration(s).seconds() == Approx(100e-6));
  s.shape[1] = 1024;  // another key: analytical
  REQUIRE_FALSE(m.profiled(s));
  REQUIRE(m.duration(s) == m.analytical(s));
  db.gpu = "H100-SXM5-80GB";
  REQUIRE_THROWS_AS(strategy::ComputeModel(gpu, &db), sim::ConfigError);
}
