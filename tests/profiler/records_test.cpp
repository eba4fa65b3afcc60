// The profiler's CUDA-free part without a GPU: the Kineto-compatible trace the injection library
// writes (NVTX ranges included) reads back through the trace importer; a micro-benchmark's
// records reduce to per-repetition GPU time and its median; benchmark input data is finite; an
// NCCL sweep's sizes and bandwidths follow nccl-tests.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "profiler/collective_sweep.hpp"
#include "profiler/random_fill.hpp"
#include "profiler/records.hpp"
#include "common/error.hpp"
#include "traces/kineto.hpp"

using namespace foresight;
using prof::ActivityRecord;

namespace {

ActivityRecord record(ActivityRecord::Kind kind, std::string name, std::uint64_t start, std::uint64_t end,
                      std::uint32_t correlation, std::uint32_t stream = 7) {
  ActivityRecord r;
  r.kind = kind;
  r.name = std::move(name);
  r.start_ns = start;
  r.end_ns = end;
  r.correlation = correlation;
  r.stream = stream;
  r.thread = 42;
  return r;
}

}  // namespace

TEST_CASE("collected records written as a Kineto trace read back with their times and links", "[profiler]") {
  prof::RecordLog log;
  log.device_name = "NVIDIA H100 80GB HBM3";
  log.sm_count = 132;
  log.dropped = 3;
  log.records = {record(ActivityRecord::Kind::runtime, "cudaLaunchKernel", 1'000'000, 1'005'000, 1),
                 record(ActivityRecord::Kind::kernel, "sm90_gemm", 1'010'000, 1'250'000, 1),
                 record(ActivityRecord::Kind::runtime, "cudaMemcpyAsync", 1'006'000, 1'009'000, 2),
                 record(ActivityRecord::Kind::memcpy, "Memcpy HtoD", 1'250'000, 1'260'000, 2, 9)};
  log.records[3].bytes = 4096;
  // The GEMM's launch configuration as CUPTI reports it: 132 x 2 blocks of 384 threads.
  ActivityRecord& k = log.records[1];
  k.grid[0] = 132, k.grid[1] = 2, k.grid[2] = 1;
  k.block[0] = 384, k.block[1] = 1, k.block[2] = 1;
  k.registers_per_thread = 168;
  k.shared_bytes = 232448;
  const std::string text = prof::kineto_json(log);
  REQUIRE(nlohmann::json::parse(text)["foresightDroppedRecords"] == 3);  // drops are reported
  const auto t = trace::parse_kineto(text, "collected.json");
  REQUIRE(t.gpu_name == "NVIDIA H100 80GB HBM3");
  REQUIRE(t.sm_count == 132);
  REQUIRE(t.gpu_ops.size() == 2);
  REQUIRE(t.runtime.size() == 2);
  const auto& gemm = t.gpu_ops[0];
  REQUIRE(gemm.name == "sm90_gemm");
  REQUIRE(gemm.ts_us == Approx(10.0));  // microseconds from the earliest record
  REQUIRE(gemm.dur_us == Approx(240.0));
  REQUIRE(gemm.stream == 7);
  REQUIRE(gemm.blocks == 264);
  REQUIRE(gemm.threads_per_block == 384);
  REQUIRE(gemm.registers_per_thread == 168);
  REQUIRE(gemm.shared_bytes == 232448);
  REQUIRE(t.gpu_ops[1].blocks == 0);  // a copy has none
  REQUIRE(t.gpu_ops[1].kind == trace::KinetoGpuOp::Kind::memcpy);
  REQUIRE(t.gpu_ops[1].stream == 9);
  REQUIRE(t.runtime[0].correlation == gemm.correlation);
  REQUIRE(t.runtime[0].tid == 42);
}

TEST_CASE("repetitions of a kernel reduce to their median", "[profiler]") {
  prof::RecordLog log;
  const std::uint64_t durations[] = {120, 100, 500, 110, 105};  // one slow outlier
  std::uint64_t at = 0;
  for (const auto d : durations) {
    log.records.push_back(record(ActivityRecord::Kind::kernel, "gemm", at, at + d * 1000, 0));
    at += 1'000'000;
  }
  log.records.push_back(record(ActivityRecord::Kind::kernel, "norm", 0, 40'000, 0));
  log.records.push_back(record(ActivityRecord::Kind::kernel, "norm", 0, 60'000, 0));
  log.records.push_back(record(ActivityRecord::Kind::runtime, "cudaLaunchKernel", 0, 9'000'000, 0));
  const auto m = prof::kernel_medians(log);
  REQUIRE(m.size() == 2);
  REQUIRE(m[0].first == "gemm");
  REQUIRE(m[0].second == Approx(110e-6));
  REQUIRE(m[1].first == "norm");
  REQUIRE(m[1].second == Approx(50e-6));  // even count: the mean of the middle two
}

TEST_CASE("a repetition's GPU time sums its kernels, copies and sets; the median is over repetitions", "[profiler]") {
  // Five repetitions 1 ms apart, each a GEMM, a split-K reduction and a copy; the windows come
  // out of order and the log holds a runtime call and a kernel outside every window.
  const std::uint64_t gemm_us[] = {200, 180, 900, 190, 185};  // one slow outlier
  const std::uint64_t reduce_us[] = {20, 22, 21, 25, 19};
  const std::uint64_t copy_us[] = {5, 6, 5, 4, 7};
  prof::RecordLog log;
  std::vector<prof::RepetitionWindow> windows;
  std::vector<double> expected_sums;
  for (std::size_t i = 0; i < 5; ++i) {
    const std::uint64_t begin = 10'000'000 + i * 1'000'000;
    windows.push_back({begin, begin + 999'000});
    std::uint64_t at = begin + 8'000;  // the launch latency is not GPU time
    for (const std::uint64_t us : {gemm_us[i], reduce_us[i]}) {
      log.records.push_back(record(ActivityRecord::Kind::kernel, "k", at, at + us * 1000, 0));
      at += us * 1000 + 3'000;  // a gap between kernels
    }
    log.records.push_back(record(ActivityRecord::Kind::memcpy, "Memcpy DtoD", at, at + copy_us[i] * 1000, 0));
    log.records.push_back(record(ActivityRecord::Kind::runtime, "cudaLaunchKernel", begin, begin + 500'000, 0));
    expected_sums.push_back(static_cast<double>(gemm_us[i] + reduce_us[i] + copy_us[i]) * 1e-6);
  }
  log.records.push_back(record(ActivityRecord::Kind::kernel, "warm-up", 1'000, 900'000, 0));
  std::swap(windows[0], windows[3]);
  std::swap(expected_sums[0], expected_sums[3]);

  const std::vector<double> sums = prof::gpu_seconds_per_repetition(log, windows);
  REQUIRE(sums.size() == windows.size());
  for (std::size_t i = 0; i < sums.size(); ++i) REQUIRE(sums[i] == Approx(expected_sums[i]));
  std::vector<double> sorted = expected_sums;
  std::sort(sorted.begin(), sorted.end());
  const auto m = prof::median_repetition_seconds(log, windows);
  REQUIRE(m.has_value());
  REQUIRE(*m == Approx(sorted[sorted.size() / 2]));  // odd count: the middle one
  REQUIRE(prof::median({1.0, 4.0, 2.0, 3.0}) == Approx((2.0 + 3.0) / 2));
  REQUIRE_THROWS_AS(prof::median({}), sim::InternalError);
}

TEST_CASE("repetitions are not trusted when records were lost", "[profiler]") {
  prof::RecordLog log;
  log.records.push_back(record(ActivityRecord::Kind::kernel, "k", 100, 200, 0));
  const std::vector<prof::RepetitionWindow> one = {{50, 300}};
  REQUIRE(prof::median_repetition_seconds(log, one).has_value());
  std::vector<prof::RepetitionWindow> two = one;
  two.push_back({400, 500});  // no GPU activity recorded in it
  REQUIRE_FALSE(prof::median_repetition_seconds(log, two).has_value());
  log.dropped = 1;
  REQUIRE_FALSE(prof::median_repetition_seconds(log, one).has_value());
  REQUIRE_FALSE(prof::median_repetition_seconds(prof::RecordLog{}, {}).has_value());
}

TEST_CASE("NVTX ranges become user annotations that the importer reads as steps", "[profiler]") {
  using Phase = prof::MarkerEvent::Phase;
  auto marker = [](Phase phase, std::uint32_t id, std::uint64_t t, std::string name = "") {
    prof::MarkerEvent m;
    m.phase = phase;
    m.id = id;
    m.timestamp_ns = t;
    m.name = std::move(name);
    m.thread = 77;
    return m;
  };
  const std::uint64_t step_begin = 2'000'000, step_end = 7'500'000, fwd_begin = 2'100'000, fwd_end = 4'000'000;
  // The nested range's end arrives before its start (another CUPTI buffer); id 9 never ends.
  const std::vector<prof::MarkerEvent> markers = {
      marker(Phase::start, 1, step_begin, "ProfilerStep#3"), marker(Phase::end, 2, fwd_end),
      marker(Phase::start, 2, fwd_begin, "forward"),         marker(Phase::instant, 5, 3'000'000, "checkpoint"),
      marker(Phase::end, 1, step_end),                       marker(Phase::start, 9, 8'000'000, "open")};
  std::uint64_t unmatched = 0;
  const std::vector<ActivityRecord> notes = prof::annotations_from_markers(markers, unmatched);
  REQUIRE(unmatched == 1);
  REQUIRE(notes.size() == 3);
  REQUIRE(notes[0].name == "ProfilerStep#3");
  REQUIRE(notes[0].end_ns - notes[0].start_ns == step_end - step_begin);
  REQUIRE(notes[1].name == "forward");
  REQUIRE(notes[2].start_ns == notes[2].end_ns);  // an instantaneous marker has no length

  prof::RecordLog log;
  log.records = notes;
  log.unmatched_markers = unmatched;
  const std::uint64_t kernel_begin = 2'500'000;
  log.records.push_back(record(ActivityRecord::Kind::kernel, "sm90_gemm", kernel_begin, 3'500'000, 4));
  const std::string text = prof::kineto_json(log);
  const auto doc = nlohmann::json::parse(text);
  REQUIRE(doc["foresightUnmatchedMarkers"] == unmatched);
  int annotations = 0;
  for (const auto& e : doc["traceEvents"]) annotations += e["cat"] == "user_annotation" ? 1 : 0;
  REQUIRE(annotations == static_cast<int>(notes.size()));

  const auto t = trace::parse_kineto(text, "nvtx.json");
  REQUIRE(t.steps.size() == 1);
  REQUIRE(t.steps[0].number == 3);
  REQUIRE(t.steps[0].ts_us == Approx(0.0));  // the step opens first: it is the origin
  REQUIRE(t.steps[0].dur_us == Approx(static_cast<double>(step_end - step_begin) * 1e-3));
  const auto in_step = t.gpu_ops_in(t.steps[0]);
  REQUIRE(in_step.size() == 1);
  REQUIRE(in_step[0]->ts_us == Approx(static_cast<double>(kernel_begin - step_begin) * 1e-3));
}

TEST_CASE("benchmark input data is finite and below 2 in every format of its width", "[profiler]") {
  const std::size_t bytes = 1 << 16;
  const auto w4 = prof::finite_random_bytes(bytes, 4, 1);
  int nonzero = 0;
  for (std::size_t i = 0; i < bytes; i += 4) {
    float f = 0;
    std::memcpy(&f, &w4[i], 4);
    REQUIRE(std::isfinite(f));
    REQUIRE(std::fabs(f) < 2.0f);
    nonzero += f != 0.0f ? 1 : 0;
  }
  REQUIRE(nonzero > static_cast<int>(bytes / 4 / 2));  // not zeros
  const auto w2 = prof::finite_random_bytes(bytes, 2, 2);
  for (std::size_t i = 0; i < bytes; i += 2) {
    const auto bits = static_cast<std::uint32_t>(w2[i] | (w2[i + 1] << 8));
    float bf16 = 0;  // bf16 is the top half of an fp32
    const std::uint32_t widened = bits << 16;
    std::memcpy(&bf16, &widened, 4);
    REQUIRE(std::isfinite(bf16));
    REQUIRE(std::fabs(bf16) < 2.0f);
    const std::uint32_t exponent = (bits >> 10) & 0x1F, mantissa = bits & 0x3FF;  // fp16: 5 + 10 bits, bias 15
    REQUIRE(exponent != 0x1F);
    REQUIRE(std::ldexp(1.0 + mantissa / 1024.0, static_cast<int>(exponent) - 15) < 2.0);
  }
  const auto w1 = prof::finite_random_bytes(bytes, 1, 3);
  for (const std::uint8_t b : w1) {
    const int e4m3_exponent = (b >> 3) & 0xF, e4m3_mantissa = b & 0x7;  // 4 + 3 bits, bias 7
    REQUIRE_FALSE((e4m3_exponent == 0xF && e4m3_mantissa == 0x7));    // E4M3's only NaN
    REQUIRE(std::ldexp(1.0 + e4m3_mantissa / 8.0, e4m3_exponent - 7) < 2.0);
    REQUIRE(((b >> 2) & 0x1F) != 0x1F);  // E5M2: 5-bit exponent never all ones (inf, NaN)
  }
  REQUIRE(prof::finite_random_bytes(4096, 2, 7) == prof::finite_random_bytes(4096, 2, 7));
  REQUIRE(prof::finite_random_bytes(4096, 2, 7) != prof::finite_random_bytes(4096, 2, 8));
  REQUIRE_THROWS_AS(prof::finite_random_bytes(16, 3, 0), sim::ConfigError);
}

TEST_CASE("an NCCL sweep's sizes, element counts and bandwidths follow nccl-tests", "[profiler]") {
  const std::uint64_t min = 8, max = 1ULL << 30;
  for (const int factor : {2, 4}) {
    const auto sizes = prof::sweep_sizes(min, max, factor);
    REQUIRE(sizes.front() == min);
    for (std::size_t i = 1; i < sizes.size(); ++i) REQUIRE(sizes[i] == sizes[i - 1] * factor);
    REQUIRE(sizes.back() <= max);
    REQUIRE(sizes.back() * factor > max);  // the last size that fits
  }
  REQUIRE(prof::sweep_sizes(min, max, 2).size() == 28);  // 8 B = 2^3 .. 2^30: 30 - 3 + 1 sizes
  REQUIRE_THROWS_AS(prof::sweep_sizes(16, 8, 2), sim::ConfigError);
  REQUIRE_THROWS_AS(prof::sweep_sizes(8, 16, 1), sim::ConfigError);

  const int n = 8;
  // 8 B of float32 are 2 elements: too few to split over 8 ranks, so one each.
  REQUIRE(prof::sweep_elements(prof::CollectiveOp::all_gather, 8, n, 4) == static_cast<std::uint64_t>(n));
  REQUIRE(prof::sweep_elements(prof::CollectiveOp::all_reduce, 8, n, 4) == 2);
  REQUIRE(prof::sweep_elements(prof::CollectiveOp::alltoall, 100 * 4, n, 4) == 100 / n * n);

  const std::uint64_t bytes = 256ULL << 20;
  const double seconds = 2.5e-3;
  const double algbw = static_cast<double>(bytes) / seconds / 1e9;
  prof::CollectiveSweep sweep;
  sweep.gpus = n;
  for (const prof::CollectiveOp op : prof::kSweepOps) sweep.rows.push_back(prof::collective_row(op, bytes, n, seconds));
  for (const auto& r : sweep.rows) REQUIRE(r.algbw_gbps == Approx(algbw));
  REQUIRE(sweep.rows[0].busbw_gbps == Approx(algbw * 2.0 * (n - 1) / n));  // all_reduce
  REQUIRE(sweep.rows[1].busbw_gbps == Approx(algbw * (n - 1) / n));        // all_gather
  REQUIRE(sweep.rows[2].busbw_gbps == Approx(algbw * (n - 1) / n));        // reduce_scatter
  REQUIRE(sweep.rows[3].busbw_gbps == Approx(algbw));                      // broadcast
  REQUIRE(sweep.rows[4].busbw_gbps == Approx(algbw * (n - 1) / n));        // alltoall
  REQUIRE(prof::bus_bandwidth_factor(prof::CollectiveOp::all_reduce, 1) == 0.0);  // one GPU moves nothing

  sweep.provenance = {{"nccl", "2.28.3"}, {"reps", "20"}};
  const auto doc = nlohmann::json::parse(prof::collective_sweep_json(sweep));
  REQUIRE(doc["format"] == "foresight-nccl-sweep");
  REQUIRE(doc["provenance"]["nccl"] == "2.28.3");
  REQUIRE(doc["rows"].size() == sweep.rows.size());
  REQUIRE(doc["rows"][3]["op"] == "broadcast");
  REQUIRE(doc["rows"][0]["bytes"] == bytes);
  REQUIRE(doc["rows"][0]["busbw_GBps"].get<double>() == Approx(sweep.rows[0].busbw_gbps));
}

// Found on the first run on a GPU (an H200, 2026-11-26): CUPTI names API calls with a version
// suffix, which hid every synchronizing call from replay (a 174.9 ms step replayed as 104 ms);
// cuBLASLt and cuDNN launch through the driver API, which was not recorded (436 of a Llama
// step's 2,844 kernels had no launching call); kernel names came mangled.
TEST_CASE("API calls are named as Kineto names them, driver launches are kept, routine calls counted", "[profiler]") {
  REQUIRE(prof::api_name("cudaStreamSynchronize_v3020") == "cudaStreamSynchronize");
  REQUIRE(prof::api_name("cudaLaunchKernel_v7000") == "cudaLaunchKernel");
  REQUIRE(prof::api_name("cuLaunchKernelEx") == "cuLaunchKernelEx");  // nothing to strip
  REQUIRE(prof::api_name("cudaMemcpy_v") == "cudaMemcpy_v");           // no digits: not a version
  REQUIRE(prof::api_name("cudaGraph_vx12") == "cudaGraph_vx12");
  REQUIRE(prof::routine_api_call("cudaGetDevice"));
  REQUIRE(prof::routine_api_call("cudaGetLastError"));
  REQUIRE_FALSE(prof::routine_api_call("cudaStreamSynchronize"));
  REQUIRE_FALSE(prof::routine_api_call("cuLaunchKernelEx"));
  REQUIRE(prof::demangled("_ZN2at6native6kernelIfEEvPT_") == "void at::native::kernel<float>(float*)");
  REQUIRE(prof::demangled("nvjet_sm90_tst_128x256") == "nvjet_sm90_tst_128x256");
  REQUIRE(prof::demangled("_Znot a name") == "_Znot a name");  // not demangleable: kept

  prof::RecordLog log;
  log.filtered_calls = 24511;
  log.records = {record(ActivityRecord::Kind::driver, "cuLaunchKernelEx", 1'000'000, 1'004'000, 5),
                 record(ActivityRecord::Kind::kernel, "nvjet_sm90_tst", 1'006'000, 1'106'000, 5)};
  const std::string text = prof::kineto_json(log);
  const auto doc = nlohmann::json::parse(text);
  REQUIRE(doc["foresightFilteredCalls"] == 24511);
  REQUIRE(doc["traceEvents"][0]["cat"] == "cuda_driver");
  const auto t = trace::parse_kineto(text, "driver.json");
  REQUIRE(t.runtime.size() == 1);  // the importer joins the kernel to its driver launch
  REQUIRE(t.runtime[0].name == "cuLaunchKernelEx");
  REQUIRE(t.runtime[0].correlation == t.gpu_ops[0].correlation);
}
