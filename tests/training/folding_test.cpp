// Rank folding (DESIGN.md, "Identical ranks"): simulating replica 0 and TP rank 0 of each stage
// for every identical rank gives the unfolded run's answer, and folds only what is identical.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "strategies/hybrid_layout.hpp"
#include "strategies/simulation.hpp"
#include "topologies/cluster_builders.hpp"

using namespace foresight;
using nlohmann::json;

namespace {

/// GPT-3 Small on two DGX A100 nodes (16 GPUs).
json scenario(const json& plan) {
  json p = {{"micro_batch", 2},        {"precision", "amp_bf16"}, {"optimizer", "adam"},
            {"steps", 2},              {"fused_attention", true}};
  p.update(plan);
  return {{"model", {{"name", "gpt3-125m"}, {"seq_len", 512}}},
          {"cluster", {{"preset", "dgx-a100"}, {"gpus", 16}}},
          {"plan", p},
          {"workload", {{"steps", 1}}}};
}

strategy::SimulationOutput run(json doc, bool fold) {
  doc["plan"]["fold"] = fold;
  strategy::SimulationInputs in;
  return strategy::simulate_scenario(strategy::parse_scenario(doc, "fold.json"), in);
}

/// Folded and unfolded runs of `doc` agree on everything a report says about time and memory.
void same_answer(const json& doc, int simulated) {
  const auto full = run(doc, false);
  const auto folded = run(doc, true);
  REQUIRE(full.report.simulated_ranks == full.report.gpus);
  REQUIRE(full.report.folding.empty());
  REQUIRE(folded.report.simulated_ranks == simulated);
  REQUIRE(!folded.report.folding.empty());
  // Bit for bit: every copy of a collective or transfer runs in the folded run too.
  REQUIRE(folded.report.iteration_time_s == full.report.iteration_time_s);
  REQUIRE(folded.result.makespan == full.result.makespan);
  REQUIRE(folded.report.breakdown.exposed_comm_s == full.report.breakdown.exposed_comm_s);
  REQUIRE(folded.report.peak_bytes_max() == full.report.peak_bytes_max());
  // Each simulated rank reports what the rank on its GPU reported in the full run.
  for (const auto& m : folded.report.memory) {
    const auto& twin = full.report.memory[static_cast<std::size_t>(m.gpu)];
    REQUIRE(twin.gpu == m.gpu);
    REQUIRE(m.bytes.total() == twin.bytes.total());
  }
  int represented = 0;
  for (const auto& b : folded.report.per_rank) {
    represented += b.represents;
    REQUIRE(b.iteration_s == full.report.per_rank[static_cast<std::size_t>(b.gpu)].iteration_s);
  }
  REQUIRE(represented == full.report.gpus);
  // And the folded graph is smaller by the fold.
  REQUIRE(folded.compiled.graph.nodes.size() * static_cast<std::size_t>(full.report.gpus) ==
          full.compiled.graph.nodes.size() * static_cast<std::size_t>(simulated));
}

}  // namespace

TEST_CASE("folding data-parallel replicas and TP ranks gives the unfolded answer", "[training][fold]") {
  for (const char* network : {"flow", "analytical"}) {
    CAPTURE(network);
    SECTION(std::string("dp 4 x tp 4, DDP, ") + network) {
      same_answer(scenario({{"dp", 4}, {"tp", 4}, {"global_batch", 16}, {"network", network}}), 1);
    }
    SECTION(std::string("dp 8 x tp 2 with sequence parallelism and ZeRO-1, ") + network) {
      same_answer(scenario({{"dp", 8}, {"tp", 2}, {"sequence_parallel", true}, {"zero", 1}, {"global_batch", 32},
                            {"network", network}}),
                  1);
    }
    SECTION(std::string("dp 2 x pp 2 x tp 4, 1F1B, ") + network) {
      same_answer(scenario({{"dp", 2}, {"pp", 2}, {"tp", 4}, {"global_batch", 16}, {"schedule", "1f1b"},
                            {"partition", "uniform"}, {"network", network}}),
                  2);
    }
    SECTION(std::string("pp 4 x tp 4, the pipeline crossing nodes between stages 1 and 2, ") + network) {
      same_answer(scenario({{"dp", 1}, {"pp", 4}, {"tp", 4}, {"global_batch", 8}, {"schedule", "1f1b"},
                            {"partition", "uniform"}, {"network", network}}),
                  4);
    }
    SECTION(std::string("dp 4 x pp 4, interleaved, data-parallel groups across both nodes, ") + network) {
      same_answer(scenario({{"dp", 4}, {"pp", 4}, {"global_batch", 32}, {"schedule", "interleaved"},
                            {"virtual_stages", 3}, {"partition", "uniform"}, {"network", network}}),
                  4);
    }
  }
}

TEST_CASE("only ranks that sit alike fold", "[training][fold]") {
  strategy::Plan p;
  p.dp = 5;
  p.tp = 1;
  SECTION("a replica that straddles two nodes keeps every replica") {
    // pp 3 on 8-GPU nodes: replica 2 runs on GPUs 6, 7 and 8.
    const auto c = topo::resolve_cluster("dgx-a100", 16);
    const strategy::HybridLayout l(p, 3, c);
    REQUIRE_FALSE(l.folds_dp());
    REQUIRE(l.simulated_ranks() == 15);
    REQUIRE(l.describe().empty());
  }
  SECTION("TP groups split across nodes keep every TP rank") {
    p.dp = 2;
    p.tp = 6;  // GPUs 6..11 form replica 1's TP group, across nodes 0 and 1
    const auto c = topo::resolve_cluster("dgx-a100", 16);
    const strategy::HybridLayout l(p, 1, c);
    REQUIRE_FALSE(l.folds_tp());
  }
  SECTION("mixed GPU models fold nothing") {
    // ThetaGPU's last two nodes hold 80 GB A100s.
    p.dp = 192;
    const auto c = topo::resolve_cluster("thetagpu", 192);
    REQUIRE_FALSE(strategy::HybridLayout(p, 1, c).folds_dp());
    p.dp = 64;
    REQUIRE(strategy::HybridLayout(p, 1, c).folds_dp());
  }
  SECTION("fold: false keeps every rank") {
    p.dp = 4;
    p.tp = 2;
    p.fold = false;
    const auto c = topo::resolve_cluster("dgx-a100", 8);
    const strategy::HybridLayout l(p, 1, c);
    REQUIRE(l.simulated_ranks() == 8);
  }
  SECTION("GPT-3 175B's 3D layout on 1024 A100s simulates one rank per stage") {
    p.dp = 16;
    p.tp = 8;
    const auto c = topo::resolve_cluster("selene", 1024);
    const strategy::HybridLayout l(p, 8, c);
    REQUIRE(l.folds_dp());
    REQUIRE(l.folds_tp());
    REQUIRE(l.simulated_ranks() == 8);
    REQUIRE(l.describe() == "8 of 1024 ranks simulated (data-parallel replicas and tensor-parallel ranks folded)");
  }
}
