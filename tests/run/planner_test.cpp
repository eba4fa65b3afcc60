// The planner: the plan it ranks first is the fastest of those that fit, checked against
// simulating every candidate directly; its bounds are lower bounds; its memory limit and its
// reasons for leaving plans out hold.
#include <catch2/catch.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "exec/graph_check.hpp"
#include "run/calibration.hpp"
#include "run/simulation.hpp"
#include "models/model_zoo.hpp"
#include "run/planner.hpp"
#include "tests/test_paths.hpp"
#include "topologies/cluster_builders.hpp"

using namespace foresight;
using nlohmann::json;
using Status = strategy::PlanRow::Status;

namespace {

strategy::PlanSpace small_space() {
  strategy::PlanSpace s;
  s.tp = {1, 2};
  s.pp = {1, 2};
  s.virtual_stages = {1};
  s.micro_batch = {1, 2, 4, 8};
  s.recompute = {"none", "full"};
  s.zero = {0};
  s.sequence_parallel = {false};
  return s;
}

strategy::SimulationInputs inputs() {
  strategy::SimulationInputs in;
  in.collectives = run::default_collective_config();
  return in;
}

/// Runs `row`'s plan through `simulate` with its --set flags on `path`, requires the planner's
/// time, and that the memory floor the planner prunes with is below the compiled peak. Returns the
/// scenario and the run.
std::pair<strategy::Scenario, strategy::SimulationOutput> simulate_row(const std::string& path,
                                                                       const strategy::PlanRow& row) {
  std::vector<strategy::Override> sets;
  for (const auto& s : row.sets()) sets.push_back(strategy::parse_override(s));
  auto scenario = strategy::load_scenario(path, sets);
  auto direct = strategy::simulate_scenario(scenario, inputs());
  REQUIRE(direct.report.iteration_time_s == row.iteration_s);
  REQUIRE(strategy::plan_memory_floor(strategy::plan_model(scenario, scenario.plan), scenario.plan) <=
          direct.report.peak_bytes_max());
  return {std::move(scenario), std::move(direct)};
}

}  // namespace

TEST_CASE("the planner's best plan is the fastest that fits, as direct simulation finds", "[planner]") {
  const std::string path = test::data_path("scenarios/plan_gpt2.json");
  strategy::PlanOptions options;
  options.top = 100;  // nothing pruned: every valid plan simulated
  const auto search = strategy::search_plans(path, {}, small_space(), options, inputs());
  // 2 x 2 x 4 x 2 combinations.
  REQUIRE(search.rows.size() == 32);
  REQUIRE(search.rows.front().status == Status::best);
  double fastest = std::numeric_limits<double>::infinity();
  int invalid = 0;
  for (const auto& row : search.rows) {
    INFO(row.label << ": " << row.reason);
    if (row.status == Status::invalid) {
      ++invalid;
      REQUIRE_FALSE(row.reason.empty());
      continue;
    }
    REQUIRE((row.status == Status::best || row.status == Status::fits));
    // The bound is a lower bound, the plan's --set flags reproduce its time, and the memory floor
    // is below the compiled peak.
    REQUIRE(row.bound_s <= row.iteration_s);
    const auto [scenario, direct] = simulate_row(path, row);
    fastest = std::min(fastest, direct.report.iteration_time_s);
  }
  REQUIRE(search.rows.front().iteration_s == fastest);
  // dp 8 x micro-batch 8 is 64 samples per step, more than the global batch of 32.
  REQUIRE(invalid > 0);
  bool batch_reason = false;
  for (const auto& row : search.rows) batch_reason = batch_reason || row.reason.find("/plan/global_batch") == 0;
  REQUIRE(batch_reason);
}

TEST_CASE("plans are pruned only when their lower bound cannot enter the best", "[planner]") {
  const std::string path = test::data_path("scenarios/plan_gpt2.json");
  strategy::PlanOptions options;
  options.top = 1;
  options.jobs = 1;
  const auto search = strategy::search_plans(path, {}, small_space(), options, inputs());
  strategy::PlanOptions all;
  all.top = 100;
  const auto full = strategy::search_plans(path, {}, small_space(), all, inputs());
  REQUIRE(search.rows.front().iteration_s == full.rows.front().iteration_s);
  for (const auto& row : search.rows) {
    if (row.status == Status::bound) REQUIRE(row.bound_s >= search.rows.front().iteration_s);
  }
  REQUIRE(search.simulated <= full.simulated);
}

TEST_CASE("the chain of ops in order bounds what it prunes and what it lets through", "[planner]") {
  // With a threshold from the first candidate on (top 1, one thread), every compiled candidate
  // that passes its FLOPs and stream bounds gets the path bound: for the simulated ones it is
  // at most their time, and some are pruned by it alone, with the same best as a full search.
  const std::string path = test::data_path("scenarios/plan_gpt2.json");
  strategy::PlanOptions one;
  one.top = 1;
  one.jobs = 1;
  const auto search = strategy::search_plans(path, {}, small_space(), one, inputs());
  strategy::PlanOptions all;
  all.top = 100;
  const auto full = strategy::search_plans(path, {}, small_space(), all, inputs());
  REQUIRE(search.rows.front().label == full.rows.front().label);
  REQUIRE(search.rows.front().iteration_s == full.rows.front().iteration_s);
  int by_path = 0, simulated_with_path = 0;
  for (const auto& row : search.rows) {
    INFO(row.label << ": " << row.reason);
    if (row.status == Status::best || row.status == Status::fits) {
      REQUIRE(row.bound_s <= row.iteration_s);
      simulated_with_path += row.bound_by == strategy::PlanRow::Bound::path;
    }
    if (row.status == Status::bound && row.bound_by == strategy::PlanRow::Bound::path) {
      ++by_path;
      REQUIRE(row.bound_s >= search.rows.front().iteration_s);
      REQUIRE(row.reason.find("chain of ops in order") != std::string::npos);
      // Simulated, it is indeed no faster than the best.
      bool found = false;
      for (const auto& f : full.rows) {
        if (f.label != row.label) continue;
        found = true;
        REQUIRE(f.iteration_s >= row.bound_s);
      }
      REQUIRE(found);
    }
  }
  REQUIRE(by_path > 0);
  REQUIRE(simulated_with_path > 0);
}

TEST_CASE("on several threads, what is pruned depends on the candidates' order alone, not on timing",
          "[planner]") {
  // Candidate i is weighed against the candidates before i - (jobs + 7), whichever thread ends
  // first: repeated searches on 3 threads give the same rows, and the same best as one thread.
  const std::string path = test::data_path("scenarios/plan_gpt2.json");
  strategy::PlanOptions one;
  one.top = 1;
  one.jobs = 1;
  const auto serial = strategy::search_plans(path, {}, small_space(), one, inputs());
  strategy::PlanOptions three = one;
  three.jobs = 3;
  const auto first = strategy::search_plans(path, {}, small_space(), three, inputs());
  REQUIRE(first.rows.front().status == Status::best);
  REQUIRE(first.rows.front().label == serial.rows.front().label);
  REQUIRE(first.rows.front().iteration_s == serial.rows.front().iteration_s);
  // Three threads see less before each candidate than one does: they prune no more.
  REQUIRE(first.simulated >= serial.simulated);
  int pruned = 0;
  for (const auto& row : first.rows) {
    if (row.status != Status::bound) continue;
    ++pruned;
    REQUIRE(row.bound_s >= first.rows.front().iteration_s);
  }
  REQUIRE(pruned > 0);
  for (int repeat = 0; repeat < 3; ++repeat) {
    const auto again = strategy::search_plans(path, {}, small_space(), three, inputs());
    REQUIRE(again.rows.size() == first.rows.size());
    REQUIRE(again.simulated == first.simulated);
    REQUIRE(again.compiled == first.compiled);
    for (std::size_t k = 0; k < first.rows.size(); ++k) {
      INFO(first.rows[k].label);
      REQUIRE(again.rows[k].label == first.rows[k].label);
      REQUIRE(again.rows[k].status == first.rows[k].status);
      REQUIRE(again.rows[k].reason == first.rows[k].reason);
      REQUIRE(again.rows[k].iteration_s == first.rows[k].iteration_s);
    }
  }
}

TEST_CASE("a memory margin leaves out plans whose peak passes it", "[planner]") {
  const std::string path = test::data_path("scenarios/plan_gpt2.json");
  strategy::PlanOptions options;
  options.memory_margin = 0.999;  // 40 MiB of an 40 GiB GPU: nothing fits
  const auto search = strategy::search_plans(path, {}, small_space(), options, inputs());
  REQUIRE(search.simulated == 0);
  int memory = 0;
  for (const auto& row : search.rows) {
    REQUIRE(row.status != Status::best);
    REQUIRE(row.status != Status::fits);
    if (row.status == Status::memory) {
      ++memory;
      REQUIRE(row.peak_bytes > row.capacity * (1.0 - options.memory_margin));
    }
  }
  REQUIRE(memory > 0);
}

TEST_CASE("for a model with experts the planner searches ep too, with ZeRO-1 sharding expert states", "[planner]") {
  const std::string path = test::data_path("scenarios/plan_tiny_moe.json");
  strategy::PlanSpace space;
  space.tp = {1};
  space.pp = {1};
  space.virtual_stages = {1};
  space.micro_batch = {1, 2};
  space.recompute = {"none"};
  space.zero = {0, 1};
  space.sequence_parallel = {false};
  // space.ep left empty: the default, the powers of two up to 64 that divide the 8 experts.
  strategy::PlanOptions options;
  options.top = 100;
  const auto search = strategy::search_plans(path, {}, space, options, inputs());
  REQUIRE(search.rows.size() == 4 * 2 * 2);  // ep 1, 2, 4, 8 x micro-batch x ZeRO
  std::map<int, int> by_ep;
  double fastest = std::numeric_limits<double>::infinity();
  for (const auto& row : search.rows) {
    INFO(row.label << ": " << row.reason);
    REQUIRE((row.status == Status::best || row.status == Status::fits));  // every one is valid and fits
    const int ep = row.plan.at("ep").get<int>();
    ++by_ep[ep];
    REQUIRE(row.plan.at("dp").get<int>() == 8 / ep);
    REQUIRE(row.label.find(fmt::format(" ep {} ", ep)) != std::string::npos);
    // Its time reproduced, and the memory floor (experts' states over dp under ZeRO-1) below its
    // compiled peak.
    const auto [scenario, direct] = simulate_row(path, row);
    // Taken on the model before the plan's kernels (unfused attention keeps its scores) it was
    // not one: this scenario runs fused attention.
    if (row.plan.at("ep").get<int>() == 8 && row.plan.at("micro_batch").get<int>() == 2 &&
        row.plan.at("zero").get<int>() == 0) {
      REQUIRE(strategy::plan_memory_floor(strategy::scenario_model(scenario), scenario.plan) >
              direct.report.peak_bytes_max());
    }
    fastest = std::min(fastest, direct.report.iteration_time_s);
  }
  REQUIRE(by_ep == std::map<int, int>{{1, 4}, {2, 4}, {4, 4}, {8, 4}});
  REQUIRE(search.rows.front().iteration_s == fastest);
  // With expert_tp 1 in the base plan, every TP 2 candidate with experts keeps them whole: its TP
  // ranks are EP ranks, so ep ranks take ep GPUs (dp = 8 / ep), and its time is reproduced.
  space.tp = {2};
  space.ep = {2, 4, 8};
  space.zero = {1};
  space.micro_batch = {1};
  space.sequence_parallel = {true};
  const auto whole = strategy::search_plans(path, {strategy::parse_override("plan.expert_tp=1")}, space, options,
                                            inputs());
  REQUIRE(whole.rows.size() == 3);
  for (const auto& row : whole.rows) {
    INFO(row.label << ": " << row.reason);
    REQUIRE((row.status == Status::best || row.status == Status::fits));
    const int ep = row.plan.at("ep").get<int>();
    REQUIRE(row.plan.at("expert_tp").get<int>() == 1);
    REQUIRE(row.plan.at("dp").get<int>() == 8 / ep);
    REQUIRE(row.label.find("expert_tp 1") != std::string::npos);
    std::vector<strategy::Override> sets{strategy::parse_override("plan.expert_tp=1")};
    for (const auto& set : row.sets()) sets.push_back(strategy::parse_override(set));
    const auto direct = strategy::simulate_scenario(strategy::load_scenario(path, sets), inputs());
    REQUIRE(direct.report.iteration_time_s == row.iteration_s);
  }
  // Without it the default tries both: experts split as TP (tp 2 x ep takes 2 ep GPUs: ep 2 and
  // 4 fit on 8) and whole (ep 2, 4 and 8), each reproduced.
  const auto both = strategy::search_plans(path, {}, space, options, inputs());
  std::map<std::pair<int, bool>, int> by_variant;  // (ep, whole) -> dp
  for (const auto& row : both.rows) {
    INFO(row.label << ": " << row.reason);
    REQUIRE((row.status == Status::best || row.status == Status::fits));
    const bool whole_experts = row.plan.contains("expert_tp");
    by_variant[{row.plan.at("ep").get<int>(), whole_experts}] = row.plan.at("dp").get<int>();
    simulate_row(path, row);
  }
  REQUIRE(by_variant == std::map<std::pair<int, bool>, int>{{{2, false}, 2}, {{4, false}, 1}, {{2, true}, 4},
                                                             {{4, true}, 2}, {{8, true}, 1}});
  // An expert TP between 1 and tp: experts split over TP pairs at tp 4 (ep 4 x 2 = 8 GPUs: dp 1).
  space.tp = {4};
  space.ep = {4};
  space.expert_tp = {2};
  const auto pairs = strategy::search_plans(path, {}, space, options, inputs());
  REQUIRE(pairs.rows.size() == 1);
  REQUIRE((pairs.rows.front().status == Status::best));
  REQUIRE(pairs.rows.front().plan.at("expert_tp").get<int>() == 2);
  REQUIRE(pairs.rows.front().plan.at("dp").get<int>() == 1);
  simulate_row(path, pairs.rows.front());
  // A dense model's space has ep 1 only, and its labels do not name it.
  const auto dense = strategy::default_plan_space(strategy::build_model("gpt2"), topo::resolve_cluster("dgx-a100", 8));
  REQUIRE(dense.ep == std::vector<int>{1});
}

TEST_CASE("a candidate whose replicas sit in several ways is bounded on one block of them first", "[planner]") {
  // GPT-3 Small on 36 GPUs of DGX A100 nodes, pp 3: twelve 3-GPU replicas in five placements
  // (tests/strategies/folding_test.cpp). One replica standing for all (plan.fold_as_alike) gives
  // the plan's memory and a chain of ops no longer than the whole graph's, on a fifth of the ranks.
  json doc = {{"model", {{"name", "gpt3-125m"}, {"seq_len", 512}}},
              {"cluster", {{"preset", "dgx-a100"}, {"gpus", 36}}},
              {"plan",
               {{"tp", 1}, {"pp", 3}, {"dp", 12}, {"micro_batch", 1}, {"global_batch", 72}, {"precision", "amp_bf16"},
                {"optimizer", "adam"}, {"steps", 2}, {"fused_attention", true}, {"network", "analytical"},
                {"partition", "uniform"}}},
              {"workload", {{"steps", 1}}}};
  auto scenario = strategy::parse_scenario(doc, "bounds.json");
  const auto whole = strategy::compile_scenario(scenario, inputs());
  scenario.plan.fold_as_alike = true;
  const auto block = strategy::compile_scenario(scenario, inputs());
  scenario.plan.fold_as_alike = false;
  REQUIRE_FALSE(whole.compiled.bounds_only);
  REQUIRE(block.compiled.bounds_only);
  REQUIRE(whole.compiled.graph.ranks() == 15);
  REQUIRE(block.compiled.graph.ranks() == 3);
  // The same peak memory, stage by stage (GPU g runs stage g mod 3).
  const auto peaks = [](const strategy::SimulationOutput& out) {
    std::map<int, double> by_stage;
    for (const auto& m : out.report.memory) {
      double& p = by_stage[m.gpu % 3];
      p = std::max(p, m.bytes.total());
    }
    return by_stage;
  };
  REQUIRE(peaks(block) == peaks(whole));
  // Rank 0's chain: the same ops and own groups, fewer members to wait for across replicas.
  const auto rates = strategy::line_rates(*whole.cluster, inputs().collectives.links);
  const sim::RankId first = 0;
  const auto chain = [&](const strategy::SimulationOutput& out) {
    return strategy::path_bounds(out.compiled, sim::check_graph(out.compiled.graph, *out.cluster), scenario.plan, rates,
                                 {&first, 1})
        .front();
  };
  const double block_chain = chain(block);
  REQUIRE(block_chain > 0.0);
  REQUIRE(block_chain <= chain(whole));
  const auto run = strategy::simulate_compiled(whole, scenario, inputs());
  REQUIRE(block_chain <= run.report.iteration_time_s);
  // It bounds and is never simulated.
  REQUIRE_THROWS_AS(strategy::simulate_compiled(block, scenario, inputs()), sim::InternalError);

  // The search: pp 3 candidates are bounded on one replica first; the best and every plan's time
  // are those of a search that simulates them all (top 100: no threshold, nothing pruned), and
  // what it prunes is no faster than its bound.
  strategy::PlanSpace space;
  space.tp = {1};
  space.pp = {1, 3};
  space.virtual_stages = {1};
  space.micro_batch = {1, 2};
  space.recompute = {"none", "full"};
  space.zero = {0};
  space.sequence_parallel = {false};
  strategy::PlanOptions one;
  one.top = 1;
  one.jobs = 1;
  const auto search = strategy::search_document("bounds.json", doc, space, one, inputs());
  strategy::PlanOptions all;
  all.top = 100;
  const auto full = strategy::search_document("bounds.json", doc, space, all, inputs());
  REQUIRE(full.simulated == 8);
  REQUIRE(full.one_block == 0);  // no best to beat: only memory could leave one out, compiled whole
  // With a best to beat from the first candidate on (a pp 1 one, the lowest FLOPs bound), each
  // pp 3 one is bounded on one replica's graph, then (its bounds being loose here) on the whole
  // graph, and simulated; pp 1's 1-GPU replicas all sit alike.
  REQUIRE(search.one_block == 4);
  REQUIRE(search.rows.front().label == full.rows.front().label);
  REQUIRE(search.rows.front().iteration_s == full.rows.front().iteration_s);
  for (const auto& row : search.rows) {
    INFO(row.label << ": " << row.reason);
    const auto f = std::find_if(full.rows.begin(), full.rows.end(), [&](const auto& r) { return r.label == row.label; });
    REQUIRE(f != full.rows.end());
    if (row.status == Status::best || row.status == Status::fits) REQUIRE(row.iteration_s == f->iteration_s);
    if (row.status == Status::bound) REQUIRE(row.bound_s <= f->iteration_s);
  }
}
