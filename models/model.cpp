#include "models/model.hpp"

#include <string_view>

namespace foresight::strategy {

std::int64_t Model::params() const {
  std::int64_t n = 0;
  for (const Layer& l : layers) n += l.params;
  return n;
}

std::string_view to_string(TpRole r) {
  switch (r) {
    case TpRole::replicated:
      return "replicated";
    case TpRole::column:
      return "column";
    case TpRole::row:
      return "row";
    case TpRole::sharded:
      return "sharded";
    case TpRole::vocab:
      return "vocab";
    case TpRole::expert:
      return "expert";
  }
  return "?";
}

const OpTemplate* find_op(const std::vector<OpTemplate>& ops, std::string_view kernel) {
  for (const OpTemplate& t : ops) {
    if (t.kernel == kernel) return &t;
  }
  return nullptr;
}

double expert_assignments(const Layer& l) {
  const OpTemplate* up = find_op(l.fwd, "expert_up_fwd");
  const OpTemplate* down = find_op(l.fwd, "expert_down_fwd");
  if (up == nullptr || down == nullptr) return 0.0;
  // Per token: {1, out, in} GEMMs: up h -> up, down ffn -> h.
  const auto width = static_cast<double>(up->shape[2] + up->shape[1] + down->shape[2]);
  return l.saved_elems / width;
}

namespace {

/// The contiguous layers of layer i's block whose names contain `part` (".mlp." or
/// ".mlp.shared."), but dropouts, residual adds and norms, with i among them; none otherwise.
std::optional<LayerSpan> named_run(const Model& m, std::size_t i, std::string_view part) {
  const auto& layers = m.layers;
  const auto inside = [&](std::size_t k) {
    const Layer& l = layers[k];
    return l.block >= 0 && l.block == layers[i].block && l.name.find(part) != std::string::npos && l.kind != "add" &&
           l.kind != "dropout" && !is_norm(l);
  };
  if (i >= layers.size() || !inside(i)) return std::nullopt;
  LayerSpan span{i, i};
  while (span.first > 0 && inside(span.first - 1)) --span.first;
  while (span.last + 1 < layers.size() && inside(span.last + 1)) ++span.last;
  return span;
}

bool routes(const Model& m, LayerSpan span) {
  for (std::size_t k = span.first; k <= span.last; ++k) {
    if (m.layers[k].kind == "router" || m.layers[k].experts > 0) return true;
  }
  return false;
}

}  // namespace

std::optional<LayerSpan> dense_mlp(const Model& m, std::size_t i) {
  std::optional<LayerSpan> span = named_run(m, i, ".mlp.");
  if (!span || routes(m, *span)) return std::nullopt;
  // The norm right before, a pre-norm (not the attention's post-norm of a post-norm block).
  const std::size_t before = span->first - 1;
  if (span->first > 0 && is_norm(m.layers[before]) && m.layers[before].block == m.layers[i].block &&
      m.layers[before].name.find(".attn.") == std::string::npos) {
    span->first = before;
  }
  return span;
}

std::optional<LayerSpan> moe_mlp(const Model& m, std::size_t i) {
  std::optional<LayerSpan> span = named_run(m, i, ".mlp.");
  if (!span || !routes(m, *span)) return std::nullopt;
  return span;
}

std::optional<LayerSpan> shared_experts(const Model& m, std::size_t i) {
  const std::optional<LayerSpan> mlp = moe_mlp(m, i);
  return mlp ? named_run(m, i, ".mlp.shared.") : std::nullopt;
}

double Model::fwd_flops() const {
  double f = 0.0;
  for (const Layer& l : layers) f += l.fwd_flops;
  return f;
}

double Model::bwd_flops() const {
  double f = 0.0;
  for (const Layer& l : layers) f += l.bwd_flops;
  return f;
}

}  // namespace foresight::strategy
