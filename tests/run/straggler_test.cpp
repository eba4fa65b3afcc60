// Stragglers: a slow GPU or per-step jitter is simulated, not assumed; a synchronous
// data-parallel step waits for its slowest rank.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "run/calibration.hpp"
#include "run/scenario.hpp"
#include "run/simulation.hpp"

using namespace foresight;
using nlohmann::json;

namespace {

/// ResNet-50, DDP on the 8 GPUs of one DGX A100, amp_bf16: compute-bound, little communication.
strategy::SimulationOutput simulate_stragglers(const json& stragglers) {
  json doc{{"model", {{"name", "resnet50"}}},
           {"cluster", {{"preset", "dgx-a100"}, {"gpus", 8}}},
           {"plan", {{"dp", 8}, {"micro_batch", 64}, {"precision", "amp_bf16"}, {"steps", 10}}},
           {"workload", {{"steps", 10}}}};
  if (!stragglers.is_null()) doc["plan"]["stragglers"] = stragglers;
  strategy::SimulationInputs inputs;
  inputs.collectives = run::default_collective_config();
  return strategy::simulate_scenario(strategy::parse_scenario(doc, "stragglers.json"), inputs);
}

}  // namespace

TEST_CASE("the straggler factor: the listed GPUs' slowdown, and jitter of the stated mean", "[stragglers]") {
  strategy::Plan p;
  p.straggler_gpus = {3};
  p.straggler_slowdown = 1.5;
  REQUIRE(strategy::straggler_factor(p, 3, 0) == 1.5);
  REQUIRE(strategy::straggler_factor(p, 2, 7) == 1.0);
  p.straggler_jitter = 0.2;
  double sum = 0.0;
  constexpr int kDraws = 100000;
  for (int i = 0; i < kDraws; ++i) {
    const double f = strategy::straggler_factor(p, i % 64, i / 64);
    REQUIRE(f >= (i % 64 == 3 ? 1.5 : 1.0));
    if (i % 64 != 3) sum += f;
  }
  // E[1 + X] = 1.2 for X exponential of mean 0.2; 10^5 draws: standard error 0.2 / sqrt(10^5).
  REQUIRE(sum / (kDraws - kDraws / 64) == Approx(1.2).epsilon(0.01));
  REQUIRE(strategy::straggler_factor(p, 5, 9) == strategy::straggler_factor(p, 5, 9));  // a function of its inputs
}

TEST_CASE("one GPU twice as slow makes a synchronous step as slow as all of them", "[stragglers]") {
  const auto base = simulate_stragglers(nullptr);
  const auto one = simulate_stragglers(json{{"gpus", {3}}, {"slowdown", 2.0}});
  const auto all = simulate_stragglers(json{{"gpus", {0, 1, 2, 3, 4, 5, 6, 7}}, {"slowdown", 2.0}});
  REQUIRE(base.compiled.graph.ranks() == 1);  // folded without stragglers
  REQUIRE(one.compiled.graph.ranks() == 8);   // ranks that differ are simulated
  // Every rank waits for rank 3 at each all-reduce: the step is the all-slow step.
  REQUIRE(one.report.iteration_time_s == Approx(all.report.iteration_time_s).epsilon(1e-9));
  // The kernels' time doubles; the input copy to the GPU (about 5% of the compute stream's busy
  // time here), the host overhead and the exposed communication do not.
  const double compute = base.report.breakdown.compute_s;
  REQUIRE(one.report.iteration_time_s > base.report.iteration_time_s + 0.93 * compute);
  REQUIRE(one.report.iteration_time_s < base.report.iteration_time_s + compute);
}

TEST_CASE("per-step jitter: each step waits for that step's slowest GPU", "[stragglers]") {
  const json jitter{{"jitter", 0.1}, {"seed", 11}};
  const auto base = simulate_stragglers(nullptr);
  const auto out = simulate_stragglers(jitter);
  // Expected: the base step plus compute x (the slowest GPU's factor - 1), averaged over the
  // measured steps (all but the first), from the same factors the simulation drew.
  strategy::Plan p;
  p.straggler_jitter = 0.1;
  p.straggler_seed = 11;
  double extra = 0.0;
  for (int s = 1; s < 10; ++s) {
    double slowest = 1.0;
    for (int g = 0; g < 8; ++g) slowest = std::max(slowest, strategy::straggler_factor(p, g, s));
    extra += slowest - 1.0;
  }
  extra /= 9.0;
  const double expected = base.report.iteration_time_s + base.report.breakdown.compute_s * extra;
  REQUIRE(out.report.iteration_time_s == Approx(expected).epsilon(0.02));
  REQUIRE(out.report.iteration_time_s > base.report.iteration_time_s * 1.1);  // E[max of 8] = 0.1 x H_8 = 0.27
  // The same seed gives the same run; another seed another.
  REQUIRE(simulate_stragglers(jitter).report.fingerprint == out.report.fingerprint);
  REQUIRE(simulate_stragglers(json{{"jitter", 0.1}, {"seed", 12}}).report.fingerprint != out.report.fingerprint);
}
