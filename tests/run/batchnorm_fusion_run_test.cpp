// plan.batchnorm_fusion from a scenario: the fused ResNet-50 steps are shorter, in order, the plan
// line says which fusion ran, and a model it cannot apply to is refused with the field named; so
// are explicit gradient groups without Horovod.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "run/calibration.hpp"
#include "run/scenario.hpp"
#include "run/simulation.hpp"

using namespace foresight;
using namespace foresight::strategy;
using nlohmann::json;

namespace {

SimulationOutput simulate_fused_bn(const std::string& model, const std::string& fusion) {
  json doc{{"model", {{"name", model}}},
           {"cluster", {{"preset", "dgx-a100"}, {"gpus", 8}}},
           {"plan", {{"dp", 8}, {"micro_batch", 64}, {"framework", "horovod"}, {"gradient_groups", 1},
                     {"precision", "fp16"}, {"batchnorm_fusion", fusion}}},
           {"workload", {{"steps", 2}}}};
  SimulationInputs inputs;
  inputs.collectives = run::default_collective_config();
  return simulate_scenario(parse_scenario(doc, "bn.json"), inputs);
}

}  // namespace

TEST_CASE("BatchNorm fusion from a scenario: each step of fusion shortens the ResNet-50 step", "[run]") {
  const SimulationOutput none = simulate_fused_bn("resnet50", "none");
  const SimulationOutput bn_relu = simulate_fused_bn("resnet50", "bn_relu");
  const SimulationOutput stats = simulate_fused_bn("resnet50", "conv_stats");
  const SimulationOutput mainloop = simulate_fused_bn("resnet50", "conv_mainloop");
  // bn_relu drops 49 ReLU and 16 add kernels each way for 16 larger BatchNorm kernels; conv_stats
  // then runs the blocks' BatchNorm forwards at the elementwise rate instead of BatchNorm's.
  CHECK(bn_relu.report.iteration_time_s < none.report.iteration_time_s);
  CHECK(stats.report.iteration_time_s < bn_relu.report.iteration_time_s);
  CHECK(mainloop.report.iteration_time_s < stats.report.iteration_time_s);  // 32 forward passes fewer
  CHECK_THAT(bn_relu.report.plan_summary, Catch::Matchers::Contains("BatchNorm fused with ReLU and add"));
  CHECK_THAT(stats.report.plan_summary, Catch::Matchers::Contains("BatchNorm statistics in the convolutions"));
  CHECK_THAT(none.report.plan_summary, !Catch::Matchers::Contains("BatchNorm"));
}

TEST_CASE("BatchNorm fusion needs a BatchNorm followed by a ReLU or an add", "[run]") {
  using Catch::Matchers::Contains;
  REQUIRE_THROWS_WITH(simulate_fused_bn("gpt2", "bn_relu"),
                      Contains("/plan/batchnorm_fusion") && Contains("gpt2") && Contains("no BatchNorm"));
  REQUIRE_THROWS_WITH(simulate_fused_bn("resnet50", "fused"),
                      Contains("batchnorm_fusion") && Contains("fused"));
}

TEST_CASE("explicit gradient groups are Horovod's", "[run]") {
  using Catch::Matchers::Contains;
  json doc{{"model", {{"name", "resnet50"}}},
           {"cluster", {{"preset", "dgx-a100"}, {"gpus", 8}}},
           {"plan", {{"dp", 8}, {"micro_batch", 64}, {"framework", "ddp"}, {"gradient_groups", 2}}},
           {"workload", {{"steps", 1}}}};
  REQUIRE_THROWS_WITH(parse_scenario(doc, "groups.json"),
                      Contains("/plan/gradient_groups") && Contains("framework ddp") && Contains("found 2"));
}
