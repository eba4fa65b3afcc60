// The CNN families of the zoo: ResNet (ImageNet and CIFAR variants), VGG-19 and MobileNetV2.
// Layer names follow torchvision's module names where a layer has a module of its own.

#include <fmt/core.h>

#include <array>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "models/model_builder.hpp"

namespace foresight::strategy {
namespace {

/// Image inputs: ImageNet 3x224x224 (He et al. 2016 §3.4; torchvision's transforms), CIFAR
/// 3x32x32 (Krizhevsky 2009).
constexpr ImageShape kImageNetInput{3, 224, 224};
constexpr ImageShape kCifarInput{3, 32, 32};

/// A feed-forward trunk that follows the current activation shape as layers are appended.
class Trunk {
 public:
  Trunk(std::string name, ImageShape input)
      : builder_(std::move(name)), input_(input), shape_(input) {}

  ImageShape shape() const { return shape_; }
  /// Rewinds the current shape to `s` (the input of a parallel branch).
  void branch_from(ImageShape s) { shape_ = s; }
  void set_block(int block) { builder_.set_block(block); }

  /// A convolution; the model's first one computes no input gradient.
  void conv(std::string name, const ConvSpec& spec) {
    builder_.add(conv_layer(std::move(name), shape_, spec, convs_ > 0));
    shape_ = conv_output(shape_, spec);
    ++convs_;
  }
  void batchnorm(std::string name) { builder_.add(batchnorm_layer(std::move(name), shape_)); }
  void activation(std::string name, Activation a) {
    Layer l = activation_layer(std::move(name), a, shape_.dims());
    // torchvision's ReLU and ReLU6 are in place: the output they need for backward is the very
    // tensor the next layer (convolution, pooling) saves as its input, so it costs nothing more.
    if (a == Activation::relu || a == Activation::relu6) l.saved_elems = 0.0;
    builder_.add(std::move(l));
  }
  void pool(std::string name, Pool kind, int kernel, int stride, int pad) {
    builder_.add(pool_layer(std::move(name), kind, shape_, kernel, stride, pad));
    shape_ = conv_output(shape_, ConvSpec{shape_.c, kernel, stride, pad, 1, false});
  }
  /// Global average pooling to 1x1 (square activations).
  void global_avgpool(std::string name) {
    pool(std::move(name), Pool::avg, static_cast<int>(shape_.h), 1, 0);
  }
  void add(std::string name) { builder_.add(add_layer(std::move(name), shape_.dims())); }

  /// The classifier input: the flattened activation, c x h x w features.
  std::int64_t features() const { return shape_.elems(); }
  ModelBuilder& builder() { return builder_; }

  Model finish() { return builder_.finish(static_cast<double>(input_.elems())); }

 private:
  ModelBuilder builder_;
  ImageShape input_;
  ImageShape shape_;
  int convs_ = 0;
};

ConvSpec conv(std::int64_t out, int kernel, int stride, int pad, int groups = 1,
              bool bias = false) {
  return ConvSpec{out, kernel, stride, pad, groups, bias};
}

/// The classifier head of the CNNs: fc from `in` features to `classes` with bias, then the loss.
void classifier(Trunk& t, const std::string& fc_name, std::int64_t in, int classes) {
  ModelBuilder& b = t.builder();
  b.set_block(-1);
  b.add(linear_layer(fc_name, 1, in, classes, true));
  b.add(loss_layer("loss", 1, classes));
}

void check_classes(const std::string& name, int classes) {
  if (classes <= 0)
    throw sim::ModelError(
        fmt::format("model {}: classes must be positive, found {}", name, classes));
}

/// One residual block of torchvision's resnet.py: BasicBlock (3x3, 3x3) or Bottleneck (1x1,
/// 3x3 with the stride, 1x1 to 4 x planes: "ResNet V1.5"), downsample shortcut 1x1 conv + BN
/// when the shape changes, add, ReLU.
void residual_block(Trunk& t, const std::string& p, std::int64_t planes, int stride,
                    bool bottleneck) {
  const ImageShape in = t.shape();
  const std::int64_t out_c =
      bottleneck ? 4 * planes : planes;  // expansion 4 (He et al. 2016 Table 1)
  if (bottleneck) {
    t.conv(p + "conv1", conv(planes, 1, 1, 0));
    t.batchnorm(p + "bn1");
    t.activation(p + "relu1", Activation::relu);
    t.conv(p + "conv2", conv(planes, 3, stride, 1));
    t.batchnorm(p + "bn2");
    t.activation(p + "relu2", Activation::relu);
    t.conv(p + "conv3", conv(out_c, 1, 1, 0));
    t.batchnorm(p + "bn3");
  } else {
    t.conv(p + "conv1", conv(planes, 3, stride, 1));
    t.batchnorm(p + "bn1");
    t.activation(p + "relu1", Activation::relu);
    t.conv(p + "conv2", conv(planes, 3, 1, 1));
    t.batchnorm(p + "bn2");
  }
  if (stride != 1 || in.c != out_c) {
    const ImageShape main = t.shape();
    t.branch_from(in);
    t.conv(p + "downsample.0", conv(out_c, 1, stride, 0));
    t.batchnorm(p + "downsample.1");
    if (t.shape().elems() != main.elems()) {
      throw sim::InternalError(fmt::format("{}: shortcut and main branch shapes differ", p));
    }
  }
  t.add(p + "add");
  t.activation(p + (bottleneck ? "relu3" : "relu2"), Activation::relu);
}

}  // namespace

Model build_resnet(const ResNetSpec& spec) {
  check_classes(spec.name, spec.classes);
  Trunk t(spec.name, spec.cifar ? kCifarInput : kImageNetInput);
  if (spec.cifar) {
    // kuangliu/pytorch-cifar models/resnet.py: conv1 3x3/1 to 64, bn1, relu; no max-pool.
    t.conv("conv1", conv(64, 3, 1, 1));
    t.batchnorm("bn1");
    t.activation("relu", Activation::relu);
  } else {
    // He et al. 2016 Table 1 / torchvision resnet.py: 7x7/2 conv to 64, BN, ReLU, 3x3/2 max-pool.
    t.conv("conv1", conv(64, 7, 2, 3));
    t.batchnorm("bn1");
    t.activation("relu", Activation::relu);
    t.pool("maxpool", Pool::max, 3, 2, 1);
  }
  // Four stages of 64, 128, 256, 512 planes; the first block of stages 2-4 has stride 2 (He et
  // al. 2016 Table 1).
  constexpr std::array<std::int64_t, 4> kPlanes{64, 128, 256, 512};
  int block = 0;
  for (std::size_t stage = 0; stage < kPlanes.size(); ++stage) {
    for (int i = 0; i < spec.blocks[stage]; ++i) {
      t.set_block(block++);
      const int stride = stage > 0 && i == 0 ? 2 : 1;
      residual_block(t, fmt::format("layer{}.{}.", stage + 1, i), kPlanes[stage], stride,
                     spec.bottleneck);
    }
  }
  t.set_block(-1);
  t.global_avgpool("avgpool");
  classifier(t, spec.cifar ? "linear" : "fc", t.features(), spec.classes);
  return t.finish();
}

Model build_vgg19(const std::string& name, int classes) {
  check_classes(name, classes);
  // Configuration E (Simonyan and Zisserman 2015, Table 1) as torchvision's cfgs["E"]: 3x3 convs
  // with bias, padding 1, each followed by ReLU; 0 marks a 2x2/2 max-pool.
  constexpr std::array<std::int64_t, 21> kCfg{64,  64,  0,   128, 128, 0,   256, 256, 256, 256, 0,
                                              512, 512, 512, 512, 0,   512, 512, 512, 512, 0};
  Trunk t(name, kImageNetInput);
  int index = 0;  // torchvision's index in `features`
  int block = -1;
  for (const std::int64_t c : kCfg) {
    if (c == 0) {
      t.pool(fmt::format("features.{}", index++), Pool::max, 2, 2, 0);
      continue;
    }
    t.set_block(++block);  // a block: one conv, its ReLU and the max-pool after it
    t.conv(fmt::format("features.{}", index++), conv(c, 3, 1, 1, 1, true));
    t.activation(fmt::format("features.{}", index++), Activation::relu);
  }
  // torchvision's AdaptiveAvgPool2d((7, 7)) is the identity on the 7x7 maps of a 224x224 input:
  // omitted. Classifier: 25088 -> 4096 -> 4096 -> classes, ReLU and dropout after the first two.
  ModelBuilder& b = t.builder();
  std::int64_t in = t.features();
  for (int i = 0; i < 2; ++i) {
    b.set_block(++block);
    b.add(linear_layer(fmt::format("classifier.{}", 3 * i), 1, in, 4096, true));
    b.add(activation_layer(fmt::format("classifier.{}", 3 * i + 1), Activation::relu, {4096}));
    b.add(dropout_layer(fmt::format("classifier.{}", 3 * i + 2), {4096}));
    in = 4096;
  }
  classifier(t, "classifier.6", in, classes);
  return t.finish();
}

Model build_mobilenet_v2(const std::string& name, int classes) {
  check_classes(name, classes);
  // Sandler et al. 2018 Table 2: expansion t, output channels c, repeats n, first stride s.
  struct Stage {
    int t;
    std::int64_t c;
    int n;
    int s;
  };
  constexpr std::array<Stage, 7> kStages{{{1, 16, 1, 1},
                                          {6, 24, 2, 2},
                                          {6, 32, 3, 2},
                                          {6, 64, 4, 2},
                                          {6, 96, 3, 1},
                                          {6, 160, 3, 2},
                                          {6, 320, 1, 1}}};
  Trunk t(name, kImageNetInput);
  // features.0: 3x3/2 conv to 32, BN, ReLU6 (Table 2, first row).
  t.conv("features.0.conv", conv(32, 3, 2, 1));
  t.batchnorm("features.0.bn");
  t.activation("features.0.relu6", Activation::relu6);
  int index = 1;
  for (const Stage& st : kStages) {
    for (int i = 0; i < st.n; ++i) {
      t.set_block(index - 1);
      const std::string p = fmt::format("features.{}.", index++);
      const ImageShape in = t.shape();
      const int stride = i == 0 ? st.s : 1;
      const std::int64_t hidden = in.c * st.t;
      if (st.t != 1) {  // torchvision skips the expansion when t = 1
        t.conv(p + "expand.conv", conv(hidden, 1, 1, 0));
        t.batchnorm(p + "expand.bn");
        t.activation(p + "expand.relu6", Activation::relu6);
      }
      t.conv(p + "dw.conv", conv(hidden, 3, stride, 1, static_cast<int>(hidden)));  // depthwise
      t.batchnorm(p + "dw.bn");
      t.activation(p + "dw.relu6", Activation::relu6);
      t.conv(p + "project.conv", conv(st.c, 1, 1, 0));  // linear bottleneck: no activation
      t.batchnorm(p + "project.bn");
      if (stride == 1 && in.c == st.c) t.add(p + "add");
    }
  }
  // features.18: 1x1 conv to 1280, BN, ReLU6; global average pool; dropout 0.2 and the classifier.
  t.set_block(-1);
  const std::string last = fmt::format("features.{}.", index);
  t.conv(last + "conv", conv(1280, 1, 1, 0));
  t.batchnorm(last + "bn");
  t.activation(last + "relu6", Activation::relu6);
  t.global_avgpool("avgpool");
  t.builder().add(dropout_layer("classifier.0", {t.features()}));
  classifier(t, "classifier.1", t.features(), classes);
  return t.finish();
}

}  // namespace foresight::strategy
