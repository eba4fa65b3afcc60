// plan.kernel_generation from a scenario: megatron-2021 divides every unprofiled matrix kernel's
// time by the calibration's megatron_sc21.gemm_efficiency (on top of plan.gemm_efficiency) and
// leaves every other kernel alone; the report keeps the plan as written; without the calibration's
// rate the plan is refused; the stored calibration supplies it to every command.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "run/calibration.hpp"
#include "run/scenario.hpp"
#include "run/scenario_inputs.hpp"
#include "run/simulation.hpp"

using namespace foresight;
using namespace foresight::strategy;
using nlohmann::json;

namespace {

json generation_doc(const std::string& generation, double gemm_efficiency) {
  return json{{"model", {{"name", "gpt2"}}},
              {"cluster", {{"preset", "dgx-a100"}, {"gpus", 2}}},
              {"plan", {{"dp", 1}, {"tp", 2}, {"micro_batch", 2}, {"precision", "fp16"},
                        {"kernel_generation", generation}, {"gemm_efficiency", gemm_efficiency}}},
              {"workload", {{"steps", 1}}}};
}

SimulationInputs generation_inputs(double rate) {
  SimulationInputs inputs;
  inputs.collectives = run::default_collective_config();
  inputs.coalesce_kernels = false;  // one node per kernel
  inputs.megatron_2021_gemm_efficiency = rate;
  return inputs;
}

/// Rank 0's kernels: the GEMMs' time and count, and the others' time, in seconds.
struct KernelSeconds {
  double gemm = 0.0;
  int gemms = 0;
  double other = 0.0;
};
KernelSeconds kernel_seconds(const SimulationOutput& out) {
  const auto& g = out.compiled.graph;
  KernelSeconds k;
  for (const auto& node : g.nodes) {
    if (node.rank != 0 || node.kind != sim::OpKind::compute || node.signature >= g.signatures.size()) continue;
    if (g.signatures[node.signature].type == sim::OpType::gemm) {
      k.gemm += node.duration.seconds();
      ++k.gemms;
    } else {
      k.other += node.duration.seconds();
    }
  }
  return k;
}

}  // namespace

TEST_CASE("Megatron-LM v2's kernels: matrix kernels at the calibration's rate, times gemm_efficiency", "[run]") {
  const auto compiled = [](const std::string& generation, double gemm_efficiency, double rate) {
    return compile_scenario(parse_scenario(generation_doc(generation, gemm_efficiency), "gen.json"),
                            generation_inputs(rate));
  };
  const auto current = kernel_seconds(compiled("current", 1.0, 0.5));
  const auto v2 = kernel_seconds(compiled("megatron-2021", 1.0, 0.5));
  const auto both = kernel_seconds(compiled("megatron-2021", 0.8, 0.5));
  REQUIRE(current.gemm > 0.0);
  REQUIRE(current.other > 0.0);
  REQUIRE(v2.gemms == current.gemms);
  // Each GEMM takes 1 / 0.5 as long, then 1 / (0.5 x 0.8), to the picosecond each kernel's time
  // is rounded to; the elementwise, norm and softmax kernels keep their time exactly.
  const double rounding = 2e-12 * current.gemms;
  CHECK(v2.gemm == Approx(current.gemm / 0.5).epsilon(0.0).margin(rounding));
  CHECK(both.gemm == Approx(current.gemm / (0.5 * 0.8)).epsilon(0.0).margin(rounding));
  CHECK(v2.other == current.other);
  CHECK(both.other == current.other);
  // The current generation ignores the calibration's rate.
  const auto other_rate = kernel_seconds(compiled("current", 1.0, 0.25));
  CHECK(other_rate.gemm == current.gemm);

  const SimulationOutput run = simulate_scenario(parse_scenario(generation_doc("megatron-2021", 0.8), "gen.json"),
                                                 generation_inputs(0.5));
  CHECK(run.plan.at("kernel_generation") == "megatron-2021");
  CHECK(run.plan.at("gemm_efficiency") == 0.8);  // the plan as written, not the product
  CHECK_THAT(run.report.plan_summary, Catch::Matchers::Contains("Megatron-LM v2 (2021) matrix kernels"));
  const SimulationOutput plain =
      simulate_scenario(parse_scenario(generation_doc("current", 1.0), "gen.json"), generation_inputs(0.5));
  CHECK_THAT(plain.report.plan_summary, !Catch::Matchers::Contains("Megatron-LM v2"));
  CHECK(run.report.iteration_time_s > plain.report.iteration_time_s);
}

TEST_CASE("Megatron-LM v2's kernels need the calibration's rate; a generation not listed is refused", "[run]") {
  using Catch::Matchers::Contains;
  REQUIRE_THROWS_WITH(
      simulate_scenario(parse_scenario(generation_doc("megatron-2021", 1.0), "gen.json"), generation_inputs(0.0)),
      Contains("gen.json") && Contains("/plan/kernel_generation") && Contains("megatron_sc21.gemm_efficiency"));
  REQUIRE_THROWS_WITH(parse_scenario(generation_doc("megatron-2022", 1.0), "gen.json"),
                      Contains("kernel_generation") && Contains("current, megatron-2021") && Contains("megatron-2022"));
}

TEST_CASE("every command's inputs carry the stored calibration's Megatron SC21 rate", "[run]") {
  const InputFiles files(InputPaths{}, [](const std::string& path) -> sim::ProfileDb {
    throw std::runtime_error("no profile was asked for: " + path);
  });
  const double stored = run::load_calibration(run::default_calibration_path()).megatron.gemm_efficiency;
  REQUIRE(stored > 0.0);
  REQUIRE(stored < 1.0);
  CHECK(files.inputs().megatron_2021_gemm_efficiency == stored);
}

TEST_CASE("Megatron-LM v2's softmax: PyTorch's passes where its kernel does not take the scores", "[run]") {
  using Catch::Matchers::Contains;
  // GPT-2's 12 heads over TP 2 at micro-batch 1: 6 rows of scores, not a multiple of 4.
  const auto run = [](const std::string& generation, int micro_batch) {
    json doc = generation_doc(generation, 1.0);
    doc["plan"]["micro_batch"] = micro_batch;
    return simulate_scenario(parse_scenario(doc, "gen.json"), generation_inputs(0.5));
  };
  const auto unfused_kernels = [](const SimulationOutput& out) {
    int n = 0;
    for (const auto& node : out.compiled.graph.nodes) {
      if (node.kind == sim::OpKind::compute && out.compiled.graph.names[node.name].find("softmax_unfused_mask") != std::string::npos) ++n;
    }
    return n;
  };
  const SimulationOutput v2 = run("megatron-2021", 1);
  CHECK_THAT(v2.report.plan_summary, Contains("PyTorch's attention softmax in 12 layers"));
  CHECK(unfused_kernels(v2) > 0);
  // Two samples make 12 rows: the kernel takes them. The current generation always runs it.
  const SimulationOutput v2_pairs = run("megatron-2021", 2);
  CHECK_THAT(v2_pairs.report.plan_summary, !Contains("PyTorch's attention softmax"));
  CHECK(unfused_kernels(v2_pairs) == 0);
  const SimulationOutput current = run("current", 1);
  CHECK(unfused_kernels(current) == 0);
  CHECK_THAT(current.report.plan_summary, !Contains("PyTorch's attention softmax"));
}
