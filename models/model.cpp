#include "models/model.hpp"

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

std::optional<LayerSpan> dense_mlp(const Model& m, std::size_t i) {
  const auto& layers = m.layers;
  const auto in_mlp = [&](std::size_t k) {
    const Layer& l = layers[k];
    return l.block >= 0 && l.block == layers[i].block && l.name.find(".mlp.") != std::string::npos &&
           l.kind != "add" && l.kind != "dropout" && !is_norm(l);
  };
  if (i >= layers.size() || !in_mlp(i)) return std::nullopt;
  LayerSpan span{i, i};
  while (span.first > 0 && in_mlp(span.first - 1)) --span.first;
  while (span.last + 1 < layers.size() && in_mlp(span.last + 1)) ++span.last;
  for (std::size_t k = span.first; k <= span.last; ++k) {
    if (layers[k].kind == "router" || layers[k].experts > 0) return std::nullopt;
  }
  if (span.first > 0 && is_norm(layers[span.first - 1]) && layers[span.first - 1].block == layers[i].block) {
    --span.first;
  }
  return span;
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
