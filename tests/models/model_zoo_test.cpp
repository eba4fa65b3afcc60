// The model zoo against published parameter counts and FLOP formulas, and the shapes, batch axes
// and activation counts of its layers. Expected values are derived in comments.

#include "models/model_zoo.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/error.hpp"

namespace {

using foresight::sim::ModelError;
using foresight::sim::OpType;
using namespace foresight::strategy;

const Layer& layer(const Model& m, const std::string& name) {
  for (const Layer& l : m.layers) {
    if (l.name == name) return l;
  }
  FAIL("no layer " << name << " in " << m.name);
  throw;  // unreachable
}

double relative_error(double value, double expected) {
  return std::abs(value - expected) / expected;
}

/// Forward FLOPs of the GEMM and convolution kernels only (2 per multiply-add).
double math_flops(const Model& m) {
  double f = 0.0;
  for (const Layer& l : m.layers) {
    for (const OpTemplate& t : l.fwd) f += t.type == OpType::memory ? 0.0 : t.flops;
  }
  return f;
}

/// Saved elements of transformer block `block`.
double block_saved(const Model& m, int block) {
  double s = 0.0;
  for (const Layer& l : m.layers) s += l.block == block ? l.saved_elems : 0.0;
  return s;
}

}  // namespace

TEST_CASE("every known model builds, ends with its loss, and its FLOPs are its kernels'",
          "[strategies]") {
  REQUIRE(known_models().size() == 30);
  for (const ModelInfo& info : known_models()) {
    INFO(info.name);
    const Model m = build_model(info.name);
    CHECK(m.name == info.name);
    CHECK_FALSE(info.description.empty());
    REQUIRE_FALSE(m.layers.empty());
    CHECK(m.layers.back().kind == "loss");
    CHECK(m.layers.back().block == -1);
    CHECK(m.input_elems > 0.0);
    CHECK(m.transformer.has_value() == (m.seq_len > 0));
    int last_block = -1;
    for (const Layer& l : m.layers) {
      INFO(l.name);
      REQUIRE_FALSE(l.fwd.empty());
      double fwd = 0.0;
      double bwd = 0.0;
      for (const OpTemplate& t : l.fwd) fwd += t.flops;
      for (const OpTemplate& t : l.bwd) bwd += t.flops;
      // Routed experts' kernels are one token's; the layer counts each sample's seq x top_k.
      const double per_sample = l.experts > 0 ? static_cast<double>(m.seq_len) * l.top_k : 1.0;
      CHECK(l.fwd_flops == Approx(fwd * per_sample));
      CHECK(l.bwd_flops == Approx(bwd * per_sample));
      CHECK(l.output_elems > 0.0);
      CHECK(l.saved_elems >= 0.0);
      // Blocks only grow along the forward order (stem -1, then 0, 1, ..., head -1).
      if (l.block >= 0) {
        CHECK(l.block >= last_block);
        last_block = l.block;
      }
      for (const OpTemplate& t : l.fwd) {
        // Memory kernels: per-sample shape {1, ...} with the batch at axis 0.
        if (t.type == OpType::memory) CHECK((t.batch_axis == 0 && t.shape.at(0) == 1));
      }
    }
  }
}

TEST_CASE("CNN parameter counts match torchvision and kuangliu/pytorch-cifar", "[strategies]") {
  // torchvision's documented parameter counts (weights + biases + BN scale and shift).
  struct Case {
    const char* name;
    double published;
  };
  const Case cases[] = {{"resnet18", 11'689'512},
                        {"resnet34", 21'797'672},
                        {"resnet50", 25'557'032},
                        {"vgg19", 143'667'240},
                        {"mobilenet-v2", 3'504'872}};
  for (const Case& c : cases) {
    INFO(c.name);
    const auto params = static_cast<double>(build_model(c.name).params());
    CHECK(relative_error(params, c.published) < 0.01);
    CHECK(params == c.published);  // the builders reproduce them exactly
  }
  // CIFAR ResNet-18, 100 classes: ImageNet's 11,689,512 less the 7x7 stem (3*64*49 = 9,408)
  // plus a 3x3 stem (3*64*9 = 1,728), less fc 512*1000+1000 plus fc 512*100+100:
  // 11,689,512 - 9,408 + 1,728 - 513,000 + 51,300 = 11,220,132.
  CHECK(build_model("resnet18-cifar").params() == 11'220'132);
  // Another class count changes only the classifier: 512*10+10 = 5,130 instead of 51,300.
  CHECK(build_model("resnet18-cifar", 10).params() == 11'220'132 - 51'300 + 5'130);
}

TEST_CASE("transformer parameter counts match the published ones", "[strategies]") {
  // BERT-large (HF BertModel, with the pooler): embeddings (30522+512+2)*1024 + LN 2048 =
  // 31,782,912; per layer 4*(1024^2+1024) + (2*1024*4096 + 4096 + 1024) + 2*2048 = 12,596,224;
  // pooler 1024^2+1024: 31,782,912 + 24*12,596,224 + 1,049,600 = 335,141,888 (~335M, Devlin et
  // al.).
  CHECK(build_model("bert-large").params() == 335'141'888);
  // GPT-2 small: 124,439,808 (HF gpt2).
  CHECK(build_model("gpt2").params() == 124'439'808);
  // GPT-3 175B: N21 Eq. 2, P = 12 l h^2 + 13 l h + (V + s) h, plus the final LayerNorm's 2h.
  const double l = 96, h = 12288, v = 50257, s = 2048;
  const double gpt3 = 12 * l * h * h + 13 * l * h + (v + s) * h + 2 * h;  // 174,604,259,328
  const auto p175 = static_cast<double>(build_model("gpt3-175b").params());
  CHECK(p175 == gpt3);
  CHECK(p175 > 174.6e9);
  CHECK(p175 < 175.0e9);
  // Llama 2 7B: 6,738,415,616 (HF model card); Llama 2 70B 68.98B; Llama 3 8B 8.03B.
  CHECK(build_model("llama2-7b").params() == 6'738'415'616);
  CHECK(relative_error(static_cast<double>(build_model("llama2-70b").params()), 68.98e9) < 0.01);
  CHECK(relative_error(static_cast<double>(build_model("llama3-8b").params()), 8.03e9) < 0.01);
}

TEST_CASE("CNN forward FLOPs match the published multiply-adds", "[strategies]") {
  // torchvision's documented GFLOPS (multiply-adds of convolutions and linear layers): ResNet-18
  // 1.81, ResNet-34 3.66, ResNet-50 4.09, VGG-19 19.63, MobileNetV2 0.30; 2 FLOPs per MAC.
  // The memory-bound kernels (BN, ReLU, pooling) add little to the total: within 5%, except in
  // MobileNetV2, whose depthwise convolutions leave BN and ReLU6 about 6% of its FLOPs.
  struct Case {
    const char* name;
    double gmacs;
    double total_tolerance;
  };
  const Case cases[] = {{"resnet18", 1.81, 0.05},
                        {"resnet34", 3.66, 0.05},
                        {"resnet50", 4.09, 0.05},
                        {"vgg19", 19.63, 0.05},
                        {"mobilenet-v2", 0.30, 0.10}};
  for (const Case& c : cases) {
    INFO(c.name);
    const Model m = build_model(c.name);
    CHECK(relative_error(math_flops(m), 2e9 * c.gmacs) < 0.02);
    CHECK(relative_error(m.fwd_flops(), 2e9 * c.gmacs) < c.total_tolerance);
  }
  // ResNet-50: ~4.1 GMACs, ~8.2 GFLOPs.
  CHECK(relative_error(build_model("resnet50").fwd_flops(), 8.2e9) < 0.05);
}

TEST_CASE("CNN backward FLOPs: twice the forward, less the first convolution's input gradient",
          "[strategies]") {
  for (const char* name : {"resnet18", "resnet50-cifar", "vgg19", "mobilenet-v2"}) {
    INFO(name);
    const Model m = build_model(name);
    const Layer& first = m.layers.front();
    REQUIRE(first.kind == "conv");
    REQUIRE(first.bwd.size() == 1);  // weight gradient only
    CHECK(first.bwd.front().type == OpType::conv_wgrad);
    CHECK(m.bwd_flops() == Approx(2.0 * m.fwd_flops() - first.fwd_flops).epsilon(1e-9));
  }
}

TEST_CASE("transformer FLOPs follow Korthikanti et al. and Megatron's formulas", "[strategies]") {
  SECTION("GPT-3 175B forward: a third of K22 App. A's 72 s l h^2 (1 + s/6h + V/12lh)") {
    const double s = 2048, l = 96, h = 12288, v = 50257;
    const double expected = 24 * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h));  // 7.348e14
    const Model m = build_model("gpt3-175b");
    CHECK(relative_error(m.fwd_flops(), expected) < 0.02);
    CHECK(relative_error(math_flops(m), expected) < 1e-9);  // the GEMMs are exactly the formula
  }
  SECTION("Llama (SwiGLU, GQA): a third of MLM's 12 s l h^2 (1 + (F/h) 3/2 + g/n + s/h + V/2lh)") {
    struct Case {
      const char* name;
      double l, h, f, g, n, s, v;
    };
    const Case cases[] = {{"llama2-7b", 32, 4096, 11008, 32, 32, 4096, 32000},
                          {"llama3-8b", 32, 4096, 14336, 8, 32, 8192, 128256}};
    for (const Case& c : cases) {
      INFO(c.name);
      const double expected = 4 * c.s * c.l * c.h * c.h *
                              (1 + c.f / c.h * 1.5 + c.g / c.n + c.s / c.h + c.v / (2 * c.l * c.h));
      const Model m = build_model(c.name);
      CHECK(relative_error(math_flops(m), expected) < 1e-9);
      CHECK(relative_error(m.fwd_flops(), expected) < 0.02);
    }
  }
  SECTION("backward = 2 x forward") {
    for (const char* name : {"gpt2", "gpt3-175b", "bert-large", "llama2-70b", "llama3-8b"}) {
      INFO(name);
      const Model m = build_model(name);
      CHECK(relative_error(m.bwd_flops(), 2.0 * m.fwd_flops()) < 0.01);
    }
  }
}

TEST_CASE("layer shapes, kernels and batch axes", "[strategies]") {
  const Model cifar = build_model("resnet18-cifar");
  SECTION("ResNet-18 CIFAR layer3.0.conv1: 128x16x16 -> 256, 3x3, stride 2") {
    const Layer& c = layer(cifar, "layer3.0.conv1");
    CHECK(c.kind == "conv");
    CHECK(c.block == 4);  // blocks: layer1.0, layer1.1, layer2.0, layer2.1, layer3.0
    REQUIRE(c.fwd.size() == 1);
    CHECK(c.fwd[0].type == OpType::conv_fprop);
    CHECK(c.fwd[0].math == MathKind::conv);
    CHECK(c.fwd[0].kernel == "conv2d");
    CHECK(c.fwd[0].shape == std::vector<std::int64_t>{1, 128, 16, 16, 256, 3, 3, 2, 1, 1});
    CHECK(c.fwd[0].batch_axis == 0);
    CHECK(c.output_elems == 256 * 8 * 8);    // (16 + 2 - 3) / 2 + 1 = 8
    CHECK(c.saved_elems == 128 * 16 * 16);   // its input
    CHECK(c.params == 3LL * 3 * 128 * 256);  // no bias
    CHECK(c.fwd_flops == 2.0 * 128 * 9 * 256 * 8 * 8);
    CHECK(c.fwd[0].act_elems == 128 * 16 * 16 + 256 * 8 * 8);
    REQUIRE(c.bwd.size() == 2);
    CHECK(c.bwd[0].type == OpType::conv_dgrad);
    CHECK(c.bwd[1].type == OpType::conv_wgrad);
    for (const OpTemplate& t : c.bwd) CHECK((t.shape == c.fwd[0].shape && t.flops == c.fwd_flops));
  }
  SECTION("the classifier's GEMMs: forward and input gradient on the rows, weight gradient on k") {
    const Layer& fc = layer(cifar, "linear");
    CHECK(fc.params == 512 * 100 + 100);
    REQUIRE(fc.bwd.size() == 2);
    CHECK(fc.fwd[0].shape == std::vector<std::int64_t>{1, 100, 512, 1});
    CHECK(fc.fwd[0].batch_axis == 0);
    CHECK(fc.bwd[0].shape == std::vector<std::int64_t>{1, 512, 100, 1});
    CHECK(fc.bwd[0].batch_axis == 0);
    CHECK(fc.bwd[1].shape == std::vector<std::int64_t>{100, 512, 1, 1});
    CHECK(fc.bwd[1].batch_axis == 2);
    CHECK(fc.bwd[1].kernel.find("wgrad") != std::string::npos);
    CHECK(fc.bwd_flops == 2.0 * fc.fwd_flops);
  }
  SECTION("blocks: stem and head outside, 8 residual blocks") {
    CHECK(layer(cifar, "conv1").block == -1);
    CHECK(layer(cifar, "layer1.0.conv1").block == 0);
    CHECK(layer(cifar, "layer4.1.relu2").block == 7);
    CHECK(layer(cifar, "avgpool").block == -1);
    CHECK(cifar.input_elems == 3 * 32 * 32);
    CHECK(cifar.seq_len == 0);
  }
  SECTION("GPT-2 token GEMMs and the attention core") {
    const Model gpt2 = build_model("gpt2");
    const Layer& qkv = layer(gpt2, "h.3.attn.qkv");
    CHECK(qkv.block == 3);
    CHECK(qkv.fwd[0].shape == std::vector<std::int64_t>{1024, 3LL * 768, 768, 1});
    CHECK(qkv.bwd[1].shape == std::vector<std::int64_t>{3LL * 768, 768, 1024, 1});
    CHECK(qkv.bwd[1].batch_axis == 2);
    const Layer& core = layer(gpt2, "h.3.attn.core");
    CHECK(core.kind == "attention");
    CHECK(core.params == 0);
    double gemm_fwd = 0.0;
    double gemm_bwd = 0.0;
    int gemms_bwd = 0;
    for (const OpTemplate& t : core.fwd) {
      if (t.type != OpType::gemm) continue;
      CHECK(t.batch_axis == 3);
      CHECK(t.math == MathKind::matmul);
      gemm_fwd += t.flops;
    }
    for (const OpTemplate& t : core.bwd) {
      if (t.type != OpType::gemm) continue;
      CHECK(t.batch_axis == 3);
      CHECK(t.kernel.find("wgrad") == std::string::npos);  // no weights: all input gradients
      gemm_bwd += t.flops;
      ++gemms_bwd;
    }
    CHECK(core.fwd.front().shape == std::vector<std::int64_t>{1024, 1024, 64, 12});  // Q K^T
    CHECK(core.fwd.back().shape == std::vector<std::int64_t>{1024, 64, 1024, 12});   // P V
    CHECK(gemm_fwd == 2 * (2.0 * 1024 * 1024 * 64 * 12));                            // 4 s^2 h
    CHECK(gemms_bwd == 4);
    CHECK(gemm_bwd == 2 * gemm_fwd);
    CHECK(gpt2.seq_len == 1024);
    CHECK(gpt2.input_elems == 1024);
    REQUIRE(gpt2.transformer.has_value());
    CHECK(gpt2.transformer->layers == 12);
    CHECK(gpt2.transformer->causal);
    CHECK_FALSE(gpt2.transformer->swiglu);
    // The LM head is tied: no parameters of its own, but it computes the logits and their gradient.
    const Layer& head = layer(gpt2, "lm_head");
    CHECK(head.params == 0);
    CHECK(head.fwd[0].shape == std::vector<std::int64_t>{1024, 50257, 768, 1});
    CHECK(head.bwd.size() == 2);
  }
  SECTION("Llama 2 70B: grouped-query attention narrows the QKV projection") {
    const Model m = build_model("llama2-70b");
    // q 64 x 128 + k and v 8 x 128 each = 10240 outputs.
    CHECK(layer(m, "h.0.attn.qkv").fwd[0].shape == std::vector<std::int64_t>{4096, 10240, 8192, 1});
    CHECK(layer(m, "h.0.mlp.gate_up").params == 8192LL * 2 * 28672);
    CHECK(layer(m, "lm_head").params == 32000LL * 8192);  // untied
    CHECK(layer(m, "h.0.ln_1").kind == "rmsnorm");
    CHECK(m.transformer->kv_heads == 8);
  }
}

TEST_CASE("saved activations per transformer layer follow K22", "[strategies]") {
  SECTION("GPT: 18sh + 3as^2 elements = K22's 34sh + 5as^2 bytes") {
    // K22 §4.1 per layer: attention 11sh + 5as^2 bytes, MLP 19sh, two LayerNorms 4sh, with
    // 2-byte activations and 1-byte dropout masks. As elements: LN inputs 2sh; QKV input sh;
    // Q, K, V 3sh; softmax output, its dropout mask and output 3as^2; projection input sh; its
    // dropout mask sh; fc input sh; GELU input 4sh; fc2 input 4sh; MLP dropout mask sh:
    // 18sh + 3as^2 elements, of which the masks are 2sh + as^2. Bytes: 2 (16sh + 2as^2) +
    // (2sh + as^2) = 34sh + 5as^2.
    const Model m = build_model("gpt2");
    const double s = 1024, h = 768, a = 12;
    double saved = 0.0, masks = 0.0;
    for (const auto& l : m.layers) {
      if (l.block != 5) continue;
      saved += l.saved_elems;
      masks += l.saved_mask_elems;
    }
    CHECK(saved + masks == 18 * s * h + 3 * a * s * s);
    CHECK(masks == 2 * s * h + a * s * s);
    CHECK(2 * saved + masks == 34 * s * h + 5 * a * s * s);
  }
  SECTION("Llama: no dropout, RMSNorm, SwiGLU, GQA") {
    // Norm inputs 2sh; QKV input sh; Q (sh), K and V (2 s kv d); softmax output as^2;
    // projection input sh; gate_up input sh; SwiGLU input 2sF; down input sF.
    const Model m = build_model("llama3-8b", 0, 1024);
    const double s = 1024, h = 4096, a = 32, kvd = 8 * 128, f = 14336;
    CHECK(block_saved(m, 0) ==
          2 * s * h + s * h + s * h + 2 * s * kvd + a * s * s + s * h + s * h + 3 * s * f);
  }
}

TEST_CASE("model arguments are validated", "[strategies]") {
  SECTION("unknown names list the known ones") {
    try {
      build_model("resnet19");
      FAIL("no error");
    } catch (const ModelError& e) {
      const std::string what = e.what();
      CHECK(what.find("resnet19") != std::string::npos);
      for (const ModelInfo& info : known_models())
        CHECK(what.find(std::string(info.name)) != std::string::npos);
    }
  }
  CHECK_THROWS_AS(build_model("resnet18", -1), ModelError);
  CHECK_THROWS_AS(build_model("gpt2", 0, -5), ModelError);
  CHECK_THROWS_AS(build_model("gpt2", 10), ModelError);          // classes on a transformer
  CHECK_THROWS_AS(build_model("resnet50", 0, 128), ModelError);  // seq_len on a CNN
  CHECK_THROWS_AS(build_model("gpt2", 0, 2048), ModelError);  // beyond its 1024 learned positions
  SECTION("seq_len overrides the default") {
    const Model m = build_model("gpt3-1.3b", 0, 1024);
    CHECK(m.seq_len == 1024);
    CHECK(m.input_elems == 1024);
    CHECK(m.transformer->seq_len == 1024);
    CHECK(layer(m, "h.0.attn.qkv").fwd[0].shape[0] == 1024);
    // Rotary models have no position table to exceed.
    CHECK(build_model("llama2-7b", 0, 32768).seq_len == 32768);
  }
}
