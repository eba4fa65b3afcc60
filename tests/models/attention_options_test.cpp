// Attention options of newer Hugging Face configs. Sliding windows (Mistral's sliding_window,
// transformers' layer_types): which layers are windowed, the fused kernel's FLOPs and shape, its
// time from the key blocks FlashAttention skips, and the refusals. Qwen3's QK norm. MoE layouts
// the import refuses.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <string>

#include "common/error.hpp"
#include "models/compute_model.hpp"
#include "models/context_parallel.hpp"
#include "models/eager_kernels.hpp"
#include "models/model_builder.hpp"
#include "models/model_zoo.hpp"
#include "tests/test_files.hpp"
#include "tests/test_paths.hpp"
#include "topologies/gpu_spec.hpp"

using namespace foresight;
using foresight::test::data_path;
using strategy::Layer;
using strategy::Model;

namespace {

std::vector<const Layer*> cores(const Model& m) {
  std::vector<const Layer*> out;
  for (const Layer& l : m.layers) {
    if (l.kind == "attention") out.push_back(&l);
  }
  return out;
}

const strategy::OpTemplate& op(const Layer& l, const std::string& kernel, bool forward = true) {
  for (const auto& t : forward ? l.fwd : l.bwd) {
    if (t.kernel == kernel) return t;
  }
  FAIL("no kernel " << kernel << " in " << l.name);
  throw;
}

/// The config `relative` (under tests/data) with `from` replaced by `to`, written to a scratch file.
std::string variant(const std::string& relative, const std::string& from, const std::string& to) {
  std::string text = test::slurp(data_path(relative));
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  static const auto dir = test::fresh_dir("attention-options");
  const auto out = dir / (std::to_string(std::hash<std::string>{}(relative + to)) + ".json");
  std::ofstream(out) << text;
  return out.string();
}

/// Mistral 7B v0.1's config with its window replaced (json null: none).
std::string mistral_with(const std::string& window) {
  return variant("hf/mistral-7b-v0.1/config.json", "\"sliding_window\": 4096", "\"sliding_window\": " + window);
}

}  // namespace

TEST_CASE("Mistral's sliding window: every layer's fused kernel visits w keys per query", "[models]") {
  const double s = 8192, w = 4096, d = 128, h = 32;
  const Model windowed = strategy::with_fused_attention(strategy::load_hf_config(data_path("hf/mistral-7b-v0.1/config.json"), 8192));
  const Model full = strategy::with_fused_attention(strategy::load_hf_config(mistral_with("null"), 8192));
  REQUIRE(cores(windowed).size() == 32);
  for (const Layer* l : cores(windowed)) {
    REQUIRE(l->attention_window == 4096);
    const auto& f = op(*l, "flash_attn_fwd");
    REQUIRE(f.shape.size() == 7);
    REQUIRE(f.shape[6] == 4096);
    // Query i attends to min(i + 1, w) keys: w s - w (w - 1) / 2 pairs, 4 d FLOPs per pair and head.
    REQUIRE(f.flops == Approx(4.0 * d * h * (w * s - w * (w - 1) / 2)).epsilon(1e-12));
    REQUIRE(op(*l, "flash_attn_bwd", false).flops == Approx(2.5 * f.flops).epsilon(1e-12));
  }
  for (const Layer* l : cores(full)) {
    REQUIRE(l->attention_window == 0);
    REQUIRE(op(*l, "flash_attn_fwd").shape.size() == 6);
    REQUIRE(op(*l, "flash_attn_fwd").flops == Approx(4.0 * d * h * s * s / 2).epsilon(1e-12));
  }
  // The model FLOPs MFU counts take w keys per query where full attention takes s (the unfused
  // kernels' s x s work, still computed and masked, scaled by w / s): per layer, the scores and
  // context products 2 x 2 s d h x (s - w) fewer, with the softmax's share.
  const Layer& a = *cores(windowed).front();
  const Layer& b = *cores(full).front();
  double rope = 0.0;
  for (const auto& t : b.fwd) rope += t.kernel.starts_with("rope") ? t.flops : 0.0;
  REQUIRE(a.fwd_flops - rope == Approx((b.fwd_flops - rope) * w / s).epsilon(1e-12));
  REQUIRE(a.fwd_flops < b.fwd_flops);
  REQUIRE(windowed.fwd_flops() - full.fwd_flops() == Approx(32 * (a.fwd_flops - b.fwd_flops)).epsilon(1e-9));
  REQUIRE(windowed.params() == full.params());
  // At a sequence no longer than the window nothing changes: the same kernels as without one.
  const Model at_window = strategy::with_fused_attention(strategy::load_hf_config(data_path("hf/mistral-7b-v0.1/config.json"), 4096));
  const Model plain = strategy::with_fused_attention(strategy::load_hf_config(mistral_with("null"), 4096));
  for (std::size_t i = 0; i < at_window.layers.size(); ++i) {
    REQUIRE(at_window.layers[i].fwd.size() == plain.layers[i].fwd.size());
    for (std::size_t k = 0; k < at_window.layers[i].fwd.size(); ++k) {
      REQUIRE(at_window.layers[i].fwd[k].shape == plain.layers[i].fwd[k].shape);
      REQUIRE(at_window.layers[i].fwd[k].flops == plain.layers[i].fwd[k].flops);
    }
  }
  // MistralConfig's default window (4096) applies when the key is absent; null means none.
  REQUIRE(cores(strategy::load_hf_config(mistral_with("null"), 8192)).front()->attention_window == 0);
  const std::string absent = variant("hf/mistral-7b-v0.1/config.json", "\"sliding_window\": 4096,", "");
  REQUIRE(cores(strategy::load_hf_config(absent, 8192)).back()->attention_window == 4096);
}

TEST_CASE("a windowed kernel's time counts the key blocks FlashAttention visits", "[models]") {
  const strategy::ComputeModel h100(topo::find_gpu_spec("H100-SXM5-80GB"));
  const strategy::FlashAttentionConstants k = strategy::hopper_attention_constants();
  const double gap = h100.constants().launch_gap.seconds();
  auto kernel = [](bool backward, std::int64_t window) {
    sim::OpSignature a;
    a.type = sim::OpType::attention;
    a.dtype = sim::DType::bf16;
    a.kernel = backward ? "flash_attn_bwd" : "flash_attn_fwd";
    a.shape = {32, 8192, 8192, 128, 1, strategy::kAttentionFlash2};
    if (window > 0) a.shape.push_back(window);
    return a;
  };
  // 64 query blocks of 128. Causal: block i visits i + 1 key blocks, 2080 in all. With a window
  // of 4096 keys: blocks 0-31 visit i + 1 (528 in all); block i >= 32 starts at key
  // 128 i - 4095, in block i - 32, and visits 33 (32 x 33 = 1056): 1584 in all. Each query block
  // also pays the masked row overhead.
  for (const bool backward : {false, true}) {
    CAPTURE(backward);
    const double overhead = backward ? k.backward_causal_row_overhead : k.causal_row_overhead;
    const double full = h100.analytical(kernel(backward, 0)).seconds() - gap;
    const double windowed = h100.analytical(kernel(backward, 4096)).seconds() - gap;
    // (Times are whole picoseconds: 1e-8.)
    REQUIRE(windowed / full == Approx((1584 + 64 * overhead) / (2080 + 64 * overhead)).epsilon(1e-8));
    // A window as long as the sequence is no window.
    REQUIRE(h100.analytical(kernel(backward, 8192)).seconds() == h100.analytical(kernel(backward, 0)).seconds());
  }
}

TEST_CASE("layer_types and Qwen's use_sliding_window choose the windowed layers; errors name the key", "[models]") {
  // layer_types: the first and third layers windowed, the others full.
  const Model m = strategy::load_hf_config(data_path("hf/tiny-sliding/config.json"), 2048);
  const auto c = cores(m);
  REQUIRE(c.size() == 4);
  REQUIRE(c[0]->attention_window == 512);
  REQUIRE(c[1]->attention_window == 0);
  REQUIRE(c[2]->attention_window == 512);
  REQUIRE(c[3]->attention_window == 0);
  // Qwen2 with use_sliding_window false (its public config): no window although one is given.
  const Model qwen2 = strategy::load_hf_config(data_path("hf/qwen2-0.5b/config.json"), 1024);
  for (const Layer* l : cores(qwen2)) REQUIRE(l->attention_window == 0);
  // Without layer_types, Qwen windows the layers from max_window_layers on (modeling_qwen2.py).
  auto tiny = [](const std::string& from, const std::string& to) { return variant("hf/tiny-sliding/config.json", from, to); };
  const std::string types =
      R"("layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"])";
  const Model from_layer_2 = strategy::load_hf_config(tiny(types, R"("attention_dropout": 0.0)"), 2048);
  const auto qwen = cores(from_layer_2);
  REQUIRE(qwen[0]->attention_window == 0);
  REQUIRE(qwen[1]->attention_window == 0);
  REQUIRE(qwen[2]->attention_window == 512);
  REQUIRE(qwen[3]->attention_window == 512);
  auto error = [](const std::string& path) -> std::string {
    try {
      strategy::load_hf_config(path, 2048);
    } catch (const sim::ModelError& e) {
      return e.what();
    }
    return "";
  };
  using Catch::Matchers::Contains;
  REQUIRE_THAT(error(tiny(types, R"("layer_types": ["sliding_attention"])")),
               Contains("/layer_types") && Contains("one entry per layer (4), found 1"));
  REQUIRE_THAT(error(tiny("\"full_attention\", \"sliding_attention\", \"full_attention\"]",
                             "\"full_attention\", \"local\", \"full_attention\"]")),
               Contains("/layer_types/2") && Contains("\"local\""));
  REQUIRE_THAT(error(tiny(R"("sliding_window": 512)", R"("sliding_window": null)")),
               Contains("/sliding_window") && Contains("sliding_attention layers"));
  REQUIRE_THAT(error(tiny(R"("sliding_window": 512)", R"("sliding_window": -4)")), Contains("/sliding_window"));
}

TEST_CASE("context parallelism refuses sliding-window attention", "[models]") {
  const auto whole = strategy::with_fused_attention(strategy::load_hf_config(data_path("hf/mistral-7b-v0.1/config.json"), 8192));
  const auto part = strategy::with_fused_attention(strategy::load_hf_config(data_path("hf/mistral-7b-v0.1/config.json"), 4096));
  REQUIRE_THROWS_WITH(strategy::with_context_parallel(whole, part, 2),
                      Catch::Matchers::Contains("cp = 2") && Catch::Matchers::Contains("sliding-window attention") &&
                          Catch::Matchers::Contains("window 4096"));
}

TEST_CASE("Qwen3's QK norm: one RMSNorm pass over the queries and keys each way; interleaved dense layers refused",
          "[models]") {
  // tiny-sliding is a Qwen3 config: 4 query heads and 2 KV heads of 64, sequence 2048.
  const Model m = strategy::load_hf_config(data_path("hf/tiny-sliding/config.json"), 2048);
  const double qk = 2048.0 * (4 + 2) * 64;  // elements of the queries and keys
  for (const Layer* l : cores(m)) {
    const auto& f = op(*l, "qk_norm_fwd");
    const auto& b = op(*l, "qk_norm_bwd", false);
    REQUIRE(l->fwd.front().kernel == "qk_norm_fwd");  // before RoPE
    REQUIRE(l->bwd.back().kernel == "qk_norm_bwd");
    REQUIRE(f.act_elems == 2 * qk);  // read and write, in the activation dtype
    REQUIRE(b.act_elems == 3 * qk);  // read the input and the gradient, write the gradient
  }
  // It saves its input: the queries and keys once more than a Llama-style core of the same shape.
  const Model no_norm = strategy::load_hf_config(variant("hf/tiny-sliding/config.json", "\"model_type\": \"qwen3\"",
                                                         "\"model_type\": \"llama\""),
                                                 2048);
  REQUIRE(cores(m).front()->saved_elems - cores(no_norm).front()->saved_elems == Approx(qk));
  for (const Layer* l : cores(no_norm)) REQUIRE(l->fwd.front().kernel != "qk_norm_fwd");
  // Fused attention keeps it (and RoPE) beside the fused kernel.
  const Model fused = strategy::with_fused_attention(m);
  REQUIRE(cores(fused).front()->fwd.front().kernel == "qk_norm_fwd");
  // PyTorch eager's kernels: the norm still first forward and last backward, around eager RoPE.
  strategy::EagerOptions eager;
  const Model eager_model = strategy::with_eager_kernels(fused, eager);
  const Layer& e = *cores(eager_model).front();
  REQUIRE(e.fwd.front().kernel == "qk_norm_fwd");
  REQUIRE(e.fwd[1].kernel.starts_with("eager_rope"));
  REQUIRE(e.bwd.back().kernel == "qk_norm_bwd");
  REQUIRE(std::count_if(e.fwd.begin(), e.fwd.end(), [](const auto& t) { return t.kernel == "qk_norm_fwd"; }) == 1);
  REQUIRE(std::count_if(e.bwd.begin(), e.bwd.end(), [](const auto& t) { return t.kernel == "qk_norm_bwd"; }) == 1);
  // Qwen-MoE configs that interleave dense MLP layers are refused, naming the key.
  const std::string moe = variant("hf/tiny-sliding/config.json", "\"intermediate_size\": 512,",
                                  "\"intermediate_size\": 512, \"num_experts\": 8, \"num_experts_per_tok\": 2, "
                                  "\"moe_intermediate_size\": 128, \"decoder_sparse_step\": 2,");
  try {
    strategy::load_hf_config(moe, 2048);
    FAIL("decoder_sparse_step 2 was accepted");
  } catch (const sim::ModelError& e) {
    REQUIRE_THAT(e.what(), Catch::Matchers::Contains("/decoder_sparse_step") && Catch::Matchers::Contains("found 2"));
  }
  const std::string dense_list = variant("hf/tiny-sliding/config.json", "\"intermediate_size\": 512,",
                                         "\"intermediate_size\": 512, \"num_experts\": 8, \"num_experts_per_tok\": 2, "
                                         "\"mlp_only_layers\": [0],");
  try {
    strategy::load_hf_config(dense_list, 2048);
    FAIL("mlp_only_layers [0] was accepted");
  } catch (const sim::ModelError& e) {
    REQUIRE_THAT(e.what(), Catch::Matchers::Contains("/mlp_only_layers"));
  }
  // The all-MoE defaults load.
  const std::string all_moe = variant("hf/tiny-sliding/config.json", "\"intermediate_size\": 512,",
                                      "\"intermediate_size\": 512, \"num_experts\": 8, \"num_experts_per_tok\": 2, "
                                      "\"decoder_sparse_step\": 1, \"mlp_only_layers\": [],");
  REQUIRE(strategy::load_hf_config(all_moe, 2048).params() > m.params());
}

TEST_CASE("GPT-OSS 120B and 20B: sinks, router and expert biases, alternating windows; the model card's sizes",
          "[models]") {
  // OpenAI, gpt-oss-120b & gpt-oss-20b model card (2025), Table 1: total parameters 116.83 B and
  // 20.91 B; MLP (router and experts) 114.71 B and 19.12 B; attention 0.96 B and 0.64 B;
  // embedding and unembedding 1.16 B; active per token 5.13 B and 3.61 B.
  struct Card {
    const char* dir;
    int layers, experts;
    double total, mlp, attention, active;
  };
  for (const Card c : {Card{"hf/gpt-oss-120b/config.json", 36, 128, 116.83e9, 114.71e9, 0.96e9, 5.13e9},
                       Card{"hf/gpt-oss-20b/config.json", 24, 32, 20.91e9, 19.12e9, 0.64e9, 3.61e9}}) {
    CAPTURE(c.dir);
    const Model m = strategy::load_hf_config(data_path(c.dir), 4096);
    const double h = 2880, f = 2880, q = 64 * 64, kv = 8 * 64, vocab = 201088;
    // Derived from the config: each expert h -> 2f and f -> h with biases; the router h -> E with
    // a bias; QKV and the output projection with biases; a sink logit per head; two RMSNorms.
    const double expert = h * 2 * f + f * h + 2 * f + h;
    const double router = h * c.experts + c.experts;
    const double attention = h * (q + 2 * kv) + (q + 2 * kv) + q * h + h + 64;
    const double per_layer = c.experts * expert + router + attention + 2 * h;
    const double embeddings = 2 * vocab * h;  // untied
    REQUIRE(static_cast<double>(m.params()) == Approx(c.layers * per_layer + embeddings + h));
    // Against the card, to its rounding (three significant digits of the parts).
    REQUIRE(static_cast<double>(m.params()) == Approx(c.total).epsilon(0.0005));
    double mlp = 0.0, attn = 0.0, routed = 0.0;
    int sinks = 0;
    for (const Layer& l : m.layers) {
      if (l.kind == "router" || l.experts > 0) mlp += static_cast<double>(l.params);
      if (l.experts > 0) routed += static_cast<double>(l.params);
      if (l.name.find(".attn.") != std::string::npos) attn += static_cast<double>(l.params);
      if (l.kind == "attention") {
        REQUIRE(l.params == 64);  // one sink per head
        ++sinks;
      }
    }
    REQUIRE(sinks == c.layers);
    REQUIRE(mlp == Approx(c.mlp).epsilon(0.001));
    REQUIRE(attn == Approx(c.attention).epsilon(0.01));
    // Active: all but the unvisited experts (4 of E) and the input embedding.
    const double active = static_cast<double>(m.params()) - routed * (1.0 - 4.0 / c.experts) - vocab * h;
    REQUIRE(active == Approx(c.active).epsilon(0.002));
    // layer_types: sliding windows of 128 on even layers, full attention on odd ones.
    const auto attn_cores = cores(m);
    for (std::size_t i = 0; i < attn_cores.size(); ++i) REQUIRE(attn_cores[i]->attention_window == (i % 2 == 0 ? 128 : 0));
  }
  // Other Llama-style configs keep neither sinks nor MoE biases.
  const Model mixtral = strategy::load_hf_config(data_path("hf/mixtral-8x7b/config.json"), 4096);
  for (const Layer& l : mixtral.layers) {
    if (l.kind == "attention") REQUIRE(l.params == 0);
    if (l.kind == "router") REQUIRE(l.params == 4096 * 8);
  }
}
