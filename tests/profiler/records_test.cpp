// CUPTI activity records without a GPU: the Kineto-compatible trace the injection library
// writes reads back through the trace importer, and repetitions reduce to medians.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "profiler/records.hpp"
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
