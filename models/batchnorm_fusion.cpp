#include "models/batchnorm_fusion.hpp"

#include <fmt/core.h>

#include <utility>

#include "common/error.hpp"

namespace foresight::strategy {
namespace {

bool is(const Model& m, std::size_t i, const char* kind) { return i < m.layers.size() && m.layers[i].kind == kind; }

/// The layer's one kernel of `pass` (InternalError otherwise: the builder gives BatchNorm, ReLU
/// and add one kernel each way).
OpTemplate& only(std::vector<OpTemplate>& pass, const Layer& l) {
  if (pass.size() != 1) {
    throw sim::InternalError(fmt::format("batchnorm fusion: layer {} ({}) has {} kernels in a pass, expected 1", l.name,
                                    l.kind, pass.size()));
  }
  return pass.front();
}

/// Moves the kernels of `from` (a ReLU or an add) into `into`'s: their FLOPs join its kernels'.
void absorb(Layer& into, Layer& from) {
  only(into.fwd, into).flops += only(from.fwd, from).flops;
  only(into.bwd, into).flops += only(from.bwd, from).flops;
  from.fwd.clear();
  from.bwd.clear();
}

}  // namespace

bool has_fusable_batchnorm(const Model& m) {
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    if (is(m, i, "batchnorm") && (is(m, i + 1, "relu") || (is(m, i + 1, "add") && is(m, i + 2, "relu")))) return true;
  }
  return false;
}

Model with_batchnorm_fusion(Model m, BatchNormFusion fusion, int activation_bytes) {
  if (fusion == BatchNormFusion::none) return m;
  if (activation_bytes <= 0) throw sim::InternalError("batchnorm fusion: activation bytes must be positive");
  const bool mainloop = fusion == BatchNormFusion::conv_mainloop;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    if (!is(m, i, "batchnorm")) continue;
    Layer& bn = m.layers[i];
    OpTemplate& fwd = only(bn.fwd, bn);
    OpTemplate& bwd = only(bn.bwd, bn);
    // Inside residual blocks only: the stem's BatchNorm follows a plain convolution and computes
    // its own statistics (MXNet's BatchNorm with act_type relu in every network).
    const bool stats = fusion != BatchNormFusion::bn_relu && bn.block >= 0;
    // Its activation elements per sample: the forward reads x and writes y.
    const double n = fwd.act_elems / 2.0;
    if (is(m, i + 1, "relu")) {
      absorb(bn, m.layers[i + 1]);
      fwd.kernel = stats ? "bn_apply_relu" : "batchnorm_relu_fwd";  // reads x, writes y
      bwd.kernel = "batchnorm_relu_bwd";                            // reads dy and x, writes dx
      if (stats && mainloop && is(m, i + 2, "conv")) {
        // Applied as the next convolution loads its input: no pass of its own. Its FLOPs stay
        // in the layer's count (model FLOPs), not in a kernel.
        bn.fwd.clear();
        continue;
      }
    } else if (is(m, i + 1, "add") && is(m, i + 2, "relu")) {
      absorb(bn, m.layers[i + 1]);
      absorb(bn, m.layers[i + 2]);
      const double mask = n / (8.0 * activation_bytes);  // one bit per element
      fwd.kernel = stats ? "bn_apply_add_relu" : "batchnorm_add_relu_fwd";
      fwd.act_elems = 3.0 * n + mask;  // reads x and the addend, writes y and the mask
      bwd.kernel = "batchnorm_add_relu_bwd";
      bwd.act_elems = 4.0 * n + mask;  // reads dy, x and the mask, writes dx and the addend's gradient
      // A downsampling block (BatchNorm, shortcut convolution, its BatchNorm, add): under
      // conv_stats the main branch's last BatchNorm is applied in the same pass.
      if (stats && i >= 2 && is(m, i - 1, "conv") && is(m, i - 2, "batchnorm") && !m.layers[i - 2].fwd.empty()) {
        Layer& main = m.layers[i - 2];
        fwd.flops += only(main.fwd, main).flops;
        main.fwd.clear();
      }
    } else if (stats) {
      fwd.kernel = "bn_apply";  // a BatchNorm followed by neither: applied alone
    }
    // Under conv_stats the statistics come from the convolution: the forward is elementwise.
    if (stats) fwd.path = sim::MemoryPath::vectorized;
  }
  return m;
}

}  // namespace foresight::strategy
