// Transformer Engine's FP8 current scaling (Float8CurrentScaling): the passes each FP8 cast gains.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/model_builder.hpp"

namespace foresight::strategy {
namespace {

constexpr std::string_view kCast = "fp8_cast_transpose_";
constexpr std::string_view kAmax = "fp8_amax_";
constexpr std::string_view kScale = "fp8_scale_";

/// `ops` with an amax pass and a scale kernel before each FP8 cast.
std::vector<OpTemplate> with_amax_passes(const std::vector<OpTemplate>& ops) {
  std::vector<OpTemplate> out;
  out.reserve(ops.size());
  for (const OpTemplate& t : ops) {
    if (t.kernel.starts_with(kCast)) {
      const std::string tensor = t.kernel.substr(kCast.size());
      // The amax: one read of the 2-byte tensor (the cast reads it and writes 1 + 1 bytes: half
      // its elements), one comparison per element.
      OpTemplate amax = t;
      amax.kernel = std::string(kAmax) + tensor;
      amax.act_elems = t.act_elems / 2.0;
      amax.param_elems = t.param_elems / 2.0;
      amax.flops = t.act_elems / 2.0 + t.param_elems / 2.0;
      // The scale from the amax: one value, a launch.
      OpTemplate scale = t;
      scale.kernel = std::string(kScale) + tensor;
      scale.shape = {1, 1};
      scale.batched = false;
      scale.act_elems = 0.0;
      scale.param_elems = 0.0;
      scale.flops = 0.0;
      out.push_back(std::move(amax));
      out.push_back(std::move(scale));
    }
    out.push_back(t);
  }
  return out;
}

}  // namespace

std::string_view fp8_cast_of(std::string_view kernel) {
  for (const std::string_view prefix : {kAmax, kScale}) {
    if (kernel.starts_with(prefix)) return kernel.substr(prefix.size());
  }
  return kernel.starts_with(kCast) ? kernel.substr(kCast.size()) : std::string_view{};
}

Model with_fp8_current_scaling(Model model) {
  for (Layer& l : model.layers) {
    l.fwd = with_amax_passes(l.fwd);
    l.bwd = with_amax_passes(l.bwd);
  }
  return model;
}

}  // namespace foresight::strategy
