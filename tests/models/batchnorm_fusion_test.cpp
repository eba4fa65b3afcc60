// BatchNorm fused with the ReLU and residual add after it (models/batchnorm_fusion.hpp), on
// ResNet-50: which kernels go, which grow, and by how many elements.
#include "models/batchnorm_fusion.hpp"

#include <catch2/catch.hpp>
#include <initializer_list>
#include <map>
#include <utility>
#include <string>

#include "models/model_zoo.hpp"

namespace {

using namespace foresight::strategy;
using foresight::sim::MemoryPath;

/// Kernels of both passes by name, counted.
std::map<std::string, int> fusion_kernel_counts(const Model& m) {
  std::map<std::string, int> out;
  for (const Layer& l : m.layers) {
    for (const auto* pass : {&l.fwd, &l.bwd}) {
      for (const OpTemplate& t : *pass) ++out[t.kernel];
    }
  }
  return out;
}

double total_flops(const Model& m) {
  double f = 0.0;
  for (const Layer& l : m.layers) {
    for (const auto* pass : {&l.fwd, &l.bwd}) {
      for (const OpTemplate& t : *pass) f += t.flops;
    }
  }
  return f;
}

/// Checks how many kernels of each name `m` has (0: none).
void check_kernel_counts(const Model& m, std::initializer_list<std::pair<const char*, int>> expected) {
  const auto k = fusion_kernel_counts(m);
  for (const auto& [name, count] : expected) {
    INFO(name);
    CHECK((k.count(name) ? k.at(name) : 0) == count);
  }
}

const Layer& layer_named(const Model& m, const std::string& name) {
  for (const Layer& l : m.layers) {
    if (l.name == name) return l;
  }
  FAIL("no layer " << name);
  return m.layers.front();
}

}  // namespace

TEST_CASE("ResNet-50 with BatchNorm fused with ReLU and add (MXNet's bn_relu)", "[models]") {
  const Model plain = build_model("resnet50");
  REQUIRE(has_fusable_batchnorm(plain));
  const Model m = with_batchnorm_fusion(plain, BatchNormFusion::bn_relu, 2);
  // He et al. 2016, Table 1: 16 bottleneck blocks, 4 of them with a projection shortcut. The stem
  // BatchNorm and each block's first two are followed by a ReLU (33); each block's last is
  // followed by the add and the ReLU (16); the 4 shortcut BatchNorms by neither.
  check_kernel_counts(m, {{"batchnorm_relu_fwd", 33}, {"batchnorm_relu_bwd", 33}, {"batchnorm_add_relu_fwd", 16},
                          {"batchnorm_add_relu_bwd", 16}, {"batchnorm_fwd", 4}, {"batchnorm_bwd", 4},
                          {"relu_fwd", 0}, {"relu_bwd", 0}, {"add_fwd", 0}, {"add_bwd", 0}});
  // The fused kernels count the FLOPs of those they replace; layers keep theirs.
  CHECK(total_flops(m) == Approx(total_flops(plain)).epsilon(1e-12));
  CHECK(m.fwd_flops() == plain.fwd_flops());
  CHECK(m.layers.size() == plain.layers.size());

  // layer1.1 (identity shortcut): bn3 then add then relu3, over 256 x 56 x 56 per sample.
  const double n = 256.0 * 56 * 56;
  const double mask = n / 16.0;  // one bit per 2-byte element
  const Layer& bn3 = layer_named(m, "layer1.1.bn3");
  REQUIRE(bn3.fwd.size() == 1);
  CHECK(bn3.fwd[0].kernel == "batchnorm_add_relu_fwd");
  CHECK(bn3.fwd[0].act_elems == Approx(3.0 * n + mask));  // x, the addend, y, the mask
  CHECK(bn3.bwd[0].act_elems == Approx(4.0 * n + mask));  // dy, x, the mask; dx, the addend's gradient
  CHECK(bn3.fwd[0].path == MemoryPath::batchnorm_fwd);
  CHECK(layer_named(m, "layer1.1.add").fwd.empty());
  CHECK(layer_named(m, "layer1.1.relu3").bwd.empty());
  // layer1.1.bn1 (64 x 56 x 56) takes its ReLU with no more bytes: the mask comes from x.
  const Layer& bn1 = layer_named(m, "layer1.1.bn1");
  CHECK(bn1.fwd[0].kernel == "batchnorm_relu_fwd");
  CHECK(bn1.fwd[0].act_elems == Approx(2.0 * 64 * 56 * 56));
  CHECK(bn1.bwd[0].act_elems == Approx(3.0 * 64 * 56 * 56));
  // In fp32 the mask is a 32nd of an element.
  const Model m32 = with_batchnorm_fusion(plain, BatchNormFusion::bn_relu, 4);
  CHECK(layer_named(m32, "layer1.1.bn3").fwd[0].act_elems == Approx(3.0 * n + n / 32.0));
}

TEST_CASE("ResNet-50 with BatchNorm statistics in the convolutions (conv_stats)", "[models]") {
  const Model plain = build_model("resnet50");
  const Model m = with_batchnorm_fusion(plain, BatchNormFusion::conv_stats, 2);
  // Inside the blocks; the stem's BatchNorm, after a plain convolution, computes its statistics.
  // The 4 downsampling blocks apply their main branch's last BatchNorm inside the add's pass
  // (dual scale-bias): it keeps only its backward. Their shortcut BatchNorm takes the add.
  check_kernel_counts(m, {{"bn_apply_relu", 32}, {"batchnorm_relu_fwd", 1}, {"bn_apply_add_relu", 16},
                          {"bn_apply", 0}, {"batchnorm_relu_bwd", 33}, {"batchnorm_add_relu_bwd", 16},
                          {"batchnorm_bwd", 4}});
  CHECK(layer_named(m, "bn1").fwd[0].path == MemoryPath::batchnorm_fwd);
  const Layer& main = layer_named(m, "layer1.0.bn3");
  CHECK(main.fwd.empty());
  REQUIRE(main.bwd.size() == 1);
  CHECK(main.bwd[0].kernel == "batchnorm_bwd");
  const Layer& shortcut = layer_named(m, "layer1.0.downsample.1");
  CHECK(shortcut.fwd[0].kernel == "bn_apply_add_relu");
  // An elementwise pass at the vectorized rate forward; a reduction at BatchNorm's backward.
  CHECK(shortcut.fwd[0].path == MemoryPath::vectorized);
  CHECK(shortcut.bwd[0].path == MemoryPath::batchnorm_bwd);
  CHECK(total_flops(m) == Approx(total_flops(plain)).epsilon(1e-12));
}

TEST_CASE("ResNet-50 with BatchNorm applied in the convolutions' main loop (conv_mainloop)", "[models]") {
  const Model plain = build_model("resnet50");
  const Model stats = with_batchnorm_fusion(plain, BatchNormFusion::conv_stats, 2);
  const Model m = with_batchnorm_fusion(plain, BatchNormFusion::conv_mainloop, 2);
  // The 32 inner BatchNorm-ReLU passes of conv_stats go into the next convolution; the stem's
  // and the 16 block ends' stay, and every backward kernel stays.
  check_kernel_counts(m, {{"bn_apply_relu", 0}, {"batchnorm_relu_fwd", 1}, {"bn_apply_add_relu", 16},
                          {"batchnorm_relu_bwd", 33}, {"batchnorm_add_relu_bwd", 16}});
  CHECK(layer_named(m, "layer2.0.bn2").fwd.empty());
  CHECK(layer_named(m, "layer2.0.bn2").fwd_flops == layer_named(plain, "layer2.0.bn2").fwd_flops);
  // What goes is exactly conv_stats's inner apply passes: their FLOPs and elements.
  double gone_flops = 0.0;
  for (const Layer& l : stats.layers) {
    if (!l.fwd.empty() && l.fwd[0].kernel == "bn_apply_relu") gone_flops += l.fwd[0].flops;
  }
  CHECK(total_flops(stats) - total_flops(m) == Approx(gone_flops).epsilon(1e-12));
  CHECK(gone_flops > 0.0);
}

TEST_CASE("BatchNorm fusion leaves a model without BatchNorm as it is", "[models]") {
  const Model gpt = build_model("gpt2");
  CHECK_FALSE(has_fusable_batchnorm(gpt));
  const Model none = with_batchnorm_fusion(build_model("resnet18"), BatchNormFusion::none, 2);
  CHECK(fusion_kernel_counts(none) == fusion_kernel_counts(build_model("resnet18")));
  // ResNet-18 (basic blocks): 8 blocks, 3 with a projection shortcut; stem + one per block
  // before the ReLU (9), one per block before the add (8).
  check_kernel_counts(with_batchnorm_fusion(build_model("resnet18"), BatchNormFusion::bn_relu, 2),
                      {{"batchnorm_relu_fwd", 9}, {"batchnorm_add_relu_fwd", 8}, {"batchnorm_fwd", 3}});
}
