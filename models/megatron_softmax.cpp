#include "models/megatron_softmax.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <utility>

#include "common/error.hpp"

namespace foresight::strategy {
namespace {

/// A pass of PyTorch's softmax path: its kernel name and its 16-bit elements read + written per
/// score (fp32 ones count two).
struct Pass {
  const char* kernel;
  double elems;
};
constexpr std::array<Pass, 5> kForward{
    {{"softmax_unfused_to_fp32", 3.0},     // read 16-bit, write fp32
     {"softmax_unfused_scale", 4.0},       // fp32 in and out
     {"softmax_unfused_mask", 4.5},        // and the 1-byte mask
     {"softmax_unfused_softmax", 4.0},     // fp32 in and out
     {"softmax_unfused_to_16bit", 3.0}}};  // read fp32, write 16-bit
constexpr std::array<Pass, 5> kBackward{
    {{"softmax_unfused_to_16bit_bwd", 3.0},  // the gradient to fp32
     {"softmax_unfused_softmax_bwd", 6.0},   // reads it and the output
     {"softmax_unfused_mask_bwd", 4.5},
     {"softmax_unfused_scale_bwd", 4.0},
     {"softmax_unfused_to_fp32_bwd", 3.0}}};  // back to 16-bit

/// The kernel's passes `t` stands for, as PyTorch's: the softmax pass keeps its FLOPs.
std::vector<OpTemplate> unfused(const OpTemplate& t, const std::array<Pass, 5>& passes,
                                const char* softmax, double scores) {
  std::vector<OpTemplate> out;
  for (const Pass& p : passes) {
    OpTemplate o = t;
    o.kernel = p.kernel;
    o.act_elems = p.elems * scores;
    o.flops = o.kernel == softmax ? t.flops : 0.0;
    o.path = sim::MemoryPath::vectorized;
    out.push_back(std::move(o));
  }
  return out;
}

/// Replaces the one kernel named `kernel` of `pass` by `passes`; false when it has none.
bool replace(std::vector<OpTemplate>& pass, const std::string& kernel,
             const std::array<Pass, 5>& passes, const char* softmax, double scores) {
  const auto it = std::find_if(pass.begin(), pass.end(),
                               [&](const OpTemplate& t) { return t.kernel == kernel; });
  if (it == pass.end()) return false;
  std::vector<OpTemplate> with = unfused(*it, passes, softmax, scores);
  const auto at = pass.erase(it);
  pass.insert(at, with.begin(), with.end());
  return true;
}

}  // namespace

int megatron_softmax_batch_per_block(std::int64_t sk) {
  std::int64_t pow2 = 1;
  while (pow2 < sk) pow2 *= 2;
  const std::int64_t warp = std::min<std::int64_t>(pow2, 32);
  const std::int64_t rows_per_warp = pow2 <= 128 ? 2 : 1;
  return static_cast<int>((128 / warp) * rows_per_warp);
}

bool megatron_fused_softmax_available(std::int64_t batch, std::int64_t heads, std::int64_t sq,
                                      std::int64_t sk, bool causal) {
  const std::int64_t attn_batches = batch * heads;
  if (!(16 < sk && sk <= 2048) || sq % 4 != 0 || attn_batches % 4 != 0) return false;
  const int per_block = megatron_softmax_batch_per_block(sk);
  return causal ? attn_batches % per_block == 0 : sq % per_block == 0;
}

Model with_megatron_softmax(Model m, int micro_batch, int tp) {
  if (micro_batch < 1 || tp < 1)
    throw sim::InternalError("megatron softmax: micro-batch and tp must be positive");
  const bool causal = !m.transformer || m.transformer->causal;
  for (Layer& l : m.layers) {
    if (l.kind != "attention") continue;
    const OpTemplate* fwd = find_op(l.fwd, "softmax_fwd");
    if (fwd == nullptr) continue;  // fused attention, or already unfused
    if (fwd->shape.size() != 4) {
      throw sim::InternalError(
          fmt::format("megatron softmax: layer {}: softmax_fwd has {} dimensions, expected "
                      "{{1, heads, queries, keys}}",
                      l.name, fwd->shape.size()));
    }
    const std::int64_t heads = fwd->shape[1], sq = fwd->shape[2], sk = fwd->shape[3];
    // Megatron-DeepSpeed's ALiBi adds the bias to the scores and runs the padding-mask kernel.
    const bool layer_causal = causal && find_op(l.fwd, "alibi_bias_fwd") == nullptr;
    if (heads % tp != 0) continue;  // tensor parallelism refuses it later, naming the layer
    if (megatron_fused_softmax_available(micro_batch, heads / tp, sq, sk, layer_causal)) continue;
    const double scores =
        static_cast<double>(heads) * static_cast<double>(sq) * static_cast<double>(sk);
    const bool dropout = find_op(l.fwd, "dropout_fwd") != nullptr;
    replace(l.fwd, "softmax_fwd", kForward, "softmax_unfused_softmax", scores);
    if (!replace(l.bwd, "softmax_bwd", kBackward, "softmax_unfused_softmax_bwd", scores)) {
      throw sim::InternalError(
          fmt::format("megatron softmax: layer {} has a softmax forward but no backward", l.name));
    }
    // The softmax keeps its fp32 output for backward; the 16-bit probabilities (or the dropout's
    // output) still feed the context GEMM.
    const double extra = (dropout ? 1.0 : 2.0) * scores;
    l.saved_elems += extra;
    l.saved_score_elems += extra;
  }
  return m;
}

int unfused_softmax_layers(const Model& m) {
  return static_cast<int>(std::count_if(m.layers.begin(), m.layers.end(), [](const Layer& l) {
    return l.kind == "attention" && find_op(l.fwd, "softmax_unfused_softmax") != nullptr;
  }));
}

}  // namespace foresight::strategy
