// The foresight command as a user meets it: outputs, JSON keys, exit codes, clear errors, and no
// partial output file after a failure.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>

#include "tests/test_paths.hpp"

namespace {

struct Run {
  int status = -1;
  std::string out;  ///< stdout and stderr together
};

/// Runs `foresight <args>` through the shell and captures its output and exit status.
Run run_foresight(const std::string& args) {
  const char* exe = std::getenv("FORESIGHT_EXE");
  REQUIRE(exe != nullptr);
  Run r;
  FILE* p = popen((std::string(exe) + " " + args + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) r.out += buf.data();
  const int raw = pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

std::string scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "foresight-cli-test";
  std::filesystem::create_directories(dir);
  const auto p = dir / name;
  std::filesystem::remove(p);
  return p.string();
}

}  // namespace

TEST_CASE("foresight --list shows every registry", "[cli]") {
  const auto r = run_foresight("--list");
  REQUIRE(r.status == 0);
  for (const char* s : {"thetagpu", "selene", "dgx-h100", "flow", "analytical", "nvls_tree", "LL128", "nvlink",
                        "A100-SXM4-80GB", "link-level"}) {
    INFO(s);
    REQUIRE(r.out.find(s) != std::string::npos);
  }
}

TEST_CASE("foresight collective --json has nccl-tests' columns", "[cli]") {
  const auto r = run_foresight("collective --cluster dgx-a100 --gpus 8 --op all_reduce --sizes 1M,1G --json");
  REQUIRE(r.status == 0);
  const auto rows = nlohmann::json::parse(r.out);
  REQUIRE(rows.size() == 2);
  for (const auto& row : rows) {
    for (const char* key : {"size_bytes", "time_s", "algbw_GBps", "busbw_GBps", "algorithm"}) REQUIRE(row.contains(key));
    // all_reduce busbw = algbw x 2(n-1)/n, algbw = size / time.
    REQUIRE(row["busbw_GBps"].get<double>() == Approx(row["algbw_GBps"].get<double>() * 1.75));
    REQUIRE(row["algbw_GBps"].get<double>() == Approx(row["size_bytes"].get<double>() / row["time_s"].get<double>() * 1e-9));
  }
  REQUIRE(rows[0]["size_bytes"] == 1048576);
  REQUIRE(rows[1]["algorithm"] == "ring");
}

TEST_CASE("foresight collective prints a table with a row per size", "[cli]") {
  const auto r = run_foresight("collective --cluster dgx-h100 --op all_gather --sizes 1K:1M --factor 4");
  REQUIRE(r.status == 0);
  REQUIRE(r.out.find("busbw(GB/s)") != std::string::npos);
  std::size_t rows = 0;
  for (std::size_t pos = 0; (pos = r.out.find('\n', pos)) != std::string::npos; ++pos) ++rows;
  REQUIRE(rows == 3 + 6);  // 3 header lines; 1K, 4K, 16K, 64K, 256K, 1M
}

TEST_CASE("foresight topology reports the bisection of thetagpu", "[cli]") {
  const auto r = run_foresight("topology thetagpu --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["gpus"] == 192);
  REQUIRE(j["routing"] == "adaptive");
}

TEST_CASE("bad input is one clear message and a non-zero exit", "[cli]") {
  struct Case {
    const char* args;
    const char* says;
  };
  const std::string bad_topology = foresight::test::data_path("bad/topologies/dangling_link.json");
  for (const Case c : {Case{"collective --cluster nowhere", "nowhere"},
                       Case{"collective --cluster dgx-a100 --sizes 1X", "unknown unit \"X\""},
                       Case{"collective --cluster dgx-a100 --op allreduce", "expected a collective operation"},
                       Case{"collective --cluster thetagpu --gpus 9999", "192"},
                       Case{"collective --cluster dgx-a100 --algorithm nvls", "not available"},
                       Case{"collective --cluster dgx-a100 --network fast", "analytical, flow"},
                       Case{"collective --cluster dgx-a100 --calibration /nonexistent.json", "cannot open"}}) {
    const auto r = run_foresight(c.args);
    INFO(c.args << "\n" << r.out);
    REQUIRE(r.status == 1);
    REQUIRE(r.out.find("foresight: error:") != std::string::npos);
    REQUIRE(r.out.find(c.says) != std::string::npos);
  }
  const auto t = run_foresight("topology " + bad_topology);
  REQUIRE(t.status == 1);
  REQUIRE(t.out.find("dangling link") != std::string::npos);
  REQUIRE(run_foresight("collective").status != 0);  // --cluster is required (a usage error)
}

TEST_CASE("--output is written whole or not at all", "[cli]") {
  const std::string ok = scratch("ok.json");
  REQUIRE(run_foresight("collective --cluster dgx-a100 --sizes 1M --json --output " + ok).status == 0);
  REQUIRE(std::filesystem::exists(ok));
  REQUIRE(!std::filesystem::exists(ok + ".tmp"));
  REQUIRE(nlohmann::json::parse(std::ifstream(ok)).size() == 1);
  const std::string failed = scratch("failed.json");
  REQUIRE(run_foresight("collective --cluster dgx-a100 --sizes 1M,2Z --json --output " + failed).status == 1);
  REQUIRE(!std::filesystem::exists(failed));
  REQUIRE(!std::filesystem::exists(failed + ".tmp"));
}
