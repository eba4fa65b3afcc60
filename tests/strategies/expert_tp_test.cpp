// Expert tensor parallelism (plan.expert_tp, Megatron-Core's expert_tensor_parallel_size): whole
// experts and experts split over part of each TP group, their EP and expert-TP groups, the
// dispatcher's gathers, memory, errors, and exact folding.
#include <catch2/catch.hpp>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "run/scenario.hpp"
#include "run/simulation.hpp"
#include "tests/strategies/moe_fixtures.hpp"

using namespace foresight;
using namespace foresight::test::moe;
using Catch::Matchers::Contains;
using nlohmann::json;

TEST_CASE("Expert TP 1 under TP 2: whole experts, EP groups across the TP ranks, each routing its own tokens",
          "[training][moe][expert_tp]") {
  // Megatron-Core with expert_tensor_parallel_size 1 (token_dispatcher.py, the alltoall
  // dispatcher): each TP rank routes its 1/t of the sequence (sequence parallelism) over an EP
  // group of ep ranks in the expert order tp-ep-dp, here tp 2 x 2 replicas, and runs its experts
  // whole, with no tensor-parallel collective around them. 8 GPUs: dp (the experts' data-parallel
  // size) = 8 / (ep 4 x expert_tp 1) = 2, so 4 dense replicas of TP 2.
  const json plan = {{"tp", 2}, {"ep", 4}, {"expert_tp", 1}, {"sequence_parallel", true}, {"global_batch", 16},
                     {"fold", false}, {"zero", 1}};
  const auto out = run(tiny(plan, 8));
  json same_tp = plan;
  same_tp.erase("expert_tp");
  const auto ref = run(tiny(same_tp, 8));  // expert TP = TP (dp 1: the same 4 replicas of TP 2)
  REQUIRE(out.report.iteration_time_s > 0.0);
  const auto& g = out.compiled.graph;
  const double h = 512, f = 1024, tokens = 2.0 * 256 / 2;  // micro-batch 2 x 256 over tp 2
  // Communicator GPUs of rank 0's all-to-alls and of its experts' gradients (ZeRO-1's
  // reduce-scatter of the expert bucket).
  std::set<std::vector<sim::GpuId>> a2a_groups;
  double a2a_bytes = 0.0;
  int expert_tp_collectives = 0;
  std::map<std::string, int> up_tokens;  // expert kernel -> its tokens (m)
  for (const auto& n : g.nodes) {
    const std::string& name = g.names[n.name];
    if (n.kind == sim::OpKind::collective && n.op == sim::CollectiveOp::all_to_all) {
      std::vector<sim::GpuId> gpus;
      for (const auto r : g.communicators[n.communicator].ranks) gpus.push_back(g.rank_gpu[r]);
      a2a_groups.insert(gpus);
      if (n.rank == 0) a2a_bytes = n.bytes;
    }
    if (n.kind == sim::OpKind::collective && name.find("mlp.experts") != std::string::npos &&
        n.op != sim::CollectiveOp::all_to_all) {
      ++expert_tp_collectives;
    }
    if (n.rank == 0 && n.kind == sim::OpKind::compute && name.find("expert_up_fwd") != std::string::npos) {
      up_tokens[name] = static_cast<int>(g.signatures[n.signature].shape[0]);
      REQUIRE(g.signatures[n.signature].shape[1] == 2 * f);  // the gate/up projection whole
    }
  }
  // EP rank j + 2 x (replica's place in its pair): GPUs {0..3} and {4..7} (placement tp-dp-pp).
  REQUIRE(a2a_groups == std::set<std::vector<sim::GpuId>>{{0, 1, 2, 3}, {4, 5, 6, 7}});
  REQUIRE(expert_tp_collectives == 0);
  // Each EP rank sends its tokens x top 2 assignments, h bf16 values each; NCCL's size is the
  // mean per rank, balanced: tokens x 2 x h x 2 bytes.
  REQUIRE(a2a_bytes == Approx(tokens * 2 * h * 2));
  // Each of a rank's 2 experts gets 4 ranks x tokens x 2 / 8 experts.
  REQUIRE(!up_tokens.empty());
  for (const auto& [name, m] : up_tokens) REQUIRE(m == Approx(4 * tokens * 2 / 8));
  // With expert TP = TP each rank sends its own tokens too (the same all-to-all), then the TP
  // pair gathers what both received for their half-experts, which run twice the tokens, and
  // reduce-scatters the outputs before the all-to-all back: in this order, forward.
  const auto& rg = ref.compiled.graph;
  std::vector<std::string> order;
  for (const auto& n : rg.nodes) {
    const std::string& name = rg.names[n.name];
    if (n.rank != 0 || n.micro_batch != 0 || n.phase != sim::Phase::forward) continue;
    if (name.find("h.0.mlp.experts") == std::string::npos) continue;
    if (n.kind == sim::OpKind::collective) {
      order.push_back(std::string(sim::to_string(n.op)));
      if (n.op == sim::CollectiveOp::all_to_all) REQUIRE(n.bytes == Approx(a2a_bytes));
      if (n.op == sim::CollectiveOp::all_gather || n.op == sim::CollectiveOp::reduce_scatter) {
        REQUIRE(n.bytes == Approx(2 * (4 * tokens * 2 / 8) * 2 * h * 2));  // tp x 2 experts' tokens x h bf16
      }
    } else if (n.kind == sim::OpKind::compute && name.find("sort_chunks") != std::string::npos) {
      // Megatron-Core's sort by local expert (2 here) after the dispatch, and back before the
      // combine, over every token the rank's experts run.
      order.push_back(name.substr(name.rfind('.') + 1));
      REQUIRE(rg.signatures[n.signature].shape[0] == 2 * 2 * (4 * tokens * 2 / 8));
    } else if (n.kind == sim::OpKind::compute && name.find("expert_up_fwd") != std::string::npos) {
      order.push_back("expert_up_fwd");
      REQUIRE(rg.signatures[n.signature].shape[0] == 2 * (4 * tokens * 2 / 8));
      REQUIRE(rg.signatures[n.signature].shape[1] == f);  // the gate/up projection split over TP 2
    }
  }
  const std::vector<std::string> layer{"all_to_all",    "all_gather",        "moe_sort_chunks", "expert_up_fwd",
                                       "expert_up_fwd", "moe_unsort_chunks", "reduce_scatter",  "all_to_all"};
  std::vector<std::string> steps = layer;  // the first micro-batch of each of the 2 steps
  steps.insert(steps.end(), layer.begin(), layer.end());
  REQUIRE(order == steps);
  // Weights: a rank holds 1/ep of the experts whole instead of 1/(ep x tp) of them.
  const double experts_all = 4 * 8 * expert_params(h, f);  // 4 layers of 8
  REQUIRE(out.report.memory[0].bytes.weights - ref.report.memory[0].bytes.weights ==
          Approx(experts_all * (1.0 / 4 - 1.0 / 8) * 2).epsilon(1e-9));
  // Saved activations: split over TP 2, each half-expert keeps every token it runs, the pair's
  // gathered tokens, whole (their FFN activations split); whole experts keep their own tokens.
  // The difference: 4 layers x micro-batch 2 x 256 x top 2 assignments x h bf16, half of it.
  REQUIRE(ref.report.memory[0].bytes.activations - out.report.memory[0].bytes.activations ==
          Approx(4 * 2 * 256 * 2 * h * 2 * 0.5).epsilon(1e-9));
  // Dispatch and combine buffers (balanced): the tokens a rank sends, its half of micro-batch 2
  // x 256 x top 2, h bf16 each, and receives: as many with whole experts, twice as many (the TP
  // pair's, gathered) with experts split; DDP's gradient buckets besides (ZeRO-1: one copy).
  const double sent_bytes = tokens * 2 * h * 2;
  REQUIRE(out.report.memory[0].bytes.buffers - out.report.memory[0].bytes.gradients == Approx(2 * sent_bytes));
  REQUIRE(ref.report.memory[0].bytes.buffers - ref.report.memory[0].bytes.gradients == Approx(3 * sent_bytes));
  // The experts' data-parallel group: the same EP rank in the other EP group, GPUs {0, 4}.
  bool expert_group = false;
  for (const auto& n : g.nodes) {
    if (n.rank != 0 || n.kind != sim::OpKind::collective || n.op != sim::CollectiveOp::reduce_scatter) continue;
    std::vector<sim::GpuId> gpus;
    for (const auto r : g.communicators[n.communicator].ranks) gpus.push_back(g.rank_gpu[r]);
    expert_group = expert_group || gpus == std::vector<sim::GpuId>{0, 4};
  }
  REQUIRE(expert_group);
  // Folding: every rank alike (balanced) folds to one; skewed routing folds whole EP groups and
  // not the TP ranks. Each gives the unfolded answer bit for bit, on both network models.
  json at64 = plan;
  at64["ep"] = 8;
  at64["pp"] = 2;
  at64["global_batch"] = 64;
  require_exact_folding(at64, 64, 2, 16);
  // Refused: an expert TP between 1 and tp, an EP group that does not span whole TP groups, no
  // sequence parallelism.
  json bad = tiny({{"tp", 4}, {"ep", 4}, {"expert_tp", 3}, {"sequence_parallel", true}}, 8);
  REQUIRE_THROWS_WITH(run(bad), Contains("/plan/expert_tp") && Contains("expected a divisor of tp = 4") &&
                                    Contains("found 3"));
  bad = tiny({{"tp", 4}, {"ep", 2}, {"expert_tp", 1}, {"sequence_parallel", true}}, 8);
  REQUIRE_THROWS_WITH(run(bad), Contains("/plan/ep") && Contains("multiple of tp / expert_tp = 4 / 1 = 4") &&
                                    Contains("found 2"));
  bad = tiny({{"tp", 2}, {"ep", 4}, {"expert_tp", 1}}, 8);
  REQUIRE_THROWS_WITH(run(bad), Contains("/plan/sequence_parallel") && Contains("expert_tp 1"));
  bad = tiny({{"tp", 2}, {"expert_tp", 1}, {"sequence_parallel", true}}, 8);
  REQUIRE_THROWS_WITH(run(bad), Contains("/plan/expert_tp") && Contains("expected tp (2) with ep = 1"));
  // The GPU count is dp x expert_tp x pp x ep: 8 GPUs leave dp 2, and a mismatch names the formula.
  REQUIRE(strategy::parse_scenario(tiny({{"tp", 2}, {"ep", 4}, {"expert_tp", 1}, {"sequence_parallel", true}}, 8),
                                   "moe.json").plan.dp == 2);
  bad = tiny({{"tp", 2}, {"ep", 4}, {"expert_tp", 1}, {"sequence_parallel", true}, {"dp", 4}}, 8);
  REQUIRE_THROWS_WITH(run(bad), Contains("dp x expert_tp x pp x ep x cp = 4 x 1 x 1 x 4 x 1 = 16"));
}

TEST_CASE("Expert TP 2 under TP 4: experts split over TP pairs, EP groups across the pairs", "[training][moe][expert_tp]") {
  // Megatron-Core's expert order tp-ep-dp with expert TP e = 2 of TP 4: a rank's expert-TP group
  // is its TP pair, its EP group the ranks with its place in the pair of ep e / tp = 2 replicas
  // (EP rank (j + 4 x place) / 2). 16 GPUs: dp = 16 / (ep 4 x e 2) = 2, 4 dense replicas.
  const json plan = {{"tp", 4}, {"ep", 4}, {"expert_tp", 2}, {"sequence_parallel", true}, {"global_batch", 16},
                     {"fold", false}};
  const auto out = run(tiny(plan, 16));
  const auto& g = out.compiled.graph;
  const double h = 512, f = 1024, tokens = 2.0 * 256 / 4;  // a TP rank's share of micro-batch 2 x 256
  const double per_expert = 4 * tokens * 2 / 8;            // 4 EP ranks x top 2 over 8 experts
  std::set<std::vector<sim::GpuId>> a2a, gathers;
  for (const auto& n : g.nodes) {
    if (n.kind != sim::OpKind::collective) continue;
    const std::string& name = g.names[n.name];
    std::vector<sim::GpuId> gpus;
    for (const auto r : g.communicators[n.communicator].ranks) gpus.push_back(g.rank_gpu[r]);
    if (n.op == sim::CollectiveOp::all_to_all) {
      a2a.insert(gpus);
      if (n.rank == 0) REQUIRE(n.bytes == Approx(tokens * 2 * h * 2));
    }
    if (name.find("dispatched tokens") != std::string::npos) {
      gathers.insert(gpus);
      // The pair's received tokens for the rank's 2 experts, h bf16 each.
      if (n.rank == 0) REQUIRE(n.bytes == Approx(2 * 2 * per_expert * h * 2));
    }
    if (n.rank == 0 && n.kind == sim::OpKind::compute && name.find("expert_up_fwd") != std::string::npos) {
      REQUIRE(g.signatures[n.signature].shape[0] == 2 * per_expert);  // the pair's tokens
      REQUIRE(g.signatures[n.signature].shape[1] == 2 * f / 2);       // the gate/up projection halved
    }
  }
  REQUIRE(a2a == std::set<std::vector<sim::GpuId>>{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}});
  REQUIRE(gathers == std::set<std::vector<sim::GpuId>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13},
                                                       {14, 15}});
  // A rank holds 1/ep of the experts, each halved.
  json whole = plan;
  whole["expert_tp"] = 1;
  whole["dp"] = 4;  // the same 16 GPUs: dp x pp x ep = 4 x 1 x 4
  const auto w = run(tiny(whole, 16));
  const double experts_all = 4 * 8 * expert_params(h, f);
  REQUIRE(w.report.memory[0].bytes.weights - out.report.memory[0].bytes.weights ==
          Approx(experts_all * (1.0 / 4 - 1.0 / 8) * 2).epsilon(1e-9));
  // Folding equals the unfolded run, balanced or skewed, on both network models.
  json at32 = plan;
  at32["pp"] = 2;
  at32["global_batch"] = 32;
  require_exact_folding(at32, 32, 2, 16);
}
