// The parameter table: every scenario key is read, range-checked, echoed and documented from it.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "run/params.hpp"
#include "run/scenario.hpp"
#include "tests/test_paths.hpp"

using namespace foresight;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

json base() {
  return json::parse(R"({
    "model": {"name": "gpt2"},
    "cluster": {"preset": "dgx-a100", "gpus": 8},
    "plan": {"dp": 8, "micro_batch": 4},
    "workload": {"steps": 10}})");
}

strategy::Scenario parse(const json& doc) { return strategy::parse_scenario(doc, "s.json"); }

/// The document's `section` object ("plan.moe_routing" is nested in "plan").
json& section_of(json& doc, std::string_view section) {
  for (const char* nested : {"moe_routing", "stragglers"}) {
    if (section == "plan." + std::string(nested)) {
      doc["plan"][nested] = json::object();
      return doc["plan"][nested];
    }
  }
  return doc[std::string(section)];
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("every parameter is documented with its type, default and range", "[params]") {
  std::set<std::string> paths;
  for (const auto& p : strategy::scenario_params()) {
    INFO(p.path());
    REQUIRE(paths.insert(p.path()).second);  // declared once
    REQUIRE_FALSE(p.doc.empty());
    REQUIRE_FALSE(p.default_text.empty());
    if (p.kind == strategy::ParamKind::integer || p.kind == strategy::ParamKind::number) REQUIRE(p.lo < p.hi);
    if (p.kind == strategy::ParamKind::choice) REQUIRE(p.choices.size() >= 2);
  }
  // Each section the scenario format has, and every plan key scenarios were written with before the
  // table existed (the reader's former key list), are there.
  for (const char* s : {"model", "cluster", "plan", "plan.moe_routing", "plan.stragglers", "workload"}) {
    REQUIRE_FALSE(strategy::section_keys(s).empty());
  }
  const std::set<std::string_view> former{
      "dp", "tp", "pp", "ep", "micro_batch", "grad_accum", "global_batch", "framework", "precision", "tf32_conv",
      "tf32_matmul", "optimizer", "bucket_cap", "first_bucket", "fusion_threshold", "cycle_time", "input_rate",
      "step_overhead", "dispatch_forward", "dispatch_backward", "dispatch_optimizer", "sync_each_step",
      "comm_compute_slowdown", "network", "steps", "schedule", "virtual_stages", "partition", "driver",
      "microbatch_overhead", "dispatch_gil", "p2p_sync", "recompute", "scale_axis", "zero", "shard_group",
      "sequence_parallel", "fused_attention", "fold", "placement", "moe_routing", "gemm_efficiency"};
  auto added = former;
  added.insert("stragglers");       // since the table
  added.insert("fp32_main_grads");  // documented before it was a key (issue 24)
  added.insert("optimizer_impl");   // foreach or fused optimizer kernels (issue 21, measured on an H200)
  added.insert("comm_contention");  // compute slowed under communication, measured on an H100 (issue 20)
  added.insert("fp8");              // Transformer Engine FP8 linear layers (issue 20)
  added.insert("zero3_schedule");   // PyTorch FSDP's units, rate limit and prefetch, or DeepSpeed's (issue 20)
  added.insert("tp_comm_overlap");  // Transformer Engine's TP communication overlap (issue 20)
  added.insert("kernels");          // eager PyTorch kernels of Hugging Face modules (issue 20)
  added.insert("pipeline_engine");  // DeepSpeed's PipelineEngine under Megatron-DeepSpeed (issue 20)
  added.insert("attention_kernel");  // FlashAttention-2 or cuDNN fused attention, measured on Hopper (issue 20)
  added.insert("batchnorm_fusion");  // MXNet's fused BatchNorm, as NVIDIA's MLPerf ResNet-50 runs it (issue 20)
  added.insert("gradient_groups");   // Horovod's explicit gradient groups (MXNET_HOROVOD_NUM_GROUPS, issue 20)
  added.insert("kernel_generation");  // Megatron-LM v2's matrix kernels, SC21's measured rate (issue 20)
  added.insert("cp");  // context parallelism, Megatron-Core's ring attention (issue 20)
  added.insert("cp_comm");  // its exchange: a ring or Ulysses' all-to-alls (issue 20)
  added.insert("moe_host_sync");  // Megatron-Core's dispatcher waits for the token counts (issue 20)
  added.insert("fp8_recipe");  // Transformer Engine's delayed or current FP8 scaling (issue 20)
  added.insert("recompute_modules");  // Megatron-Core's selective recompute modules (issue 20)
  added.insert("expert_tp");  // Megatron-Core's expert_tensor_parallel_size, 1 or tp (issue 20)
  for (const char* k : {"input_workers", "input_sample_time", "input_prefetch", "input_cores"}) {
    added.insert(k);  // PyTorch DataLoader workers (issue 20)
  }
  const auto plan = strategy::section_keys("plan");
  REQUIRE(std::set<std::string_view>(plan.begin(), plan.end()) == added);
}

TEST_CASE("docs/reference.md is the reference generated from the table", "[params]") {
  // Regenerate with: build/cli/foresight params --markdown > docs/reference.md
  REQUIRE(read_file(test::source_path("docs/reference.md")) == strategy::params_markdown());
}

TEST_CASE("a key outside the table is rejected, in the file and in --set", "[params]") {
  auto doc = base();
  doc["plan"]["micro_bacth"] = 4;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/micro_bacth: unknown key \"micro_bacth\" in a plan; expected only dp, "
                                           "tp, pp, ep, expert_tp, cp, cp_comm, micro_batch"));
  REQUIRE_NOTHROW(strategy::check_param_path("plan.tp"));
  REQUIRE_NOTHROW(strategy::check_param_path("plan.moe_routing.seed"));
  REQUIRE_THROWS_WITH(strategy::check_param_path("plan.tpp"), Contains("--set plan.tpp: unknown key \"tpp\" in plan"));
  REQUIRE_THROWS_WITH(strategy::check_param_path("simulation.network"),
                      Contains("expected a path under model, cluster, plan"));
}

TEST_CASE("every integer and number is refused just outside its declared range", "[params]") {
  for (const auto& p : strategy::scenario_params()) {
    if (p.kind != strategy::ParamKind::integer && p.kind != strategy::ParamKind::number) continue;
    INFO(p.path());
    auto doc = base();
    if (p.section == "workload") doc["workload"] = json::object({{"steps", 10}});
    json& obj = section_of(doc, p.section);
    std::string section(p.section);
    std::replace(section.begin(), section.end(), '.', '/');
    const std::string pointer = fmt::format("/{}/{}", section, p.key);
    if (p.kind == strategy::ParamKind::integer) {
      obj[std::string(p.key)] = static_cast<long long>(p.hi) + 1;
      REQUIRE_THROWS_WITH(parse(doc), Contains(pointer) && Contains(fmt::format("expected an integer from {} to {}",
                                                                              static_cast<long long>(p.lo),
                                                                              static_cast<long long>(p.hi))));
      obj[std::string(p.key)] = static_cast<long long>(p.lo) - 1;
      REQUIRE_THROWS_WITH(parse(doc), Contains(pointer) && Contains("expected an integer from"));
    } else {
      if (p.section == "plan.moe_routing") obj["distribution"] = "zipf";  // s belongs to zipf
      obj[std::string(p.key)] = p.lo_open ? p.lo : p.lo - 1.0;
      REQUIRE_THROWS_WITH(parse(doc), Contains(pointer) && Contains("expected a number"));
      if (!std::isinf(p.hi)) {
        obj[std::string(p.key)] = p.hi * 1.5 + 1.0;
        REQUIRE_THROWS_WITH(parse(doc), Contains(pointer) && Contains("expected a number"));
      }
    }
  }
}

TEST_CASE("every choice is refused outside its names, with the names listed", "[params]") {
  for (const auto& p : strategy::scenario_params()) {
    if (p.kind != strategy::ParamKind::choice) continue;
    INFO(p.path());
    auto doc = base();
    section_of(doc, p.section)[std::string(p.key)] = "no-such-choice";
    REQUIRE_THROWS_WITH(parse(doc), Contains(fmt::format("expected one of {}, found \"no-such-choice\"",
                                                         fmt::join(p.choices, ", "))));
  }
}

TEST_CASE("the echoed plan reads back as the same plan, for every example", "[params]") {
  for (const char* example : {"examples/thetagpu-resnet18-ddp.json", "examples/thetagpu-resnet18-gpipe.json",
                              "examples/gpt2-1f1b-4stages.json", "examples/gpt3-175b-3d-sweep-1024.json",
                              "examples/mixtral-8x7b-ep8-pp4-64xh100.json", "examples/resnet50-ddp-selene.json"}) {
    INFO(example);
    const auto s = strategy::load_scenario(test::source_path(example));
    const json echoed = strategy::plan_to_json(s.plan);
    // Every echoed key is a table key of the plan, and every plan key with a value is echoed
    // (moe_routing and stragglers are objects, reported in their own lines).
    for (const auto& [key, value] : echoed.items()) REQUIRE(strategy::find_param("plan", key) != nullptr);
    for (const auto key : strategy::section_keys("plan")) {
      if (key != "moe_routing" && key != "stragglers") REQUIRE(echoed.contains(std::string(key)));
    }
    json doc = json::parse(read_file(test::source_path(example)));
    json plan = echoed;
    if (doc["plan"].contains("moe_routing")) plan["moe_routing"] = doc["plan"]["moe_routing"];
    doc["plan"] = plan;
    const auto again = strategy::parse_scenario(doc, test::source_path(example));
    REQUIRE(strategy::plan_to_json(again.plan) == echoed);
  }
}

TEST_CASE("--set reaches every table key through the same reader", "[params]") {
  auto doc = base();
  strategy::apply_overrides(doc, {strategy::parse_override("plan.bucket_cap=50 MiB"),
                                  strategy::parse_override("plan.precision=\"amp_bf16\""),
                                  strategy::parse_override("plan.network=analytical")});
  const auto s = parse(doc);
  REQUIRE(s.plan.bucket_cap == sim::Bytes(50LL << 20));
  REQUIRE(s.plan.precision == strategy::Precision::amp_bf16);
  REQUIRE(s.plan.network == sim::NetworkKind::analytical);
  auto bad = base();
  REQUIRE_THROWS_WITH(strategy::apply_overrides(bad, {strategy::parse_override("plan.bucket_capp=1")}),
                      Contains("unknown key \"bucket_capp\" in plan; expected one of dp, tp"));
}

TEST_CASE("DataLoader workers: the plan's input is a rate or a pool of workers, described whole", "[params]") {
  auto doc = base();
  doc["plan"]["input_workers"] = 8;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/input_sample_time: expected a CPU time per sample above 0 with 8 "
                                           "input_workers, found none"));
  doc["plan"]["input_sample_time"] = "3 ms";
  const strategy::Scenario s = parse(doc);
  REQUIRE(s.plan.input_workers == 8);
  REQUIRE(s.plan.input_sample_time == sim::Time::from_seconds(3e-3));
  REQUIRE(s.plan.input_prefetch == 2);
  REQUIRE(s.plan.input_cores == 0);
  // Enough steps for one steady window of a batch per worker after the first step.
  REQUIRE(s.plan.steps >= 9);
  doc["plan"]["input_rate"] = 1000;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/input_workers: expected 0 with input_rate (1000 samples/s)"));
  doc["plan"].erase("input_rate");
  doc["plan"]["input_prefetch"] = 0;
  REQUIRE_THROWS_WITH(parse(doc), Contains("/plan/input_prefetch") && Contains("expected an integer from 1"));
  auto bare = base();
  bare["plan"]["input_cores"] = 16;
  REQUIRE_THROWS_WITH(parse(bare), Contains("/plan/input_cores: expected no input_cores without input_workers"));
}
