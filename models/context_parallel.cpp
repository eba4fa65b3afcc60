#include "models/context_parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

#include "common/error.hpp"

namespace foresight::strategy {

Model with_context_parallel(const Model& whole, Model part, int cp) {
  if (!whole.transformer || !part.transformer || whole.layers.size() != part.layers.size()) {
    throw sim::ModelError(fmt::format(
        "context parallelism of {}: expected a transformer built at two sequence lengths",
        whole.name));
  }
  for (std::size_t i = 0; i < part.layers.size(); ++i) {
    Layer& l = part.layers[i];
    l.fwd_flops = whole.layers[i].fwd_flops;
    l.bwd_flops = whole.layers[i].bwd_flops;
    if (l.kind != "attention" || cp == 1) continue;
    if (whole.layers[i].attention_window > 0 && whole.layers[i].attention_window < whole.seq_len) {
      throw sim::ConfigError(fmt::format("plan: cp = {}: context parallelism with the sliding-window attention of {} "
                                         "(window {}) is not simulated",
                                         cp, l.name, whole.layers[i].attention_window));
    }
    const OpTemplate* f = find_op(l.fwd, "flash_attn_fwd");
    const OpTemplate* b = find_op(l.bwd, "flash_attn_bwd");
    if (f == nullptr || b == nullptr) {
      throw sim::ModelError(fmt::format(
          "context parallelism of {}: layer {} has no fused attention kernel", whole.name, l.name));
    }
    // shape {heads, s_q, s_k, head dim, causal, kernel}: another rank's step takes all of this
    // rank's queries against half its keys when causal (or half the queries against all of
    // them: the same work), all of both otherwise.
    const std::int64_t h = f->shape[0];
    const std::int64_t s = f->shape[1];
    const std::int64_t d = f->shape[3];
    const bool causal = f->shape[4] != 0;
    const std::int64_t keys = causal ? s / 2 : s;
    const auto hsd = [&](std::int64_t n) {
      return static_cast<double>(h) * static_cast<double>(n) * static_cast<double>(d);
    };
    OpTemplate rf = *f;
    rf.kernel = std::string(kCpAttentionFwd);
    rf.shape[2] = keys;
    rf.shape[4] = 0;
    rf.flops = 4.0 * hsd(s) * static_cast<double>(keys);
    rf.act_elems = 2.0 * hsd(s) + 2.0 * hsd(keys);  // read Q and the other rank's K, V; write O
    OpTemplate rb = *b;
    rb.kernel = std::string(kCpAttentionBwd);
    rb.shape = rf.shape;
    rb.flops = 2.5 * rf.flops;
    rb.act_elems = 2.0 * rf.act_elems;
    // Forward: the own block first, then the others as their keys and values arrive; backward
    // the same order, its kernels first in the layer's list (its RoPE after).
    std::size_t at = 0;
    while (at < l.fwd.size() && l.fwd[at].kernel != "flash_attn_fwd") ++at;
    l.fwd.insert(l.fwd.begin() + static_cast<std::ptrdiff_t>(at) + 1,
                 static_cast<std::size_t>(cp - 1), rf);
    at = 0;
    while (at < l.bwd.size() && l.bwd[at].kernel != "flash_attn_bwd") ++at;
    l.bwd.insert(l.bwd.begin() + static_cast<std::ptrdiff_t>(at) + 1,
                 static_cast<std::size_t>(cp - 1), rb);
  }
  part.seq_len = whole.seq_len;
  return part;
}

Model with_context_parallel_a2a(const Model& whole, Model part, int cp) {
  Model out = with_context_parallel(whole, std::move(part), 1);
  const TransformerShape& t = *whole.transformer;
  if (t.heads % cp != 0 || t.kv_heads % cp != 0) {
    throw sim::ModelError(
        fmt::format("context parallelism of {} over all-to-alls: cp = {} must divide the {} heads "
                    "and {} key-value heads",
                    whole.name, cp, t.heads, t.kv_heads));
  }
  for (std::size_t i = 0; i < out.layers.size(); ++i) {
    Layer& l = out.layers[i];
    if (l.kind != "attention") continue;
    for (const bool forward : {true, false}) {
      const std::string_view kernel = forward ? "flash_attn_fwd" : "flash_attn_bwd";
      std::vector<OpTemplate>& list = forward ? l.fwd : l.bwd;
      const OpTemplate* w = find_op(forward ? whole.layers[i].fwd : whole.layers[i].bwd, kernel);
      const auto at = std::find_if(list.begin(), list.end(),
                                   [kernel](const OpTemplate& x) { return x.kernel == kernel; });
      if (w == nullptr || at == list.end()) {
        throw sim::ModelError(
            fmt::format("context parallelism of {}: layer {} has no fused attention kernel",
                        whole.name, l.name));
      }
      *at = *w;
      at->shape[0] /= cp;
      at->flops /= cp;
      at->act_elems /= cp;
    }
  }
  return out;
}

double cp_a2a_bytes(const OpTemplate& local, const TransformerShape& t, int cp, int samples, int tp,
                    double activation_bytes, bool queries) {
  const double heads =
      static_cast<double>(local.shape[0]) * cp / tp;  // the rank's heads before the exchange
  const double per_token = queries ? heads : 2.0 * heads * t.kv_heads / t.heads;
  return samples * static_cast<double>(local.shape[1]) / cp * per_token *
         static_cast<double>(local.shape[3]) * activation_bytes;
}

double cp_kv_bytes(const OpTemplate& local, const TransformerShape& t, int samples, int tp,
                   double activation_bytes) {
  const double kv_heads = static_cast<double>(local.shape[0]) * t.kv_heads / t.heads / tp;
  return 2.0 * samples * static_cast<double>(local.shape[1]) * kv_heads *
         static_cast<double>(local.shape[3]) * activation_bytes;
}

}  // namespace foresight::strategy
