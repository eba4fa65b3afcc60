// Every strategy with collectives in closed form (collectives/comm_jobs.hpp) gives the answer of the run
// that simulates every flow, bit for bit, on the flow-level network, and of the run that samples
// links on the analytical one; and a folded run's cost does not grow with the data-parallel size.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "run/simulation.hpp"
#include "tests/test_paths.hpp"

using namespace foresight;
using nlohmann::json;

namespace {

json scenario(const json& plan, int gpus, const json& model = {{"name", "gpt3-125m"}, {"seq_len", 512}}) {
  json p = {{"micro_batch", 2}, {"precision", "amp_bf16"}, {"optimizer", "adam"}, {"steps", 2}, {"fused_attention", true}};
  p.update(plan);
  return {{"model", model}, {"cluster", {{"preset", "dgx-a100"}, {"gpus", gpus}}}, {"plan", p}, {"workload", {{"steps", 1}}}};
}

strategy::SimulationOutput run_closed_form(const json& doc, bool closed_form) {
  strategy::SimulationInputs in;
  in.closed_form = closed_form;
  return strategy::simulate_scenario(strategy::parse_scenario(doc, "closed_form.json"), in);
}

/// Closed form and flow by flow agree on every operation's start and end.
void same_run(const json& doc) {
  const auto slow = run_closed_form(doc, false);
  const auto fast = run_closed_form(doc, true);
  REQUIRE(fast.result.makespan == slow.result.makespan);
  REQUIRE(fast.report.iteration_time_s == slow.report.iteration_time_s);
  REQUIRE(fast.result.end.size() == slow.result.end.size());
  std::size_t differ = 0;
  for (std::size_t n = 0; n < fast.result.end.size(); ++n) {
    differ += fast.result.start[n] != slow.result.start[n] || fast.result.end[n] != slow.result.end[n];
  }
  REQUIRE(differ == 0);
  REQUIRE(fast.result.jobs_closed_form > 0);
  if (doc["plan"].value("network", "flow") == "analytical") {
    // Jobs never meet on the analytical network: they run in closed form with links sampled
    // too (the slow run's reason to exist), each as its groups alone take.
    REQUIRE(slow.result.jobs_closed_form == fast.result.jobs_closed_form);
    REQUIRE(slow.result.events == fast.result.events);
    return;
  }
  REQUIRE(slow.result.jobs_closed_form == 0);
  REQUIRE(fast.result.events < slow.result.events);
}

}  // namespace

TEST_CASE("collectives in closed form give every strategy the flow-by-flow answer", "[training]") {
  const json moe = {{"hf_config", test::data_path("hf/tiny-mixtral/config.json")}};
  for (const char* network : {"flow", "analytical"}) {
    CAPTURE(network);
    SECTION(std::string("DDP with tensor parallelism, ") + network) {
      same_run(scenario({{"dp", 4}, {"tp", 4}, {"global_batch", 16}, {"network", network}}, 16));
    }
    SECTION(std::string("ZeRO-1 with sequence parallelism, ") + network) {
      same_run(scenario({{"dp", 8}, {"tp", 2}, {"zero", 1}, {"sequence_parallel", true}, {"global_batch", 32},
                         {"network", network}}, 16));
    }
    SECTION(std::string("FSDP full shard and hybrid shard, ") + network) {
      same_run(scenario({{"dp", 16}, {"zero", 3}, {"global_batch", 32}, {"network", network}}, 16));
      same_run(scenario({{"dp", 16}, {"zero", 3}, {"shard_group", 8}, {"global_batch", 32}, {"network", network}}, 16));
    }
    SECTION(std::string("3D: interleaved pipeline across nodes with TP and DP, ") + network) {
      same_run(scenario({{"dp", 2}, {"pp", 4}, {"tp", 2}, {"global_batch", 16}, {"schedule", "interleaved"},
                         {"virtual_stages", 3}, {"partition", "uniform"}, {"placement", "tp-dp-pp"},
                         {"network", network}}, 16));
    }
    SECTION(std::string("unfolded GPipe, every rank simulated, ") + network) {
      same_run(scenario({{"dp", 2}, {"pp", 4}, {"global_batch", 16}, {"schedule", "gpipe"}, {"partition", "uniform"},
                         {"fold", false}, {"network", network}}, 8));
    }
    SECTION(std::string("expert parallelism across nodes with skewed routing, ") + network) {
      json doc = scenario({{"ep", 8}, {"dp", 2}, {"global_batch", 32}, {"moe_routing", {{"distribution", "zipf"}, {"s", 1.2}}},
                           {"network", network}}, 16, moe);
      doc["cluster"]["preset"] = "dgx-h100";
      doc["plan"]["fused_attention"] = false;
      same_run(doc);
    }
  }
}

TEST_CASE("a crowded ring with several steps on their way stays flow by flow, with the same answer", "[training]") {
  // Experts on two nodes of 16 GB200s whose NVSwitch ports are slow and distant (a test
  // topology): ZeRO-1's reduce-scatter over 4 replicas x ep 8 runs 16 rings whose flows crowd
  // each GPU's port, and its small steps take less time than a hop's latency, so a hop carries
  // several finished steps at once. When the all-to-alls that crowded it ended, the job's return
  // to closed form took its state, which keeps one step's send time per hop, and the run stopped
  // ("more than one step on its way on a hop"; first seen with 72 rings on two GB200 racks, before
  // rings followed NCCL's search). Now such a job stays flow by flow, with the flow-by-flow answer.
  json doc = scenario({{"ep", 8}, {"dp", 4}, {"zero", 1}, {"global_batch", 64}, {"precision", "bf16"},
                       {"fused_attention", false}, {"network", "flow"}},
                      32, {{"hf_config", test::data_path("hf/tiny-mixtral/config.json")}});
  doc["cluster"] = {{"topology", test::data_path("topologies/two-nodes-slow-nvswitch.json")}};
  same_run(doc);
}

TEST_CASE("a folded run costs the same events from 2 to 256 data-parallel replicas", "[training]") {
  // GPT-3 Medium with TP 8 in each DGX node of selene and ZeRO-1 across the nodes: the graph has
  // one simulated rank, and every collective takes its closed form whatever the replicas its
  // groups stand for (TP on NVLink, the data-parallel rings on the NICs: nothing contends).
  auto events = [](int dp, int zero, const char* network) {
    const json doc = {{"model", {{"name", "gpt3-350m"}, {"seq_len", 512}}},
                      {"cluster", {{"preset", "selene"}, {"gpus", dp * 8}}},
                      {"plan",
                       {{"dp", dp}, {"tp", 8}, {"micro_batch", 1}, {"global_batch", dp * 2}, {"zero", zero},
                        {"precision", "bf16"}, {"optimizer", "adam"}, {"steps", 2}, {"network", network}}},
                      {"workload", {{"steps", 1}}}};
    const auto out = run_closed_form(doc, true);
    REQUIRE(out.report.simulated_ranks == 1);
    REQUIRE(out.result.jobs_flow_by_flow == 0);
    return out.result.events;
  };
  for (const char* network : {"flow", "analytical"}) {
    for (const int zero : {0, 1, 3}) {
      CAPTURE(network, zero);
      const auto base = events(2, zero, network);
      REQUIRE(events(32, zero, network) == base);
      REQUIRE(events(256, zero, network) == base);
    }
  }
}
