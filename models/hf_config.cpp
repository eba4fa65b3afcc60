// Hugging Face config.json import (load_hf_config of model_zoo.hpp): decoder-only transformers
// in the GPT-2 style (transformers' GPT2Config), the MPT style (MPTConfig: ALiBi), the BLOOM style
// (BloomConfig: ALiBi and an embedding LayerNorm) or the Llama
// style (LlamaConfig and the Mistral, Qwen2 and similar configs that share its keys). The file belongs to another tool:
// keys this import does not need are ignored, but every key it reads is type-checked.

#include <fmt/core.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/error.hpp"
#include "models/model_builder.hpp"
#include "models/model_zoo.hpp"
#include "common/json_reader.hpp"

namespace foresight::strategy {
namespace {

using nlohmann::json;
using topo::JsonPath;
using topo::JsonReader;

constexpr std::string_view kWhat = "a Hugging Face config";

/// A required positive integer.
int positive(const JsonReader& r, const json& doc, std::string_view key) {
  return static_cast<int>(r.integer_at(doc, key, JsonPath{}, kWhat, 1, INT_MAX));
}

/// True when `key` is absent or null (transformers writes unset optional values as null).
bool unset(const json& doc, std::string_view key) {
  const auto it = doc.find(key);
  return it == doc.end() || it->is_null();
}

std::optional<int> optional_positive(const JsonReader& r, const json& doc, std::string_view key) {
  if (unset(doc, key)) return std::nullopt;
  return positive(r, doc, key);
}

bool optional_bool(const JsonReader& r, const json& doc, std::string_view key, bool fallback) {
  return unset(doc, key) ? fallback : r.bool_at(doc, key, JsonPath{}, kWhat);
}

double optional_number(const JsonReader& r, const json& doc, std::string_view key,
                       double fallback) {
  return unset(doc, key) ? fallback : r.number_at(doc, key, JsonPath{}, kWhat);
}

std::string optional_string(const JsonReader& r, const json& doc, std::string_view key,
                            const std::string& fallback) {
  return unset(doc, key) ? fallback : r.string_at(doc, key, JsonPath{}, kWhat);
}

/// GPT-2 style (transformers GPT2Config): n_embd, n_layer, n_head, vocab_size, n_positions;
/// n_inner defaults to 4 n_embd; learned positions, pre-LN, GELU, biases, LM head tied unless
/// tie_word_embeddings is false; dropout unless its probabilities are 0 (defaults 0.1).
TransformerSpec gpt2_style(const JsonReader& r, const json& doc) {
  TransformerSpec s;
  const int hidden = positive(r, doc, "n_embd");
  const int heads = positive(r, doc, "n_head");
  const int positions = positive(r, doc, "n_positions");
  s.shape.layers = positive(r, doc, "n_layer");
  s.shape.hidden = hidden;
  s.shape.heads = heads;
  s.shape.kv_heads = heads;
  s.shape.ffn = optional_positive(r, doc, "n_inner").value_or(4 * hidden);
  s.shape.vocab = positive(r, doc, "vocab_size");
  s.shape.seq_len = positions;
  s.shape.swiglu = false;
  s.shape.causal = true;
  s.positions = positions;
  s.tied_embeddings = optional_bool(r, doc, "tie_word_embeddings", true);
  // GPT2Config defaults: resid_pdrop = embd_pdrop = attn_pdrop = 0.1.
  s.hidden_dropout = optional_number(r, doc, "resid_pdrop", 0.1) > 0.0 ||
                     optional_number(r, doc, "embd_pdrop", 0.1) > 0.0;
  s.attention_dropout = optional_number(r, doc, "attn_pdrop", 0.1) > 0.0;
  s.shape.gelu_tanh = optional_string(r, doc, "activation_function", "gelu_new") == "gelu_new";
  return s;
}

/// Mixture of experts, where the config names experts: Mixtral (num_local_experts,
/// num_experts_per_tok; each expert's FFN is intermediate_size), Qwen2-MoE (num_experts,
/// moe_intermediate_size, shared_expert_intermediate_size) and DeepSeek-V2/V3 (n_routed_experts,
/// moe_intermediate_size, n_shared_experts, first_k_dense_replace).
void read_moe(const JsonReader& r, const json& doc, TransformerSpec& s) {
  std::optional<int> experts = optional_positive(r, doc, "num_local_experts");
  if (!experts) experts = optional_positive(r, doc, "n_routed_experts");
  if (!experts) experts = optional_positive(r, doc, "num_experts");
  if (!experts) return;
  MoeShape& m = s.shape.moe;
  m.experts = *experts;
  m.top_k = positive(r, doc, "num_experts_per_tok");
  m.expert_ffn = optional_positive(r, doc, "moe_intermediate_size").value_or(s.shape.ffn);
  m.shared_experts = optional_positive(r, doc, "n_shared_experts").value_or(0);
  if (const auto shared = optional_positive(r, doc, "shared_expert_intermediate_size")) {
    // Qwen2-MoE states the shared expert's total width: as many experts of moe size.
    m.shared_experts = std::max(1, *shared / m.expert_ffn);
  }
  m.dense_layers = optional_positive(r, doc, "first_k_dense_replace").value_or(0);
  // Qwen2-MoE/Qwen3-MoE may interleave dense MLP layers: only their all-MoE default is modelled.
  if (!unset(doc, "decoder_sparse_step")) {
    const long long step = r.integer_at(doc, "decoder_sparse_step", JsonPath{}, kWhat, 1, INT_MAX);
    if (step != 1) {
      r.fail(JsonPath{}.at("decoder_sparse_step"),
             fmt::format("expected 1 (every layer MoE; interleaved dense layers are not modelled), found {}", step));
    }
  }
  if (!unset(doc, "mlp_only_layers") && !r.array_at(doc, "mlp_only_layers", JsonPath{}, kWhat).empty()) {
    r.fail(JsonPath{}.at("mlp_only_layers"), "expected [] (every layer MoE; dense layers among MoE ones are not "
                                             "modelled), found a list of layers");
  }
  if (m.top_k > m.experts) {
    r.fail(JsonPath{}.at("num_experts_per_tok"),
           fmt::format("expected at most the {} experts, found {}", m.experts, m.top_k));
  }
}

/// Sliding-window attention, per layer (0: none), as transformers applies it:
/// - layer_types, where given: "sliding_attention" layers take sliding_window, "full_attention"
///   ones none (transformers >= 4.53 writes it for Qwen2/3, Gemma 2/3, GPT-OSS);
/// - use_sliding_window false: none; Qwen2/Qwen3 (and their MoE) slide only with it true, from
///   layer max_window_layers on (default 28, Qwen2Config's), as modeling_qwen2.py does;
/// - otherwise sliding_window on every layer (Mistral: MistralConfig's default 4096 when absent).
/// A window is the keys a query attends to, itself included (window_size (w - 1, 0) in
/// FlashAttention). null or absent sliding_window: none.
std::vector<int> read_windows(const JsonReader& r, const json& doc, const std::string& model_type, int layers) {
  const bool qwen = model_type.starts_with("qwen2") || model_type.starts_with("qwen3");
  std::optional<int> window = optional_positive(r, doc, "sliding_window");
  if (!window && model_type == "mistral" && !doc.contains("sliding_window")) window = 4096;
  if (!unset(doc, "layer_types")) {
    const json& types = r.array_at(doc, "layer_types", JsonPath{}, kWhat);
    if (types.size() != static_cast<std::size_t>(layers)) {
      r.fail(JsonPath{}.at("layer_types"), fmt::format("expected one entry per layer ({}), found {}", layers, types.size()));
    }
    std::vector<int> out;
    for (std::size_t i = 0; i < types.size(); ++i) {
      const JsonPath p = JsonPath{}.at("layer_types").at(i);
      const std::string type = types[i].is_string() ? types[i].get<std::string>() : "";
      if (type == "sliding_attention") {
        if (!window) r.fail(JsonPath{}.at("sliding_window"), "expected a window for the sliding_attention layers, found none");
        out.push_back(*window);
      } else if (type == "full_attention") {
        out.push_back(0);
      } else {
        r.fail(p, fmt::format("expected \"sliding_attention\" or \"full_attention\", found {}", topo::shown(types[i])));
      }
    }
    return out;
  }
  const bool use = optional_bool(r, doc, "use_sliding_window", !qwen);
  if (!use || !window) return {};
  const long long from =
      !qwen ? 0 : unset(doc, "max_window_layers") ? 28 : r.integer_at(doc, "max_window_layers", JsonPath{}, kWhat, 0, INT_MAX);
  std::vector<int> out(static_cast<std::size_t>(layers), 0);
  for (long long i = std::min<long long>(from, layers); i < layers; ++i) out[static_cast<std::size_t>(i)] = *window;
  return out;
}

/// Llama style (transformers LlamaConfig): hidden_size, num_hidden_layers, num_attention_heads,
/// intermediate_size, vocab_size, max_position_embeddings; num_key_value_heads defaults to the
/// heads, head_dim to hidden / heads; hidden_act "silu" (the default) gives SwiGLU, anything
/// else a GELU MLP; rms_norm_eps present gives RMSNorm, else LayerNorm; RoPE; biases per
/// attention_bias and mlp_bias (default false; Qwen2 always has QKV biases, modeling_qwen2.py);
/// tie_word_embeddings defaults to false; dropout only on attention probabilities when
/// attention_dropout > 0; sliding windows per read_windows.
TransformerSpec llama_style(const JsonReader& r, const json& doc, const std::string& model_type) {
  TransformerSpec s;
  const int heads = positive(r, doc, "num_attention_heads");
  s.shape.layers = positive(r, doc, "num_hidden_layers");
  s.shape.hidden = positive(r, doc, "hidden_size");
  s.shape.heads = heads;
  s.shape.kv_heads = optional_positive(r, doc, "num_key_value_heads").value_or(heads);
  s.shape.ffn = positive(r, doc, "intermediate_size");
  s.shape.vocab = positive(r, doc, "vocab_size");
  s.shape.seq_len = positive(r, doc, "max_position_embeddings");
  s.shape.swiglu = optional_string(r, doc, "hidden_act", "silu") == "silu";
  s.shape.causal = true;
  s.head_dim = optional_positive(r, doc, "head_dim").value_or(0);
  s.positions = 0;
  s.norm = doc.contains("rms_norm_eps") ? Norm::rmsnorm : Norm::layernorm;
  const bool attention_bias = optional_bool(r, doc, "attention_bias", false);
  s.qkv_bias = attention_bias || model_type == "qwen2";
  s.proj_bias = attention_bias;
  s.mlp_bias = optional_bool(r, doc, "mlp_bias", false);
  s.tied_embeddings = optional_bool(r, doc, "tie_word_embeddings", false);
  s.hidden_dropout = false;
  s.attention_dropout = optional_number(r, doc, "attention_dropout", 0.0) > 0.0;
  s.windows = read_windows(r, doc, model_type, s.shape.layers);
  // Qwen3 normalizes each head's query and key (modeling_qwen3.py: q_norm, k_norm).
  s.qk_norm = model_type == "qwen3" || model_type == "qwen3_moe";
  // GPT-OSS (modeling_gpt_oss.py): a sink logit per head in each attention, biases on the
  // router and on every expert's projections.
  s.attention_sinks = model_type == "gpt_oss";
  read_moe(r, doc, s);
  s.shape.moe.bias = model_type == "gpt_oss" && s.shape.moe.experts > 0;
  return s;
}

/// MPT style (MosaicML's MPTConfig, model_type "mpt"): d_model, n_heads, n_layers; expansion_ratio
/// (default 4, may be fractional), max_seq_len (default 2048), vocab_size (default 50368);
/// attn_config.alibi (default false) gives ALiBi with no position table (MPT builds no wpe when
/// alibi is on), else learned_pos_emb (default true) a learned table of max_seq_len rows,
/// attn_config.rope RoPE, neither no position encoding; attn_config.attn_type
/// "grouped_query_attention" with kv_n_heads; no_bias (default false) drops every linear bias;
/// norm_type *layernorm or *rmsnorm; ffn_config.ffn_type "mptmlp" (GELU, the default) or
/// "mptglu" (gated); tied embeddings (MPT's SharedEmbedding); dropout per resid_pdrop,
/// emb_pdrop and attn_config.attn_pdrop (default 0).
TransformerSpec mpt_style(const JsonReader& r, const json& doc) {
  TransformerSpec s;
  const int hidden = positive(r, doc, "d_model");
  const int heads = positive(r, doc, "n_heads");
  s.shape.layers = positive(r, doc, "n_layers");
  s.shape.hidden = hidden;
  s.shape.heads = heads;
  s.shape.vocab = optional_positive(r, doc, "vocab_size").value_or(50368);
  s.shape.seq_len = optional_positive(r, doc, "max_seq_len").value_or(2048);
  const double expansion = optional_number(r, doc, "expansion_ratio", 4.0);
  if (!(expansion > 0.0) || expansion * hidden > INT_MAX) {
    r.fail(JsonPath{}.at("expansion_ratio"), fmt::format("expected a ratio > 0 giving at most {} FFN units, found {}",
                                                         INT_MAX, expansion));
  }
  s.shape.ffn = static_cast<int>(expansion * hidden);  // MPTMLP: int(expansion_ratio * d_model)
  s.shape.causal = true;
  // attn_config: an object of MPT's attention options; absent means MPT's defaults.
  const json empty = json::object();
  const json& attn = unset(doc, "attn_config") ? empty : doc.at("attn_config");
  const JsonPath ap = JsonPath{}.at("attn_config");
  if (!attn.is_object()) r.fail(ap, fmt::format("expected an object, found {}", topo::shown(attn)));
  const auto attn_bool = [&](std::string_view key) { return !unset(attn, key) && r.bool_at(attn, key, ap, kWhat); };
  s.alibi = attn_bool("alibi");
  s.rope = !s.alibi && attn_bool("rope");
  s.positions = !s.alibi && !s.rope && optional_bool(r, doc, "learned_pos_emb", true) ? s.shape.seq_len : 0;
  const std::string attn_type = unset(attn, "attn_type") ? "multihead_attention" : r.string_at(attn, "attn_type", ap, kWhat);
  if (attn_type == "grouped_query_attention") {
    s.shape.kv_heads = static_cast<int>(r.integer_at(attn, "kv_n_heads", ap, kWhat, 1, heads));
  } else if (attn_type == "multihead_attention") {
    s.shape.kv_heads = heads;
  } else if (attn_type == "multiquery_attention") {
    s.shape.kv_heads = 1;
  } else {
    r.fail(ap.at("attn_type"), fmt::format("expected multihead_attention, grouped_query_attention or "
                                           "multiquery_attention, found \"{}\"", attn_type));
  }
  s.attention_dropout = !unset(attn, "attn_pdrop") && r.number_at(attn, "attn_pdrop", ap, kWhat) > 0.0;
  const bool bias = !optional_bool(r, doc, "no_bias", false);
  s.qkv_bias = s.proj_bias = s.mlp_bias = bias;
  const std::string norm = optional_string(r, doc, "norm_type", "low_precision_layernorm");
  if (norm.ends_with("rmsnorm")) {
    s.norm = Norm::rmsnorm;
  } else if (norm.ends_with("layernorm")) {
    s.norm = Norm::layernorm;
  } else {
    r.fail(JsonPath{}.at("norm_type"), fmt::format("expected a layernorm or rmsnorm type, found \"{}\"", norm));
  }
  const json& ffn = unset(doc, "ffn_config") ? empty : doc.at("ffn_config");
  const JsonPath fp = JsonPath{}.at("ffn_config");
  if (!ffn.is_object()) r.fail(fp, fmt::format("expected an object, found {}", topo::shown(ffn)));
  const std::string ffn_type = unset(ffn, "ffn_type") ? "mptmlp" : r.string_at(ffn, "ffn_type", fp, kWhat);
  if (ffn_type != "mptmlp" && ffn_type != "mptglu") {
    r.fail(fp.at("ffn_type"), fmt::format("expected mptmlp or mptglu, found \"{}\"", ffn_type));
  }
  s.shape.swiglu = ffn_type == "mptglu";  // a gated unit: two up-projections, as SwiGLU
  s.tied_embeddings = optional_bool(r, doc, "tie_word_embeddings", true);
  s.hidden_dropout = optional_number(r, doc, "resid_pdrop", 0.0) > 0.0 || optional_number(r, doc, "emb_pdrop", 0.0) > 0.0;
  return s;
}

/// BLOOM style (transformers' BloomConfig, model_type "bloom"): hidden_size (or n_embed, the
/// older key), n_layer, n_head, vocab_size (default 250880); FFN 4 hidden with GELU (BloomMLP);
/// ALiBi, no position table; a LayerNorm after the word embedding
/// (word_embeddings_layernorm), pre-LN blocks with biases on every linear, a final LayerNorm;
/// tied embeddings unless tie_word_embeddings is false; dropout per hidden_dropout and
/// attention_dropout (default 0). BloomConfig states no sequence length: seq_length where a
/// config has it, else 2048, BLOOM's training length (or the scenario's model.seq_len).
TransformerSpec bloom_style(const JsonReader& r, const json& doc) {
  TransformerSpec s;
  const int hidden = unset(doc, "n_embed") ? positive(r, doc, "hidden_size") : positive(r, doc, "n_embed");
  s.shape.layers = positive(r, doc, "n_layer");
  s.shape.hidden = hidden;
  s.shape.heads = positive(r, doc, "n_head");
  s.shape.kv_heads = s.shape.heads;
  s.shape.ffn = 4 * hidden;
  s.shape.vocab = optional_positive(r, doc, "vocab_size").value_or(250880);
  s.shape.seq_len = optional_positive(r, doc, "seq_length").value_or(2048);
  s.shape.swiglu = false;
  s.shape.gelu_tanh = true;  // bloom_gelu_forward: the tanh approximation
  s.shape.causal = true;
  s.positions = 0;
  s.rope = false;
  s.alibi = true;
  s.embedding_norm = true;
  s.tied_embeddings = optional_bool(r, doc, "tie_word_embeddings", true);
  s.hidden_dropout = optional_number(r, doc, "hidden_dropout", 0.0) > 0.0;
  s.attention_dropout = optional_number(r, doc, "attention_dropout", 0.0) > 0.0;
  return s;
}

/// "_name_or_path" when the config has one, else the folder holding config.json, else the
/// file's stem.
std::string model_name(const std::string& path, const json& doc) {
  const auto it = doc.find("_name_or_path");
  if (it != doc.end() && it->is_string() && !it->get_ref<const std::string&>().empty())
    return it->get<std::string>();
  const std::filesystem::path p(path);
  if (p.filename() == "config.json" && !p.parent_path().filename().empty())
    return p.parent_path().filename().string();
  return p.stem().string();
}

}  // namespace

Model load_hf_config(const std::string& path, int seq_len) {
  if (seq_len < 0)
    throw sim::ModelError(fmt::format("{}: seq_len must be positive, found {}", path, seq_len));
  const JsonReader r(path, sim::ErrorKind::model);
  const json doc = r.parse_file();
  if (!doc.is_object())
    r.fail(JsonPath{}, fmt::format("expected {} (an object), found {}", kWhat, topo::shown(doc)));
  const std::string model_type = optional_string(r, doc, "model_type", "");
  const bool gpt2 = model_type == "gpt2" || (model_type.empty() && doc.contains("n_embd"));
  TransformerSpec spec = gpt2                     ? gpt2_style(r, doc)
                         : model_type == "mpt"   ? mpt_style(r, doc)
                         : model_type == "bloom" ? bloom_style(r, doc)
                                                 : llama_style(r, doc, model_type);
  spec.name = model_name(path, doc);
  if (seq_len > 0) spec.shape.seq_len = seq_len;
  try {
    return build_transformer(spec);
  } catch (const sim::ModelError& e) {
    throw sim::ModelError(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace foresight::strategy
