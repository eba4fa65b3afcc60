// Kineto (PyTorch profiler) trace import: GPU activities, runtime calls, CPU ops and steps from
// plain and gzip traces; clear errors with the position; the shared measured traces.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <unistd.h>
#include <zlib.h>

#include "common/error.hpp"
#include "tests/test_paths.hpp"
#include "traces/kineto.hpp"

using namespace foresight;
using Catch::Matchers::Contains;
using trace::KinetoGpuOp;

TEST_CASE("a Kineto trace's kernels, NCCL kernels, runtime calls, CPU ops and steps", "[traces]") {
  for (const char* file : {"traces/mini_kineto.json", "traces/mini_kineto.json.gz"}) {
    CAPTURE(file);
    const auto t = trace::load_kineto(test::data_path(file));
    REQUIRE(t.gpu_name == "NVIDIA A100-SXM4-40GB");
    REQUIRE(t.sm_count == 108);
    REQUIRE(t.rank == 0);
    REQUIRE(t.world_size == 2);
    REQUIRE(t.steps.size() == 2);
    REQUIRE(t.steps[1].number == 2);
    REQUIRE(t.steps[1].ts_us == 1000.0);
    REQUIRE(t.steps[1].dur_us == 1000.0);
    REQUIRE(t.gpu_ops.size() == 6);
    REQUIRE(t.runtime.size() == 6);
    REQUIRE(t.cpu_ops.size() == 2);
    const auto in_step = t.gpu_ops_in(t.steps[1]);
    REQUIRE(in_step.size() == 3);
    const KinetoGpuOp& gemm = *in_step[0];
    REQUIRE(gemm.kind == KinetoGpuOp::Kind::kernel);
    REQUIRE(gemm.stream == 7);
    REQUIRE(gemm.dur_us == 400.0);
    REQUIRE_FALSE(gemm.nccl());
    const KinetoGpuOp& nccl = *in_step[1];
    REQUIRE(nccl.nccl());
    REQUIRE(nccl.collective == "allreduce");
    REQUIRE(nccl.message_elems == 1048576.0);
    REQUIRE(nccl.dtype == "Float");
    REQUIRE(nccl.group_size == 2);
    REQUIRE(nccl.stream == 20);
    REQUIRE(in_step[2]->kind == KinetoGpuOp::Kind::memcpy);
    // Each GPU op's launching call, by correlation id.
    for (const auto* op : in_step) {
      const auto call = std::find_if(t.runtime.begin(), t.runtime.end(), [&](const auto& r) { return r.correlation == op->correlation; });
      REQUIRE(call != t.runtime.end());
      REQUIRE(call->tid == 11);
      REQUIRE(call->ts_us < op->ts_us);
    }
  }
}

TEST_CASE("malformed, truncated and incomplete traces are TraceErrors with the position", "[traces]") {
  REQUIRE_THROWS_AS(trace::load_kineto(test::data_path("traces/bad_malformed.json")), sim::TraceError);
  REQUIRE_THROWS_WITH(trace::load_kineto(test::data_path("traces/bad_malformed.json")),
                      Contains("bad_malformed.json") && Contains("malformed JSON at byte"));
  REQUIRE_THROWS_WITH(trace::load_kineto(test::data_path("traces/bad_not_trace.json")),
                      Contains("expected a Kineto trace") && Contains("traceEvents"));
  REQUIRE_THROWS_WITH(trace::load_kineto(test::data_path("traces/bad_missing_dur.json")),
                      Contains("/traceEvents/3 (ampere_sgemm_128x64_tn)") && Contains("expected a number \"dur\""));
  REQUIRE_THROWS_WITH(trace::load_kineto("/nonexistent/trace.json"), Contains("/nonexistent/trace.json: cannot be opened"));
  // A gzip trace cut in half.
  std::ifstream in(test::data_path("traces/mini_kineto.json.gz"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto cut = std::filesystem::temp_directory_path() / ("foresight-cut-" + std::to_string(::getpid()) + ".json.gz");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  REQUIRE_THROWS_WITH(trace::load_kineto(cut.string()), Contains(cut.string()) && Contains("truncated gzip stream"));
  std::filesystem::remove(cut);
}

namespace {

/// `text` as one gzip member (zlib's deflate with a gzip wrapper).
std::string gzip(const std::string& text) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, text.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

/// A ustar member header for `name` of `size` bytes, type '0', then the data padded to 512.
std::string tar_member(const std::string& name, const std::string& data) {
  std::string h(512, '\0');
  std::copy(name.begin(), name.end(), h.begin());
  const std::string size = fmt::format("{:011o}", data.size());
  std::copy(size.begin(), size.end(), h.begin() + 124);
  h[156] = '0';
  std::copy_n("ustar", 5, h.begin() + 257);
  return h + data + std::string((512 - data.size() % 512) % 512, '\0');
}

}  // namespace

TEST_CASE("gzip and tar bytes: members, padding, corruption, bombs and cut archives are handled", "[traces]") {
  const std::string a = R"({"traceEvents": []})";
  const std::string b = R"({"traceEvents": [{"ph": "X"}]})";
  // One member, two concatenated members (read as one text, as gzip -d does), and trailing zeros
  // after the last member (ignored, as gzip does).
  CHECK(trace::gunzip(gzip(a), "a.gz", 1 << 20) == a);
  CHECK(trace::gunzip(gzip(a) + gzip(b), "ab.gz", 1 << 20) == a + b);
  CHECK(trace::gunzip(gzip(a) + std::string(1024, '\0'), "padded.gz", 1 << 20) == a);
  // Not gzip at all, a flipped byte in the deflate data, cut short, and past the bound.
  CHECK_THROWS_WITH(trace::gunzip(a, "plain.gz", 1 << 20), Contains("plain.gz: corrupt gzip stream after 0 bytes"));
  std::string flipped = gzip(std::string(4096, 'x') + a);
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x55);
  CHECK_THROWS_AS(trace::gunzip(flipped, "flipped.gz", 1 << 20), sim::TraceError);
  const std::string whole = gzip(std::string(100'000, 'y'));
  CHECK_THROWS_WITH(trace::gunzip(whole.substr(0, whole.size() - 12), "cut.gz", 1 << 20), Contains("cut.gz: truncated gzip stream"));
  CHECK_THROWS_WITH(trace::gunzip(gzip(std::string(2'000'000, 'z')), "bomb.gz", 1'000'000),
                    Contains("bomb.gz: expected at most 1000000 bytes of trace text, found more"));
  CHECK_THROWS_WITH(trace::gunzip("", "empty.gz", 1 << 20), Contains("empty.gz: truncated gzip stream after 0 bytes"));
  // A tar archive: .json members in order, others and macOS's "._" files skipped, the end blocks.
  const std::string tar = tar_member("rank0.json", a) + tar_member("notes.txt", "hello") +
                          tar_member("dir/rank1.json", b) + tar_member("dir/._rank1.json", "junk") + std::string(1024, '\0');
  const auto members = trace::tar_json_members(tar, "t.tar");
  REQUIRE(members.size() == 2);
  CHECK(members[0] == std::make_pair(std::string("rank0.json"), a));
  CHECK(members[1] == std::make_pair(std::string("dir/rank1.json"), b));
  // A member whose size runs past the archive, even by a size near 2^36.
  CHECK_THROWS_WITH(trace::tar_json_members(tar.substr(0, 512 + 10), "cut.tar"),
                    Contains("cut.tar: truncated tar archive: member rank0.json needs 19 bytes"));
  std::string huge = tar_member("big.json", a);
  std::copy_n("77777777777", 11, huge.begin() + 124);
  CHECK_THROWS_WITH(trace::tar_json_members(huge, "huge.tar"), Contains("needs 8589934591 bytes"));
}

TEST_CASE("a kernel's launch configuration: grid and block sizes, registers, shared memory", "[traces]") {
  const auto event = [](const std::string& args) {
    return R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {)" + args + "}}]}";
  };
  const auto t = trace::parse_kineto(
      event(R"("stream": 7, "grid": [7, 16, 32], "block": [256, 1, 1], "registers per thread": 32, "shared memory": 4224)"),
      "launch.json");
  REQUIRE(t.gpu_ops.size() == 1);
  REQUIRE(t.gpu_ops[0].blocks == 7 * 16 * 32);
  REQUIRE(t.gpu_ops[0].threads_per_block == 256);
  REQUIRE(t.gpu_ops[0].registers_per_thread == 32);
  REQUIRE(t.gpu_ops[0].shared_bytes == 4224);
  REQUIRE(trace::parse_kineto(event(R"("stream": 7)"), "none.json").gpu_ops[0].blocks == 0);  // not recorded
  REQUIRE_THROWS_WITH(trace::parse_kineto(event(R"("grid": [7, 0, 1])"), "zero.json"),
                      Contains("zero.json") && Contains("/traceEvents/0/args/grid: expected [x, y, z] of positive "
                                                        "integers, found [7,0,1]"));
  REQUIRE_THROWS_WITH(trace::parse_kineto(event(R"("block": "256")"), "text.json"),
                      Contains("/traceEvents/0/args/block"));
}

TEST_CASE("the shared A100 ResNet-50 DDP trace: 3 steps and the NCCL kernels with their sizes", "[traces]") {
  const std::string path = test::shared_path("validation/traces/hta/nccl_parser_config/nccl_data.json.gz");
  if (path.empty()) {
    WARN("skipped: ../shared/validation/traces is absent");
    return;
  }
  const auto t = trace::load_kineto(path);
  // SOURCES.txt: A100-PG509-200, 108 SMs, world size 2, steps 222.44 / 219.73 / 224.94 ms,
  // 15 AllReduce + 6 Broadcast NCCL kernels with message sizes.
  REQUIRE(t.gpu_name == "NVIDIA A100-PG509-200");
  REQUIRE(t.sm_count == 108);
  REQUIRE(t.world_size == 2);
  REQUIRE(t.steps.size() == 3);
  REQUIRE(t.steps[0].dur_us / 1e3 == Approx(222.44).margin(0.01));
  REQUIRE(t.steps[1].dur_us / 1e3 == Approx(219.73).margin(0.01));
  REQUIRE(t.steps[2].dur_us / 1e3 == Approx(224.94).margin(0.01));
  int all_reduce = 0, broadcast = 0, sized = 0;
  for (const auto& op : t.gpu_ops) {
    if (!op.nccl()) continue;
    all_reduce += op.collective == "allreduce";
    broadcast += op.collective == "broadcast";
    sized += op.message_elems > 0;
  }
  REQUIRE(all_reduce == 15);
  REQUIRE(broadcast == 6);
  REQUIRE(sized == 21);
}

TEST_CASE("the PARAM DLRM archive: all 8 ranks' traces read from one tar.gz", "[traces]") {
  const std::string path = test::shared_path("validation/traces/param/dlrm_kineto.tar.gz");
  if (path.empty()) {
    WARN("skipped: ../shared/validation/traces is absent");
    return;
  }
  const auto members = trace::read_tar_gz_json(path);
  REQUIRE(members.size() == 8);
  std::set<int> ranks;
  for (const auto& [name, text] : members) {
    const auto t = trace::parse_kineto(text, name);
    REQUIRE(t.world_size == 8);
    REQUIRE(t.steps.size() == 1);  // ProfilerStep#10, 12.5-19.9 ms (SOURCES.txt)
    REQUIRE(t.steps[0].dur_us > 12000.0);
    REQUIRE(t.steps[0].dur_us < 20000.0);
    ranks.insert(t.rank);
  }
  REQUIRE(ranks == std::set<int>{0, 1, 2, 3, 4, 5, 6, 7});
  // A gzip file that is not a tar archive yields no members.
  REQUIRE(trace::read_tar_gz_json(test::data_path("traces/mini_kineto.json.gz")).empty());
}

TEST_CASE("a trace nested past the reader's limit is a TraceError, not a stack overflow", "[traces]") {
  const std::string deep = "{\"traceEvents\": [" + std::string(100000, '[') + std::string(100000, ']') + "]}";
  REQUIRE_THROWS_AS(trace::parse_kineto(deep, "deep-trace.json"), sim::TraceError);
  REQUIRE_THROWS_WITH(trace::parse_kineto(deep, "deep-trace.json"), Contains("deep-trace.json") && Contains("levels deep"));
  // Malformed JSON still names its byte.
  REQUIRE_THROWS_WITH(trace::parse_kineto("{\"traceEvents\": [", "cut.json"), Contains("cut.json: malformed JSON at byte"));
}

TEST_CASE("events whose ph, cat or name is not a string are skipped or named \"unnamed\", never a JSON type error", "[traces]") {
  // Found by fuzz_kineto (fuzz/corpus/kineto/cat-object.ok): {"cat": {...}} escaped parse_kineto as
  // nlohmann's type_error.302 from json::value("cat", std::string()).
  const std::string step = R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 10})";
  const auto t = trace::parse_kineto(R"({"traceEvents": [)" + step + R"(, {"ph": "X", "cat": {"a": 1}, "name": "k"},
      {"ph": 1, "cat": "kernel"}, {"ph": "X", "cat": "kernel", "name": ["k"], "ts": 1, "dur": 2}]})", "types.json");
  REQUIRE(t.steps.size() == 1);
  REQUIRE(t.gpu_ops.size() == 1);
  REQUIRE(t.gpu_ops[0].name.empty());
  REQUIRE_THROWS_WITH(trace::parse_kineto(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": 7, "ts": 1}]})", "types.json"),
                      Contains("/traceEvents/0 (unnamed): expected a number \"dur\""));
}

TEST_CASE("a device given as a trace is refused before it is read", "[traces]") {
  // /dev/zero as a replay trace was read until memory ran out.
  if (!std::filesystem::exists("/dev/zero")) return;
  REQUIRE_THROWS_AS(trace::load_kineto("/dev/zero"), sim::TraceError);
  REQUIRE_THROWS_WITH(trace::load_kineto("/dev/zero"), Contains("/dev/zero") && Contains("regular file"));
}
