// Eager PyTorch kernels (plan.kernels "eager", models/eager_kernels.hpp): what Hugging Face's
// modules launch under autocast and without it, derived here from their Python code, and what
// the compute model makes of each memory path.
#include <catch2/catch.hpp>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/op_signature.hpp"
#include "models/compute_model.hpp"
#include "models/eager_kernels.hpp"
#include "models/model_builder.hpp"
#include "models/model_zoo.hpp"
#include "run/scenario.hpp"
#include "run/simulation.hpp"
#include "topologies/gpu_spec.hpp"

using namespace foresight;
using namespace foresight::strategy;
using nlohmann::json;
using sim::MemoryPath;

namespace {

const Layer& layer(const Model& m, const std::string& name) {
  const auto it = std::find_if(m.layers.begin(), m.layers.end(), [&](const Layer& l) { return l.name == name; });
  REQUIRE(it != m.layers.end());
  return *it;
}

std::vector<const OpTemplate*> named(const std::vector<OpTemplate>& ops, const std::string& kernel) {
  std::vector<const OpTemplate*> out;
  for (const OpTemplate& t : ops) {
    if (t.kernel == kernel) out.push_back(&t);
  }
  return out;
}

double bytes(const std::vector<OpTemplate>& ops) {
  double b = 0.0;
  for (const OpTemplate& t : ops) b += t.bytes;
  return b;
}

constexpr EagerOptions kAmpBf16{.activation = 2, .autocast = true, .kv_cache = true};
constexpr EagerOptions kFp32{.activation = 4, .autocast = false, .kv_cache = true};

// GPT-2 124M: s = 1024, h = 768, ffn = 3072, vocab 50257.
constexpr double kS = 1024;
constexpr double kH = 768;
constexpr double kFfn = 3072;

SimulationOutput simulate_eager(const std::string& model, const json& plan_extra) {
  json doc{{"model", {{"name", model}}},
           {"cluster", {{"preset", "dgx-h200"}, {"gpus", 1}}},
           {"plan", {{"micro_batch", 2}, {"precision", "amp_bf16"}, {"optimizer", "adam"}, {"fused_attention", true}}},
           {"workload", {{"steps", 2}}}};
  for (const auto& [k, v] : plan_extra.items()) doc["plan"][k] = v;
  return simulate_scenario(parse_scenario(doc, "eager.json"), SimulationInputs{});
}

}  // namespace

TEST_CASE("eager GPT-2 under autocast: NewGELU's ops in fp32 after pow, nine kernels forward", "[eager]") {
  const Model m = with_eager_kernels(with_fused_attention(build_model("gpt2")), kAmpBf16);
  const Layer& act = layer(m, "h.3.mlp.act");
  // Forward: 0.5 * x (bf16: 2 + 2), x -> fp32 for pow (2 + 4), pow, * 0.044715 (4 + 4 each),
  // x + . (bf16 + fp32 -> fp32: 2 + 4 + 4), * sqrt(2 / pi), tanh, 1 + . (4 + 4 each),
  // (0.5 x) * . (2 + 4 + 4): 70 bytes per element.
  REQUIRE(act.fwd.size() == 9);
  REQUIRE(bytes(act.fwd) == Approx(70.0 * kS * kFfn));
  // The three mixed-dtype kernels take the cast path, the rest are vectorized.
  REQUIRE(std::count_if(act.fwd.begin(), act.fwd.end(), [](const OpTemplate& t) { return t.path == MemoryPath::cast; }) == 3);
  REQUIRE(act.bwd.size() == 14);
  // Kept for backward: pow's fp32 input, tanh's fp32 output, and the last product's operands
  // (0.5 x in bf16, 1 + tanh in fp32): 4 + 4 + 2 + 4 bytes per element; the output is fp32.
  REQUIRE(act.saved_bytes.value() == Approx(14.0 * kS * kFfn));
  REQUIRE(act.output_bytes.value() == Approx(4.0 * kS * kFfn));
  // The model FLOPs MFU counts are the builder's, whatever the kernels.
  const Model fused = with_fused_attention(build_model("gpt2"));
  REQUIRE(m.fwd_flops() == fused.fwd_flops());
  REQUIRE(m.bwd_flops() == fused.bwd_flops());
}

TEST_CASE("eager GPT-2 in fp32: no casts, eight GELU kernels forward and eleven backward", "[eager]") {
  const Model m = with_eager_kernels(with_fused_attention(build_model("gpt2")), kFp32);
  for (const Layer& l : m.layers) {
    for (const auto* list : {&l.fwd, &l.bwd}) {
      for (const OpTemplate& t : *list) {
        INFO(l.name << " " << t.kernel);
        REQUIRE(t.kernel.find("cast") == std::string::npos);
        REQUIRE(t.path != MemoryPath::cast);
      }
    }
  }
  const Layer& act = layer(m, "h.0.mlp.act");
  REQUIRE(act.fwd.size() == 8);
  REQUIRE(act.bwd.size() == 11);
  // Each op reads its tensor operands and writes one: 2 x 6 unary + 3 x 2 binary = 18 fp32
  // elements forward per element.
  REQUIRE(bytes(act.fwd) == Approx(18.0 * 4.0 * kS * kFfn));
  // fp32 logits need no upcast: log-softmax reads them three times and writes once.
  const Layer& loss = layer(m, "loss");
  REQUIRE(named(loss.fwd, "eager_logits_upcast").empty());
  REQUIRE(named(loss.fwd, "eager_log_softmax").at(0)->bytes == Approx(16.0 * kS * 50257));
}

TEST_CASE("eager linear layers under autocast: each weight cast, inputs cast where the stream is fp32", "[eager]") {
  const Model m = with_eager_kernels(with_fused_attention(build_model("gpt2")), kAmpBf16);
  // qkv reads ln_1's fp32 output: its weight (h x 3h) and bias (3h), each cast by its own
  // kernel, and, per projection the model counts (query, key, value), its input cast to bf16,
  // 4 + 2 bytes per element.
  const Layer& qkv = layer(m, "h.2.attn.qkv");
  const auto weight = named(qkv.fwd, "eager_weight_cast");
  REQUIRE(weight.size() == 1);
  REQUIRE_FALSE(weight[0]->batched);
  REQUIRE(weight[0]->bytes == Approx(6.0 * kH * 3 * kH));
  REQUIRE(named(qkv.fwd, "eager_bias_cast").at(0)->bytes == Approx(6.0 * 3 * kH));
  const auto inputs = named(qkv.fwd, "eager_input_cast");
  REQUIRE(inputs.size() == 3);
  REQUIRE(inputs[0]->bytes == Approx(6.0 * kS * kH));
  // Backward: the weight gradient back to fp32 (cast path), each input gradient too, and the
  // three projections' input gradients summed (two adds in fp32).
  REQUIRE(named(qkv.bwd, "eager_weight_grad_cast").at(0)->path == MemoryPath::cast);
  REQUIRE(named(qkv.bwd, "eager_bias_grad_cast").size() == 1);
  REQUIRE(named(qkv.bwd, "eager_input_grad_cast").size() == 3);
  REQUIRE(named(qkv.bwd, "eager_input_grad_add").size() == 2);
  REQUIRE(named(qkv.bwd, "eager_bias_grad").size() == 1);
  // Each projection's GEMM keeps its own bf16 copy of the input.
  REQUIRE(qkv.saved_bytes.value() == Approx(3 * 2.0 * kS * kH));
  // LayerNorm keeps its fp32 input and an fp32 mean and rstd per row; its output is fp32.
  const Layer& ln = layer(m, "h.2.ln_1");
  REQUIRE(ln.saved_bytes.value() == Approx(4.0 * kS * kH + 8.0 * kS));
  REQUIRE(ln.output_bytes.value() == Approx(4.0 * kS * kH));
  // The loss keeps log-softmax's fp32 output, and holds the logits upcast: the LM head's output
  // counts 4 bytes per logit at the turn from forward to backward.
  REQUIRE(layer(m, "loss").saved_bytes.value() == Approx(4.0 * kS * 50257));
  REQUIRE(layer(m, "lm_head").output_bytes.value() == Approx(4.0 * kS * 50257));
  // The attention projection reads the attention output, already bf16: no input cast.
  const Layer& proj = layer(m, "h.2.attn.proj");
  REQUIRE(named(proj.fwd, "eager_weight_cast").size() == 1);
  REQUIRE(named(proj.fwd, "eager_input_cast").empty());
  REQUIRE(named(proj.bwd, "eager_input_grad_cast").empty());
  // The MLP's output projection reads NewGELU's fp32 output: cast.
  REQUIRE(named(layer(m, "h.2.mlp.proj").fwd, "eager_input_cast").size() == 1);
  // The residual add: bf16 branch + fp32 stream -> fp32, 2 + 4 + 4 bytes, cast path.
  const Layer& add = layer(m, "h.2.attn.residual");
  REQUIRE(add.fwd.size() == 1);
  REQUIRE(add.fwd[0].path == MemoryPath::cast);
  REQUIRE(add.fwd[0].bytes == Approx(10.0 * kS * kH));
  // The logits (bf16) upcast before the loss: 2 + 4 bytes per logit.
  REQUIRE(named(layer(m, "loss").fwd, "eager_logits_upcast").at(0)->bytes == Approx(6.0 * kS * 50257));
}

TEST_CASE("eager decoders append K and V to a cache unless checkpointing; RMSNorm and RoPE unfused", "[eager]") {
  const Model gpt = with_eager_kernels(with_fused_attention(build_model("gpt2")), kAmpBf16);
  REQUIRE(named(layer(gpt, "h.0.attn.core").fwd, "eager_cache_cat_key").size() == 1);
  EagerOptions checkpointed = kAmpBf16;
  checkpointed.kv_cache = false;
  const Model ckpt = with_eager_kernels(with_fused_attention(build_model("gpt2")), checkpointed);
  REQUIRE(named(layer(ckpt, "h.0.attn.core").fwd, "eager_cache_cat_key").empty());
  // BERT is an encoder: no cache.
  const Model bert = with_eager_kernels(with_fused_attention(build_model("bert-large")), kAmpBf16);
  for (const Layer& l : bert.layers) REQUIRE(named(l.fwd, "eager_cache_cat_key").empty());
  // BERT's LM head reads the last post-LN output (fp32 under autocast), past the pooler's branch.
  REQUIRE(named(layer(bert, "lm_head").fwd, "eager_input_cast").size() == 1);
  REQUIRE(named(layer(bert, "pooler.dense").fwd, "eager_input_cast").size() == 1);

  // Llama 2 7B: s = 4096, 32 heads of 128, no GQA. RoPE on the query and on the key, each:
  // two products with fp32 cos/sin (2 + 4 bytes, strided), the negated half (2), the cat (2 + 2)
  // and the fp32 sum (12), then the cast to bf16 for SDPA (6): 36 bytes per element.
  const Model llama = with_eager_kernels(with_fused_attention(build_model("llama2-7b")), kAmpBf16);
  const Layer& core = layer(llama, "h.0.attn.core");
  double rope = 0.0;
  for (const OpTemplate& t : core.fwd) rope += t.kernel.rfind("eager_rope", 0) == 0 ? t.bytes : 0.0;
  REQUIRE(rope == Approx(36.0 * 2 * 4096.0 * 4096.0));
  REQUIRE(named(core.fwd, "eager_rope_cat").at(0)->path == MemoryPath::strided_cat);
  // The fused attention kernel stays, and runs after RoPE and the cache.
  REQUIRE(core.fwd.back().kernel == "flash_attn_fwd");
  // Llama's projections have no bias: nothing to cast or reduce.
  const Layer& gate_up = layer(llama, "h.0.mlp.gate_up");
  REQUIRE(named(gate_up.fwd, "eager_bias_cast").empty());
  REQUIRE(named(gate_up.bwd, "eager_bias_grad").empty());
  REQUIRE(named(gate_up.fwd, "eager_weight_cast").size() == 1);
  // LlamaRMSNorm in fp32: pow, mean, the eps add and rsqrt per row, two broadcast products.
  const Layer& norm = layer(llama, "h.0.ln_1");
  REQUIRE(norm.fwd.size() == 6);
  REQUIRE(named(norm.fwd, "eager_rmsnorm_scale").at(0)->path == MemoryPath::broadcast);
  REQUIRE(norm.bwd.size() == 12);
  // SwiGLU: SiLU and the product (2 + 2 and 2 + 2 + 2 bytes), three kernels backward.
  const Layer& act = layer(llama, "h.0.mlp.act");
  REQUIRE(bytes(act.fwd) == Approx(10.0 * 4096.0 * 11008.0));
  REQUIRE(act.bwd.size() == 3);
}

namespace {

/// A memory-bound kernel moving `bytes`.
sim::OpSignature memory_kernel(std::string name, std::vector<std::int64_t> shape, double bytes) {
  sim::OpSignature sig;
  sig.type = sim::OpType::memory;
  sig.kernel = std::move(name);
  sig.shape = std::move(shape);
  sig.bytes = bytes;
  return sig;
}

}  // namespace

TEST_CASE("memory paths: the same bytes take 1 / factor as long off the vectorized path", "[eager]") {
  const topo::GpuSpec& gpu = topo::find_gpu_spec("H200-SXM-141GB");
  const ComputeModel model(gpu);
  const ComputeConstants& c = model.constants();
  sim::OpSignature sig = memory_kernel("eager_test", {1, 1 << 20, 64}, 1e9);
  sig.dtype = sim::DType::bf16;
  const double launch = c.launch_gap.seconds();
  const double vectorized = model.analytical(sig).seconds() - launch;
  // 1 GB at peak x hbm_fraction.
  REQUIRE(vectorized == Approx(1e9 / (gpu.memory_bandwidth.bytes_per_second() * c.hbm_fraction)).epsilon(1e-6));
  for (const MemoryPath p : {MemoryPath::cast, MemoryPath::broadcast, MemoryPath::strided, MemoryPath::strided_cat}) {
    sig.path = p;
    const double factor = c.memory_path_factor[static_cast<std::size_t>(p)];
    REQUIRE(factor < 1.0);
    REQUIRE(model.analytical(sig).seconds() - launch == Approx(vectorized / factor).epsilon(1e-6));
  }
  // The path is no part of the profile database's key.
  sim::OpSignature other = sig;
  other.path = MemoryPath::vectorized;
  REQUIRE(other.key() == sig.key());
}

TEST_CASE("training BatchNorm: bf16 at PyTorch's kernels' rate, fp16 and fp32 at cuDNN's", "[eager]") {
  // The GPU the factors were measured on.
  const topo::GpuSpec& gpu = topo::find_gpu_spec("H200-SXM-141GB");
  const ComputeModel model(gpu);
  const ComputeConstants& c = model.constants();
  sim::OpSignature sig = memory_kernel("batchnorm_fwd", {128, 256, 56, 56}, 2.0 * 128 * 256 * 56 * 56 * 2);
  const double launch = c.launch_gap.seconds();
  const double plain = sig.bytes / (gpu.memory_bandwidth.bytes_per_second() * c.hbm_fraction);
  const auto time = [&](sim::DType dt, MemoryPath p) {
    sig.dtype = dt;
    sig.path = p;
    return model.analytical(sig).seconds() - launch;
  };
  REQUIRE(time(sim::DType::bf16, MemoryPath::batchnorm_fwd) == Approx(plain / c.batchnorm_native_bf16[0]).epsilon(1e-6));
  REQUIRE(time(sim::DType::bf16, MemoryPath::batchnorm_bwd) == Approx(plain / c.batchnorm_native_bf16[1]).epsilon(1e-6));
  REQUIRE(time(sim::DType::fp16, MemoryPath::batchnorm_fwd) == Approx(plain / c.batchnorm_cudnn16[0]).epsilon(1e-6));
  REQUIRE(time(sim::DType::fp16, MemoryPath::batchnorm_bwd) == Approx(plain / c.batchnorm_cudnn16[1]).epsilon(1e-6));
  REQUIRE(time(sim::DType::fp32, MemoryPath::batchnorm_bwd) == Approx(plain / c.batchnorm_cudnn32[1]).epsilon(1e-6));
  // Any other kernel of the same bytes moves them at the plain rate.
  REQUIRE(time(sim::DType::fp32, MemoryPath::vectorized) == Approx(plain).epsilon(1e-6));
  // PyTorch's statistics kernel makes its forward the slowest of the four.
  REQUIRE(c.batchnorm_native_bf16[0] < c.batchnorm_native_bf16[1]);
  REQUIRE(c.batchnorm_native_bf16[0] < c.batchnorm_cudnn16[0]);
  // The model's BatchNorm layers carry the paths.
  const Model r = strategy::build_model("resnet18");
  int layers = 0;
  for (const Layer& l : r.layers) {
    if (l.kind != "batchnorm") continue;
    ++layers;
    REQUIRE(l.fwd.at(0).path == MemoryPath::batchnorm_fwd);
    REQUIRE(l.bwd.at(0).path == MemoryPath::batchnorm_bwd);
  }
  REQUIRE(layers == 20);
}

TEST_CASE("plan.kernels eager: slower than fused for GPT-2 AMP, refused where it has no meaning", "[eager]") {
  using Catch::Matchers::Contains;
  const SimulationOutput fused = simulate_eager("gpt2", json::object());
  const SimulationOutput eager = simulate_eager("gpt2", json{{"kernels", "eager"}});
  // Every fused memory kernel has eager ones at least as large, and GELU alone adds 70 - 4 and
  // (14 kernels) more bytes per element: the eager step is longer.
  REQUIRE(eager.report.iteration_time_s > fused.report.iteration_time_s);
  REQUIRE_THROWS_WITH(simulate_eager("resnet50", json{{"kernels", "eager"}, {"fused_attention", false}}),
                      Contains("/plan/kernels") && Contains("Hugging Face"));
  json doc{{"model", {{"name", "gpt2"}}},
           {"cluster", {{"preset", "dgx-h200"}, {"gpus", 2}}},
           {"plan", {{"tp", 2}, {"micro_batch", 2}, {"precision", "amp_bf16"}, {"kernels", "eager"}}},
           {"workload", {{"steps", 2}}}};
  REQUIRE_THROWS_WITH(simulate_scenario(parse_scenario(doc, "tp.json"), SimulationInputs{}),
                      Contains("/plan/kernels") && Contains("tp > 1"));
  REQUIRE_THROWS_WITH(parse_scenario(json{{"model", {{"name", "gpt2"}}},
                                          {"cluster", {{"preset", "dgx-h200"}, {"gpus", 1}}},
                                          {"plan", {{"kernels", "lazy"}}}},
                                     "bad.json"),
                      Contains("/plan/kernels") && Contains("lazy"));
}

TEST_CASE("torchtitan's eager Llama: bf16 parameters without autocast, no cache, complex RoPE", "[eager]") {
  // FSDP2 gathers bf16 parameters: nothing to cast before the GEMMs, and the residual stream is
  // bf16; the Python RMSNorm upcasts to fp32 and back; there is no KV cache.
  constexpr EagerOptions kTorchtitan{.activation = 2, .autocast = false, .kv_cache = false, .rope = RopeStyle::complex};
  const Model m = with_eager_kernels(with_fused_attention(build_model("llama2-7b")), kTorchtitan);
  for (const Layer& l : m.layers) {
    INFO(l.name);
    REQUIRE(named(l.fwd, "eager_weight_cast").empty());
    REQUIRE(named(l.fwd, "eager_input_cast").empty());
    REQUIRE(named(l.fwd, "eager_cache_cat_key").empty());
  }
  const Layer& norm = layer(m, "h.0.ln_1");
  REQUIRE(named(norm.fwd, "eager_rmsnorm_upcast").size() == 1);
  REQUIRE(named(norm.fwd, "eager_rmsnorm_downcast").size() == 1);
  REQUIRE(norm.output_bytes.value() == Approx(2.0 * 4096.0 * 4096.0));  // the bf16 stream
  // RoPE per query or key element: x.float() (2 + 4, cast path), the complex product with the
  // broadcast frequencies (4 + 4), type_as back (4 + 2): 20 bytes; forward and backward alike.
  const Layer& core = layer(m, "h.0.attn.core");
  double fwd = 0.0;
  double bwd = 0.0;
  for (const OpTemplate& t : core.fwd) fwd += t.kernel.rfind("eager_rope", 0) == 0 ? t.bytes : 0.0;
  for (const OpTemplate& t : core.bwd) bwd += t.kernel.rfind("eager_rope", 0) == 0 ? t.bytes : 0.0;
  REQUIRE(fwd == Approx(20.0 * 2 * 4096.0 * 4096.0));
  REQUIRE(bwd == Approx(fwd));
  REQUIRE(named(core.fwd, "eager_rope_complex_mul").at(0)->path == MemoryPath::broadcast);
  // The loss still upcasts the logits (torchtitan's cross_entropy on pred.float()).
  REQUIRE(named(layer(m, "loss").fwd, "eager_logits_upcast").size() == 1);

  // The scenario key: amp_bf16 with torchtitan's kernels runs no autocast casts.
  const SimulationOutput hf = simulate_eager("llama2-7b", json{{"kernels", "eager"}});
  const SimulationOutput titan = simulate_eager("llama2-7b", json{{"kernels", "torchtitan"}});
  REQUIRE(titan.report.iteration_time_s < hf.report.iteration_time_s);
  REQUIRE_THROWS_WITH(simulate_eager("resnet50", json{{"kernels", "torchtitan"}, {"fused_attention", false}}),
                      Catch::Matchers::Contains("/plan/kernels") && Catch::Matchers::Contains("\"torchtitan\""));
}

TEST_CASE("BatchNorm scales with the SMs within Hopper and with HBM elsewhere", "[eager]") {
  // Times come back in whole picoseconds: compared to 1e-7.
  const auto time = [](const char* name, sim::DType dt, MemoryPath p) {
    const topo::GpuSpec& gpu = topo::find_gpu_spec(name);
    const ComputeModel model(gpu);
    sim::OpSignature sig = memory_kernel("batchnorm_fwd", {128, 256, 56, 56}, 2.0 * 128 * 256 * 56 * 56 * 2);
    sig.dtype = dt;
    sig.path = p;
    return model.analytical(sig).seconds() - model.constants().launch_gap.seconds();
  };
  const auto plain = [](const char* name, double bytes) {
    const topo::GpuSpec& gpu = topo::find_gpu_spec(name);
    return bytes / (gpu.memory_bandwidth.bytes_per_second() * ComputeModel(gpu).constants().hbm_fraction);
  };
  const double bytes = 2.0 * 128 * 256 * 56 * 56 * 2;
  const ComputeConstants hopper = ComputeModel(topo::find_gpu_spec("H200-SXM-141GB")).constants();
  // H100 SXM and H200: the same 132 SMs at the same clock (FP32 67 TFLOP/s both), so BatchNorm
  // takes the same time on both, though the H200's HBM is 43% faster; a plain kernel does not.
  for (const auto dt : {sim::DType::bf16, sim::DType::fp16, sim::DType::fp32}) {
    for (const auto p : {MemoryPath::batchnorm_fwd, MemoryPath::batchnorm_bwd}) {
      REQUIRE(time("H100-SXM5-80GB", dt, p) == Approx(time("H200-SXM-141GB", dt, p)).epsilon(1e-7));
    }
  }
  const double hbm_ratio = topo::find_gpu_spec("H200-SXM-141GB").memory_bandwidth.bytes_per_second() /
                           topo::find_gpu_spec("H100-SXM5-80GB").memory_bandwidth.bytes_per_second();
  REQUIRE(hbm_ratio > 1.4);
  REQUIRE(time("H100-SXM5-80GB", sim::DType::bf16, MemoryPath::vectorized) ==
          Approx(time("H200-SXM-141GB", sim::DType::bf16, MemoryPath::vectorized) * hbm_ratio).epsilon(1e-7));
  // H100 PCIe: 114 SMs at 1.755 GHz, FP32 51 of 67 TFLOP/s: BatchNorm at that fraction of the
  // H200's rate, as long as that stays under its own HBM rate (2.0 TB/s x 0.866).
  const double h200_rate = bytes / time("H200-SXM-141GB", sim::DType::bf16, MemoryPath::batchnorm_fwd);
  REQUIRE(h200_rate * 51.0 / 67.0 < bytes / plain("H100-PCIE-80GB", bytes));
  REQUIRE(bytes / time("H100-PCIE-80GB", sim::DType::bf16, MemoryPath::batchnorm_fwd) ==
          Approx(h200_rate * 51.0 / 67.0).epsilon(1e-7));
  // The rule is Hopper's: the H200's vectorized rate over its FP32 peak.
  REQUIRE(hopper.held_rate_per_flop == Approx(4.8e12 * hopper.hbm_fraction / 67.0e12).epsilon(1e-12));
  // A100 (no BatchNorm measured on its architecture): the factors scale with HBM.
  REQUIRE(time("A100-SXM4-80GB", sim::DType::bf16, MemoryPath::batchnorm_fwd) ==
          Approx(plain("A100-SXM4-80GB", bytes) / hopper.batchnorm_native_bf16[0]).epsilon(1e-7));
}

TEST_CASE("a profile's memory kernels timed as copies run at their own path's rate", "[eager]") {
  // foresight-profile times a memory-bound kernel as a D2D copy of its bytes: the vectorized rate.
  // The kernel's own path (a cast, BatchNorm's statistics) takes the analytical model's ratio of
  // its time to a copy's; a database that timed the kernels themselves is taken as it is.
  const topo::GpuSpec& gpu = topo::find_gpu_spec("H200-SXM-141GB");
  sim::OpSignature cast = memory_kernel("to_bf16", {1 << 20, 64}, 3e8);
  cast.dtype = sim::DType::bf16;
  cast.path = MemoryPath::cast;
  sim::OpSignature bn = memory_kernel("batchnorm_fwd", {128, 256, 56, 56}, 2.0 * 128 * 256 * 56 * 56 * 2);
  bn.dtype = sim::DType::bf16;
  bn.path = MemoryPath::batchnorm_fwd;
  sim::OpSignature add = memory_kernel("add_fwd", {128, 256, 56, 56}, 3.0 * 128 * 256 * 56 * 56 * 2);
  add.dtype = sim::DType::bf16;
  sim::ProfileDb db;
  db.gpu = gpu.name;
  for (const sim::OpSignature* s : {&cast, &bn, &add}) db.add(*s, 1e-3);

  const ComputeModel as_kernels(gpu, &db);
  for (const sim::OpSignature* s : {&cast, &bn, &add}) REQUIRE(as_kernels.duration(*s).seconds() == Approx(1e-3).epsilon(1e-9));

  db.memory_timing = sim::MemoryTiming::copy;
  const ComputeModel as_copies(gpu, &db);
  const ComputeConstants& c = as_copies.constants();
  REQUIRE(as_copies.duration(add).seconds() == Approx(1e-3).epsilon(1e-9));
  REQUIRE(as_copies.duration(cast).seconds() ==
          Approx(1e-3 / c.memory_path_factor[static_cast<std::size_t>(MemoryPath::cast)]).epsilon(1e-9));
  // On the GPU BatchNorm's factors were measured on, its time is the copy's over the factor.
  REQUIRE(as_copies.duration(bn).seconds() == Approx(1e-3 / c.batchnorm_native_bf16[0]).epsilon(1e-9));
  REQUIRE(as_copies.duration(bn) > as_copies.duration(add));
  // Whatever the database, the ratio is the analytical model's (launch gaps aside).
  const double gap = c.launch_gap.seconds();
  add.bytes = bn.bytes;
  REQUIRE(as_copies.copy_to_kernel(bn) ==
          Approx((as_copies.analytical(bn).seconds() - gap) / (as_copies.analytical(add).seconds() - gap)).epsilon(1e-7));
  // Other kernel types are not memory-bound copies.
  sim::OpSignature gemm = memory_kernel("linear_fwd", {64, 64, 64}, 1e6);
  gemm.type = sim::OpType::gemm;
  REQUIRE(as_copies.copy_to_kernel(gemm) == 1.0);
}

TEST_CASE("memory paths off the vectorized one scale with the SMs within Hopper", "[eager]") {
  // A cast, a broadcast, a strided copy or cat: the H200 (the calibration GPU) measured them at
  // fractions of its vectorized rate, held back by their SMs. On an H100 SXM (the same SMs and
  // clock, 30% less HBM) they keep the H200's rate unless that is above the H100's own vectorized
  // rate; a vectorized kernel scales with HBM. On the H200 itself nothing changes.
  const auto time = [](const char* name, MemoryPath p) {
    const topo::GpuSpec& gpu = topo::find_gpu_spec(name);
    const ComputeModel model(gpu);
    sim::OpSignature sig = memory_kernel("path_test", {1 << 20, 256}, 1e9);
    sig.dtype = sim::DType::bf16;
    sig.path = p;
    return model.analytical(sig).seconds() - model.constants().launch_gap.seconds();
  };
  const auto vectorized_rate = [](const char* name) {
    const topo::GpuSpec& gpu = topo::find_gpu_spec(name);
    return gpu.memory_bandwidth.bytes_per_second() * ComputeModel(gpu).constants().hbm_fraction;
  };
  const ComputeConstants hopper = ComputeModel(topo::find_gpu_spec("H200-SXM-141GB")).constants();
  const double h200 = vectorized_rate("H200-SXM-141GB"), h100 = vectorized_rate("H100-SXM5-80GB");
  for (const MemoryPath p : {MemoryPath::cast, MemoryPath::broadcast, MemoryPath::strided, MemoryPath::strided_cat}) {
    const double factor = hopper.memory_path_factor[static_cast<std::size_t>(p)];
    CAPTURE(static_cast<int>(p), factor);
    // The H200: its fraction of its own vectorized rate, as fitted.
    REQUIRE(time("H200-SXM-141GB", p) == Approx(1e9 / (h200 * factor)).epsilon(1e-7));
    // The H100 SXM: the H200's rate, capped by the H100's vectorized rate.
    REQUIRE(time("H100-SXM5-80GB", p) == Approx(1e9 / std::min(h100, h200 * factor)).epsilon(1e-7));
    REQUIRE(time("H100-SXM5-80GB", p) < time("H200-SXM-141GB", p) * h200 / h100);
    // The A100 (no kernel of these paths measured on its architecture): its HBM, as before.
    REQUIRE(time("A100-SXM4-80GB", p) == Approx(1e9 / (vectorized_rate("A100-SXM4-80GB") * factor)).epsilon(1e-7));
  }
  // The cast path (2.29 of 4.35 TB/s on the H200) stays under the H100's 2.9 TB/s: as fast on both.
  REQUIRE(time("H100-SXM5-80GB", MemoryPath::cast) == Approx(time("H200-SXM-141GB", MemoryPath::cast)).epsilon(1e-7));
  REQUIRE(time("H100-SXM5-80GB", MemoryPath::vectorized) ==
          Approx(time("H200-SXM-141GB", MemoryPath::vectorized) * h200 / h100).epsilon(1e-7));
}
