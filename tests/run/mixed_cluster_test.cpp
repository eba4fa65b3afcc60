// Mixed clusters: every rank's kernels are costed for its own GPU, so the order of the GPUs in
// the cluster does not change a synchronous step, whose slowest rank sets it.
#include <catch2/catch.hpp>

#include <cmath>
#include <nlohmann/json.hpp>

#include "models/compute_model.hpp"
#include "run/calibration.hpp"
#include "run/scenario.hpp"
#include "run/simulation.hpp"
#include "tests/test_paths.hpp"

using namespace foresight;
using nlohmann::json;

namespace {

/// ResNet-50 with DDP on the 8 GPUs of a topology file (a path), with plan.comm_contention.
strategy::SimulationOutput simulate_file_with(const std::string& topology, const std::string& contention) {
  const json doc{{"model", {{"name", "resnet50"}}},
                 {"cluster", {{"topology", topology}}},
                 {"plan", {{"dp", 8}, {"micro_batch", 64}, {"comm_contention", contention}}},
                 {"workload", {{"steps", 10}}}};
  strategy::SimulationInputs inputs;
  inputs.collectives = run::default_collective_config();
  inputs.coalesce_kernels = false;  // the tests read each kernel's node
  return strategy::simulate_scenario(strategy::parse_scenario(doc, "mixed.json"), inputs);
}

strategy::SimulationOutput simulate_file(const std::string& topology) { return simulate_file_with(topology, "measured"); }

/// The same on tests/data/topologies/`name`.json.
strategy::SimulationOutput simulate_on(const std::string& name) {
  return simulate_file(test::data_path("topologies/" + name + ".json"));
}

}  // namespace

TEST_CASE("each rank's kernels take its own GPU's time", "[mixed]") {
  const auto out = simulate_on("mixed-a100-v100");
  const auto& g = out.compiled.graph;
  REQUIRE(g.ranks() == 8);  // ranks that differ are not folded
  int a100 = 0, v100 = 0;
  for (const auto& n : g.nodes) {
    if (n.kind != sim::OpKind::compute || n.signature >= g.signatures.size()) continue;
    const topo::GpuSpec& gpu = out.cluster->gpu_model(g.rank_gpu[n.rank]);
    const strategy::ComputeModel own(gpu);
    REQUIRE(n.duration == own.duration(g.signatures[n.signature]));
    (gpu.name == std::string_view("A100-SXM4-80GB") ? a100 : v100) += 1;
  }
  REQUIRE(a100 > 0);
  REQUIRE(v100 == a100);  // the same program on 4 GPUs of each model
  REQUIRE(out.report.gpu == "mixed: 4 A100-SXM4-80GB + 4 V100-SXM2-32GB");
}

TEST_CASE("a synchronous data-parallel step on mixed GPUs takes the slowest GPU's time, in any order", "[mixed]") {
  const double a100_first = simulate_on("mixed-a100-v100").report.iteration_time_s;
  const double v100_first = simulate_on("mixed-v100-a100").report.iteration_time_s;
  // The V100s run the same kernels slower; every rank waits for them at each all-reduce, on the
  // same fabric: the step is the all-V100 cluster's (to rounding of the event times).
  const double v100_only = simulate_on("two-node-v100").report.iteration_time_s;
  const double a100_only = simulate_file(test::source_path("examples/topologies/two_node.json")).report.iteration_time_s;
  REQUIRE(v100_only > 2.0 * a100_only);
  REQUIRE(std::abs(a100_first - v100_only) <= 1e-6 * v100_only);
  REQUIRE(std::abs(v100_first - v100_only) <= 1e-6 * v100_only);
}

TEST_CASE("each rank slows under communication as its own GPU model does", "[mixed]") {
  // H100 ranks take the measured Hopper factors (models/compute_model.hpp), A100 ranks none:
  // with contention off the A100 ranks' compute is the same, and only the H100 ranks' grows.
  const auto on = simulate_on("mixed-a100-h100");
  const auto& g = on.compiled.graph;
  const strategy::Plan& plan = strategy::parse_scenario(json{{"model", {{"name", "resnet50"}}},
                                                            {"cluster", {{"topology", test::data_path("topologies/mixed-a100-h100.json")}}},
                                                            {"plan", {{"dp", 8}, {"micro_batch", 64}}},
                                                            {"workload", {{"steps", 10}}}},
                                                       "mixed.json")
                                   .plan;
  const auto slow = strategy::plan_comm_slowdowns_by_rank(plan, *on.cluster, g);
  REQUIRE(slow.size() == 8);
  int hopper = 0;
  for (sim::RankId r = 0; r < 8; ++r) {
    const bool h100 = on.cluster->gpu_model(g.rank_gpu[r]).name == std::string_view("H100-SXM5-80GB");
    const double conv = slow[r][static_cast<std::size_t>(sim::OpType::conv_fprop)];
    REQUIRE(conv == (h100 ? strategy::kHopperCommSlowdownConv : 0.0));
    hopper += h100;
  }
  REQUIRE(hopper == 4);
  // The busy time of each rank's compute ops, with and without contention.
  const auto busy = [](const strategy::SimulationOutput& out, sim::RankId r) {
    double s = 0.0;
    const auto& gr = out.compiled.graph;
    for (sim::NodeId n = 0; n < gr.nodes.size(); ++n) {
      if (gr.nodes[n].rank == r && gr.nodes[n].kind == sim::OpKind::compute) s += (out.result.end[n] - out.result.start[n]).seconds();
    }
    return s;
  };
  const auto off = simulate_file_with(test::data_path("topologies/mixed-a100-h100.json"), "off");
  for (sim::RankId r = 0; r < 8; ++r) {
    const bool h100 = on.cluster->gpu_model(g.rank_gpu[r]).name == std::string_view("H100-SXM5-80GB");
    INFO("rank " << r);
    if (h100) {
      REQUIRE(busy(on, r) > busy(off, r));
    } else {
      REQUIRE(busy(on, r) == Approx(busy(off, r)).epsilon(1e-12));
    }
  }
}
