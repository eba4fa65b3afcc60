#include "strategies/op_recompute.hpp"

#include <algorithm>

namespace foresight::strategy {
namespace {

/// `t`, a linear layer's forward GEMM {rows, out, in, 1}, narrowed to `width` of its outputs.
OpTemplate narrowed(const OpTemplate& t, std::int64_t width) {
  OpTemplate out = t;
  const double rows = static_cast<double>(t.shape[0]);
  const double in = static_cast<double>(t.shape[2]);
  const double share = static_cast<double>(width) / static_cast<double>(t.shape[1]);
  out.shape[1] = width;
  out.flops = t.flops * share;
  out.act_elems = rows * in + rows * static_cast<double>(width);
  out.param_elems = t.param_elems * share;
  return out;
}

}  // namespace

std::vector<OpRecompute> op_recompute_block(const Model& model, std::size_t first, std::size_t last) {
  std::vector<OpRecompute> out;
  int matmuls = 0;  // aten.mm calls so far in the block's forward
  for (std::size_t i = first; i < last && i < model.layers.size(); ++i) {
    const Layer& l = model.layers[i];
    OpRecompute r;
    const OpTemplate* gemm = find_op(l.fwd, "linear_fwd");
    if (l.experts > 0) {
      r.saved_elems = l.saved_elems;  // not recomputed (see the header)
    } else if (l.kind == "linear" && gemm != nullptr) {
      const std::vector<std::int64_t> widths =
          l.matmul_widths.empty() ? std::vector<std::int64_t>{gemm->shape[1]} : l.matmul_widths;
      std::int64_t recomputed = 0;
      for (const std::int64_t w : widths) {
        if (++matmuls % 2 == 0) recomputed += w;
      }
      const double rows = static_cast<double>(gemm->shape[0]);
      r.saved_elems += rows * static_cast<double>(gemm->shape[1] - recomputed);
      if (recomputed > 0) r.kernels.push_back(narrowed(*gemm, recomputed));
    } else {
      for (const OpTemplate& t : l.fwd) {
        if (t.type == sim::OpType::attention) {
          // A fused attention kernel is on the save list: its output is kept.
          r.saved_elems += l.output_elems;
        } else {
          r.kernels.push_back(t);
        }
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<OpRecompute> op_recompute_layers(const Model& model, const Plan& plan) {
  std::vector<OpRecompute> out;
  if (plan.recompute != Recompute::selective_op) return out;
  out.resize(model.layers.size());
  for (std::size_t i = 0; i < model.layers.size();) {
    std::size_t end = i + 1;
    const int b = model.layers[i].block;
    while (b >= 0 && end < model.layers.size() && model.layers[end].block == b) ++end;
    if (b >= 0) std::ranges::move(op_recompute_block(model, i, end), out.begin() + static_cast<std::ptrdiff_t>(i));
    i = end;
  }
  return out;
}

}  // namespace foresight::strategy
