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
