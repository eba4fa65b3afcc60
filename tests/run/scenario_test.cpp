// Scenario files: defaults, overrides, and a clear error for every kind of bad input.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "run/calibration.hpp"
#include "run/scenario.hpp"
#include "strategies/memory_model.hpp"
#include "run/simulation.hpp"
#include "topologies/cluster_builders.hpp"

using namespace foresight;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

json base() {
  return json::parse(R"({
    "model": {"name": "resnet18-cifar", "classes": 100},
    "cluster": {"preset": "thetagpu", "gpus": 8},
    "plan": {"dp": 8, "micro_batch": 128},
    "workload": {"epochs": 10, "dataset_samples": 50000}})");
}

strategy::Scenario parse(const json& doc) { return strategy::parse_scenario(doc, "s.json"); }

}  // namespace

TEST_CASE("a scenario's defaults and derived batch", "[training]") {
  const auto s = parse(base());
  REQUIRE(s.plan.global_batch == 1024);
  REQUIRE(s.plan.grad_accum == 1);
  REQUIRE(s.plan.bucket_cap == sim::Bytes(25LL << 20));
  REQUIRE(s.plan.tf32_conv);
  REQUIRE_FALSE(s.plan.tf32_matmul);
  // 10 epochs x ceil(50000 / 1024) = 10 x 49 steps (the last batch of each epoch is partial).
  REQUIRE(s.total_steps() == 490);
  auto doc = base();
  doc["plan"]["global_batch"] = 4096;
  REQUIRE(parse(doc).plan.grad_accum == 4);
  doc["plan"]["bucket_cap"] = "50 MiB";
  doc["plan"]["cycle_time"] = "5 ms";
  REQUIRE(parse(doc).plan.bucket_cap == sim::Bytes(50LL << 20));
  REQUIRE(parse(doc).plan.cycle_time == sim::Time::from_ps(5'000'000'000));
}

TEST_CASE("overrides edit the scenario before it is checked", "[training]") {
  auto doc = base();
  strategy::apply_overrides(doc, {{"cluster.gpus", "4"}, {"plan.micro_batch", "64"}, {"plan.precision", "amp_fp16"},
                                  {"plan.bucket_cap", "10 MiB"}});
  const auto s = parse(doc);
  REQUIRE(s.cluster.gpus == 4);
  REQUIRE(s.plan.dp == 4);  // follows the GPU count
  REQUIRE(s.plan.micro_batch == 64);
  REQUIRE(s.plan.precision == strategy::Precision::amp_fp16);
  REQUIRE(s.plan.bucket_cap == sim::Bytes(10LL << 20));
  REQUIRE(strategy::parse_override("plan.tp=8").path == "plan.tp");
  REQUIRE_THROWS_WITH(strategy::parse_override("plan.tp"), Contains("PATH=VALUE"));
}

TEST_CASE("every kind of bad scenario names its field", "[training]") {
  auto doc = base();
  doc["plan"]["colour"] = "red";
  REQUIRE_THROWS_WITH(parse(doc), Contains("s.json") && Contains("/plan/colour") && Contains("unknown key"));
  doc = base();
  doc["plan"]["dp"] = 4;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan") && Contains("= 4, but cluster.gpus is 8"));
  doc = base();
  doc["plan"]["micro_batch"] = -3;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/micro_batch") && Contains("-3"));
  doc = base();
  doc["plan"]["global_batch"] = 1000;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/global_batch") && Contains("multiple of dp x micro_batch"));
  doc = base();
  doc["plan"]["zero"] = 2;
  doc["plan"]["pp"] = 2;
  doc["plan"]["dp"] = 4;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/zero") && Contains("expected 0 or 1 with pp = 2") &&
                                      Contains("found 2"));
  doc["plan"]["zero"] = 1;  // Megatron's distributed optimizer inside a pipeline
  REQUIRE(parse(doc).plan.zero == 1);
  doc = base();
  doc["plan"]["shard_group"] = 4;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/shard_group") && Contains("without ZeRO"));
  doc["plan"]["zero"] = 3;
  doc["plan"]["shard_group"] = 3;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/shard_group") && Contains("expected a divisor of dp = 8") &&
                                      Contains("found 3"));
  doc["plan"]["shard_group"] = 4;
  REQUIRE(parse(doc).plan.hybrid_shard());
  doc = base();
  doc["plan"]["placement"] = "tp-pp-pp";
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/placement") && Contains("expected tp, pp and dp in some order") &&
                                      Contains("\"tp-pp-pp\""));
  doc["plan"]["placement"] = "tp-dp-pp";
  REQUIRE(parse(doc).plan.placement == "tp-dp-pp");
  doc = base();
  // Without dp, data parallelism takes what tp x pp x ep leave of cluster.gpus (8 here).
  doc["plan"].erase("dp");
  doc["plan"]["pp"] = 2;
  doc["plan"]["schedule"] = "gpipe";
  REQUIRE(strategy::parse_scenario(doc, "s.json").plan.dp == 4);
  doc["plan"]["pp"] = 3;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan") && Contains("but cluster.gpus is 8"));
  doc = base();
  doc["plan"]["zero"] = 1;
  doc["plan"]["framework"] = "horovod";
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/zero") && Contains("expected 0 with framework horovod"));
  doc = base();
  doc["plan"]["zero"] = 4;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/zero"));
  doc = base();
  doc["plan"]["sequence_parallel"] = true;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/sequence_parallel") && Contains("expected false with tp = 1"));
  doc = base();
  doc["plan"]["tp_comm_overlap"] = true;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/tp_comm_overlap") && Contains("expected false without sequence_parallel"));
  doc = base();
  doc["plan"]["precision"] = "fp64";
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/precision") && Contains("amp_bf16") && Contains("fp64"));
  doc = base();
  doc["plan"]["bucket_cap"] = 25;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/bucket_cap") && Contains("with a unit"));
  doc = base();
  doc["model"] = json{{"name", "resnet18"}, {"hf_config", "x.json"}};
  REQUIRE_THROWS_WITH(parse(doc), Contains("/model") && Contains("exactly one"));
  doc = base();
  doc.erase("workload");
  REQUIRE_THROWS_WITH(parse(doc), Contains("missing required key \"workload\""));
  doc = base();
  doc["workload"]["steps"] = 5;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/workload") && Contains("expected one of"));
  REQUIRE_THROWS_AS(strategy::load_scenario("/nonexistent/scenario.json"), sim::ConfigError);
}

TEST_CASE("work is bounded: a plan or cluster too large to simulate fails before it is built", "[training]") {
  // 2^30 samples at dp 8 x micro-batch 128 are 2^20 micro-batches: 3 steps x 2^20 x the model's
  // layers x 2 passes is far past the graph's limit, so it fails at once, naming /plan.
  auto doc = base();
  doc["plan"]["global_batch"] = 1 << 30;
  const auto huge = parse(doc);
  const double least = 2.0 * 3 * (1 << 20) * static_cast<double>(strategy::scenario_model(huge).layers.size());
  REQUIRE(least > static_cast<double>(sim::ExecutionGraph::kMaxNodes));
  REQUIRE_THROWS_WITH(strategy::simulate_scenario(huge, {}),
                      Contains("s.json: /plan:") && Contains("execution-graph nodes"));
  // A preset past its limit is refused before any switch is built, naming /cluster.
  doc = base();
  doc["cluster"] = {{"preset", "dgx-h100"}, {"gpus", topo::kMaxPresetGpus + 8}};
  doc["plan"]["dp"] = topo::kMaxPresetGpus + 8;
  REQUIRE_THROWS_WITH(strategy::simulate_scenario(parse(doc), {}),
                      Contains("s.json: /cluster:") && Contains("at most 131072 GPUs"));
}

TEST_CASE("products of in-range plan and workload values are checked, not overflowed", "[training]") {
  // Issue 25 (fuzz/corpus/scenario/*.ConfigError; UBSan: signed integer overflow): each value was
  // within its own bound, their product past an int or int64.
  auto doc = base();
  doc["cluster"].erase("gpus");
  doc["plan"] = {{"dp", 1 << 30}, {"tp", 4}, {"micro_batch", 1}};
  REQUIRE_THROWS_WITH(parse(doc), Contains("s.json: /plan") && Contains("dp x tp x pp x ep x cp at most 1073741824 ranks"));
  doc["plan"] = {{"dp", 1 << 30}, {"micro_batch", 1 << 30}};
  REQUIRE_THROWS_WITH(parse(doc), Contains("s.json: /plan") && Contains("global batch"));
  doc["plan"] = {{"dp", 1}, {"micro_batch", 1}};
  doc["workload"] = {{"epochs", 1 << 24}, {"dataset_samples", 1LL << 40}};
  REQUIRE_THROWS_WITH(parse(doc).total_steps(), Contains("/workload") && Contains("at most 2^63 - 1 steps"));
  doc["workload"] = {{"epochs", 1 << 23}, {"dataset_samples", 1LL << 40}};  // 2^63: one past
  REQUIRE_THROWS_AS(parse(doc).total_steps(), sim::ConfigError);
  doc["workload"] = {{"epochs", 1 << 22}, {"dataset_samples", 1LL << 40}};
  REQUIRE(parse(doc).total_steps() == 1LL << 62);  // 2^22 epochs x 2^40 steps of one sample
  // dp derived from the GPUs, and dp following --set cluster.gpus, from tp x pp = 2^62 x 4.
  doc = base();
  doc["plan"] = {{"tp", 1LL << 62}, {"pp", 4}, {"micro_batch", 1}};
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/tp"));
  doc["plan"]["dp"] = 8;
  strategy::apply_overrides(doc, {{"cluster.gpus", "8"}});
  REQUIRE(doc["plan"]["dp"] == 8);
}

TEST_CASE("a workload in tokens counts its steps from the global batch and sequence length", "[training]") {
  auto doc = base();
  doc["workload"] = json{{"tokens", 2e12}};  // a whole number written with an exponent
  const auto s = parse(doc);
  REQUIRE(s.workload.tokens == 2'000'000'000'000LL);
  // Llama 2's 2 T tokens at 1024 sequences of 4096 tokens per step: ceil(2e12 / 4194304).
  REQUIRE(s.total_steps(1024LL * 4096) == 476838);
  REQUIRE(s.total_steps(1000) == 2'000'000'000);
  // A model without a sequence cannot count tokens.
  REQUIRE_THROWS_WITH(s.total_steps(0), Contains("/workload/tokens") && Contains("sequence length"));
  // One form only, and a fraction is not a count.
  doc["workload"] = json{{"tokens", 1000}, {"steps", 10}};
  REQUIRE_THROWS_WITH(parse(doc), Contains("expected one of \"steps\", \"tokens\""));
  doc["workload"] = json{{"tokens", 1.5e3 + 0.5}};
  REQUIRE_THROWS_WITH(parse(doc), Contains("/workload/tokens") && Contains("expected an integer"));
  // A whole float counts wherever an integer is read; a fraction does not.
  doc = base();
  doc["plan"]["dp"] = 8.0;
  REQUIRE(parse(doc).plan.dp == 8);
  doc["plan"]["dp"] = 7.5;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/dp") && Contains("expected an integer"));
}

TEST_CASE("setting a cluster preset replaces a topology file, and the reverse", "[training]") {
  auto doc = base();
  doc["cluster"] = json{{"topology", "my.json"}, {"gpus", 8}};
  strategy::apply_overrides(doc, {strategy::parse_override("cluster.preset=dgx-h100")});
  REQUIRE(doc["cluster"] == json{{"preset", "dgx-h100"}, {"gpus", 8}});
  strategy::apply_overrides(doc, {strategy::parse_override("cluster.topology=other.json")});
  REQUIRE(doc["cluster"] == json{{"topology", "other.json"}, {"gpus", 8}});
}

TEST_CASE("a scenario's measured run is set against its prediction", "[training]") {
  auto doc = base();
  doc["measured"] = json{{"run_s", 60.0}, {"role", "calibration"}, {"source", "a test"}};
  const auto s = parse(doc);
  REQUIRE(s.measured.present);
  REQUIRE(s.measured.run_s == 60.0);
  REQUIRE(s.measured.role == strategy::MeasuredRole::calibration);
  strategy::SimulationInputs in;
  in.collectives = run::default_collective_config();
  const auto out = strategy::simulate_scenario(s, in);
  const auto& m = out.report.measured;
  REQUIRE(m.present);
  REQUIRE(m.whole_run);
  REQUIRE(m.predicted_s == out.report.run_time_s);
  REQUIRE(m.error_pct() == Approx(100.0 * (out.report.run_time_s - 60.0) / 60.0));
  const std::string text = strategy::to_text(out.report);
  REQUIRE_THAT(text, Contains(fmt::format("measured    60 s run (a test): predicted {:+.1f}%, a calibration case", m.error_pct())));
  // Where the time goes: the breakdown's parts as shares of the iteration, largest first.
  const auto& b = out.report.breakdown;
  const double host = 100.0 * b.host_s / b.iteration_s;
  const double compute = 100.0 * b.compute_s / b.iteration_s;
  REQUIRE(compute > host);  // no input limit: compute-bound
  REQUIRE_THAT(text, Contains(fmt::format("time goes   {:.0f}% computing", compute)) &&
                         Contains(fmt::format(", {:.0f}% waiting for the host", host)));
  // An input-bound run puts the host first.
  doc["plan"]["input_rate"] = 100.0;
  const auto slow = strategy::simulate_scenario(parse(doc), in).report;
  REQUIRE(slow.breakdown.host_s > slow.breakdown.compute_s);
  REQUIRE_THAT(strategy::to_text(slow),
               Contains(fmt::format("time goes   {:.0f}% waiting for the host",
                                    100.0 * slow.breakdown.host_s / slow.breakdown.iteration_s)));
  REQUIRE(strategy::to_json(out.report, out.plan)["measured"]["role"] == "calibration");
  // One of run_s and iteration_s, and a source.
  doc["measured"] = json{{"run_s", 60.0}, {"iteration_s", 1.0}, {"source", "x"}};
  REQUIRE_THROWS_WITH(parse(doc), Contains("/measured") && Contains("expected one of \"run_s\" or \"iteration_s\""));
  doc["measured"] = json{{"run_s", 60.0}};
  REQUIRE_THROWS_WITH(parse(doc), Contains("/measured") && Contains("source"));
  doc["measured"] = json{{"run_s", 0}, {"source", "x"}};
  REQUIRE_THROWS_WITH(parse(doc), Contains("/measured/run_s"));
}

TEST_CASE("fp32_main_grads, as documented, gives Megatron-LM's 18 bytes per parameter with bf16", "[training]") {
  auto doc = base();
  doc["plan"]["precision"] = "bf16";
  doc["plan"]["optimizer"] = "adam";
  doc["plan"]["fp32_main_grads"] = true;
  const auto s = parse(doc);
  REQUIRE(s.plan.fp32_main_grads);
  // bf16 weights 2 + fp32 gradients 4 + Adam's two fp32 states 8 + fp32 master weights 4 = 18.
  const auto m = strategy::model_state_memory(1000.0, s.plan, 1);
  REQUIRE(m.weights + m.gradients + m.optimizer == Approx(18.0 * 1000.0));
  doc["plan"]["fp32_main_grads"] = false;
  const auto half = strategy::model_state_memory(1000.0, parse(doc).plan, 1);
  REQUIRE(half.weights + half.gradients + half.optimizer == Approx(16.0 * 1000.0));
}

TEST_CASE("pipeline_engine deepspeed: what DeepSpeed's engine cannot run is refused, naming the field", "[training]") {
  auto doc = base();
  doc["plan"]["pipeline_engine"] = "deepspeed";
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/pipeline_engine") && Contains("expected megatron with pp = 1"));
  doc["plan"]["dp"] = 4;
  doc["plan"]["pp"] = 2;
  const auto ok = parse(doc);
  REQUIRE(ok.plan.pipeline_engine == strategy::PipelineEngine::deepspeed);
  REQUIRE(ok.plan.schedule == strategy::Schedule::one_f_one_b);
  REQUIRE_FALSE(ok.plan.p2p_sync);  // its own blocking exchanges instead
  doc["plan"]["schedule"] = "gpipe";
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/schedule") && Contains("expected 1f1b with pipeline_engine deepspeed") &&
                                      Contains("\"gpipe\""));
  doc["plan"].erase("schedule");
  doc["plan"]["p2p_sync"] = true;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/p2p_sync") && Contains("expected no p2p_sync"));
  doc["plan"].erase("p2p_sync");
  doc["plan"]["driver"] = "single_process";
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/driver") && Contains("expected per_stage"));
  doc["plan"].erase("driver");
  doc["plan"]["pipeline_engine"] = "colossal";
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/pipeline_engine") && Contains("megatron") && Contains("colossal"));
}
