// Published training runs (validate/data/published_runs.json): the shipped file's arithmetic
// against its own scenarios, a planted run predicted exactly as `simulate` predicts it, and bad
// entries refused with the file, the pointer and what was found.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <functional>
#include <regex>
#include <set>

#include "run/calibration.hpp"
#include "run/scenario.hpp"
#include "run/simulation.hpp"
#include "tests/test_files.hpp"
#include "tests/test_paths.hpp"
#include "validate/published_runs.hpp"

using namespace foresight;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

std::string dataset_path() { return test::source_path("validate/data/published_runs.json"); }

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

}  // namespace

TEST_CASE("the published runs: every run names a listed source and its scenario agrees with its figure",
          "[validate]") {
  const validate::PublishedRuns d = validate::load_published_runs(dataset_path());
  REQUIRE(d.sources.size() >= 11);
  REQUIRE(d.runs.size() >= 68);
  std::set<std::string> used;
  int tokens_checked = 0;
  int tflops_checked = 0;
  int images_checked = 0;
  for (const validate::PublishedRun& r : d.runs) {
    CAPTURE(r.id);
    used.insert(r.source);
    REQUIRE(r.role == validate::Role::prediction);  // nothing is fitted on them
    const json scenario = read_json(r.scenario);
    const json& plan = scenario.at("plan");
    // The kernel generation follows the framework's code lineage, never the run's error: the
    // runs on Megatron-DeepSpeed (DeepSpeed's pipeline engine), a fork of Megatron-LM v2, run
    // Megatron-LM v2's kernels; every other run the compute model's.
    const bool megatron_deepspeed = plan.value("pipeline_engine", "megatron") == "deepspeed";
    REQUIRE(plan.value("kernel_generation", "current") == (megatron_deepspeed ? "megatron-2021" : "current"));
    REQUIRE_FALSE(plan.contains("gemm_efficiency"));  // no per-run rate
    // A figure in tokens per second per GPU: the iteration is a GPU's share of the global batch's
    // tokens over that rate.
    std::smatch m;
    if (std::regex_search(r.reported, m, std::regex(R"(^([0-9.]+) tokens/s per GPU)"))) {
      const double rate = std::stod(m[1].str());
      const auto model = strategy::scenario_model(strategy::load_scenario(r.scenario));
      REQUIRE(model.transformer.has_value());
      const double tokens = plan.at("global_batch").get<double>() * double(model.transformer->seq_len) /
                            scenario.at("cluster").at("gpus").get<double>();
      REQUIRE(r.measured_iteration_s == Approx(tokens / rate).epsilon(1e-4));
      ++tokens_checked;
    }
    // A figure in TFLOP/s per GPU by Megatron-Core's count (num_floating_point_operations, for
    // query width = hidden): 12 B s L h^2 ((1 + g/a + s/h) + (f/h) k (3/2 with SwiGLU) + V/(2 L h)),
    // V padded to a multiple of 128 x tp, over the rate of every GPU.
    if (std::regex_search(r.reported, m, std::regex(R"(^([0-9.]+) TFLOP/s per GPU by Megatron-Core's FLOP count)"))) {
      const auto model = strategy::scenario_model(strategy::load_scenario(r.scenario));
      REQUIRE(model.transformer.has_value());
      const strategy::TransformerShape& t = *model.transformer;
      const double s = t.seq_len, h = t.hidden, layers = t.layers;
      const double unit = 128.0 * plan.value("tp", 1);
      const double vocab = std::ceil(t.vocab / unit) * unit;
      const double routed = t.moe.experts > 0 ? t.moe.top_k : 1;
      const double ffn = t.moe.experts > 0 ? t.moe.expert_ffn : t.ffn;
      const double flops = 12.0 * plan.at("global_batch").get<double>() * s * layers * h * h *
                           ((1.0 + double(t.kv_heads) / t.heads + s / h) + ffn / h * routed * (t.swiglu ? 1.5 : 1.0) +
                            vocab / (2.0 * layers * h));
      const double gpus = scenario.at("cluster").at("gpus").get<double>();
      REQUIRE(r.measured_iteration_s == Approx(flops / (std::stod(m[1].str()) * 1e12 * gpus)).epsilon(1e-4));
      ++tflops_checked;
    }
    // A figure in images per second (MLPerf's ResNet-50 logs): the iteration is the global
    // batch over that rate.
    if (std::regex_search(r.reported, m, std::regex(R"(^([0-9.]+) images/s$)"))) {
      const double batch = plan.at("micro_batch").get<double>() * plan.at("dp").get<double>();
      REQUIRE(r.measured_iteration_s == Approx(batch / std::stod(m[1].str())).epsilon(1e-5));
      ++images_checked;
    }
    // A figure in seconds per iteration is the measured time itself.
    if (std::regex_search(r.reported, m, std::regex(R"(^([0-9.]+) s per iteration)"))) {
      REQUIRE(r.measured_iteration_s == std::stod(m[1].str()));
    }
  }
  REQUIRE(used.size() == d.sources.size());  // no source listed without a run
  REQUIRE(tokens_checked >= 15);
  REQUIRE(tflops_checked == 2);
  REQUIRE(images_checked == 8);
}

TEST_CASE("a published run is predicted as simulate predicts its scenario", "[validate]") {
  const auto dir = test::fresh_dir("published");
  const std::string scenario = test::source_path("examples/thetagpu-resnet18-ddp.json");
  json doc = {{"dataset", "published_runs"},
              {"description", "one planted run"},
              {"calibration_rule", "none"},
              {"sources", {{"planted", {{"citation", "Planted, a test"}, {"url", "none"}}}}},
              {"runs",
               {{{"id", "resnet18"},
                 {"source", "planted"},
                 {"scenario", scenario},
                 {"reported", "0.1 s per iteration"},
                 {"derivation", "as reported"},
                 {"measured_iteration_s", 0.1},
                 {"role", "prediction"}}}}};
  const auto path = (dir / "runs.json").string();
  std::ofstream(path) << doc.dump();
  const validate::PublishedRuns d = validate::load_published_runs(path);
  strategy::SimulationInputs in;
  in.collectives = run::default_collective_config();
  const auto results = validate::evaluate_published_runs(d, in);
  REQUIRE(results.size() == 1);
  const auto direct = strategy::simulate_scenario(strategy::load_scenario(scenario), in);
  REQUIRE(results[0].predicted_s == direct.report.iteration_time_s);
  REQUIRE_THAT(results[0].note, Contains("8 x A100-SXM4-40GB") && Contains("reported 0.1 s per iteration"));

  const auto bad = [&](const std::string& name, const std::function<void(json&)>& edit) {
    json b = doc;
    edit(b);
    const auto p = (dir / name).string();
    std::ofstream(p) << b.dump();
    return p;
  };
  REQUIRE_THROWS_WITH(validate::load_published_runs(bad("unknown.json", [](json& b) { b["runs"][0]["colour"] = 1; })),
                      Contains("unknown.json") && Contains("colour"));
  REQUIRE_THROWS_WITH(
      validate::load_published_runs(bad("source.json", [](json& b) { b["runs"][0]["source"] = "elsewhere"; })),
      Contains("/runs/0/source") && Contains("\"elsewhere\""));
  REQUIRE_THROWS_WITH(
      validate::load_published_runs(bad("scenario.json", [](json& b) { b["runs"][0]["scenario"] = "none.json"; })),
      Contains("/runs/0/scenario") && Contains("none.json"));
  REQUIRE_THROWS_WITH(
      validate::load_published_runs(bad("time.json", [](json& b) { b["runs"][0]["measured_iteration_s"] = -2; })),
      Contains("/runs/0/measured_iteration_s") && Contains("positive"));
  REQUIRE_THROWS_WITH(
      validate::load_published_runs(bad("twice.json", [](json& b) { b["runs"].push_back(b["runs"][0]); })),
      Contains("/runs/1/id") && Contains("again"));
  REQUIRE_THROWS_WITH(validate::load_published_runs(bad("role.json", [](json& b) { b["runs"][0]["role"] = "fit"; })),
                      Contains("/runs/0/role") && Contains("\"fit\""));
}
