// foresight-profile: measures on this machine's GPUs what the simulator otherwise estimates.
//
//   foresight-profile SCENARIO --gpu NAME -o PROFILE [--warmup N] [--reps N] [--no-cupti]
//   foresight-profile --nccl-sweep OUT.json [--nccl-min-bytes B] [--nccl-max-bytes B] [--nccl-step F]
//   (both in one call: the scenario first, then the sweep)
//
// SCENARIO: every kernel signature of the scenario's compiled graph runs on the first GPU at its
// exact shape and dtype, and a profile database (traces/profile_db_json.hpp) is written for
// `foresight simulate --profile`:
// - GEMMs {m, n, k, count}: one cublasLtMatmul (batched by layout), with the algorithm
//   cublasLtMatmulAlgoGetHeuristic proposes, FP32, TF32, FP16, BF16 and FP8 (E4M3 inputs with
//   scale pointers, BF16 output; only on sm_89 and newer) (profiler/gemm_bench.hpp);
// - convolutions (conv_fprop, conv_dgrad, conv_wgrad) {n, c, h, w, k, r, s, stride, pad, groups}:
//   cuDNN's cudnnConvolutionForward / BackwardData / BackwardFilter with the algorithm
//   cudnnFind*AlgorithmEx measures fastest, FP32 and TF32 NCHW, FP16 and BF16 NHWC
//   (profiler/conv_bench.hpp); a build without cuDNN leaves them unmeasured;
// - memory-bound kernels: a device-to-device copy of half their bytes (profiler/memory_bench.hpp),
//   so the database says "memory_timing": "copy" and the simulator carries the copy's time to
//   the kernel's own code path (a cast, a strided copy, BatchNorm: ComputeModel::duration);
// - fused attention: not measured yet.
// Inputs are finite random data. Each signature runs --warmup times untimed, then --reps times;
// the median repetition is recorded. A repetition's time is, by CUPTI, the sum of the durations of
// its kernels, copies and sets (GPU time, no launch gaps); where CUPTI is not built, refuses, or
// loses records (or with --no-cupti), CUDA events around it (launch gaps included)
// (profiler/bench_timer.hpp). Provenance: device, SMs, clocks, driver, CUDA runtime, cuBLASLt and
// cuDNN versions, "timing" ("cupti", "cuda-events" or "mixed", with "timing_note" saying how many
// each and why), warm-up and repetitions, date. Signatures not measured are counted by reason.
//
// --nccl-sweep: all_reduce, all_gather, reduce_scatter, broadcast and alltoall over every visible
// GPU in this process (ncclCommInitAll), at sizes from --nccl-min-bytes to --nccl-max-bytes times
// --nccl-step, capped by free memory; medians of CUDA-event times; rows {op, bytes, gpus, seconds,
// algbw_GBps, busbw_GBps} with nccl-tests' bus-bandwidth factors, written with provenance as
// described in profiler/collective_sweep.hpp. Needs a build with NCCL.
//
// Without a usable GPU it exits 3 with one line saying why; errors exit 1.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <ctime>
#include <map>
#include <optional>
#include <vector>

#include "profiler/bench_timer.hpp"
#include "profiler/device_info.hpp"
#include "profiler/gemm_bench.hpp"
#include "profiler/memory_bench.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "run/simulation.hpp"
#include "topologies/gpu_spec.hpp"
#include "traces/profile_db_json.hpp"
#ifdef FORESIGHT_HAVE_CUDNN
#include "profiler/conv_bench.hpp"
#endif
#ifdef FORESIGHT_HAVE_NCCL
#include "profiler/nccl_bench.hpp"
#endif

using namespace foresight;

namespace {

using Provenance = std::vector<std::pair<std::string, std::string>>;

std::string today() {
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
  return date;
}

/// The facts every output records about the machine.
Provenance machine_provenance(const prof::Devices& devices) {
  const prof::DeviceInfo& d = devices.devices.front();
  return {{"device", d.name},
          {"compute_capability", std::to_string(d.compute_capability)},
          {"sm_count", std::to_string(d.sm_count)},
          {"sm_clock_mhz", fmt::format("{:.0f}", d.sm_clock_mhz)},
          {"memory_clock_mhz", fmt::format("{:.0f}", d.memory_clock_mhz)},
          {"driver", std::to_string(devices.driver_version)},
          {"cuda_runtime", std::to_string(devices.runtime_version)},
          {"date", today()}};
}

struct ProfileOptions {
  std::string scenario_path;
  std::string gpu;
  std::string output;
  int warmup = 5;
  int reps = 20;
  bool use_cupti = true;
};

/// Measures the scenario's signatures and writes the profile database; the summary line.
std::string profile_scenario(const ProfileOptions& o, const prof::Devices& devices) {
  if (topo::try_find_gpu_spec(o.gpu) == nullptr) {
    throw sim::ConfigError(fmt::format("--gpu: expected a catalog GPU name (foresight --list), found \"{}\"", o.gpu));
  }
  const strategy::Scenario scenario = strategy::load_scenario(o.scenario_path);
  const strategy::SimulationOutput sim = strategy::simulate_scenario(scenario, {});
  const prof::DeviceInfo& device = devices.devices.front();
  prof::BenchTimer timer(o.warmup, o.reps, o.use_cupti);
  prof::GemmBench gemms(device.compute_capability);
#ifdef FORESIGHT_HAVE_CUDNN
  prof::ConvBench convs;
#endif
  sim::ProfileDb db;
  db.gpu = o.gpu;
  db.memory_timing = sim::MemoryTiming::copy;  // measure_memory times a copy of the kernel's bytes
  int measured = 0;
  std::map<std::string, int> not_measured;  // "type: reason" -> count
  for (const sim::OpSignature& s : sim.compiled.graph.signatures) {
    prof::Measurement m = prof::Measurement::skipped("no benchmark for this kernel type");
    switch (s.type) {
      case sim::OpType::gemm:
        m = gemms.measure(s, timer);
        break;
      case sim::OpType::conv_fprop:
      case sim::OpType::conv_dgrad:
      case sim::OpType::conv_wgrad:
#ifdef FORESIGHT_HAVE_CUDNN
        m = convs.measure(s, timer);
#else
        m = prof::Measurement::skipped("built without cuDNN");
#endif
        break;
      case sim::OpType::memory:
        m = prof::measure_memory(s.bytes, timer);
        break;
      case sim::OpType::attention:
        m = prof::Measurement::skipped("no fused-attention benchmark yet");
        break;
    }
    if (m.measured()) {
      db.add(s, m.seconds);
      ++measured;
    } else {
      ++not_measured[fmt::format("{} {}: {}", sim::to_string(s.type), sim::to_string(s.dtype), m.not_measured)];
    }
  }
  const std::string timing = timer.source_summary();
  db.source = fmt::format("foresight-profile on {} for {}: cuBLASLt GEMMs, {}D2D copies; median of {} after {} warm-up "
                          "runs, timed by {}",
                          device.name, o.scenario_path,
#ifdef FORESIGHT_HAVE_CUDNN
                          "cuDNN convolutions, ",
#else
                          "",
#endif
                          o.reps, o.warmup, timing == "cupti" ? "CUPTI (GPU time)" : timing);
  Provenance provenance = machine_provenance(devices);
  provenance.emplace_back("cublaslt", std::to_string(prof::GemmBench::version()));
  // Databases measured before profiler/gemm_layout.hpp say what they used instead.
  provenance.emplace_back("gemm_layout", "as PyTorch runs them: tn forward, nn input gradient, nt weight gradient, tn FP8");
#ifdef FORESIGHT_HAVE_CUDNN
  provenance.emplace_back("cudnn", std::to_string(prof::ConvBench::version()));
#endif
  provenance.emplace_back("timing", timing);
  if (const std::string note = timer.source_note(); !note.empty()) provenance.emplace_back("timing_note", note);
  provenance.emplace_back("warmup", std::to_string(o.warmup));
  provenance.emplace_back("reps", std::to_string(o.reps));
  sim::write_file_atomically(o.output, trace::profile_db_json(db, provenance));

  int skipped = 0;
  std::string reasons;
  for (const auto& [why, count] : not_measured) {
    skipped += count;
    reasons += fmt::format("{}{} {}", reasons.empty() ? "" : "; ", count, why);
  }
  return fmt::format("foresight-profile: {} kernels measured (timing: {}), {} not measured{}, written to {}", measured,
                     timing, skipped, reasons.empty() ? "" : " (" + reasons + ")", o.output);
}

#ifdef FORESIGHT_HAVE_NCCL
/// Runs the collective sweep and writes it; the summary line.
std::string sweep_collectives(const prof::NcclSweepOptions& o, const std::string& output, const prof::Devices& devices) {
  prof::CollectiveSweep sweep = prof::run_nccl_sweep(o);
  Provenance provenance = machine_provenance(devices);
  provenance.insert(provenance.end(), sweep.provenance.begin(), sweep.provenance.end());
  sweep.provenance = std::move(provenance);
  sim::write_file_atomically(output, prof::collective_sweep_json(sweep));
  return fmt::format("foresight-profile: NCCL sweep, {} rows over {} GPU{}, written to {}{}", sweep.rows.size(),
                     sweep.gpus, sweep.gpus == 1 ? "" : "s", output, sweep.note.empty() ? "" : " (" + sweep.note + ")");
}
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Measure a scenario's kernels on this GPU into a profile database, and/or sweep NCCL collectives"};
  ProfileOptions profile;
  std::string sweep_output;
  std::uint64_t nccl_min = 8, nccl_max = 1ULL << 30;
  int nccl_step = 2;
  bool no_cupti = false;
  auto* scenario = app.add_option("scenario", profile.scenario_path, "Scenario JSON file");
  auto* gpu = app.add_option("--gpu", profile.gpu, "The GPU's catalog name (see foresight --list), recorded in the database");
  auto* output = app.add_option("-o,--output", profile.output, "Profile database to write (atomically)");
  scenario->needs(gpu)->needs(output);
  gpu->needs(scenario);
  output->needs(scenario);
  app.add_option("--warmup", profile.warmup, "Runs before timing")->check(CLI::Range(0, 1000));
  app.add_option("--reps", profile.reps, "Timed runs; the median is recorded")->check(CLI::Range(1, 10000));
  app.add_flag("--no-cupti", no_cupti, "Time with CUDA events even where CUPTI is available");
  app.add_option("--nccl-sweep", sweep_output, "Sweep NCCL collectives over all visible GPUs into this JSON file");
  app.add_option("--nccl-min-bytes", nccl_min, "Smallest collective size in bytes")->check(CLI::Range(1ULL, 1ULL << 40));
  app.add_option("--nccl-max-bytes", nccl_max, "Largest collective size in bytes (capped by free memory)")
      ->check(CLI::Range(1ULL, 1ULL << 40));
  app.add_option("--nccl-step", nccl_step, "Size factor between steps")->check(CLI::Range(2, 16));
  CLI11_PARSE(app, argc, argv);
  if (profile.scenario_path.empty() && sweep_output.empty()) {
    return app.exit(CLI::RequiredError("a SCENARIO (with --gpu and -o) or --nccl-sweep OUT.json"));
  }
  profile.use_cupti = !no_cupti;
#ifndef FORESIGHT_HAVE_NCCL
  if (!sweep_output.empty()) {
    fmt::print(stderr, "foresight-profile: error: --nccl-sweep: this build found no NCCL (nccl.h, libnccl)\n");
    return 1;
  }
#endif
  const prof::Devices devices = prof::query_devices();
  if (devices.devices.empty()) {
    fmt::print(stderr, "foresight-profile: no usable CUDA device ({})\n", devices.error);
    return 3;
  }
  try {
    if (!profile.scenario_path.empty()) fmt::print("{}\n", profile_scenario(profile, devices));
#ifdef FORESIGHT_HAVE_NCCL
    if (!sweep_output.empty()) {
      prof::NcclSweepOptions o;
      o.min_bytes = nccl_min;
      o.max_bytes = nccl_max;
      o.factor = nccl_step;
      o.warmup = profile.warmup;
      o.reps = profile.reps;
      fmt::print("{}\n", sweep_collectives(o, sweep_output, devices));
    }
#endif
    return 0;
  } catch (const sim::Error& e) {
    fmt::print(stderr, "foresight-profile: error: {}\n", e.what());
    return 1;
  }
}
