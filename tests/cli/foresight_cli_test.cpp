// The foresight command as a user meets it: outputs, JSON keys, exit codes, clear errors, and no
// partial output file after a failure (replay and import-profile: replay_cli_test.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/wait.h>
#include <vector>

#include "tests/cli/cli_run.hpp"
#include "tests/test_paths.hpp"

using foresight::test::run_foresight;
using foresight::test::scratch;

TEST_CASE("foresight --list shows every registry", "[cli]") {
  const auto r = run_foresight("--list");
  REQUIRE(r.status == 0);
  for (const char* s : {"thetagpu", "selene", "dgx-h100", "flow", "analytical", "nvls_tree", "LL128", "nvlink",
                        "A100-SXM4-80GB", "link-level"}) {
    INFO(s);
    REQUIRE(r.out.find(s) != std::string::npos);
  }
  // Each GPU with the tensor-core modes it has, at its datasheet's dense peaks: the V100 its FP16
  // (125 TFLOP/s, V100 datasheet; it has no BF16), the A100 BF16 alone (312; no FP8), the H100
  // SXM BF16 and FP8 (989.4 and 1979, H100 datasheet, half the sparse figures).
  const auto gpu_line = [&](const std::string& name) {
    const std::size_t at = r.out.find("  " + name + " ");
    REQUIRE(at != std::string::npos);
    return r.out.substr(at, r.out.find('\n', at) - at);
  };
  REQUIRE_THAT(gpu_line("V100-SXM2-32GB"), Catch::Contains("FP16 125.0 (no BF16) TFLOP/s dense"));
  REQUIRE_THAT(gpu_line("A100-SXM4-80GB"), Catch::Contains("BF16 312.0 TFLOP/s dense"));
  REQUIRE(gpu_line("A100-SXM4-80GB").find("FP8") == std::string::npos);
  REQUIRE_THAT(gpu_line("H100-SXM5-80GB"), Catch::Contains("BF16 989.4, FP8 1979.0 TFLOP/s dense"));
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
                       Case{"collective --cluster dgx-a100 --calibration /nonexistent.json", "cannot open"},
                       // ln(2^40) / ln(1.0000001) + 1 = 2.77e8 sizes, refused before any runs.
                       Case{"collective --cluster dgx-a100 --sizes 1:1T --factor 1.0000001", "2.77e+08 sizes"},
                       Case{"collective --cluster dgx-h100 --gpus 200000", "at most 131072 GPUs"}}) {
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

namespace {

const std::string& small_ddp() {
  static const std::string path = foresight::test::data_path("scenarios/small_ddp.json");
  return path;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("foresight simulate --json: an input-bound run whose numbers follow from the scenario", "[cli][simulate]") {
  // small_ddp: 4 ranks, micro-batch 32, 5000 samples/s of input per process, 1 epoch of 50000.
  // ResNet-18 on CIFAR computes in ~3 ms, so each step waits on its input: 32 / 5000 = 6.4 ms.
  const auto r = run_foresight("simulate " + small_ddp() + " --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"iteration_time_s", "run_time_s", "throughput", "breakdown", "memory", "plan", "simulation"}) {
    INFO(key);
    REQUIRE(j.contains(key));
  }
  const double iteration = j["iteration_time_s"].get<double>();
  REQUIRE(iteration == Approx(32.0 / 5000.0).epsilon(1e-9));
  const double steps = std::ceil(50000.0 / (4 * 32));
  REQUIRE(j["steps"].get<double>() == steps);
  REQUIRE(j["run_time_s"].get<double>() == Approx(steps * iteration).epsilon(1e-9));
  REQUIRE(j["throughput"]["samples_per_s"].get<double>() == Approx(4 * 5000.0).epsilon(1e-9));
  REQUIRE(j["throughput"]["tokens_per_s"].get<double>() == 0.0);  // an image model has no tokens
  // Model TFLOP/s per GPU ~ 3 x forward FLOPs per sample x samples/s per GPU: backward is twice
  // forward except in the stem, which computes no input gradient (hence 0.5%). MFU against 312.
  const double tflops = 3.0 * j["model"]["fwd_flops_per_sample"].get<double>() * 5000.0 * 1e-12;
  const double reported = j["throughput"]["tflops_per_gpu"].get<double>();
  REQUIRE(reported == Approx(tflops).epsilon(0.005));
  REQUIRE(reported < tflops);
  REQUIRE(j["throughput"]["mfu"].get<double>() == Approx(reported / 312.0).epsilon(1e-9));
  // The breakdown of the slowest rank adds up to the iteration.
  const auto& b = j["breakdown"];
  const double sum = b["compute_s"].get<double>() + b["exposed_comm_s"].get<double>() + b["bubble_s"].get<double>() +
                     b["host_s"].get<double>();
  REQUIRE(sum == Approx(iteration).epsilon(1e-6));
  // The four replicas are identical: one is simulated, standing for all four (rank folding).
  REQUIRE(b["per_rank"].size() == 1);
  REQUIRE(b["per_rank"][0]["represents"] == 4);
  REQUIRE(j["simulation"]["simulated_ranks"] == 1);
  REQUIRE(b["exposed_comm_s"].get<double>() <= b["comm_s"].get<double>());
  // Memory: fp32 weights + fp16 copy (6 B), fp32 gradients and SGD momentum (4 B each) per parameter.
  const auto& m = j["memory"]["per_rank"][0];
  const double params = j["model"]["params"].get<double>();
  REQUIRE(m["weights_bytes"].get<double>() == Approx(6 * params));
  REQUIRE(m["gradients_bytes"].get<double>() == Approx(4 * params));
  REQUIRE(m["optimizer_bytes"].get<double>() == Approx(4 * params));
  REQUIRE(j["memory"]["oom"] == false);
  REQUIRE(j["simulation"]["gradient_buckets"].get<int>() >= 2);  // 45 MB of gradients, 1 MB + 25 MB buckets
}

TEST_CASE("foresight simulate reports an out-of-memory plan with its overflow", "[cli][simulate]") {
  const auto r = run_foresight("simulate " + small_ddp() + " --micro-batch 60000 --json");
  REQUIRE(r.status == 0);  // running out of memory is a result, not an input error
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["memory"]["oom"] == true);
  const auto& m = j["memory"]["per_rank"][0];
  REQUIRE(m["overflow_bytes"].get<double>() == Approx(m["peak_bytes"].get<double>() - m["capacity_bytes"].get<double>()));
  const auto text = run_foresight("simulate " + small_ddp() + " --micro-batch 60000");
  REQUIRE(text.out.find("OUT OF MEMORY by") != std::string::npos);
}

TEST_CASE("foresight simulate is deterministic and overrides apply", "[cli][simulate]") {
  const auto a = run_foresight("simulate " + small_ddp() + " --json");
  const auto b = run_foresight("simulate " + small_ddp() + " --json");
  REQUIRE(a.out == b.out);
  const auto c = nlohmann::json::parse(run_foresight("simulate " + small_ddp() + " --gpus 8 --set plan.input_rate=2500 --json").out);
  REQUIRE(c["plan"]["dp"] == 8);
  REQUIRE(c["iteration_time_s"].get<double>() == Approx(32.0 / 2500.0).epsilon(1e-9));
}

TEST_CASE("foresight simulate --trace writes a Perfetto trace with a process per rank", "[cli][simulate]") {
  const std::string trace = scratch("small_ddp.trace.json");
  // Unfolded, so that every rank is in the graph (folded, rank 0 would stand for all four).
  REQUIRE(run_foresight("simulate " + small_ddp() + " --set plan.fold=false --trace " + trace).status == 0);
  const auto j = nlohmann::json::parse(std::ifstream(trace));
  std::set<std::string> processes;
  std::size_t spans = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X") {
      REQUIRE(e.contains("ts"));
      REQUIRE(e["dur"].get<double>() >= 0.0);
      ++spans;
    }
  }
  for (int rank = 0; rank < 4; ++rank) {
    INFO(rank);
    REQUIRE(std::any_of(processes.begin(), processes.end(),
                        [&](const std::string& p) { return p.rfind("rank " + std::to_string(rank) + " ", 0) == 0; }));
  }
  REQUIRE(spans > 100);
  // Folded (the default), the one simulated rank says what it stands for.
  REQUIRE(run_foresight("simulate " + small_ddp() + " --trace " + trace).status == 0);
  const auto folded = nlohmann::json::parse(std::ifstream(trace));
  std::vector<std::string> names;
  for (const auto& e : folded["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") names.push_back(e["args"]["name"].get<std::string>());
  }
  REQUIRE(names == std::vector<std::string>{"rank 0 (GPU 0, standing for 4 identical GPUs)", "network links"});
}

TEST_CASE("foresight sweep: a CSV row per configuration, identical on a rerun, a plot, and --resume", "[cli][sweep]") {
  const std::string csv = scratch("sweep.csv");
  const std::string plot = scratch("sweep.svg");
  const std::string args = "sweep " + small_ddp() + " --gpus 2,4,8 --micro-batch 16,32 --jobs 2 --csv " + csv;
  REQUIRE(run_foresight(args + " --plot " + plot).status == 0);
  const std::string first = slurp(csv);
  REQUIRE(std::count(first.begin(), first.end(), '\n') == 1 + 3 * 2);
  REQUIRE(first.rfind("gpus,micro_batch,iteration_time_s,", 0) == 0);
  // Input-bound at 5000 samples/s per process: micro-batch 32 takes 6.4 ms on every GPU count.
  for (const char* row : {"\n2,32,0.0064,", "\n4,32,0.0064,", "\n8,32,0.0064,"}) {
    INFO(row);
    REQUIRE(first.find(row) != std::string::npos);
  }
  REQUIRE(slurp(plot).rfind("<?xml", 0) == 0);
  REQUIRE(run_foresight(args).status == 0);
  REQUIRE(slurp(csv) == first);
  const auto resumed = run_foresight(args + " --resume");
  REQUIRE(resumed.status == 0);
  REQUIRE(resumed.out.find("(0 run now, 6 resumed)") != std::string::npos);
  REQUIRE(slurp(csv) == first);
}

TEST_CASE("bad scenarios and flags: exit status, file and field named, no output file", "[cli][simulate]") {
  struct Case {
    const char* file;
    const char* says;
  };
  for (const Case c : {Case{"unknown_key.json", "/plan/micro_bacth: unknown key"},
                       Case{"impossible_plan.json", "cluster.gpus is 4"},
                       Case{"unknown_model.json", "/model/name"},
                       Case{"unknown_preset.json", "/cluster/preset"},
                       Case{"negative_batch.json", "/plan/micro_batch"},
                       Case{"wrong_type.json", "expected"},
                       Case{"unknown_precision.json", "/plan/precision"},
                       Case{"truncated.json", "truncated.json"},
                       Case{"pipeline_too_many_stages.json", "32 model chunks, but resnet18-cifar has only 14 units"},
                       Case{"pipeline_virtual_stages.json", "6 blocks per stage (12 blocks / pp 2) are not divisible by 4"},
                       Case{"pipeline_batch.json", "/plan/global_batch: expected a multiple of dp x micro_batch"},
                       Case{"pipeline_interleaved_m.json", "/plan/grad_accum: expected a multiple of pp = 4"},
                       Case{"moe_ep_not_dividing.json", "/plan/ep: expected a divisor of the 8 experts of h.0.mlp.experts, found 3"},
                       Case{"moe_histogram_row.json", "row 0 has 4 shares, expected one per expert (8)"}}) {
    const std::string path = foresight::test::data_path(std::string("bad/scenarios/") + c.file);
    const std::string out = scratch("bad-report.txt");
    const auto r = run_foresight("simulate " + path + " --output " + out);
    INFO(c.file << "\n" << r.out);
    REQUIRE(r.status == 1);
    REQUIRE(r.out.find("foresight: error: " + path) != std::string::npos);
    REQUIRE(r.out.find(c.says) != std::string::npos);
    REQUIRE(!std::filesystem::exists(out));
  }
  struct Flag {
    std::string args;
    int status;
    const char* says;
  };
  const std::string s = small_ddp();
  for (const Flag& f : {Flag{"simulate " + s + " --set plan.dp=3", 1, "dp x tp x pp x ep x cp = 3 x 1 x 1 x 1 x 1 = 3"},
                        Flag{"simulate " + s + " --set plan.tp=2 --set plan.dp=2", 1, "expected 1 for resnet18-cifar: tensor parallelism splits transformer layers"},
                        Flag{"simulate " + s + " --set plan.foo=3", 1, "--set plan.foo: unknown key \"foo\" in plan; expected one of dp, tp"},
                        Flag{"simulate " + s + " --set plan.dp", 1, "expected PATH=VALUE"},
                        Flag{"simulate " + s + " --micro-batch 0", 2, "expected an integer >= 1, found \"0\""},
                        Flag{"simulate /nonexistent/scenario.json", 1, "cannot open"},
                        Flag{"simulate " + s + " --trace /nonexistent/dir/t.json", 1, "cannot write"},
                        Flag{"sweep " + s + " --gpus 2,x --csv " + scratch("never.csv"), 1, "sweep configuration gpus=x"},
                        Flag{"sweep " + s + " --gpus 2,,4", 1, "empty value"},
                        Flag{"sweep " + s, 1, "nothing to vary"}}) {
    const auto r = run_foresight(f.args);
    INFO(f.args << "\n" << r.out);
    REQUIRE(r.status == f.status);
    REQUIRE(r.out.find(f.says) != std::string::npos);
  }
  REQUIRE(!std::filesystem::exists(scratch("never.csv")));
}

TEST_CASE("foresight --list names the models; foresight params every scenario key and choice", "[cli]") {
  const auto r = run_foresight("--list");
  for (const char* s : {"resnet18-cifar", "gpt3-175b", "llama2-7b", "foresight params"}) {
    INFO(s);
    REQUIRE(r.out.find(s) != std::string::npos);
  }
  const auto params = run_foresight("params");
  REQUIRE(params.status == 0);
  for (const char* s : {"micro_batch", "shard_group", "amp_bf16", "horovod", "interleaved", "dataset_samples"}) {
    INFO(s);
    REQUIRE(params.out.find(s) != std::string::npos);
  }
  const auto j = run_foresight("params --json");
  REQUIRE(j.status == 0);
  const auto table = nlohmann::json::parse(j.out);
  REQUIRE(table.size() > 50);
  for (const auto& e : table) REQUIRE(params.out.find(e.at("path").get<std::string>().substr(
                                          e.at("path").get<std::string>().rfind('.') + 1)) != std::string::npos);
  const auto both = run_foresight("params --markdown --json");
  REQUIRE(both.status == 1);
  REQUIRE(both.out.find("at most one of --markdown and --json") != std::string::npos);
}

TEST_CASE("GPT-3 175B on 1024 GPUs: one simulated rank per stage, and a TP x PP sweep with OOM verdicts", "[cli][sweep]") {
  const std::string s = foresight::test::data_path("scenarios/gpt3_175b_3d.json");
  const auto r = run_foresight("simulate " + s + " --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  // tp 8 x pp 16 x dp 8: the replicas and TP ranks of each stage fold onto one simulated rank.
  REQUIRE(j["simulation"]["simulated_ranks"] == 16);
  REQUIRE(j["breakdown"]["per_rank"].size() == 16);
  for (const auto& rank : j["memory"]["per_rank"]) REQUIRE(rank["represents"] == 64);
  REQUIRE(j["cluster"]["gpus"] == 1024);
  const std::string csv = scratch("175b-sweep.csv");
  const auto sweep = run_foresight("sweep " + s + " --vary plan.tp=4,8 --vary plan.pp=8,16 --csv " + csv);
  INFO(sweep.out);
  REQUIRE(sweep.status == 0);
  std::ifstream in(csv);
  std::string header;
  std::getline(in, header);
  REQUIRE(header.rfind("plan.tp,plan.pp,iteration_time_s", 0) == 0);
  std::map<std::pair<int, int>, std::pair<double, bool>> rows;  // (tp, pp) -> (peak, oom)
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    for (std::size_t pos = 0;;) {
      const std::size_t comma = line.find(',', pos);
      f.push_back(line.substr(pos, comma - pos));
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    REQUIRE(f.size() == 17);
    REQUIRE(std::stod(f[2]) > 0.0);  // an iteration time for every row, OOM or not
    // The run's cost: 1024 GPU x the run's hours at the stored A100 80 GB price.
    REQUIRE(std::stod(f[14]) == Approx(1024 * 5.1207 * std::stod(f[3]) / 3600.0).epsilon(1e-6));
    rows[{std::stoi(f[0]), std::stoi(f[1])}] = {std::stod(f[12]), f[13] == "1"};
  }
  REQUIRE(rows.size() == 4);
  for (const auto& [key, row] : rows) {
    INFO("tp " << key.first << " pp " << key.second);
    REQUIRE(row.second == (row.first > 80.0 * (1LL << 30)));  // the verdict is the peak against 80 GiB
  }
  // Model states dominate: 175 B parameters over tp x pp GPUs. Only tp 4 x pp 8 (5.5 B
  // parameters per GPU, ~16 bytes each) does not fit.
  REQUIRE(rows.at({4, 8}).second);
  REQUIRE_FALSE(rows.at({8, 8}).second);
  REQUIRE_FALSE(rows.at({4, 16}).second);
  REQUIRE(rows.at({8, 16}).first < rows.at({4, 16}).first);
  REQUIRE(rows.at({8, 16}).first == Approx(rows.at({8, 8}).first / 2).epsilon(0.1));
}

TEST_CASE("an MoE run reports per-rank token loads and its timeline shows dispatch and combine", "[cli][simulate]") {
  const std::string s = foresight::test::data_path("scenarios/tiny_moe.json");
  const auto r = run_foresight("simulate " + s + " --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& moe = j["moe"];
  REQUIRE(moe["routing"] == "zipf (s = 1)");
  REQUIRE(moe["per_rank"].size() == 8);
  double total = 0.0;
  for (const auto& rank : moe["per_rank"]) total += rank["tokens"].get<double>();
  // 8 ranks x 2 micro-batches x 512 tokens x top-2 x 4 MoE layers, all kept (dropless).
  REQUIRE(total == Approx(8 * 2 * 512 * 2 * 4));
  REQUIRE(moe["imbalance_s"].get<double>() > 0.0);
  const auto text = run_foresight("simulate " + s);
  REQUIRE(text.out.find("experts     zipf (s = 1) routing") != std::string::npos);
  const std::string trace = scratch("moe.trace.json");
  REQUIRE(run_foresight("simulate " + s + " --trace " + trace).status == 0);
  const auto t = nlohmann::json::parse(std::ifstream(trace));
  std::set<std::string> threads;
  int dispatch = 0, combine = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") threads.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] != "X") continue;
    const std::string name = e["name"].get<std::string>();
    dispatch += name.find("mlp.experts dispatch") != std::string::npos;
    combine += name.find("mlp.experts combine") != std::string::npos;
  }
  REQUIRE(threads.count("expert all-to-all") == 1);
  REQUIRE(dispatch > 0);
  REQUIRE(combine > 0);
}

TEST_CASE("foresight sweep over tp x micro-batch marks the rows that run out of memory", "[cli][sweep]") {
  const std::string s = foresight::test::data_path("scenarios/gpt_tp_sweep.json");
  const std::string csv = scratch("tp-sweep.csv");
  const auto r = run_foresight("sweep " + s + " --vary plan.tp=1,2,4 --micro-batch 4,8 --csv " + csv + " --jobs 1");
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::ifstream in(csv);
  std::string header;
  std::getline(in, header);
  auto column = [&](const std::string& name) {
    std::size_t index = 0, pos = 0;
    while (true) {
      const std::size_t comma = header.find(',', pos);
      if (header.substr(pos, comma - pos) == name) return index;
      REQUIRE(comma != std::string::npos);
      pos = comma + 1;
      ++index;
    }
  };
  const std::size_t mb = column("micro_batch"), tp = column("plan.tp"), peak = column("peak_bytes"), oom = column("oom");
  std::map<std::pair<int, int>, double> peaks;
  int rows = 0, ooms = 0;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::size_t pos = 0;
    while (true) {
      const std::size_t comma = line.find(',', pos);
      f.push_back(line.substr(pos, comma - pos));
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    const double bytes = std::stod(f[peak]);
    // The verdict is the peak against the A100's 40 GiB.
    REQUIRE((f[oom] == "1") == (bytes > 40.0 * (1LL << 30)));
    ooms += f[oom] == "1";
    peaks[{std::stoi(f[mb]), std::stoi(f[tp])}] = bytes;
    ++rows;
  }
  REQUIRE(rows == 6);
  REQUIRE(ooms > 0);
  REQUIRE(ooms < rows);
  // Progress says which ran out of memory, and the sweep names the fastest that fits.
  std::size_t marked = 0;
  for (std::size_t at = r.out.find("OUT OF MEMORY (peak"); at != std::string::npos; at = r.out.find("OUT OF MEMORY (peak", at + 1)) {
    ++marked;
  }
  REQUIRE(marked == static_cast<std::size_t>(ooms));
  REQUIRE(r.out.find("sweep: best that fits: ") != std::string::npos);
  for (const int m : {4, 8}) {
    // Tensor parallelism shards weights, optimizer states and activations: the peak falls.
    REQUIRE(peaks.at({m, 2}) < peaks.at({m, 1}));
    REQUIRE(peaks.at({m, 4}) < peaks.at({m, 2}));
  }
}

TEST_CASE("foresight plan: the best plans, a row simulate can run, and why the rest were left out", "[cli][sweep]") {
  const std::string s = foresight::test::data_path("scenarios/plan_gpt2.json");
  const std::string space = " --tp 1,2 --pp 1,2 --micro-batches 1,2,8 --recompute none --zero 0 --sequence-parallel off";
  const auto r = run_foresight("plan " + s + space + " --top 3");
  REQUIRE(r.status == 0);
  REQUIRE(r.out.find("   1  tp ") != std::string::npos);
  REQUIRE(r.out.find("18 plans:") != std::string::npos);  // tp 2 x (pp 1, pp 2 x virtual stages 1, 2) x 3 batches
  REQUIRE(r.out.find("invalid") != std::string::npos);     // dp 8 x micro-batch 8 > global batch 32
  REQUIRE(r.out.find("/plan/global_batch") != std::string::npos);
  // The best row, run by simulate with the flags the planner printed, takes the planner's time.
  const auto j = run_foresight("plan " + s + space + " --json");
  REQUIRE(j.status == 0);
  const auto search = nlohmann::json::parse(j.out.substr(j.out.find('{')));
  const auto& best = search.at("plans").at(0);
  REQUIRE(best.at("status") == "best");
  std::string sets;
  for (const auto& set : best.at("set")) sets += " --set " + set.get<std::string>();
  const auto sim = nlohmann::json::parse(run_foresight("simulate " + s + sets + " --json").out);
  REQUIRE(sim.at("iteration_time_s").get<double>() == best.at("iteration_s").get<double>());
  for (const auto& [flags, says] : std::vector<std::pair<std::string, std::string>>{
           {" --tp 0", "--tp: expected integers >= 1"},
           {" --memory-margin 1.5", "--memory-margin: expected a fraction in [0, 1)"},
           {" --sequence-parallel maybe", "expected on or off"},
           {" --expert-tp 0", "--expert-tp: expected tp or an integer >= 1, found \"0\""}}) {
    const auto bad = run_foresight("plan " + s + flags);
    REQUIRE(bad.status == 1);
    REQUIRE(bad.out.find(says) != std::string::npos);
  }
  // With experts, the CSV says each row's expert TP: tp's (2) or whole experts (1).
  const auto csv = std::filesystem::temp_directory_path() / "foresight-cli-test-plan-moe.csv";
  const auto moe = run_foresight("plan " + foresight::test::data_path("scenarios/plan_tiny_moe.json") +
                                 " --tp 2 --pp 1 --ep 4 --micro-batches 1 --recompute none --zero 1 "
                                 "--sequence-parallel on --expert-tp tp,1 --csv " + csv.string());
  REQUIRE(moe.status == 0);
  const std::string text = slurp(csv.string());
  std::filesystem::remove(csv);
  REQUIRE(text.find(",sequence_parallel,ep,expert_tp,bound_s,") != std::string::npos);
  REQUIRE(text.find(",true,4,2,") != std::string::npos);  // tp 2 x ep 4: dp 1
  REQUIRE(text.find(",true,4,1,") != std::string::npos);  // whole experts: dp 2
}

TEST_CASE("foresight sweep keeps an earlier default sweep.csv and checks --plot before running", "[cli][sweep]") {
  const auto dir = std::filesystem::temp_directory_path() / "foresight-cli-test" / "default-csv";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string s = std::filesystem::absolute(small_ddp()).string();
  const auto shell = [&](const std::string& args) { return foresight::test::run_foresight_in(dir.string(), args); };
  REQUIRE(shell("sweep " + s + " --gpus 2,4").status == 0);
  const std::string first = slurp((dir / "sweep.csv").string());
  const auto again = shell("sweep " + s + " --gpus 2,8");
  REQUIRE(again.status == 1);
  REQUIRE_THAT(again.out, Catch::Contains("sweep.csv exists") && Catch::Contains("--force"));
  REQUIRE(slurp((dir / "sweep.csv").string()) == first);
  REQUIRE(shell("sweep " + s + " --gpus 2,8 --force").status == 0);
  REQUIRE(slurp((dir / "sweep.csv").string()) != first);
  // --plot needs --gpus: refused before any configuration runs.
  const auto plot = shell("sweep " + s + " --micro-batch 16,32 --plot p.svg --csv other.csv");
  REQUIRE(plot.status == 1);
  REQUIRE_THAT(plot.out, Catch::Contains("--plot: the sweep must vary --gpus"));
  REQUIRE(plot.out.find("sweep: [") == std::string::npos);
  REQUIRE_FALSE(std::filesystem::exists(dir / "other.csv"));
}

TEST_CASE("simulate --cluster takes a preset or a topology file", "[cli][simulate]") {
  const std::string topology = foresight::test::source_path("examples/topologies/ring4.json");
  const auto on_file = run_foresight("simulate " + small_ddp() + " --cluster " + topology + " --gpus 4");
  INFO(on_file.out);
  REQUIRE(on_file.status == 0);
  REQUIRE_THAT(on_file.out, Catch::Contains("4 x "));
  const auto on_preset = run_foresight("simulate " + small_ddp() + " --cluster dgx-h100 --gpus 8");
  REQUIRE(on_preset.status == 0);
  REQUIRE_THAT(on_preset.out, Catch::Contains("8 x H100-SXM5-80GB"));
}
