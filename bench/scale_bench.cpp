// Issue 17's scale targets, measured as a user meets them: each row runs the `foresight` binary
// (parse, build the cluster, compile, simulate, report) in a child process pinned to one core,
// three times, and prints the median wall time, the simulator's events per second and the peak
// resident memory (getrusage of the child, so the whole process counts).
//
//   build/bench/scale_bench [--foresight build/cli/foresight] [--repeat 3] [--limit 120]
//                           [--only TEXT] [--sweep]
//
// Run from the repository root (the scenarios are bench/scenarios/ and examples/). --sweep adds
// a 240-configuration GPT-3 175B sweep (both cores, as a user would run it). Nothing here is a
// test: the numbers depend on the machine; README's table records one run.
#include <fmt/format.h>
#include <fcntl.h>
#include <sched.h>
#include <csignal>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Row {
  std::string label;
  int gpus;
  std::vector<std::string> args;  // after the foresight binary
  bool one_core = true;
  bool events = true;  // the command prints --json with simulation.events
};

struct Measure {
  double wall_s = 0.0;
  double rss_mb = 0.0;
  double events = 0.0;
  int gpus = 0;  // the cluster's, from the report
  int status = 0;
};

/// Runs `exe args...` with stdout into `out_path`; returns wall time, peak RSS and exit status.
Measure run_once(const std::string& exe, const Row& row, const std::string& out_path, int limit_s) {
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    std::exit(2);
  }
  if (pid == 0) {
    if (row.one_core) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(0, &set);
      sched_setaffinity(0, sizeof(set), &set);
    }
    const int fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      close(fd);
    }
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (const auto& a : row.args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    alarm(static_cast<unsigned>(limit_s));  // survives exec: SIGALRM ends a run past the limit
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  Measure m;
  m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.rss_mb = static_cast<double>(usage.ru_maxrss) / 1024.0;
  m.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (row.events && m.status == 0) {
    try {
      std::ifstream in(out_path);
      const auto doc = nlohmann::json::parse(in);
      m.events = doc.at("simulation").at("events").get<double>();
      m.gpus = doc.at("cluster").at("gpus").get<int>();
    } catch (const std::exception&) {
      m.events = 0.0;
    }
  }
  return m;
}

std::vector<std::string> simulate(const std::string& scenario, const std::string& network,
                                  std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"simulate", scenario, "--json", "--set", "plan.network=" + network};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

std::vector<Row> rows(bool sweep) {
  std::vector<Row> r;
  for (const char* e : {"thetagpu-resnet18-ddp", "thetagpu-resnet18-gpipe", "gpt2-1f1b-4stages",
                        "gpt3-1.3b-ddp-8xh100", "gpt3-6.7b-tp-sweep-64", "resnet50-ddp-selene",
                        "mixtral-8x7b-ep8-pp4-64xh100", "gpt3-175b-3d-sweep-1024"}) {
    const std::string path = fmt::format("examples/{}.json", e);
    r.push_back({fmt::format("example {}", e), 0, {"simulate", path, "--json"}});
  }
  // Issue 17's scenarios, each on both network models.
  struct Scale {
    const char* label;
    int gpus;
    const char* file;
  };
  for (const Scale& k : {Scale{"GPT-3 175B TP8 PP8 DP16 interleaved", 1024, "gpt3-175b-1024-interleaved"},
                         Scale{"MoE TP2 EP16 PP12x8 DP24", 9216, "moe-9216-h100"},
                         Scale{"FSDP Llama-2 70B", 512, "fsdp-llama2-70b-512"},
                         Scale{"FSDP Llama-2 7B", 128, "fsdp-llama2-7b-128"},
                         Scale{"SC21 1008B row (PP64 TP8 DP6)", 3072, "sc21-1008b-3072"},
                         Scale{"GPT-3 175B dgx-h100 3-level fabric", 6144, "gpt3-175b-6144-dgx-h100"},
                         Scale{"Llama-2 70B TP2 PP8x2 DP32 on GB200 racks", 512, "llama2-70b-512-gb200"}}) {
    for (const char* net : {"analytical", "flow"}) {
      r.push_back({fmt::format("{}, {}", k.label, net), k.gpus,
                   simulate(fmt::format("bench/scenarios/{}.json", k.file), net)});
    }
  }
  // Folding by placement against every rank simulated (the same answer); with experts on the
  // analytical network alone (the flow network simulates every replica's flows there).
  r.push_back({"Llama-2 70B TP2 PP8x2 DP32 on GB200 racks, analytical, unfolded", 512,
               simulate("bench/scenarios/llama2-70b-512-gb200.json", "analytical", {"--set", "plan.fold=false"})});
  r.push_back({"Mixtral 8x7B EP8 PP4x2 DP16 on GB200 racks, analytical", 512,
               simulate("bench/scenarios/mixtral-8x7b-512-gb200.json", "analytical")});
  r.push_back({"Mixtral 8x7B EP8 PP4x2 DP16 on GB200 racks, analytical, unfolded", 512,
               simulate("bench/scenarios/mixtral-8x7b-512-gb200.json", "analytical", {"--set", "plan.fold=false"})});
  // DP growth at fixed TP x PP = 2 x 2 (GPT-2 large, dgx-a100 fat tree): DP 1 -> 4096.
  for (int dp : {1, 64, 4096}) {
    for (const char* net : {"analytical", "flow"}) {
      r.push_back({fmt::format("DP growth TP2 PP2 DP{}, {}", dp, net), 4 * dp,
                   simulate("bench/scenarios/dp-growth-gpt2-large.json", net,
                            {"--set", fmt::format("plan.dp={}", dp), "--set",
                             fmt::format("cluster.gpus={}", 4 * dp), "--set",
                             fmt::format("plan.global_batch={}", 8 * dp)})});
    }
  }
  if (sweep) {
    // 3 x 5 x 2 x 2 x 4 = 240 configurations; a global batch of 2048 divides every dp x mb.
    Row s{"sweep: GPT-3 175B, 240 configurations (2 cores)", 1024,
          {"sweep", "examples/gpt3-175b-3d-sweep-1024.json", "--set", "plan.global_batch=2048",
           "--vary", "plan.tp=2,4,8", "--vary", "plan.pp=2,4,8,16,32", "--vary",
           "plan.recompute=full,selective", "--vary", "plan.sequence_parallel=true,false",
           "--micro-batch", "1,2,4,8", "--csv", "/tmp/foresight-scale-bench-sweep.csv"},
          false, false};
    r.push_back(s);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string exe = "build/cli/foresight";
  int repeat = 3;
  int limit_s = 120;
  std::string only;
  bool sweep = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--foresight" && i + 1 < argc) {
      exe = argv[++i];
    } else if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--limit" && i + 1 < argc) {
      limit_s = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--sweep") {
      sweep = true;
    } else {
      fmt::print(stderr, "usage: scale_bench [--foresight EXE] [--repeat N] [--limit S] [--only TEXT] [--sweep]\n");
      return 2;
    }
  }
  const std::string out = fmt::format("/tmp/foresight-scale-bench-{}.json", getpid());
  fmt::print("| scenario | GPUs | wall s (median of {}) | events | events/s | peak RSS MB |\n", repeat);
  fmt::print("|---|---:|---:|---:|---:|---:|\n");
  for (const Row& row : rows(sweep)) {
    if (!only.empty() && row.label.find(only) == std::string::npos) continue;
    std::vector<Measure> ms;
    for (int k = 0; k < repeat; ++k) {
      ms.push_back(run_once(exe, row, out, limit_s));
      if (ms.back().status == 128 + SIGALRM) break;  // past the limit: once is enough
    }
    std::sort(ms.begin(), ms.end(), [](const Measure& a, const Measure& b) { return a.wall_s < b.wall_s; });
    const Measure& m = ms[ms.size() / 2];
    double rss = 0.0;
    for (const auto& x : ms) rss = std::max(rss, x.rss_mb);
    const int gpu_count = m.gpus > 0 ? m.gpus : row.gpus;
    const std::string gpus = gpu_count > 0 ? std::to_string(gpu_count) : "";
    if (ms.back().status == 128 + SIGALRM) {
      fmt::print("| {} | {} | > {} (stopped) | | | {:.0f} |\n", row.label, gpus, limit_s, rss);
    } else if (m.status != 0) {
      fmt::print("| {} | {} | {:.2f} | exit {} | | {:.0f} |\n", row.label, gpus, m.wall_s, m.status, rss);
    } else if (row.events) {
      fmt::print("| {} | {} | {:.2f} | {:.3g} | {:.3g} | {:.0f} |\n", row.label, gpus, m.wall_s, m.events,
                 m.events / m.wall_s, rss);
    } else {
      fmt::print("| {} | {} | {:.2f} | | | {:.0f} |\n", row.label, gpus, m.wall_s, rss);
    }
    std::fflush(stdout);
  }
  std::remove(out.c_str());
  return 0;
}
