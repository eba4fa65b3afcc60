// Compute under communication: the slowdown per kernel family comes from the measured H100 and H200 files
// by the rule docs/models.md states, and the simulation applies it where measured only.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/compute_model.hpp"
#include "run/calibration.hpp"
#include "run/scenario.hpp"
#include "run/simulation.hpp"
#include "topologies/gpu_spec.hpp"

using namespace foresight;
using nlohmann::json;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

std::vector<json> measured_rows(const std::string& file) {
  const char* root = std::getenv("FORESIGHT_SOURCE_ROOT");
  REQUIRE(root != nullptr);
  std::ifstream in(std::filesystem::path(root) / "validate/data/comm_compute_overlap" / file);
  REQUIRE(in.good());
  std::vector<json> rows;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(json::parse(line));
  }
  REQUIRE(rows.size() > 10);
  const auto device = rows.front().at("device").get<std::string>();
  REQUIRE(device.find(file.substr(0, 4) == "h100" ? "H100" : "H200") != std::string::npos);
  REQUIRE(rows.front().at("sms").get<int>() == 132);
  return rows;
}

strategy::SimulationOutput simulate_contention(const std::string& preset, const json& plan_extra) {
  // GPT-2 medium-sized layers, DDP on 8 GPUs with small buckets: the all-reduces overlap the
  // backward pass's GEMMs and memory-bound kernels.
  json doc{{"model", {{"name", "gpt2-medium"}}},
           {"cluster", {{"preset", preset}, {"gpus", 8}}},
           {"plan", {{"dp", 8}, {"micro_batch", 8}, {"precision", "amp_bf16"}, {"optimizer", "adam"}, {"steps", 3}}},
           {"workload", {{"steps", 3}}}};
  for (const auto& [k, v] : plan_extra.items()) doc["plan"][k] = v;
  strategy::SimulationInputs inputs;
  inputs.collectives = run::default_collective_config();
  return strategy::simulate_scenario(strategy::parse_scenario(doc, "contention.json"), inputs);
}

}  // namespace

TEST_CASE("the Hopper slowdowns are the measured medians at NCCL's two DGX H100 operating points", "[contention]") {
  // One node's ring: 24 channels, as fast as the CTAs go; multi-node: 16 channels at 100 GB/s.
  const auto at_point = [](const json& r) {
    if (r.value("kind", "") != "victim_with_comm") return false;
    const int ctas = r.at("ctas").get<int>();
    const double rate = r.at("target_gbps").get<double>();
    return (ctas == 24 && rate == 0.0) || (ctas == 16 && rate == 100.0);
  };
  std::map<std::string, std::vector<double>> family;
  for (const std::string gpu : {"h100", "h200"}) {
    for (const json& r : measured_rows(gpu + "-emulated-nccl.jsonl")) {  // cuBLAS GEMMs and an axpy
      if (!at_point(r)) continue;
      const bool axpy = r.at("victim").get<std::string>().rfind("axpy", 0) == 0;
      family[axpy ? "memory" : "gemm"].push_back(r.at("slowdown").get<double>());
    }
    for (const json& r : measured_rows(gpu + "-emulated-nccl-torch.jsonl")) {  // PyTorch's kernels, by family
      if (at_point(r)) family[r.at("family").get<std::string>()].push_back(r.at("slowdown").get<double>());
    }
  }
  REQUIRE(family.size() == 4);
  REQUIRE(family["gemm"].size() == 24);  // five cuBLAS shapes and a torch matmul at two points, two GPUs
  REQUIRE(family["conv"].size() == 16);
  REQUIRE(family["attention"].size() == 8);
  REQUIRE(family["memory"].size() == 8);
  CHECK(median(family["gemm"]) == Approx(strategy::kHopperCommSlowdownGemm).margin(5e-4));
  CHECK(median(family["conv"]) == Approx(strategy::kHopperCommSlowdownConv).margin(5e-4));
  CHECK(median(family["attention"]) == Approx(strategy::kHopperCommSlowdownAttention).margin(5e-4));
  CHECK(median(family["memory"]) == Approx(strategy::kHopperCommSlowdownMemory).margin(5e-4));

  const auto by_type = strategy::comm_slowdown_by_type(strategy::compute_constants(topo::find_gpu_spec("H100-SXM5-80GB")));
  const auto of = [&](sim::OpType t) { return by_type[static_cast<std::size_t>(t)]; };
  REQUIRE(of(sim::OpType::gemm) == strategy::kHopperCommSlowdownGemm);
  for (const auto t : {sim::OpType::conv_fprop, sim::OpType::conv_dgrad, sim::OpType::conv_wgrad}) {
    REQUIRE(of(t) == strategy::kHopperCommSlowdownConv);
  }
  REQUIRE(of(sim::OpType::attention) == strategy::kHopperCommSlowdownAttention);
  REQUIRE(of(sim::OpType::memory) == strategy::kHopperCommSlowdownMemory);
  REQUIRE(strategy::comm_slowdown_by_type(strategy::compute_constants(topo::find_gpu_spec("H200-SXM-141GB"))) == by_type);
  // Unmeasured architectures slow nothing.
  for (const char* name : {"A100-SXM4-80GB", "V100-SXM2-32GB", "B200-SXM-180GB"}) {
    INFO(name);
    const auto other = strategy::comm_slowdown_by_type(strategy::compute_constants(topo::find_gpu_spec(name)));
    REQUIRE(std::all_of(other.begin(), other.end(), [](double f) { return f == 0.0; }));
  }
}

TEST_CASE("on Hopper a collective launched during a GEMM waits for that GEMM, not for the queue", "[contention]") {
  // h1?0-launch-wait.jsonl: ~25 ms of kernels queued, the collective launched 5 ms in. Beside
  // GEMMs its CTAs become resident within one GEMM's duration (never behind the queue; 5% for
  // the timing's noise: a GEMM's duration is timed apart) and typically after a large part of
  // one; beside the axpy, after a few percent of one.
  for (const std::string gpu : {"h100", "h200"}) {
    INFO(gpu);
    std::map<std::string, std::vector<double>> fraction;  // wait / one kernel's duration
    for (const json& r : measured_rows(gpu + "-launch-wait.jsonl")) {
      if (r.value("kind", "") != "launch_wait" || !r.at("victims_still_queued").get<bool>()) continue;
      const auto victim = r.at("victim").get<std::string>();
      fraction[victim.rfind("axpy", 0) == 0 ? "memory" : "gemm"].push_back(r.at("all_ctas_us").get<double>() /
                                                                           r.at("victim_us").get<double>());
    }
    REQUIRE(fraction["gemm"].size() >= 40);
    REQUIRE(fraction["memory"].size() == 9);
    REQUIRE(*std::max_element(fraction["gemm"].begin(), fraction["gemm"].end()) < 1.05);
    REQUIRE(median(fraction["gemm"]) > 0.25);
    REQUIRE(*std::max_element(fraction["memory"].begin(), fraction["memory"].end()) < 0.1);
  }
  // Hence: on Hopper, GEMMs hold a collective's SMs; nothing else does, and nothing elsewhere.
  const auto waits = strategy::comm_waits_by_type(strategy::compute_constants(topo::find_gpu_spec("H100-SXM5-80GB")));
  for (int t = 0; t < sim::kOpTypeCount; ++t) {
    REQUIRE(waits[static_cast<std::size_t>(t)] == (static_cast<sim::OpType>(t) == sim::OpType::gemm));
  }
  const auto a100 = strategy::comm_waits_by_type(strategy::compute_constants(topo::find_gpu_spec("A100-SXM4-80GB")));
  REQUIRE(std::none_of(a100.begin(), a100.end(), [](bool w) { return w; }));
}

TEST_CASE("measured contention slows overlapped H100 compute, by at most the matrix factor of the communication",
          "[contention]") {
  const auto off = simulate_contention("dgx-h100", json{{"comm_contention", "off"}});
  const auto on = simulate_contention("dgx-h100", json::object());
  const auto uniform = simulate_contention("dgx-h100", json{{"comm_compute_slowdown", strategy::kHopperCommSlowdownGemm}});
  const double t_off = off.report.iteration_time_s;
  const double t_on = on.report.iteration_time_s;
  REQUIRE(t_on > t_off);
  // A kernel slowed by s while communication runs loses at most s / (1 + s) of each overlapped
  // second, and a step overlaps at most its communication time; s is at most the GEMMs' factor.
  // Each communication op may also wait for one running GEMM (at most its slowed duration).
  double comm_s = 0.0;
  for (const auto& r : on.report.per_rank) comm_s = std::max(comm_s, r.comm_s);
  REQUIRE(comm_s > 0.0);
  const sim::ExecutionGraph& graph = on.compiled.graph;
  double longest_gemm = 0.0;
  std::size_t comm_ops = 0;
  for (const sim::Node& n : graph.nodes) {
    if (n.rank != 0) continue;
    if (n.kind == sim::OpKind::collective || n.kind == sim::OpKind::send || n.kind == sim::OpKind::recv) ++comm_ops;
    if (n.kind == sim::OpKind::compute && n.signature != sim::kNoSignature &&
        graph.signatures[n.signature].type == sim::OpType::gemm) {
      longest_gemm = std::max(longest_gemm, n.duration.seconds());
    }
  }
  const double s = strategy::kHopperCommSlowdownGemm;
  const double waits = static_cast<double>(comm_ops) / 3.0 * longest_gemm * (1.0 + s);  // 3 steps simulated
  REQUIRE(t_on - t_off <= comm_s * s / (1.0 + s) + waits);
  // Every kernel at the GEMMs' factor, the largest, is at least as slow as each at its own.
  REQUIRE(uniform.report.iteration_time_s >= t_on);
}

TEST_CASE("contention changes nothing where it was not measured (A100)", "[contention]") {
  const auto off = simulate_contention("dgx-a100", json{{"comm_contention", "off"}});
  const auto on = simulate_contention("dgx-a100", json::object());
  REQUIRE(on.result.makespan == off.result.makespan);
  REQUIRE(on.report.iteration_time_s == off.report.iteration_time_s);
}

TEST_CASE("comm_contention rejects an unknown value", "[contention]") {
  REQUIRE_THROWS_WITH(simulate_contention("dgx-h100", json{{"comm_contention", "some"}}),
                      Catch::Matchers::Contains("comm_contention") && Catch::Matchers::Contains("measured"));
}
