// The transformer family of the zoo and the Hugging Face import: GPT-2/GPT-3 (pre-LN, learned
// positions), BERT (post-LN, token types, pooler) and Llama-style decoders (RMSNorm, RoPE,
// SwiGLU, grouped-query attention), built layer by layer from their shapes.

#include <fmt/core.h>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "models/model_builder.hpp"

namespace foresight::strategy {
namespace {

void require_positive(const std::string& model, std::string_view what, long long value) {
  if (value <= 0)
    throw sim::ModelError(
        fmt::format("model {}: {} must be positive, found {}", model, what, value));
}

/// Checks the spec and returns the head dimension.
std::int64_t checked_head_dim(const TransformerSpec& spec) {
  const TransformerShape& t = spec.shape;
  require_positive(spec.name, "layers", t.layers);
  require_positive(spec.name, "hidden size", t.hidden);
  require_positive(spec.name, "attention heads", t.heads);
  require_positive(spec.name, "key/value heads", t.kv_heads);
  require_positive(spec.name, "FFN size", t.ffn);
  require_positive(spec.name, "vocabulary", t.vocab);
  require_positive(spec.name, "seq_len", t.seq_len);
  if (t.heads % t.kv_heads != 0) {
    throw sim::ModelError(
        fmt::format("model {}: {} key/value heads do not divide {} attention heads", spec.name,
                    t.kv_heads, t.heads));
  }
  if (spec.head_dim == 0 && t.hidden % t.heads != 0) {
    throw sim::ModelError(
        fmt::format("model {}: {} attention heads do not divide the hidden size {}", spec.name,
                    t.heads, t.hidden));
  }
  if (spec.head_dim < 0) {
    throw sim::ModelError(fmt::format("model {}: head dimension must be positive, found {}",
                                      spec.name, spec.head_dim));
  }
  if (spec.positions > 0 && t.seq_len > spec.positions) {
    throw sim::ModelError(fmt::format("model {}: seq_len {} exceeds its {} learned positions",
                                      spec.name, t.seq_len, spec.positions));
  }
  return spec.head_dim > 0 ? spec.head_dim : t.hidden / t.heads;
}

/// `l` with its tensor-parallel role (Megatron's layout, Shoeybi et al. 2019 §3).
Layer with_tp(Layer l, TpRole role) {
  l.tp = role;
  return l;
}

/// A column-parallel linear layer fusing projections of `widths` (in the order an eager model
/// calls them), as Megatron fuses QKV and the gated MLP's gate and up projections.
Layer fused_linear(std::string name, std::int64_t rows, std::int64_t in, std::vector<std::int64_t> widths, bool bias) {
  std::int64_t out = 0;
  for (const std::int64_t w : widths) out += w;
  Layer l = with_tp(linear_layer(std::move(name), rows, in, out, bias), TpRole::column);
  l.matmul_widths = std::move(widths);
  return l;
}

}  // namespace

Model build_transformer(const TransformerSpec& spec) {
  const std::int64_t d = checked_head_dim(spec);
  const TransformerShape& t = spec.shape;
  const std::int64_t s = t.seq_len;
  const std::int64_t h = t.hidden;
  const std::int64_t q = t.heads * d;  // query (and context) width
  const std::int64_t ffn = t.ffn;
  const Dims tokens{s, h};

  ModelBuilder b(spec.name);
  // Embedding: word table, then learned positions and token types where the model has them.
  std::vector<std::int64_t> tables{t.vocab};
  if (spec.positions > 0) tables.push_back(spec.positions);
  if (spec.token_types > 0) tables.push_back(spec.token_types);
  b.add(with_tp(embedding_layer("embed", s, h, tables), TpRole::vocab));
  if (!spec.pre_norm || spec.embedding_norm) b.add(norm_layer("embed.norm", spec.norm, s, h));
  if (spec.hidden_dropout) b.add(dropout_layer("embed.dropout", tokens));

  const bool table = spec.positions > 0;
  AttentionShape attention{s,
                           t.heads,
                           t.kv_heads,
                           d,
                           !table && spec.rope && !spec.alibi,
                           spec.attention_dropout,
                           !table && spec.alibi};
  attention.qk_norm = spec.qk_norm;
  attention.sinks = spec.attention_sinks;
  if (!spec.windows.empty() && spec.windows.size() != static_cast<std::size_t>(t.layers)) {
    throw sim::ModelError(fmt::format("model {}: {} attention windows for {} layers", spec.name, spec.windows.size(),
                                      t.layers));
  }
  for (int i = 0; i < t.layers; ++i) {
    attention.window = spec.windows.empty() ? 0 : spec.windows[static_cast<std::size_t>(i)];
    b.set_block(i);
    const std::string p = fmt::format("h.{}.", i);
    // Attention sub-layer: [norm,] fused QKV projection, core, output projection, [dropout,]
    // residual add, [post-norm].
    if (spec.pre_norm) b.add(norm_layer(p + "ln_1", spec.norm, s, h));
    b.add(fused_linear(p + "attn.qkv", s, h, {q, t.kv_heads * d, t.kv_heads * d}, spec.qkv_bias));
    b.add(attention_layer(p + "attn.core", attention));
    b.add(with_tp(linear_layer(p + "attn.proj", s, q, h, spec.proj_bias), TpRole::row));
    if (spec.hidden_dropout) b.add(dropout_layer(p + "attn.dropout", tokens));
    b.add(add_layer(p + "attn.residual", tokens));
    if (!spec.pre_norm) b.add(norm_layer(p + "attn.norm", spec.norm, s, h));
    // MLP sub-layer: [norm,] h -> ffn (GELU) or h -> 2 ffn (gate and up, fused as Megatron's
    // gated linear_fc1) then SwiGLU, ffn -> h, [dropout,] residual add, [post-norm].
    if (spec.pre_norm) b.add(norm_layer(p + "ln_2", spec.norm, s, h));
    const MoeShape& m = t.moe;
    if (m.experts > 0 && i >= m.dense_layers) {
      // Mixture of experts: the router, the routed experts, then the shared experts as one
      // dense FFN of shared x expert_ffn (DeepSeekMoE's layout).
      b.add(router_layer(p + "mlp.router", s, h, m.experts, m.top_k, m.bias));
      b.add(with_tp(experts_layer(p + "mlp.experts", s, h, m.expert_ffn, m.experts, m.top_k, t.swiglu, m.bias),
                    TpRole::expert));
      if (m.shared_experts > 0) {
        const std::int64_t f = static_cast<std::int64_t>(m.shared_experts) * m.expert_ffn;
        b.add(fused_linear(p + "mlp.shared.gate_up", s, h, {f, f}, spec.mlp_bias));
        b.add(with_tp(swiglu_layer(p + "mlp.shared.act", s, f), TpRole::sharded));
        b.add(with_tp(linear_layer(p + "mlp.shared.proj", s, f, h, spec.mlp_bias), TpRole::row));
      }
      if (spec.hidden_dropout) b.add(dropout_layer(p + "mlp.dropout", tokens));
      b.add(add_layer(p + "mlp.residual", tokens));
      if (!spec.pre_norm) b.add(norm_layer(p + "mlp.norm", spec.norm, s, h));
      continue;
    }
    if (t.swiglu) {
      b.add(fused_linear(p + "mlp.gate_up", s, h, {ffn, ffn}, spec.mlp_bias));
      b.add(with_tp(swiglu_layer(p + "mlp.act", s, ffn), TpRole::sharded));
    } else {
      b.add(with_tp(linear_layer(p + "mlp.fc", s, h, ffn, spec.mlp_bias), TpRole::column));
      b.add(with_tp(activation_layer(p + "mlp.act", Activation::gelu, {s, ffn}), TpRole::sharded));
    }
    b.add(with_tp(linear_layer(p + "mlp.proj", s, ffn, h, spec.mlp_bias), TpRole::row));
    if (spec.hidden_dropout) b.add(dropout_layer(p + "mlp.dropout", tokens));
    b.add(add_layer(p + "mlp.residual", tokens));
    if (!spec.pre_norm) b.add(norm_layer(p + "mlp.norm", spec.norm, s, h));
  }

  b.set_block(-1);
  if (spec.pre_norm) b.add(norm_layer("ln_f", spec.norm, s, h));
  if (spec.pooler) {
    // BERT's pooler: dense h -> h with tanh on the first token (Devlin et al. 2019 §3; HF
    // BertPooler). A side branch: the LM head below reads the encoder output.
    b.add(linear_layer("pooler.dense", 1, h, h, true));
    b.add(activation_layer("pooler.act", Activation::tanh, {h}));
  }
  // Logits over the vocabulary at every position (no bias); tied to the word embedding or not.
  b.add(with_tp(linear_layer("lm_head", s, h, t.vocab, false, spec.tied_embeddings), TpRole::column));
  b.add(with_tp(loss_layer("loss", s, t.vocab), TpRole::sharded));
  return b.finish(static_cast<double>(s), t.seq_len, t);
}

}  // namespace foresight::strategy
