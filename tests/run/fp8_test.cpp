// FP8 training as Transformer Engine runs it: the transformer blocks' linear GEMMs in FP8 with
// their casts, everything else in BF16; only on GPUs with FP8 tensor cores.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "exec/op_signature.hpp"
#include "models/compute_model.hpp"
#include "models/model_builder.hpp"
#include "models/model_zoo.hpp"
#include "run/calibration.hpp"
#include "run/scenario.hpp"
#include "run/simulation.hpp"
#include "strategies/memory_model.hpp"
#include "strategies/rank_emitter.hpp"
#include "tests/test_paths.hpp"
#include "topologies/gpu_spec.hpp"

using namespace foresight;
using namespace foresight::strategy;
using nlohmann::json;

namespace {

SimulationOutput simulate_fp8(const json& plan_extra, const std::string& preset = "dgx-h100") {
  json doc{{"model", {{"name", "gpt3-1.3b"}}},
           {"cluster", {{"preset", preset}, {"gpus", 8}}},
           {"plan", {{"tp", 2}, {"dp", 4}, {"micro_batch", 2}, {"global_batch", 16}, {"precision", "bf16"},
                     {"optimizer", "adam"}, {"fused_attention", true}, {"steps", 2}}},
           {"workload", {{"steps", 2}}}};
  for (const auto& [k, v] : plan_extra.items()) doc["plan"][k] = v;
  SimulationInputs inputs;
  inputs.collectives = run::default_collective_config();
  return simulate_scenario(parse_scenario(doc, "fp8.json"), inputs);
}

}  // namespace

TEST_CASE("with_fp8: block linear GEMMs in FP8 with a cast before each, the rest untouched", "[fp8]") {
  const Model base = build_model("gpt3-125m");
  const Model fp8 = with_fp8(base);
  REQUIRE(fp8.layers.size() == base.layers.size());
  REQUIRE(fp8.fwd_flops() == base.fwd_flops());  // model FLOPs: the casts are not model work
  REQUIRE(fp8.bwd_flops() == base.bwd_flops());
  int converted = 0;
  for (std::size_t i = 0; i < base.layers.size(); ++i) {
    const Layer& b = base.layers[i];
    const Layer& f = fp8.layers[i];
    INFO(b.name);
    if (b.kind != "linear" || b.block < 0) {  // the LM head, norms, attention: as they were
      REQUIRE(f.fwd.size() == b.fwd.size());
      for (const OpTemplate& t : f.fwd) REQUIRE(t.math != MathKind::matmul_fp8);
      continue;
    }
    ++converted;
    const OpTemplate* gemm = find_op(f.fwd, "linear_fwd");
    REQUIRE(gemm != nullptr);
    REQUIRE(gemm->math == MathKind::matmul_fp8);
    REQUIRE(find_op(f.bwd, "linear_dgrad")->math == MathKind::matmul_fp8);
    REQUIRE(find_op(f.bwd, "linear_wgrad")->math == MathKind::matmul_fp8);
    // linear_fwd {rows, out, in}: the input cast moves rows x in elements in and twice out (FP8
    // and its transpose, 1 byte each: 2 bytes = 1 element of 2), the output gradient's rows x out.
    const double rows = static_cast<double>(gemm->shape[0]);
    const double out = static_cast<double>(gemm->shape[1]);
    const double in = static_cast<double>(gemm->shape[2]);
    REQUIRE(find_op(f.fwd, "fp8_cast_transpose_input")->act_elems == 2.0 * rows * in);
    const OpTemplate* w = find_op(f.fwd, "fp8_cast_transpose_weight");
    REQUIRE(w->param_elems == 2.0 * in * out);
    REQUIRE_FALSE(w->batched);
    REQUIRE(find_op(f.bwd, "fp8_cast_transpose_grad")->act_elems == 2.0 * rows * out);
    // Casts come first: the GEMM needs their output.
    REQUIRE(f.fwd.front().kernel == "fp8_cast_transpose_input");
    REQUIRE(f.bwd.front().kernel == "fp8_cast_transpose_grad");
  }
  REQUIRE(converted == 12 * 4);  // QKV, output projection, MLP up and down in each of 12 blocks
  // Applying it twice changes nothing more.
  REQUIRE(with_fp8(fp8).layers[5].fwd.size() == fp8.layers[5].fwd.size());
}

TEST_CASE("an FP8 GEMM signature runs at the FP8 peak: half a BF16 GEMM's time on an H100", "[fp8]") {
  const auto& h100 = topo::find_gpu_spec("H100-SXM5-80GB");
  const ComputeModel compute(h100);
  Plan plan;
  plan.precision = Precision::bf16;
  OpTemplate t;
  t.type = sim::OpType::gemm;
  t.kernel = "linear_fwd";
  t.shape = {8192, 8192, 8192, 1};
  t.flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  t.act_elems = 2.0 * 8192.0 * 8192.0;
  t.param_elems = 8192.0 * 8192.0;
  t.math = MathKind::matmul;
  const sim::OpSignature bf16 = instantiate(t, 1, plan, h100.compute_capability);
  t.math = MathKind::matmul_fp8;
  const sim::OpSignature fp8 = instantiate(t, 1, plan, h100.compute_capability);
  REQUIRE(bf16.dtype == sim::DType::bf16);
  REQUIRE(fp8.dtype == sim::DType::fp8);
  REQUIRE(fp8.bytes == bf16.bytes / 2.0);  // 1-byte operands
  // Same tiles and waves, peak 1979 against 989.4 TFLOP/s; the launch gap is the same in both.
  const double gap = compute.constants().launch_gap.seconds();
  const double ratio = (compute.duration(bf16).seconds() - gap) / (compute.duration(fp8).seconds() - gap);
  REQUIRE(ratio == Approx(1979.0 / 989.4).epsilon(1e-6));
}

TEST_CASE("an FP8 plan: its linear GEMMs are FP8 kernels, TP shards their casts, and the step is faster", "[fp8]") {
  const auto off = simulate_fp8(json::object());
  const auto on = simulate_fp8(json{{"fp8", true}});
  REQUIRE(on.report.iteration_time_s < off.report.iteration_time_s);
  const auto& g = on.compiled.graph;
  int fp8_gemms = 0;
  bool weight_cast_seen = false;
  for (const sim::OpSignature& sig : g.signatures) {
    if (sig.kernel.rfind("linear_", 0) == 0 && sig.dtype == sim::DType::fp8) ++fp8_gemms;
    if (sig.kernel == "fp8_cast_transpose_weight") {
      // gpt3-1.3b (h 2048): QKV {1, 2048, 6144 / 2}, output projection {1, 2048 / 2, 2048}, MLP
      // up {1, 2048, 8192 / 2}, down {1, 8192 / 2, 2048}: TP 2 shards every weight cast.
      weight_cast_seen = true;
      REQUIRE(sig.shape[1] * sig.shape[2] * 2 <= 2048LL * 8192LL);
    }
  }
  REQUIRE(fp8_gemms > 0);
  REQUIRE(weight_cast_seen);
  // The LM head stays BF16: the only BF16 linear GEMM is the head's, whose n is the vocabulary
  // shard (50257 / 2), wider than any block's (8192 / 2 at most); fused attention stays BF16.
  int bf16_forward = 0;
  for (const sim::OpSignature& sig : g.signatures) {
    if (sig.kernel == "linear_fwd" && sig.dtype == sim::DType::bf16) {
      ++bf16_forward;
      REQUIRE(sig.shape[1] > 8192 / 2);
    }
    if (sig.type == sim::OpType::attention) REQUIRE(sig.dtype == sim::DType::bf16);
  }
  REQUIRE(bf16_forward >= 1);
}

TEST_CASE("FP8 needs FP8 tensor cores, a BF16 precision and a transformer", "[fp8]") {
  using Catch::Matchers::Contains;
  REQUIRE_THROWS_WITH(simulate_fp8(json{{"fp8", true}}, "dgx-a100"),
                      Contains("/plan/fp8") && Contains("FP8 tensor cores") && Contains("A100-SXM4-40GB"));
  REQUIRE_THROWS_WITH(simulate_fp8(json{{"fp8", true}, {"precision", "fp16"}}),
                      Contains("/plan/fp8") && Contains("bf16 or amp_bf16") && Contains("fp16"));
  json doc{{"model", {{"name", "resnet50"}}},
           {"cluster", {{"preset", "dgx-h100"}, {"gpus", 8}}},
           {"plan", {{"dp", 8}, {"micro_batch", 32}, {"precision", "bf16"}, {"fp8", true}}},
           {"workload", {{"steps", 2}}}};
  REQUIRE_THROWS_WITH(simulate_scenario(parse_scenario(doc, "cnn.json"), SimulationInputs{}),
                      Contains("/plan/fp8") && Contains("transformer"));
}

TEST_CASE("FP8 weights are cast once per step: later micro-batches and recompute use TE's cached copy", "[fp8]") {
  // Every FP8 linear layer casts its input in each forward pass and its weight only in the
  // step's first micro-batch (Megatron's is_first_microbatch), never in a recompute. With
  // micro-batches per step m, input casts are m times the weight casts.
  const auto casts = [](const SimulationOutput& out) {
    const auto& g = out.compiled.graph;
    std::pair<long, long> n{0, 0};  // input casts, weight casts
    for (const sim::Node& node : g.nodes) {
      if (node.kind != sim::OpKind::compute || node.signature == sim::kNoSignature) continue;
      const std::string& k = g.signatures[node.signature].kernel;
      n.first += k == "fp8_cast_transpose_input";
      n.second += k == "fp8_cast_transpose_weight";
    }
    return n;
  };
  for (const int m : {1, 4}) {
    for (const char* recompute : {"none", "full"}) {
      INFO("micro-batches " << m << ", recompute " << recompute);
      const auto out = simulate_fp8(json{{"fp8", true}, {"micro_batch", 4 / m}, {"recompute", recompute}});
      const auto [inputs, weights] = casts(out);
      REQUIRE(weights > 0);
      // Full recompute re-runs each block's forward (input casts again, weights cached).
      const long passes = std::string(recompute) == "full" ? 2 * m : m;
      REQUIRE(inputs == passes * weights);
    }
  }
}

TEST_CASE("FP8 linear layers keep their inputs in FP8 for the backward pass: one byte per element", "[fp8][memory]") {
  // Transformer Engine saves the FP8 transpose of each FP8 linear layer's input (what the weight
  // gradient reads) instead of the BF16 input; other saved tensors stay BF16.
  const Model base = build_model("gpt3-1.3b");
  const Model fp8 = with_fp8(base);
  Plan p;
  p.precision = Precision::bf16;
  p.micro_batch = 2;
  double block_linear_inputs = 0.0;
  for (const Layer& l : base.layers) {
    if (l.kind == "linear" && l.block >= 0) block_linear_inputs += l.saved_elems;
  }
  REQUIRE(block_linear_inputs > 0.0);
  const std::size_t n = base.layers.size();
  const double drop = saved_activation_bytes(base, p, 0, n, false) - saved_activation_bytes(fp8, p, 0, n, false);
  REQUIRE(drop == Approx(block_linear_inputs * (2.0 - 1.0) * p.micro_batch));
  // The LM head (outside the blocks) stays BF16.
  const Layer& head = base.layers[n - 2];
  REQUIRE(head.name == "lm_head");
  REQUIRE(saved_activation_bytes(fp8, p, n - 2, n - 1, false) == saved_activation_bytes(base, p, n - 2, n - 1, false));
}

TEST_CASE("with_fp8 on routed experts: each expert's GEMMs in FP8 behind their casts, permutations outside",
          "[fp8][moe]") {
  // Transformer Engine's GroupedLinear (Megatron-Core's TEGroupedMLP) under fp8_autocast.
  const Model base = build_model("mixtral-8x7b");
  const Model fp8 = with_fp8(base);
  REQUIRE(fp8.fwd_flops() == base.fwd_flops());
  REQUIRE(fp8.bwd_flops() == base.bwd_flops());
  int converted = 0;
  for (const Layer& l : fp8.layers) {
    if (l.kind != "experts") continue;
    ++converted;
    // Per token: h = 4096 in, 2 f = 28672 up, f = 14336 down.
    const double h = 4096, up = 2 * 14336, f = 14336;
    std::vector<std::string> fwd;
    for (const OpTemplate& t : l.fwd) fwd.push_back(t.kernel);
    REQUIRE(fwd == std::vector<std::string>{"moe_permute", "moe_sort_chunks", "fp8_cast_transpose_expert_input",
                                            "fp8_cast_transpose_expert_up_weight", "expert_up_fwd", "expert_swiglu_fwd",
                                            "fp8_cast_transpose_expert_hidden", "fp8_cast_transpose_expert_down_weight",
                                            "expert_down_fwd", "moe_unsort_chunks", "moe_unpermute"});
    REQUIRE(find_op(l.fwd, "expert_up_fwd")->math == MathKind::matmul_fp8);
    REQUIRE(find_op(l.fwd, "expert_down_fwd")->math == MathKind::matmul_fp8);
    REQUIRE(find_op(l.fwd, "expert_swiglu_fwd")->math != MathKind::matmul_fp8);
    // A token's input read in 2 bytes and written as FP8 and its transpose: 2 elements of 2 bytes.
    REQUIRE(find_op(l.fwd, "fp8_cast_transpose_expert_input")->act_elems == 2 * h);
    REQUIRE(find_op(l.fwd, "fp8_cast_transpose_expert_hidden")->act_elems == 2 * f);
    const OpTemplate* w = find_op(l.fwd, "fp8_cast_transpose_expert_up_weight");
    REQUIRE_FALSE(w->batched);  // once per expert and micro-batch, whatever its tokens
    REQUIRE(w->param_elems == 2 * h * up);
    REQUIRE(find_op(l.fwd, "fp8_cast_transpose_expert_down_weight")->param_elems == 2 * f * h);
    REQUIRE(l.bwd.front().kernel == "moe_unpermute_bwd");
    REQUIRE(l.bwd[1].kernel == "moe_unsort_chunks_bwd");
    REQUIRE(l.bwd[l.bwd.size() - 2].kernel == "moe_sort_chunks_bwd");
    REQUIRE(l.bwd.back().kernel == "moe_permute_bwd");
    REQUIRE(find_op(l.bwd, "fp8_cast_transpose_expert_down_grad")->act_elems == 2 * h);
    REQUIRE(find_op(l.bwd, "fp8_cast_transpose_expert_up_grad")->act_elems == 2 * up);
    for (const char* k : {"expert_down_dgrad", "expert_down_wgrad", "expert_up_dgrad", "expert_up_wgrad"}) {
      REQUIRE(find_op(l.bwd, k)->math == MathKind::matmul_fp8);
    }
    // Saved per assignment (a sample's 4096 tokens x top-2): the GEMM inputs h and f as FP8
    // transposes (1 byte), the activation's input 2f in BF16.
    const double assignments = 4096.0 * 2;
    REQUIRE(l.saved_elems == Approx(assignments * (h + up + f)));
    REQUIRE(l.saved_bytes.has_value());
    REQUIRE(*l.saved_bytes == Approx(assignments * (h + 2 * up + f)));
  }
  REQUIRE(converted == 32);
  // On an H100 each expert's up projection at 4096 tokens runs as an FP8 GEMM: at the FP8 peak,
  // at most 0.6 of its BF16 time (half, plus the launch gap and the bytes at the same HBM rate).
  const auto& h100 = topo::find_gpu_spec("H100-SXM5-80GB");
  const ComputeModel compute(h100);
  Plan plan;
  plan.precision = Precision::bf16;
  const auto& experts = *std::find_if(fp8.layers.begin(), fp8.layers.end(), [](const Layer& l) { return l.kind == "experts"; });
  const auto& bf16_experts = *std::find_if(base.layers.begin(), base.layers.end(), [](const Layer& l) { return l.kind == "experts"; });
  const auto s8 = instantiate(*find_op(experts.fwd, "expert_up_fwd"), 4096, plan, h100.compute_capability);
  const auto s16 = instantiate(*find_op(bf16_experts.fwd, "expert_up_fwd"), 4096, plan, h100.compute_capability);
  REQUIRE(s8.dtype == sim::DType::fp8);
  REQUIRE(s16.dtype == sim::DType::bf16);
  REQUIRE(s8.flops == s16.flops);
  REQUIRE(compute.duration(s8).seconds() < 0.6 * compute.duration(s16).seconds());
}

TEST_CASE("FP8 experts in a run: weight casts in the first micro-batch only, casts sharded with expert TP",
          "[fp8][moe]") {
  // The 4-layer Mixtral-like test model (h 512, 8 experts of 1024, top-2), TP 2 x EP 2 x DP 2,
  // two micro-batches per step.
  json doc{{"model", {{"hf_config", test::data_path("hf/tiny-mixtral/config.json")}}},
           {"cluster", {{"preset", "dgx-h100"}, {"gpus", 8}}},
           {"plan", {{"tp", 2}, {"ep", 2}, {"dp", 2}, {"micro_batch", 2}, {"global_batch", 16}, {"precision", "bf16"},
                     {"optimizer", "adam"}, {"fused_attention", true}, {"fp8", true}, {"steps", 1}, {"fold", false},
                     {"network", "analytical"}}},
           {"workload", {{"steps", 1}}}};
  SimulationInputs inputs;
  inputs.collectives = run::default_collective_config();
  const auto out = simulate_scenario(parse_scenario(doc, "fp8-moe.json"), inputs);
  const auto& g = out.compiled.graph;
  std::map<std::string, int> casts_by_micro;
  bool up_weight_seen = false;
  for (const auto& n : g.nodes) {
    if (n.rank != 0 || n.kind != sim::OpKind::compute) continue;
    const std::string& name = g.names[n.name];
    if (name.find("fp8_cast_transpose_expert") == std::string::npos) continue;
    const auto& sig = g.signatures[n.signature];
    const bool weight = name.ends_with("_weight");
    if (weight) ++casts_by_micro[std::to_string(n.micro_batch)];
    if (name.ends_with("expert_up_weight")) {
      // {1, h, 2f / t}: the up projection's weight split by its outputs over TP 2.
      REQUIRE(sig.shape == std::vector<std::int64_t>{1, 512, 2 * 1024 / 2});
      up_weight_seen = true;
    }
    if (name.ends_with("expert_down_weight")) REQUIRE(sig.shape == std::vector<std::int64_t>{1, 1024 / 2, 512});
    if (name.ends_with("expert_hidden")) REQUIRE(sig.shape.back() == 1024 / 2);
    if (name.ends_with("expert_input")) REQUIRE(sig.shape.back() == 512);
  }
  REQUIRE(up_weight_seen);
  // Micro-batch 0: 4 layers x 4 local experts x 2 weights; micro-batch 1 reuses them.
  REQUIRE(casts_by_micro["0"] == 4 * 4 * 2);
  REQUIRE(casts_by_micro.count("1") == 0);
}

TEST_CASE("FP8 current scaling: an amax pass and a scale kernel before each cast, sharded and cached as it is",
          "[fp8]") {
  // Transformer Engine's Float8CurrentScaling takes each tensor's amax in a pass of its own (one
  // read of the 2-byte tensor: half the bytes of the cast, which reads 2 and writes 1 + 1) and
  // turns it into the scale in a kernel of its own, before the cast.
  const Model delayed = with_fp8(build_model("gpt3-125m"));
  const Model current = with_fp8_current_scaling(delayed);
  int amax_passes = 0;
  for (std::size_t i = 0; i < delayed.layers.size(); ++i) {
    for (const bool fwd : {true, false}) {
      const auto& before = fwd ? delayed.layers[i].fwd : delayed.layers[i].bwd;
      const auto& after = fwd ? current.layers[i].fwd : current.layers[i].bwd;
      std::size_t k = 0;
      for (const OpTemplate& t : before) {
        INFO(delayed.layers[i].name << " " << t.kernel);
        if (t.kernel.starts_with("fp8_cast_transpose_")) {
          const std::string tensor = t.kernel.substr(std::string("fp8_cast_transpose_").size());
          REQUIRE(after.at(k).kernel == "fp8_amax_" + tensor);
          REQUIRE(after.at(k).act_elems == t.act_elems / 2);
          REQUIRE(after.at(k).param_elems == t.param_elems / 2);
          REQUIRE(after.at(k).shape == t.shape);
          REQUIRE(after.at(k + 1).kernel == "fp8_scale_" + tensor);
          REQUIRE(after.at(k + 1).act_elems + after.at(k + 1).param_elems == 0.0);
          REQUIRE(fp8_cast_of(after.at(k).kernel) == tensor);
          REQUIRE(is_fp8_weight_cast(after.at(k).kernel) == is_fp8_weight_cast(t.kernel));
          k += 2;
          ++amax_passes;
        }
        REQUIRE(after.at(k).kernel == t.kernel);
        ++k;
      }
      REQUIRE(k == after.size());
    }
  }
  // gpt3-125m: 12 blocks of 4 linear layers, each with an input, a weight and a gradient cast.
  REQUIRE(amax_passes == 12 * 4 * 3);
  REQUIRE(current.fwd_flops() == delayed.fwd_flops());

  // In a run (TP 2): each amax pass is sharded as its cast, the weights' only in the first
  // micro-batch, and the step is slower by them.
  const auto off = simulate_fp8(json{{"fp8", true}});
  const auto on = simulate_fp8(json{{"fp8", true}, {"fp8_recipe", "current"}});
  REQUIRE(on.report.iteration_time_s > off.report.iteration_time_s);
  const auto& g = on.compiled.graph;
  std::map<std::string, long> count;
  std::map<std::string, double> bytes;
  for (const sim::Node& node : g.nodes) {
    if (node.rank != 0 || node.kind != sim::OpKind::compute || node.signature == sim::kNoSignature) continue;
    const sim::OpSignature& sig = g.signatures[node.signature];
    count[sig.kernel] += 1;
    bytes[sig.kernel] += sig.bytes;
  }
  for (const char* tensor : {"input", "weight", "grad"}) {
    INFO(tensor);
    const std::string cast = std::string("fp8_cast_transpose_") + tensor;
    REQUIRE(count[cast] > 0);
    REQUIRE(count[std::string("fp8_amax_") + tensor] == count[cast]);
    REQUIRE(count[std::string("fp8_scale_") + tensor] == count[cast]);
    REQUIRE(bytes[std::string("fp8_amax_") + tensor] == Approx(bytes[cast] / 2));
  }
  using Catch::Matchers::Contains;
  REQUIRE_THROWS_WITH(simulate_fp8(json{{"fp8_recipe", "current"}}),
                      Contains("/plan/fp8_recipe") && Contains("expected delayed without fp8 true"));
}

TEST_CASE("FP8 current scaling under sequence parallelism: each sharded amax all-reduced over the TP group",
          "[fp8]") {
  // Transformer Engine (v2.9, _customize_quantizers_float8_current_scaling): under sequence
  // parallelism the input of a column-parallel layer and the output gradient of a row-parallel
  // one are quantized from each rank's sequence shard and gathered in FP8, so their amax is
  // all-reduced over the TP group (one fp32 value) between the amax pass and the scale.
  const auto out = simulate_fp8(json{{"fp8", true}, {"fp8_recipe", "current"}, {"sequence_parallel", true}});
  const auto& g = out.compiled.graph;
  // Expected per micro-batch: one per column-parallel linear forward, one per row-parallel
  // linear backward; 2 micro-batches per step (16 / (dp 4 x 2)), 2 steps.
  long columns = 0, rows = 0;
  for (const Layer& l : out.model.layers) {
    if (l.kind != "linear") continue;
    columns += l.tp == TpRole::column && find_op(l.fwd, "fp8_scale_input") != nullptr;
    rows += l.tp == TpRole::row && find_op(l.bwd, "fp8_scale_grad") != nullptr;
  }
  REQUIRE(columns > 0);
  REQUIRE(rows > 0);
  long forward = 0, backward = 0;
  std::uint32_t tp_comm = 0xffffffffu;
  for (const sim::Node& n : g.nodes) {
    if (n.rank == 0 && n.kind == sim::OpKind::collective && g.names[n.name].find("output gradient") != std::string::npos &&
        g.names[n.name].find("amax") == std::string::npos) {
      tp_comm = n.communicator;  // a sequence-parallel collective of the layers
    }
  }
  REQUIRE(tp_comm != 0xffffffffu);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const sim::Node& n = g.nodes[i];
    if (n.rank != 0 || n.kind != sim::OpKind::collective) continue;
    const std::string& name = g.names[n.name];
    if (name.find(" amax") == std::string::npos) continue;
    REQUIRE(n.op == sim::CollectiveOp::all_reduce);
    REQUIRE(n.bytes == 4.0);
    REQUIRE(n.communicator == tp_comm);
    const bool input = name.ends_with("input amax");
    (input ? forward : backward) += 1;
    // After the amax pass, before the scale: the next kernel node of the rank waits for it.
    REQUIRE(n.deps.size() == 1);
    const sim::Node& amax = g.nodes[n.deps[0]];
    REQUIRE(amax.kind == sim::OpKind::compute);
    const std::string tensor = input ? "input" : "grad";
    // Its last kernel (a node may stand for a run of them) is the amax pass.
    const std::uint32_t last_signature =
        amax.run == sim::kNoRun ? amax.signature
                                : g.part_signature[g.runs[amax.run].first + g.runs[amax.run].count - 1];
    REQUIRE(g.signatures[last_signature].kernel == "fp8_amax_" + tensor);
    bool scaled = false;
    for (std::size_t j = i + 1; j < g.nodes.size() && !scaled; ++j) {
      const sim::Node& m = g.nodes[j];
      if (m.rank != 0 || m.kind != sim::OpKind::compute || m.signature == sim::kNoSignature) continue;
      REQUIRE(g.signatures[m.signature].kernel == "fp8_scale_" + tensor);
      REQUIRE(std::find(m.deps.begin(), m.deps.end(), static_cast<sim::NodeId>(i)) != m.deps.end());
      scaled = true;
    }
    REQUIRE(scaled);
  }
  REQUIRE(forward == columns * 2 * 2);
  REQUIRE(backward == rows * 2 * 2);
  // Without sequence parallelism, or with delayed scaling, there is none.
  for (const json& plan : {json{{"fp8", true}, {"fp8_recipe", "current"}}, json{{"fp8", true}, {"sequence_parallel", true}}}) {
    const auto other = simulate_fp8(plan);
    for (const sim::Node& n : other.compiled.graph.nodes) {
      REQUIRE(other.compiled.graph.names[n.name].find(" amax") == std::string::npos);
    }
  }
}
