// Hugging Face config.json import: the public configs of GPT-2 and Llama give the zoo's models;
// bad files are ModelErrors that name the file and the key or position.

#include <catch2/catch.hpp>
#include <string>

#include "common/error.hpp"
#include "models/model_builder.hpp"
#include "models/model_zoo.hpp"
#include "tests/test_paths.hpp"

namespace {

using foresight::sim::ModelError;
using foresight::test::data_path;
using namespace foresight::strategy;

/// The message of the ModelError that loading `relative` throws ("" when none is thrown).
std::string load_error(const std::string& relative, int seq_len = 0) {
  try {
    load_hf_config(data_path(relative), seq_len);
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

void check_same_model(const Model& imported, const Model& zoo) {
  CHECK(imported.params() == zoo.params());
  CHECK(imported.fwd_flops() == Approx(zoo.fwd_flops()).epsilon(1e-12));
  CHECK(imported.bwd_flops() == Approx(zoo.bwd_flops()).epsilon(1e-12));
  CHECK(imported.layers.size() == zoo.layers.size());
  CHECK(imported.seq_len == zoo.seq_len);
  REQUIRE(imported.transformer.has_value());
  CHECK(imported.transformer->kv_heads == zoo.transformer->kv_heads);
  CHECK(imported.transformer->swiglu == zoo.transformer->swiglu);
  double saved_imported = 0.0;
  double saved_zoo = 0.0;
  for (const Layer& l : imported.layers) saved_imported += l.saved_elems;
  for (const Layer& l : zoo.layers) saved_zoo += l.saved_elems;
  CHECK(saved_imported == saved_zoo);
}

/// The ALiBi bias kernels of `m`, each checked to cover one sample's `heads` x `seq` x `seq`
/// scores, with no rotary kernel anywhere and no backward kernel of its own (the bias's gradient
/// passes through).
int alibi_kernels(const Model& m, std::int64_t heads, std::int64_t seq) {
  int alibi = 0;
  for (const Layer& l : m.layers) {
    for (const auto& op : l.fwd) {
      CHECK(op.kernel.rfind("rope", 0) != 0);
      if (op.kernel == "alibi_bias_fwd") {
        ++alibi;
        CHECK(op.shape == std::vector<std::int64_t>{1, heads, seq, seq});  // per sample: batch 1
      }
    }
    for (const auto& op : l.bwd) CHECK(op.kernel.find("alibi") == std::string::npos);
  }
  return alibi;
}

}  // namespace

TEST_CASE("HF configs of GPT-2 and Llama give the zoo's models", "[strategies]") {
  SECTION("gpt2: 124,439,808 parameters, seq 1024 from n_positions") {
    const Model m = load_hf_config(data_path("hf/gpt2/config.json"));
    CHECK(m.name == "gpt2");  // the folder holding config.json
    CHECK(m.params() == 124'439'808);
    check_same_model(m, build_model("gpt2"));
  }
  SECTION("Llama-2-7B: 6,738,415,616 parameters, seq 4096 from max_position_embeddings") {
    const Model m = load_hf_config(data_path("hf/llama-2-7b/config.json"));
    CHECK(m.params() == 6'738'415'616);
    check_same_model(m, build_model("llama2-7b"));
  }
  SECTION("Llama-3-8B: grouped-query attention from num_key_value_heads") {
    check_same_model(load_hf_config(data_path("hf/llama-3-8b/config.json")),
                     build_model("llama3-8b"));
  }
  SECTION("seq_len overrides max_position_embeddings") {
    const Model m = load_hf_config(data_path("hf/llama-2-7b/config.json"), 1024);
    CHECK(m.seq_len == 1024);
    check_same_model(m, build_model("llama2-7b", 0, 1024));
  }
}

TEST_CASE("HF Qwen2 config: QKV biases, GQA and tied embeddings", "[strategies]") {
  // Qwen2-0.5B-style: h 896, 24 layers, 14 heads of 64, 2 KV heads, FFN 4864, vocab 151936,
  // tied. Per layer: q 896^2 + 896; k and v 2 (896*128 + 128); o 896^2; MLP 3*896*4864; two
  // RMSNorms 2*896: 14,912,384. Total 151936*896 + 24*14,912,384 + 896 = 494,032,768.
  const Model m = load_hf_config(data_path("hf/qwen2-0.5b/config.json"), 4096);
  const long long h = 896, kv = 128, f = 4864, v = 151936;
  const long long per_layer = (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * f + 2 * h;
  CHECK(per_layer == 14'912'384);
  CHECK(m.params() == v * h + 24 * per_layer + h);
  CHECK(m.params() == 494'032'768);
  CHECK(m.seq_len == 4096);
  CHECK(m.transformer->kv_heads == 2);
}

TEST_CASE("HF MPT config: ALiBi and no position table, no biases, tied embeddings", "[strategies]") {
  // MPT-7B: h 4096, 32 layers of 32 heads, FFN 4 h, vocab 50432, no biases, LayerNorm, tied.
  // Per layer: QKV 3 h^2, output h^2, MLP 2 x 4 h^2, two LayerNorms (the model's, scale and
  // shift) 2 x 2 h. No position table: MPT builds none when alibi is on.
  const Model m = load_hf_config(data_path("hf/mpt-7b/config.json"));
  const long long h = 4096, v = 50432;
  const long long per_layer = 12 * h * h + 4 * h;
  CHECK(m.params() == v * h + 32 * per_layer + 2 * h);
  CHECK(m.params() == Approx(6.7e9).epsilon(0.01));  // the model card's "6.7B"
  CHECK(m.seq_len == 2048);
  CHECK(m.transformer->kv_heads == 32);
  CHECK_FALSE(m.transformer->swiglu);
  // Every attention core adds the bias to its 32 x 2048 x 2048 scores, and nothing rotates.
  CHECK(alibi_kernels(m, 32, 2048) == 32);
  // Fused attention takes the slopes in its kernel: no bias kernel is left.
  const Model fused = with_fused_attention(m);
  for (const Layer& l : fused.layers) {
    for (const auto& op : l.fwd) CHECK(op.kernel != "alibi_bias_fwd");
  }
}

TEST_CASE("HF BLOOM config: ALiBi, an embedding LayerNorm, biases, tied embeddings", "[strategies]") {
  // BLOOM-560M: h 1024, 24 layers of 16 heads, FFN 4 h, vocab 250880, biases on every linear.
  // Per layer: QKV 3 h^2 + 3 h, dense h^2 + h, MLP 8 h^2 + 5 h, two LayerNorms 4 h. Besides: the
  // tied word embedding, its LayerNorm and the final one: 559,214,592 parameters in all.
  const Model m = load_hf_config(data_path("hf/bloom-560m/config.json"));
  const long long h = 1024, v = 250880;
  const long long per_layer = 12 * h * h + 13 * h;
  CHECK(m.params() == v * h + 2 * h + 24 * per_layer + 2 * h);
  CHECK(m.params() == 559214592);
  CHECK(m.seq_len == 2048);  // BloomConfig has no length: BLOOM's training length
  CHECK(load_hf_config(data_path("hf/bloom-560m/config.json"), 1024).seq_len == 1024);
  CHECK(m.transformer->ffn == 4 * h);
  CHECK(m.transformer->gelu_tanh);
  // The word embedding's LayerNorm comes right after it; every block adds the ALiBi bias to its
  // 16 x 2048 x 2048 scores, and nothing rotates.
  REQUIRE(m.layers.size() > 2);
  CHECK(m.layers[1].name == "embed.norm");
  CHECK(alibi_kernels(m, 16, 2048) == 24);
  // Older configs name the hidden size n_embed and may state seq_length; dropout as they say.
  const Model tiny = load_hf_config(data_path("hf/tiny-bloom/config.json"));
  CHECK(tiny.transformer->hidden == 256);
  CHECK(tiny.seq_len == 512);
  CHECK(tiny.params() == 1000 * 256 + 2 * 256 + 2 * (12 * 256 * 256 + 13 * 256) + 2 * 256);
  bool dropout = false;
  for (const Layer& l : tiny.layers) {
    for (const auto& op : l.fwd) dropout = dropout || op.kernel == "dropout_fwd";
  }
  CHECK(dropout);
  CHECK(alibi_kernels(tiny, 4, 512) == 2);
}

TEST_CASE("HF DeepSeek-style MoE config: dense first layers, routed and shared experts", "[strategies]") {
  const Model m = load_hf_config(data_path("hf/tiny-deepseek/config.json"));
  int experts_layers = 0, shared = 0, dense = 0;
  for (const Layer& l : m.layers) {
    if (l.experts > 0) {
      ++experts_layers;
      CHECK(l.experts == 16);
      CHECK(l.top_k == 4);
      // 16 experts of gate/up 256 -> 2 x 128 and down 128 -> 256.
      CHECK(l.params == 16 * 3 * 256 * 128);
    }
    if (l.name.find("mlp.shared.gate_up") != std::string::npos) {
      ++shared;
      CHECK(l.params == 256 * 2 * (2 * 128));  // 2 shared experts of 128
    }
    if (l.name.find("mlp.gate_up") != std::string::npos) {
      ++dense;
      CHECK(l.params == 256 * 2 * 1024);  // first_k_dense_replace keeps the dense FFN
    }
  }
  CHECK(experts_layers == 3);
  CHECK(shared == 3);
  CHECK(dense == 1);
}

TEST_CASE("bad HF configs are ModelErrors naming the file and the key", "[strategies]") {
  SECTION("missing key") {
    const std::string what = load_error("hf/bad_missing_key.json");
    CHECK(what.find("bad_missing_key.json") != std::string::npos);
    CHECK(what.find("\"hidden_size\"") != std::string::npos);
  }
  SECTION("wrong type") {
    const std::string what = load_error("hf/bad_wrong_type.json");
    CHECK(what.find("bad_wrong_type.json") != std::string::npos);
    CHECK(what.find("/n_layer") != std::string::npos);
    CHECK(what.find("string") != std::string::npos);
  }
  SECTION("malformed JSON names the byte position") {
    const std::string what = load_error("hf/bad_malformed.json");
    CHECK(what.find("bad_malformed.json") != std::string::npos);
    CHECK(what.find("malformed JSON at byte") != std::string::npos);
  }
  SECTION("not an object") {
    CHECK(load_error("hf/bad_not_object.json").find("an object") != std::string::npos);
  }
  SECTION("inconsistent heads") {
    const std::string what = load_error("hf/bad_heads.json");
    CHECK(what.find("bad_heads.json") != std::string::npos);
    CHECK(what.find("5 key/value heads") != std::string::npos);
  }
  SECTION("MPT: an unknown attention type, a mistyped attn_config key") {
    const std::string what = load_error("hf/bad_mpt_attn_type.json");
    CHECK(what.find("/attn_config/attn_type") != std::string::npos);
    CHECK(what.find("sliding_window") != std::string::npos);
    const std::string alibi = load_error("hf/bad_mpt_alibi_type.json");
    CHECK(alibi.find("/attn_config/alibi") != std::string::npos);
  }
  SECTION("missing file") {
    CHECK(load_error("hf/no_such_config.json").find("cannot open") != std::string::npos);
  }
  SECTION("seq_len beyond GPT-2's learned positions, or negative") {
    CHECK(load_error("hf/gpt2/config.json", 2048).find("1024 learned positions") !=
          std::string::npos);
    CHECK_THROWS_AS(load_hf_config(data_path("hf/gpt2/config.json"), -1), ModelError);
  }
}
