// Rank folding (docs/architecture.md, "Identical ranks"): simulating replica 0 and TP rank 0 of each stage
// for every identical rank gives the unfolded run's answer, and folds only what is identical.
#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "strategies/hybrid_layout.hpp"
#include "tests/strategies/moe_fixtures.hpp"
#include "run/simulation.hpp"
#include "topologies/cluster_builders.hpp"
#include "topologies/topology_json.hpp"

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

strategy::SimulationOutput run_folded(json doc, bool fold) {
  doc["plan"]["fold"] = fold;
  strategy::SimulationInputs in;
  return strategy::simulate_scenario(strategy::parse_scenario(doc, "fold.json"), in);
}

/// Folded and unfolded runs of `doc` agree on everything a report says about time and memory.
void same_answer(const json& doc, int simulated) {
  const auto full = run_folded(doc, false);
  const auto folded = run_folded(doc, true);
  REQUIRE(full.report.simulated_ranks == full.report.gpus);
  REQUIRE(full.report.folding.empty());
  REQUIRE(folded.report.simulated_ranks == simulated);
  REQUIRE(!folded.report.folding.empty());
  // On the analytical network the run's own check agrees: every folded group ended with its
  // representative. (On the flow network some of these plans' TP pairs end apart, by 0.33 us
  // on dp 8 x tp 2 with ZeRO-1: the representative's pair is the slowest, so what is compared
  // here still agrees; the replicas it stands for would have run ahead.)
  if (doc["plan"].value("network", "flow") == "analytical") {
    REQUIRE(folded.report.folding_uneven == 0);
    REQUIRE(folded.report.folding_spread_s == 0.0);
  }
  // Bit for bit: every copy of a collective or transfer runs in the folded run too.
  REQUIRE(folded.report.iteration_time_s == full.report.iteration_time_s);
  REQUIRE(folded.result.makespan == full.result.makespan);
  REQUIRE(folded.report.breakdown.exposed_comm_s == full.report.breakdown.exposed_comm_s);
  REQUIRE(folded.report.peak_bytes_max() == full.report.peak_bytes_max());
  // Hardware FLOPs count each simulated rank's kernels once per GPU it stands for.
  REQUIRE(folded.report.hardware_tflops_per_gpu == Approx(full.report.hardware_tflops_per_gpu).epsilon(1e-12));
  // Each simulated rank reports what the rank on its GPU reported in the full run.
  auto on_gpu = [](const auto& list, int gpu) {
    const auto it = std::find_if(list.begin(), list.end(), [&](const auto& x) { return x.gpu == gpu; });
    REQUIRE(it != list.end());
    return *it;
  };
  for (const auto& m : folded.report.memory) REQUIRE(m.bytes.total() == on_gpu(full.report.memory, m.gpu).bytes.total());
  int represented = 0;
  for (const auto& b : folded.report.per_rank) {
    represented += b.represents;
    REQUIRE(b.iteration_s == on_gpu(full.report.per_rank, b.gpu).iteration_s);
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
    SECTION(std::string("dp 16, ZeRO-2, ") + network) {
      same_answer(scenario({{"dp", 16}, {"zero", 2}, {"global_batch", 32}, {"network", network}}), 1);
    }
    SECTION(std::string("dp 16, ZeRO-3 (FSDP full shard), ") + network) {
      same_answer(scenario({{"dp", 16}, {"zero", 3}, {"global_batch", 32}, {"network", network}}), 1);
    }
    SECTION(std::string("dp 16, FSDP hybrid shard in groups of 8, ") + network) {
      same_answer(scenario({{"dp", 16}, {"zero", 3}, {"shard_group", 8}, {"global_batch", 32}, {"network", network}}), 1);
    }
    SECTION(std::string("dp 8 x tp 2, ZeRO-3, ") + network) {
      same_answer(scenario({{"dp", 8}, {"tp", 2}, {"zero", 3}, {"global_batch", 16}, {"network", network}}), 1);
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
    SECTION(std::string("dp 2 x pp 2 x tp 4 placed tp-dp-pp (Megatron-Core's order), ") + network) {
      same_answer(scenario({{"dp", 2}, {"pp", 2}, {"tp", 4}, {"global_batch", 16}, {"schedule", "1f1b"},
                            {"partition", "uniform"}, {"placement", "tp-dp-pp"}, {"network", network}}),
                  2);
    }
    SECTION(std::string("dp 12 x pp 3 x tp 2 on 72 GPUs, replicas straddling nodes (three placements), ") + network) {
      json doc = scenario({{"dp", 12}, {"pp", 3}, {"tp", 2}, {"global_batch", 48}, {"schedule", "1f1b"},
                           {"partition", "uniform"}, {"zero", 1}, {"network", network}});
      doc["cluster"]["gpus"] = 72;
      // By placement on the analytical network only; on the flow network only the TP ranks fold.
      // 6-GPU replicas repeat every four (three nodes): replicas 4k and 4k + 3 sit inside a node
      // (at GPUs 0-5 and 2-7 of it: alike, the node's GPUs being interchangeable), 4k + 1 and
      // 4k + 2 straddle two nodes, each its own way.
      same_answer(doc, std::string(network) == "analytical" ? 9 : 36);
    }
    SECTION(std::string("dp 20 x pp 4 x tp 4 on 320 GB200s, 16-GPU replicas on 72-GPU racks (three placements), ") +
            network) {
      // Nine placements repeat every two racks: eight inside a rack, alike wherever in it, and
      // one split 8 + 8 across two; the fifth rack holds only 32 GPUs, so its replicas 18 and 19
      // are a placement of their own.
      json doc = scenario({{"dp", 20}, {"pp", 4}, {"tp", 4}, {"global_batch", 160}, {"schedule", "interleaved"},
                           {"virtual_stages", 3}, {"partition", "uniform"}, {"sequence_parallel", true},
                           {"network", network}});
      doc["cluster"] = {{"preset", "gb200-nvl72"}, {"gpus", 320}};
      same_answer(doc, std::string(network) == "analytical" ? 12 : 80);
    }
    SECTION(std::string("dp 4 x pp 4, interleaved, data-parallel groups across both nodes, ") + network) {
      same_answer(scenario({{"dp", 4}, {"pp", 4}, {"global_batch", 32}, {"schedule", "interleaved"},
                            {"virtual_stages", 3}, {"partition", "uniform"}, {"network", network}}),
                  4);
    }
  }
}

TEST_CASE("folding by placement gives the unfolded answer on the analytical network", "[training][fold]") {
  struct Layout {
    int gpus, tp, pp, dp, simulated;
    const char* why;
  };
  for (const Layout& l : {
           // 3-GPU replicas on 8-GPU nodes repeat every 8 replicas (three nodes): six inside a
           // node, alike, and two straddling (GPUs 6, 7 | 0 and 7 | 0, 1). Node 7 holds 4 GPUs, so
           // replicas 18 (straddling into it) and 19 (inside it) sit apart: 5 placements.
           Layout{60, 1, 3, 20, 15, "3-GPU replicas, a half-used last node"},
           // 6-GPU replicas repeat every 4 (three nodes), TP pairs inside a node: the two inside a
           // node sit alike, the two straddling each their own way: 3 placements.
           Layout{96, 2, 3, 16, 9, "6-GPU replicas on twelve nodes"},
           // 12-GPU replicas repeat every 2 (three nodes): 2 placements.
           Layout{72, 4, 3, 6, 6, "12-GPU replicas on nine nodes"},
       }) {
    CAPTURE(l.why);
    json doc = scenario({{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}, {"global_batch", l.dp * 2 * l.pp},
                         {"schedule", "1f1b"}, {"partition", "uniform"}, {"network", "analytical"}});
    doc["cluster"]["gpus"] = l.gpus;
    same_answer(doc, l.simulated);
    REQUIRE(run_folded(doc, true).report.folding.find("replicas by placement") != std::string::npos);
  }
}

TEST_CASE("experts, context-parallel and hybrid-sharding groups fold by placement in whole groups", "[training][fold]") {
  // Each on the analytical network, with replicas that sit in several ways; their subgroups are
  // blocks of consecutive replicas, and one block per placement is simulated.
  SECTION("context parallelism: cp 2 x dp 3 x pp 2 x tp 2 on 24 A100s (two placements of three CP groups)") {
    // Placed tp-dp-pp: stage 1 starts at GPU 12, so CP groups 0 (GPUs 0-3, 12-15) and 2 (8-11,
    // 20-23) sit alike and group 1 (4-7, 16-19) its own way.
    json doc = scenario({{"tp", 2}, {"cp", 2}, {"dp", 3}, {"pp", 2}, {"global_batch", 12}, {"schedule", "1f1b"},
                         {"partition", "uniform"}, {"network", "analytical"}});
    doc["cluster"]["gpus"] = 24;
    same_answer(doc, 8);
    REQUIRE(run_folded(doc, true).report.folding ==
            "8 of 24 ranks simulated (data-parallel replicas and tensor-parallel ranks folded; replicas by placement, 4 "
            "simulated)");
  }
  SECTION("hybrid sharding: dp 16 x tp 3 in shard groups of 8 on 48 A100s (TP groups straddle nodes)") {
    json doc = scenario({{"tp", 3}, {"dp", 16}, {"zero", 1}, {"shard_group", 8}, {"global_batch", 64},
                         {"network", "analytical"}});
    doc["cluster"]["gpus"] = 48;
    same_answer(doc, 24);
  }
  SECTION("experts: ep 2 on H100s placed tp-dp-pp, balanced and skewed routing, one EP group per placement") {
    struct Layout {
      int dp, gpus, simulated;
      const char* why;
    };
    for (const Layout& l : {
             // Replica d runs on GPUs d and d + 12, so each EP group's two GPUs of a stage share a
             // node, and every group's transfers between stages cross the same kinds of links
             // (from a node's GPU i to GPU i + 4 of another): one block of two replicas stands for
             // all six.
             Layout{6, 24, 4, "ep 2 x dp 6 x pp 2 on 24 H100s: one placement of six EP groups"},
             // Stage 1 starts at GPU 18, so EP group k's stages sit on GPUs 2k, 2k + 1 and 2k + 18,
             // 2k + 19: each stage's pair inside a node. Group 8's second stage is on node 4,
             // which holds only four of the plan's GPUs: a placement of its own; groups 0-7 are one.
             Layout{9, 36, 8, "ep 2 x dp 9 x pp 2 on 36 H100s: two placements of nine EP groups"},
         }) {
      for (const char* routing : {"balanced", "zipf"}) {
        CAPTURE(l.why, routing);
        json doc = test::moe::tiny({{"ep", 2}, {"dp", l.dp}, {"pp", 2}, {"global_batch", 8 * l.dp}, {"schedule", "1f1b"},
                                    {"partition", "uniform"}, {"moe_routing", {{"distribution", routing}}}},
                                   l.gpus);
        same_answer(doc, l.simulated);
        REQUIRE(run_folded(doc, true).report.folding ==
                fmt::format("{} of {} ranks simulated (expert-parallel groups folded; replicas by placement, {} simulated)",
                            l.simulated, l.gpus, l.simulated / 2));
      }
    }
  }
  SECTION("experts: ep 8 x dp 5 x pp 4 on 160 GB200s (EP groups inside racks, stages across them)") {
    // Placed tp-dp-pp, stage s holds GPUs 40s to 40s + 39: EP group k's stages sit on 8 GPUs of
    // one rack each, on racks 0, 0, 1, 1 (groups 0-2), 0, 0, 1, 2 (group 3) or 0, 1, 1, 2 (group
    // 4; the third rack holds 16 of the plan's GPUs). Where in a rack does not matter (groups 0-2
    // cross between racks from other NICs and leaf switches, of the same kinds); which racks
    // does: three placements.
    json doc = test::moe::tiny({{"ep", 8}, {"dp", 5}, {"pp", 4}, {"global_batch", 80}, {"schedule", "1f1b"},
                                {"partition", "uniform"}},
                               160);
    doc["cluster"]["preset"] = "gb200-nvl72";
    same_answer(doc, 96);
  }
  SECTION("experts across TP ranks: ep 4 x dp 3 x pp 2 x tp 2, expert TP 1, on 24 H100s") {
    // An EP group takes both TP ranks of two replicas (4 GPUs of a stage's 12, inside a node):
    // blocks of two replicas, all in one placement. TP ranks fold too where the routing is
    // balanced.
    for (const auto& [routing, simulated] : {std::pair{"balanced", 4}, std::pair{"zipf", 8}}) {
      CAPTURE(routing);
      same_answer(test::moe::tiny({{"ep", 4}, {"dp", 3}, {"pp", 2}, {"tp", 2}, {"expert_tp", 1},
                                   {"sequence_parallel", true}, {"global_batch", 48}, {"schedule", "1f1b"},
                                   {"partition", "uniform"}, {"moe_routing", {{"distribution", routing}}}},
                                  24),
                  simulated);
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
  SECTION("replicas that straddle nodes fold by placement") {
    // pp 3 on 8-GPU nodes: replica d starts at GPU 3d. Replicas inside one node (0, 1, 3, 4, 6,
    // 7, 8, 9) sit alike wherever in it, its GPUs being interchangeable behind the NVSwitch;
    // replicas 2 (GPUs 6, 7 | 8) and 5 (15 | 16, 17) straddle two nodes, each its own way. 36
    // GPUs leave node 4 half used: replicas 10 (GPUs 30, 31 | 32) and 11 (33-35) are simulated
    // too, as nothing else shares a half-used node.
    p.dp = 12;
    p.network = sim::NetworkKind::analytical;
    const auto c = topo::resolve_cluster("dgx-a100", 36);
    const strategy::HybridLayout l(p, 3, c);
    REQUIRE(l.folds_dp());
    REQUIRE(l.live_dp() == 5);
    const std::vector<int> live{0, 2, 5, 10, 11};
    for (int d = 0; d < 5; ++d) REQUIRE(l.real(d) == live[static_cast<std::size_t>(d)]);
    REQUIRE(l.simulated_ranks() == 15);
    REQUIRE(l.describe() == "15 of 36 ranks simulated (data-parallel replicas folded; replicas by placement, 5 simulated)");
    sim::ExecutionGraph g;
    l.add_ranks(g);
    REQUIRE(g.rank_gpu[9] == 30);  // simulated replica 3, stage 0: replica 10's GPU
    // Replica 0 stands for the other seven inside a node (their first stages' GPUs); replicas 2
    // and 10 for nothing else.
    REQUIRE(g.rank_mirrors[0] == std::vector<sim::GpuId>{3, 9, 12, 18, 21, 24, 27});
    REQUIRE(g.rank_mirrors[2] == std::vector<sim::GpuId>{5, 11, 14, 20, 23, 26, 29});
    REQUIRE(g.rank_mirrors[3].empty());
    REQUIRE(g.rank_mirrors[9].empty());
    // Stage 1's data-parallel group: the five simulated replicas, standing for all twelve.
    const auto dp = l.add_dp_communicator(g, 1, 0);
    REQUIRE(g.communicators[dp].ranks.size() == 5);
    REQUIRE(g.communicators[dp].ranks[3] == 10);
    std::vector<sim::GpuId> stage1;
    for (int d = 0; d < 12; ++d) stage1.push_back(static_cast<sim::GpuId>(3 * d + 1));
    REQUIRE(g.communicators[dp].groups == std::vector<std::vector<sim::GpuId>>{stage1});
    // The same plan on PCIe servers (GPUs in pairs under PCIe switches, no NVSwitch): a replica
    // inside a node sits alike only with those at the same local indices, so replicas 0 and 8
    // (GPUs 0-2 and 24-26) fold and replica 1 (3-5) does not: 10 placements.
    const strategy::HybridLayout pcie(p, 3, topo::resolve_cluster("pcie-8gpu", 36));
    REQUIRE(pcie.folds_dp());
    REQUIRE(pcie.live_dp() == 10);
    REQUIRE(pcie.real(1) == 1);
    // On the flow network replicas that straddle nodes differently are all simulated.
    p.network = sim::NetworkKind::flow;
    REQUIRE_FALSE(strategy::HybridLayout(p, 3, c).folds_dp());
    // The planner's bound (plan.fold_as_alike) takes replica 0 for all twelve, on either network:
    // one replica's ranks, standing for every group as if all sat alike, to bound and not to run.
    for (const auto network : {sim::NetworkKind::flow, sim::NetworkKind::analytical}) {
      p.network = network;
      p.fold_as_alike = true;
      const strategy::HybridLayout bound(p, 3, c);
      REQUIRE(bound.bounds_only());
      REQUIRE(bound.folds_dp());
      REQUIRE(bound.live_dp() == 1);
      REQUIRE(bound.simulated_ranks() == 3);
      REQUIRE(bound.describe() == "3 of 36 ranks simulated (data-parallel replicas folded; every placement as the first, to bound it)");
      sim::ExecutionGraph g;
      bound.add_ranks(g);
      REQUIRE(g.rank_mirrors[0].size() == 11);
      const auto dp = bound.add_dp_communicator(g, 1, 0);
      REQUIRE(g.communicators[dp].ranks.size() == 1);
      REQUIRE(g.communicators[dp].groups.front() == stage1);  // rank 0's own group, as in the whole graph
    }
    // Where every replica sits alike the flag changes nothing: the graph is the plan's own.
    p.dp = 4;  // pp 4: replicas on GPUs 0-3, 4-7, 8-11, 12-15
    const strategy::HybridLayout alike(p, 4, topo::resolve_cluster("dgx-a100", 16));
    REQUIRE(alike.folds_dp());
    REQUIRE_FALSE(alike.bounds_only());
  }
  SECTION("replicas inside NVSwitch nodes of other NVLink rates sit apart") {
    // Two 4-GPU nodes of one GPU model behind an NVSwitch each, node 1's NVLink at `rate1`:
    // replicas of pp 2 (GPUs 2d, 2d + 1) sit inside a node, alike wherever in it; on nodes of
    // other rates they do not sit alike.
    const auto two_nodes = [](const char* rate1) {
      json devices = json::array();
      json links = json::array();
      devices.push_back({{"id", "leaf0"}, {"kind", "ib_leaf"}});
      for (int n = 0; n < 2; ++n) {
        const std::string p = fmt::format("n{}.", n);
        devices.push_back({{"id", p + "cpu0"}, {"kind", "cpu"}, {"node", n}, {"vendor", "amd"}});
        devices.push_back({{"id", p + "nvswitch"}, {"kind", "nvswitch"}, {"node", n}});
        devices.push_back({{"id", p + "pcie0"}, {"kind", "pcie_switch"}, {"node", n}});
        devices.push_back({{"id", p + "nic0"}, {"kind", "nic"}, {"node", n}, {"rail", 0}, {"port_rate", "200 Gb/s"}});
        const auto link = [&](const std::string& a, const std::string& b, const char* bw, const char* cls) {
          links.push_back({{"from", a}, {"to", b}, {"bandwidth", bw}, {"latency", "150 ns"}, {"class", cls},
                           {"duplex", true}});
        };
        for (int g = 0; g < 4; ++g) {
          const std::string gpu = fmt::format("{}gpu{}", p, g);
          devices.push_back({{"id", gpu}, {"kind", "gpu"}, {"node", n}, {"local_index", g}, {"model", "A100-SXM4-80GB"}});
          link(gpu, p + "nvswitch", n == 0 ? "300 GB/s" : rate1, "nvlink");
          link(gpu, p + "pcie0", "31.5 GB/s", "pcie");
        }
        link(p + "nic0", p + "pcie0", "31.5 GB/s", "pcie");
        link(p + "pcie0", p + "cpu0", "31.5 GB/s", "pcie");
        link(p + "nic0", "leaf0", "200 Gb/s", "infiniband");
      }
      return topo::load_topology(json{{"name", "two-nvswitch-nodes"}, {"devices", devices}, {"links", links}}, "test");
    };
    p.dp = 4;
    p.network = sim::NetworkKind::analytical;
    const strategy::HybridLayout same(p, 2, two_nodes("300 GB/s"));
    REQUIRE(same.folds_dp());
    REQUIRE(same.live_dp() == 1);
    const strategy::HybridLayout other(p, 2, two_nodes("150 GB/s"));
    REQUIRE(other.folds_dp());
    REQUIRE(other.live_dp() == 2);
    REQUIRE(other.real(1) == 2);
  }
  SECTION("with hybrid sharding, replicas that straddle nodes fold by placement in whole shard groups") {
    // Shard groups are blocks of 8 replicas (24 GPUs, three whole nodes) and replica groups take
    // one replica of each: the two blocks sit alike, so block 0 stands for block 1, though its
    // own replicas sit each their own way (replica 2 runs on GPUs 6, 7 and 8).
    p.dp = 16;
    p.zero = 3;
    p.shard_group = 8;
    p.network = sim::NetworkKind::analytical;
    const auto c = topo::resolve_cluster("dgx-a100", 48);
    const strategy::HybridLayout l(p, 3, c);
    REQUIRE(l.folds_dp());
    REQUIRE(l.live_dp() == 8);
    for (int d = 0; d < 8; ++d) REQUIRE(l.real(d) == d);
    REQUIRE(l.describe() == "24 of 48 ranks simulated (data-parallel replicas folded; replicas by placement, 8 simulated)");
    sim::ExecutionGraph g;
    l.add_ranks(g);
    REQUIRE(g.rank_mirrors[l.rank(2, 1, 0)] == std::vector<sim::GpuId>{31});  // replica 10's stage 1
    // Simulated replica 3's shard group: the eight simulated replicas, standing for both blocks.
    const auto shard = l.add_dp_subgroup(g, 0, 0, 3, 8, true);
    REQUIRE(g.communicators[shard].ranks.size() == 8);
    REQUIRE(g.communicators[shard].groups.size() == 2);
    REQUIRE(g.communicators[shard].groups[1].front() == 24);  // replica 8, stage 0
    // Its replica group: replica 3 alone simulated, standing for replicas 3 and 11.
    const auto replica = l.add_dp_subgroup(g, 0, 0, 3, 8, false);
    REQUIRE(g.communicators[replica].ranks == std::vector<sim::RankId>{l.rank(3, 0, 0)});
    REQUIRE(g.communicators[replica].groups == std::vector<std::vector<sim::GpuId>>{{9, 33}});
    // On the flow network, only replicas that all sit alike fold.
    p.network = sim::NetworkKind::flow;
    REQUIRE_FALSE(strategy::HybridLayout(p, 3, c).folds_dp());
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

TEST_CASE("hardware FLOPs add the recomputed forward; model FLOPs do not", "[training][fold]") {
  // GPT-3 Small at dp 4 x pp 2 x tp 2: without recompute every kernel is a model FLOP (HFU = MFU);
  // full recompute runs each transformer block's forward again (Megatron's checkpointing: the
  // embedding, LM head and loss are not recomputed).
  const json plan = {{"dp", 4}, {"pp", 2}, {"tp", 2}, {"global_batch", 16}, {"schedule", "1f1b"},
                     {"partition", "uniform"}, {"network", "analytical"}};
  auto with = [&](const char* recompute) {
    json doc = scenario(plan);
    doc["plan"]["recompute"] = recompute;
    // Unfused attention: a causal FlashAttention kernel skips half the scores, so its hardware
    // FLOPs differ from the model's even without recompute.
    doc["plan"]["fused_attention"] = false;
    return run_folded(doc, true).report;
  };
  const auto none = with("none");
  REQUIRE(none.hardware_tflops_per_gpu == Approx(none.tflops_per_gpu).epsilon(0.01));
  REQUIRE(none.hfu == Approx(none.mfu).epsilon(0.01));
  const auto full = with("full");
  const double ratio = full.hardware_tflops_per_gpu / full.tflops_per_gpu;
  // Expected: 1 + the transformer blocks' forward over the model's forward + backward.
  json doc = scenario(plan);
  doc["plan"]["fused_attention"] = false;
  const auto m = strategy::scenario_model(strategy::parse_scenario(doc, "fold.json"));
  double blocks = 0.0;
  for (const auto& layer : m.layers) blocks += layer.block >= 0 ? layer.fwd_flops : 0.0;
  REQUIRE(ratio == Approx(1.0 + blocks / (m.fwd_flops() + m.bwd_flops())).epsilon(0.01));
  REQUIRE(ratio < 4.0 / 3.0);
  const auto selective = with("selective");
  REQUIRE(selective.hardware_tflops_per_gpu / selective.tflops_per_gpu > 1.0);
  REQUIRE(selective.hardware_tflops_per_gpu / selective.tflops_per_gpu < ratio);
}

TEST_CASE("model FLOPs of GPT-3 175B follow Megatron's count", "[training]") {
  // Per sample forward: 24 s l h^2 (1 + s / 6h + V / 16 l h) (Narayanan et al. 2021, Eq. 3 over
  // its 4 passes); the model's layers add up to it, and forward + backward to 3x it.
  json doc = scenario({{"dp", 16}});
  doc["model"] = {{"name", "gpt3-175b"}};
  const auto m = strategy::scenario_model(strategy::parse_scenario(doc, "175b.json"));
  const double s = 2048, l = 96, h = 12288, v = 50257;
  const double megatron = 24.0 * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
  REQUIRE(m.fwd_flops() == Approx(megatron).epsilon(0.005));
  REQUIRE(m.fwd_flops() + m.bwd_flops() == Approx(3.0 * megatron).epsilon(0.005));
}

TEST_CASE("placement orders TP, PP and DP as the plan says, innermost first", "[training][fold]") {
  strategy::Plan p;
  p.dp = 2;
  p.tp = 4;
  const auto c = topo::resolve_cluster("dgx-a100", 16);
  // Default tp-pp-dp: a replica's two stages share node 0; the replicas are the two nodes.
  const strategy::HybridLayout standard(p, 2, c);
  REQUIRE(standard.gpu(0, 1, 0) == 4);
  REQUIRE(standard.gpu(1, 0, 0) == 8);
  // tp-dp-pp: a stage's data-parallel group shares a node; the pipeline crosses the nodes.
  p.placement = "tp-dp-pp";
  const strategy::HybridLayout megatron_core(p, 2, c);
  REQUIRE(megatron_core.gpu(1, 0, 0) == 4);
  REQUIRE(megatron_core.gpu(0, 1, 0) == 8);
  REQUIRE(megatron_core.gpu(1, 1, 3) == 15);
  sim::ExecutionGraph g;
  megatron_core.add_ranks(g);
  const auto dp = megatron_core.add_dp_communicator(g, 1, 0);
  // Folded: one simulated member standing for the four (stage 1, TP rank j) groups {8+j, 12+j}.
  REQUIRE(g.communicators[dp].groups.size() == 4);
  REQUIRE(g.communicators[dp].groups[0] == std::vector<sim::GpuId>{8, 12});
  REQUIRE(g.communicators[dp].groups[3] == std::vector<sim::GpuId>{11, 15});
}

TEST_CASE("a folded run whose groups ended apart says by how much, and how to simulate every replica", "[fold]") {
  strategy::Report r;
  r.folding = "16 of 512 ranks simulated (data-parallel replicas folded)";
  const auto line = [&] {
    const std::string text = strategy::to_text(r);
    const std::size_t at = text.find("simulation  ");
    REQUIRE(at != std::string::npos);
    return text.substr(at, text.find('\n', at) - at);
  };
  REQUIRE(line() == "simulation  16 of 512 ranks simulated (data-parallel replicas folded)");
  r.folding_uneven = 91;
  r.folding_spread_s = 43.52e-6;
  REQUIRE(line() == "simulation  16 of 512 ranks simulated (data-parallel replicas folded); groups of 91 folded "
                    "collectives or transfers ended up to 43.52 us apart, so replicas may differ by that much "
                    "(plan.fold false simulates each)");
  r.folding_uneven = 1;
  REQUIRE_THAT(line(), Catch::Contains("groups of 1 folded collective or transfer ended up to"));
}
