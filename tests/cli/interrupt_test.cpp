// Interrupted runs (issue 25): a sweep killed by SIGINT or SIGKILL leaves a CSV of whole rows that
// `--resume` completes into the same file an uninterrupted sweep writes; a simulation killed
// while writing its trace leaves no file at all; a command whose last output fails leaves none
// of its earlier ones.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "tests/cli/cli_run.hpp"
#include "tests/test_files.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using foresight::test::fresh_dir;
using foresight::test::listing;
using foresight::test::run_foresight;
using foresight::test::slurp;

extern char** environ;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

/// `foresight args...` started in the background, its output discarded.
pid_t spawn_foresight(const std::vector<std::string>& args) {
  const char* exe = std::getenv("FORESIGHT_EXE");
  REQUIRE(exe != nullptr);
  std::vector<std::string> all{exe};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);
  return pid;
}

/// Polls every 2 ms until `ready` holds (true) or the process has exited (false, reaped).
template <typename Ready>
bool wait_until(pid_t pid, Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(50);
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  FAIL("the process neither got ready nor ended within 50 s");
  return false;
}

/// Sends `sig`, reaps the process and requires that the signal ended it.
void kill_and_reap(pid_t pid, int sig) {
  REQUIRE(::kill(pid, sig) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == sig);
}

/// Whether process `pid` has a file open in `dir` that no name points at (O_TMPFILE).
bool writes_unnamed_file_in(pid_t pid, const fs::path& dir) {
  std::error_code ec;
  for (const auto& fd : fs::directory_iterator(fs::path("/proc") / std::to_string(pid) / "fd", ec)) {
    const std::string target = fs::read_symlink(fd.path(), ec).string();
    if (!ec && target.rfind(dir.string() + "/", 0) == 0 && target.find("(deleted)") != std::string::npos) return true;
  }
  return false;
}

// A sweep of four unfolded DDP configurations, each a fraction of a second, one at a time.
std::vector<std::string> sweep_args(const fs::path& csv) {
  return {"sweep", foresight::test::source_path("examples/gpt3-1.3b-ddp-8xh100.json"), "--gpus", "8,16",
          "--micro-batch", "1,2", "--set", "plan.fold=false", "--jobs", "1", "--csv", csv.string()};
}

std::string joined(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

}  // namespace

TEST_CASE("a sweep killed by SIGINT or SIGKILL keeps whole rows, and --resume ends it as an uninterrupted run",
          "[interrupt]") {
  const fs::path whole_dir = fresh_dir("interrupt-whole");
  const auto whole = run_foresight(joined(sweep_args(whole_dir / "sweep.csv")));
  INFO(whole.out);
  REQUIRE(whole.status == 0);
  const std::string expected = slurp(whole_dir / "sweep.csv");
  const auto expected_lines = lines_of(expected);
  REQUIRE(expected_lines.size() == 1 + 4);

  for (const int sig : {SIGINT, SIGKILL}) {
    INFO("signal " << sig);
    const fs::path dir = fresh_dir("interrupt-" + std::to_string(sig));
    const fs::path csv = dir / "sweep.csv";
    const pid_t pid = spawn_foresight(sweep_args(csv));
    // Killed once its first row is in the file, while later ones run.
    const bool ready = wait_until(pid, [&] { return lines_of(slurp(csv)).size() >= 2; });
    REQUIRE(ready);  // false: the sweep ended before it could be interrupted
    kill_and_reap(pid, sig);
    CHECK(listing(dir) == std::set<std::string>{"sweep.csv"});
    const auto kept = lines_of(slurp(csv));
    REQUIRE(kept.size() >= 2);
    REQUIRE(kept.size() < expected_lines.size());
    CHECK(kept[0] == expected_lines[0]);
    // Every row it kept is whole: a row of the uninterrupted sweep (the last may be cut mid-write).
    for (std::size_t i = 1; i + 1 < kept.size(); ++i) {
      INFO(kept[i]);
      CHECK(std::find(expected_lines.begin(), expected_lines.end(), kept[i]) != expected_lines.end());
    }
    const auto resumed = run_foresight(joined(sweep_args(csv)) + " --resume");
    INFO(resumed.out);
    REQUIRE(resumed.status == 0);
    CHECK(resumed.out.find("resumed)") != std::string::npos);
    CHECK(resumed.out.find(" 0 resumed)") == std::string::npos);
    CHECK(slurp(csv) == expected);
    CHECK(listing(dir) == std::set<std::string>{"sweep.csv"});
  }
  fs::remove_all(whole_dir);
}

TEST_CASE("simulate --trace killed while it writes the trace leaves no file", "[interrupt]") {
  for (const int sig : {SIGINT, SIGKILL}) {
    INFO("signal " << sig);
    const fs::path dir = fresh_dir("interrupt-trace-" + std::to_string(sig));
    // Unfolded, 16 GPUs: a trace of some 200 MB, written for about a second.
    const pid_t pid = spawn_foresight({"simulate", foresight::test::source_path("examples/gpt3-1.3b-ddp-8xh100.json"),
                                       "--gpus", "16", "--set", "plan.fold=false", "--trace", (dir / "t.json").string(),
                                       "-o", (dir / "report.txt").string()});
    const bool writing = wait_until(pid, [&] { return writes_unnamed_file_in(pid, dir); });
    REQUIRE(writing);  // false: it ended before its trace could be interrupted
    CHECK(listing(dir).empty());  // the trace is being written under no name
    kill_and_reap(pid, sig);
    CHECK(listing(dir).empty());
    fs::remove_all(dir);
  }
}

TEST_CASE("topology --export is not written when the report's -o fails", "[interrupt]") {
  const fs::path dir = fresh_dir("interrupt-topology");
  const auto r = run_foresight("topology dgx-a100 --gpus 16 --export " + (dir / "cluster.json").string() + " -o " +
                               (dir / "no-such-folder" / "report.txt").string());
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(r.out.find("no-such-folder/report.txt") != std::string::npos);
  CHECK(listing(dir).empty());
  // Both given good paths, both are written.
  const auto ok = run_foresight("topology dgx-a100 --gpus 16 --export " + (dir / "cluster.json").string() + " -o " +
                                (dir / "report.txt").string());
  CHECK(ok.status == 0);
  CHECK(listing(dir) == std::set<std::string>{"cluster.json", "report.txt"});
  fs::remove_all(dir);
}
