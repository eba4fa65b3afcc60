// foresight-profile SCENARIO --gpu NAME -o PROFILE: measures the GEMMs and memory-bound kernels
// a scenario needs on this machine's first GPU and writes a profile database
// (traces/profile_db_json.hpp) that `foresight simulate --profile` uses. GEMMs run through
// cuBLAS (cublasGemmStridedBatchedEx) at the exact shape and dtype of each signature;
// memory-bound kernels as device-to-device copies of the same bytes. Each is warmed up, then
// timed with CUDA events over --reps repetitions; the median is recorded. Provenance: GPU,
// SMs, clocks, driver, CUDA runtime and cuBLAS versions, date. Convolutions, fused attention and
// FP8 GEMMs are not measured yet (counted in the summary). Without a usable GPU it exits 3 with
// one line saying why.
#include <CLI/CLI.hpp>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <vector>

#include "profiler/device_info.hpp"
#include "sim/atomic_file.hpp"
#include "sim/error.hpp"
#include "strategies/simulation.hpp"
#include "topologies/gpu_spec.hpp"
#include "traces/profile_db_json.hpp"

using namespace foresight;

namespace {

[[noreturn]] void cuda_fail(const char* what, cudaError_t e) {
  throw sim::ConfigError(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) cuda_fail(what, e);
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw sim::ConfigError(fmt::format("{}: cuBLAS status {}", what, static_cast<int>(s)));
}

/// Median seconds of `reps` runs of `body` after `warmup` runs, timed with CUDA events.
template <typename Body>
double median_seconds(int warmup, int reps, Body body) {
  for (int i = 0; i < warmup; ++i) body();
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(a), "cudaEventRecord");
    body();
    check(cudaEventRecord(b), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// A GEMM signature {m, n, k, count} timed through cuBLAS; nullopt for dtypes not measured.
std::optional<double> time_gemm(cublasHandle_t h, const sim::OpSignature& s, int warmup, int reps) {
  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  int elem = 4;
  switch (s.dtype) {
    case sim::DType::fp32:
      break;
    case sim::DType::tf32:
      compute = CUBLAS_COMPUTE_32F_FAST_TF32;
      break;
    case sim::DType::fp16:
      type = CUDA_R_16F;
      elem = 2;
      break;
    case sim::DType::bf16:
      type = CUDA_R_16BF;
      elem = 2;
      break;
    case sim::DType::fp8:
      return std::nullopt;  // needs cuBLASLt's FP8 path
  }
  const auto m = static_cast<int>(s.shape.at(0)), n = static_cast<int>(s.shape.at(1)), k = static_cast<int>(s.shape.at(2));
  const auto count = static_cast<int>(s.shape.size() > 3 ? s.shape[3] : 1);
  const std::size_t a_elems = static_cast<std::size_t>(m) * k, b_elems = static_cast<std::size_t>(k) * n,
                    c_elems = static_cast<std::size_t>(m) * n;
  void *A = nullptr, *B = nullptr, *C = nullptr;
  check(cudaMalloc(&A, a_elems * count * elem), "cudaMalloc A");
  check(cudaMalloc(&B, b_elems * count * elem), "cudaMalloc B");
  check(cudaMalloc(&C, c_elems * count * elem), "cudaMalloc C");
  const float one = 1.0f, zero = 0.0f;
  // Column-major C (m x n) = A (m x k) x B (k x n).
  const double seconds = median_seconds(warmup, reps, [&] {
    check(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A, type, m,
                                     static_cast<long long>(a_elems), B, type, k, static_cast<long long>(b_elems), &zero,
                                     C, type, m, static_cast<long long>(c_elems), count, compute, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
  });
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  return seconds;
}

/// A memory-bound kernel moving `bytes` (read + write), as a device-to-device copy of half.
double time_memory(double bytes, int warmup, int reps) {
  const auto half = static_cast<std::size_t>(std::max(1.0, bytes / 2));
  void *src = nullptr, *dst = nullptr;
  check(cudaMalloc(&src, half), "cudaMalloc");
  check(cudaMalloc(&dst, half), "cudaMalloc");
  const double seconds =
      median_seconds(warmup, reps, [&] { check(cudaMemcpyAsync(dst, src, half, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync"); });
  cudaFree(src);
  cudaFree(dst);
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Measure a scenario's GEMMs and memory-bound kernels on this GPU into a profile database"};
  std::string scenario_path, gpu, output;
  int warmup = 5, reps = 20;
  app.add_option("scenario", scenario_path, "Scenario JSON file")->required();
  app.add_option("--gpu", gpu, "The GPU's catalog name (see foresight --list), recorded in the database")->required();
  app.add_option("-o,--output", output, "Profile database to write (atomically)")->required();
  app.add_option("--warmup", warmup, "Runs before timing")->check(CLI::Range(0, 1000));
  app.add_option("--reps", reps, "Timed runs; the median is recorded")->check(CLI::Range(1, 10000));
  CLI11_PARSE(app, argc, argv);
  const prof::Devices devices = prof::query_devices();
  if (devices.devices.empty()) {
    fmt::print(stderr, "foresight-profile: no usable CUDA device ({})\n", devices.error);
    return 3;
  }
  try {
    if (topo::try_find_gpu_spec(gpu) == nullptr) {
      throw sim::ConfigError(fmt::format("--gpu: expected a catalog GPU name (foresight --list), found \"{}\"", gpu));
    }
    const strategy::Scenario scenario = strategy::load_scenario(scenario_path);
    const strategy::SimulationOutput sim = strategy::simulate_scenario(scenario, {});
    cublasHandle_t handle = nullptr;
    check(cublasCreate(&handle), "cublasCreate");
    int cublas_version = 0;
    cublasGetVersion(handle, &cublas_version);
    sim::ProfileDb db;
    db.gpu = gpu;
    db.source = fmt::format("foresight-profile on {} for {}: cuBLAS GEMMs and D2D copies, median of {} after {} warm-up "
                            "runs, CUDA events",
                            devices.devices.front().name, scenario_path, reps, warmup);
    int measured = 0, skipped = 0;
    for (const sim::OpSignature& s : sim.compiled.graph.signatures) {
      std::optional<double> t;
      if (s.type == sim::OpType::gemm) t = time_gemm(handle, s, warmup, reps);
      else if (s.type == sim::OpType::memory) t = time_memory(s.bytes, warmup, reps);
      if (t && *t > 0.0) {
        db.add(s, *t);
        ++measured;
      } else {
        ++skipped;
      }
    }
    cublasDestroy(handle);
    const prof::DeviceInfo& d = devices.devices.front();
    char date[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
    const std::vector<std::pair<std::string, std::string>> provenance = {
        {"device", d.name},
        {"sm_count", std::to_string(d.sm_count)},
        {"sm_clock_mhz", fmt::format("{:.0f}", d.sm_clock_mhz)},
        {"memory_clock_mhz", fmt::format("{:.0f}", d.memory_clock_mhz)},
        {"driver", std::to_string(devices.driver_version)},
        {"cuda_runtime", std::to_string(devices.runtime_version)},
        {"cublas", std::to_string(cublas_version)},
        {"date", date}};
    sim::write_file_atomically(output, trace::profile_db_json(db, provenance));
    fmt::print("foresight-profile: {} kernels measured, {} not measured (convolutions, attention, FP8), written to {}\n",
               measured, skipped, output);
    return 0;
  } catch (const sim::Error& e) {
    fmt::print(stderr, "foresight-profile: error: {}\n", e.what());
    return 1;
  }
}
