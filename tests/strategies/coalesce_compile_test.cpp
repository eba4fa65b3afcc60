// Kernel coalescing as the strategies use it (sim::ExecutionGraph::add_kernel): every strategy's
// graph is built once, coalesced (no builder reads the end of a kernel that later kernels joined,
// which would force a second build one node per kernel), and reports what one node per kernel
// reports, bit for bit. Runs may join a layer's data- and weight-gradient kernels.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <string>

#include "run/report.hpp"
#include "run/simulation.hpp"
#include "tests/test_paths.hpp"

using namespace foresight;
using nlohmann::json;

namespace {

json small_gpt(const json& plan, int gpus, const json& model = {{"name", "gpt3-125m"}, {"seq_len", 512}}) {
  json p = {{"micro_batch", 2}, {"precision", "amp_bf16"}, {"optimizer", "adam"}, {"steps", 2}, {"fused_attention", true}};
  p.update(plan);
  return {{"model", model},
          {"cluster", {{"preset", "dgx-a100"}, {"gpus", gpus}}},
          {"plan", p},
          {"workload", {{"steps", 1}}}};
}

strategy::SimulationOutput simulate_kernels(const json& doc, bool coalesce) {
  strategy::SimulationInputs in;
  in.coalesce_kernels = coalesce;
  return strategy::simulate_scenario(strategy::parse_scenario(doc, "coalesce.json"), in);
}

/// Whether some node's run holds both a weight-gradient kernel and another kernel.
bool joins_wgrad(const sim::ExecutionGraph& g) {
  for (const sim::Node& n : g.nodes) {
    if (n.run == sim::kNoRun) continue;
    bool wgrad = false, other = false;
    for (std::uint32_t j = 0; j < g.kernels(n); ++j) {
      const std::uint32_t sig = g.part_signature[g.part(n, j)];
      if (sig >= g.signatures.size()) continue;
      (g.signatures[sig].kernel.find("wgrad") != std::string::npos ? wgrad : other) = true;
    }
    if (wgrad && other) return true;
  }
  return false;
}

void same_report_coalesced(const json& doc) {
  const auto apart = simulate_kernels(doc, false);
  const auto fast = simulate_kernels(doc, true);
  CHECK_FALSE(apart.compiled.coalesced);
  CHECK(fast.compiled.coalesced);  // built once: no second build one node per kernel
  CHECK(fast.compiled.graph.nodes.size() < apart.compiled.graph.nodes.size());
  CHECK(joins_wgrad(fast.compiled.graph));
  CHECK(fast.report.iteration_time_s == apart.report.iteration_time_s);
  json a = strategy::to_json(apart.report, apart.plan);
  json b = strategy::to_json(fast.report, fast.plan);
  for (json* r : {&a, &b}) {
    (*r)["simulation"].erase("events");
    (*r)["simulation"].erase("fingerprint");
  }
  CHECK(a == b);
}

}  // namespace

TEST_CASE("every strategy compiles coalesced in one build, with the report of one node per kernel", "[training][coalesce]") {
  SECTION("DDP and Horovod") {
    same_report_coalesced(small_gpt({{"dp", 16}, {"global_batch", 32}}, 16));
    same_report_coalesced(small_gpt({{"dp", 16}, {"global_batch", 32}, {"framework", "horovod"}}, 16));
  }
  SECTION("TP without SP, each recompute mode") {
    for (const char* recompute : {"none", "selective", "full", "selective_op"}) {
      CAPTURE(recompute);
      same_report_coalesced(small_gpt({{"dp", 4}, {"tp", 4}, {"global_batch", 16}, {"recompute", recompute}}, 16));
    }
  }
  SECTION("TP with SP, with and without TP communication overlap") {
    // A model large enough that a GEMM's launch takes less than the kernel before it runs, so
    // that the overlapped GEMM could join that kernel.
    for (const bool overlap : {false, true}) {
      CAPTURE(overlap);
      same_report_coalesced(small_gpt({{"dp", 4}, {"tp", 4}, {"sequence_parallel", true}, {"tp_comm_overlap", overlap},
                                       {"global_batch", 16}, {"recompute", "selective"}},
                                      16, {{"name", "gpt3-1.3b"}, {"seq_len", 2048}}));
    }
  }
  SECTION("ZeRO-1, and ZeRO-3 with FSDP's schedule, full and hybrid shard") {
    same_report_coalesced(small_gpt({{"dp", 16}, {"zero", 1}, {"global_batch", 32}}, 16));
    same_report_coalesced(small_gpt({{"dp", 16}, {"zero", 3}, {"global_batch", 32}}, 16));
    same_report_coalesced(small_gpt({{"dp", 16}, {"zero", 3}, {"shard_group", 8}, {"global_batch", 32}}, 16));
  }
  SECTION("pipelines: 1F1B with full recompute and TP, interleaved with SP") {
    same_report_coalesced(small_gpt({{"dp", 2}, {"pp", 4}, {"tp", 2}, {"global_batch", 16}, {"schedule", "1f1b"},
                          {"recompute", "full"}, {"partition", "uniform"}}, 16));
    same_report_coalesced(small_gpt({{"dp", 2}, {"pp", 4}, {"tp", 2}, {"sequence_parallel", true}, {"global_batch", 16},
                          {"schedule", "interleaved"}, {"virtual_stages", 3}, {"partition", "uniform"}}, 16));
  }
}
