// The H200 kernel sweep (validate/data/kernels/h200_kernel_sweep.json) read into signatures and
// predicted by the analytical compute model, family by family; bad rows are ConfigErrors.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "models/compute_model.hpp"
#include "tests/test_paths.hpp"
#include "topologies/gpu_spec.hpp"
#include "validate/kernel_sweep_dataset.hpp"

using namespace foresight;
using Catch::Matchers::Contains;
using validate::KernelFamily;

namespace {

std::string sweep_path() { return test::source_path("validate/data/kernels/h200_kernel_sweep.json"); }

}  // namespace

TEST_CASE("the H200 kernel sweep: every row a case of its family, with the kernels it runs", "[validate]") {
  const validate::KernelSweep s = validate::load_kernel_sweep(sweep_path());
  REQUIRE(s.gpu == "H200-SXM-141GB");
  std::map<KernelFamily, int> count;
  for (const validate::KernelCase& c : s.cases) {
    ++count[c.family];
    REQUIRE(c.measured_s > 0.0);
    REQUIRE_FALSE(c.kernels.empty());
  }
  REQUIRE(count[KernelFamily::gemm] == 919);  // 728 matmul + 96 bmm + 95 FP8 rows
  REQUIRE(count[KernelFamily::attention] == 212);
  REQUIRE(count[KernelFamily::conv] == 86);
  REQUIRE(count[KernelFamily::memory] == 136);
  // A backward convolution is its data and filter gradients; forward + backward attention two kernels.
  for (const validate::KernelCase& c : s.cases) {
    if (c.id.find("/conv_bwd/") != std::string::npos) REQUIRE(c.kernels.size() == 2);
    if (c.id.find("/sdpa_fwd_bwd/") != std::string::npos) {
      REQUIRE(c.kernels.size() == 2);
      REQUIRE(c.kernels[1].flops == Approx(2.5 * c.kernels[0].flops));  // the model builder's count
    }
  }
}

TEST_CASE("large copies on the H200 take what the memory model says", "[validate]") {
  // Expected: bytes / (4.8 TB/s x 0.866, the H100-measured copy fraction) + the 2 us launch gap;
  // measured copies moving 512 MiB and more reach 4.14-4.26 TB/s: within 5%. (Smaller ones do
  // not reach full rate: 256 MiB moved takes 12% longer than the model says; issue 22.)
  const validate::KernelSweep s = validate::load_kernel_sweep(sweep_path());
  const auto results = validate::evaluate_kernel_sweep(s, KernelFamily::memory);
  const double bandwidth = strategy::achievable_hbm_bandwidth(topo::find_gpu_spec(s.gpu)).bytes_per_second();
  REQUIRE(bandwidth == Approx(4.8e12 * 0.866).epsilon(0.001));
  int checked = 0;
  for (const validate::KernelResult& r : results) {
    if (r.c->id.rfind("memory/bf16/copy/", 0) != 0 || r.c->kernels[0].bytes < 512.0 * (1 << 20)) continue;
    CAPTURE(r.c->id);
    const double expected = r.c->kernels[0].bytes / bandwidth + 2e-6;
    REQUIRE(r.predicted_s == Approx(expected).epsilon(1e-6));
    REQUIRE(r.predicted_s == Approx(r.c->measured_s).epsilon(0.05));
    ++checked;
  }
  REQUIRE(checked >= 5);
}

TEST_CASE("bad rows of a kernel sweep are errors naming the row and the field", "[validate]") {
  std::ifstream in(sweep_path());
  nlohmann::json doc = nlohmann::json::parse(in);
  const auto write = [](const std::string& name, const nlohmann::json& d) {
    const auto p = std::filesystem::temp_directory_path() / name;
    std::ofstream(p) << d.dump();
    return p.string();
  };
  nlohmann::json unknown = doc;
  unknown["rows"][3]["colour"] = "red";
  REQUIRE_THROWS_WITH(validate::load_kernel_sweep(write("sweep-unknown.json", unknown)),
                      Contains("sweep-unknown.json") && Contains("colour"));
  nlohmann::json family = doc;
  family["rows"][0]["family"] = "sparse";
  REQUIRE_THROWS_WITH(validate::load_kernel_sweep(write("sweep-family.json", family)),
                      Contains("/rows/0/family") && Contains("\"sparse\""));
  nlohmann::json zero = doc;
  zero["rows"][5]["seconds"] = 0;
  REQUIRE_THROWS_WITH(validate::load_kernel_sweep(write("sweep-zero.json", zero)),
                      Contains("/rows/5/seconds") && Contains("positive"));
  nlohmann::json gpu = doc;
  gpu["gpu"] = "NVIDIA H200";
  REQUIRE_THROWS_WITH(validate::load_kernel_sweep(write("sweep-gpu.json", gpu)), Contains("/gpu") && Contains("catalog"));
  // A calibration case must be a row of the file.
  nlohmann::json cal = doc;
  cal["calibration_cases"] = {"gemm/bf16/256x256x256/nn", "gemm/bf16/3x5x7/nn"};
  REQUIRE_THROWS_WITH(validate::load_kernel_sweep(write("sweep-cal.json", cal)),
                      Contains("/calibration_cases/1") && Contains("\"gemm/bf16/3x5x7/nn\""));
  cal["calibration_cases"] = {"gemm/bf16/256x256x256/nn"};
  const validate::KernelSweep with_cal = validate::load_kernel_sweep(write("sweep-cal.json", cal));
  int calibration = 0;
  for (const validate::KernelCase& c : with_cal.cases) calibration += c.role == validate::Role::calibration ? 1 : 0;
  REQUIRE(calibration == 1);
}

TEST_CASE("an AdamW row is predicted with the bytes the simulator's step moves", "[validate]") {
  // The file counts both AdamW rows as fused: 28 bytes per fp32 parameter (p, m, v read and
  // written, the gradient read). torch.optim's foreach step makes one pass per operation: weight
  // decay 8, lerp 12, mul 8, addcmul 12, sqrt 8, div 8, add 8, addcdiv 16 = 80 bytes.
  const validate::KernelSweep s = validate::load_kernel_sweep(sweep_path());
  std::ifstream in(sweep_path());
  const nlohmann::json doc = nlohmann::json::parse(in);
  int foreach = 0, fused = 0;
  for (const validate::KernelCase& c : s.cases) {
    const bool is_foreach = c.id.rfind("memory/fp32/adamw_foreach/", 0) == 0;
    const bool is_fused = c.id.rfind("memory/fp32/adamw_fused/", 0) == 0;
    if (!is_foreach && !is_fused) continue;
    const double params = std::stod(c.id.substr(c.id.rfind('/') + 1)) / 4.0;  // fp32 parameters
    CAPTURE(c.id);
    REQUIRE(c.kernels.size() == 1);
    REQUIRE(c.kernels[0].bytes == Approx(params * (is_foreach ? 80.0 : 28.0)).epsilon(1e-12));
    ++(is_foreach ? foreach : fused);
  }
  // Every AdamW row of the file, each once.
  int rows_foreach = 0, rows_fused = 0;
  for (const nlohmann::json& row : doc.at("rows")) {
    if (row.value("family", "") != "memory") continue;
    rows_foreach += row.value("op", "") == "adamw_foreach";
    rows_fused += row.value("op", "") == "adamw_fused";
  }
  REQUIRE(rows_foreach >= 12);
  REQUIRE(foreach == rows_foreach);
  REQUIRE(fused == rows_fused);
}

TEST_CASE("Hopper's FP32 GEMM cap is its declared calibration row's", "[validate]") {
  // One row, the sweep's largest FP32 GEMM, sets the cap; refitting it from the file gives the
  // constant the compute model holds, and the row is then predicted exactly.
  const validate::KernelSweep s = validate::load_kernel_sweep(sweep_path());
  const double fitted = validate::fit_fp32_gemm_cap(s);
  REQUIRE(fitted == Approx(strategy::kHopperGemmCapFp32).epsilon(1e-6));
  const strategy::ComputeModel h200(topo::find_gpu_spec("H200-SXM-141GB"));
  REQUIRE(h200.constants().gemm_cap_fp32 == strategy::kHopperGemmCapFp32);
  // Above the tensor cores' cap (FP8's 0.698): CUDA-core kernels are held back less.
  REQUIRE(fitted > h200.constants().gemm_cap);
  for (const validate::KernelResult& r : validate::evaluate_kernel_sweep(s, KernelFamily::gemm)) {
    if (r.c->id != validate::kFp32GemmCalibration) continue;
    REQUIRE(r.c->role == validate::Role::calibration);
    REQUIRE(r.predicted_s == Approx(r.c->measured_s).epsilon(1e-6));
  }
  // TF32 and 16-bit GEMMs keep the tensor cores' cap; the A100 has no FP32 cap of its own.
  REQUIRE(strategy::ComputeModel(topo::find_gpu_spec("A100-SXM4-80GB")).constants().gemm_cap_fp32 == 0.0);
  // An undeclared row is refused.
  validate::KernelSweep undeclared = s;
  for (validate::KernelCase& c : undeclared.cases) {
    if (c.id == validate::kFp32GemmCalibration) c.role = validate::Role::prediction;
  }
  REQUIRE_THROWS_WITH(validate::fit_fp32_gemm_cap(undeclared), Contains("gemm_cap_fp32") && Contains("calibration case"));
}
