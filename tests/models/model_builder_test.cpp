// The layer factories and ModelBuilder: counts derived from each layer's shape.

#include "models/model_builder.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "common/error.hpp"

namespace {

using foresight::sim::ModelError;
using foresight::sim::OpType;
using namespace foresight::strategy;
using Shape = std::vector<std::int64_t>;

}  // namespace

TEST_CASE("convolution output sizes and counts", "[strategies]") {
  // ImageNet stem: (224 + 2*3 - 7) / 2 + 1 = 112.
  const ImageShape out = conv_output({3, 224, 224}, ConvSpec{64, 7, 2, 3});
  CHECK(out.c == 64);
  CHECK(out.h == 112);
  CHECK(out.w == 112);
  SECTION("depthwise: groups = channels") {
    // 3x3 depthwise over 96x112x112, stride 2 -> 96x56x56; 96*9 weights;
    // 2 * (96/96) * 9 * 96 * 56 * 56 FLOPs.
    const Layer l = conv_layer("dw", {96, 112, 112}, ConvSpec{96, 3, 2, 1, 96});
    CHECK(l.params == 96LL * 9);
    CHECK(l.fwd_flops == 2.0 * 9 * 96 * 56 * 56);
    CHECK(l.output_elems == 96 * 56 * 56);
    CHECK(l.fwd[0].shape == Shape{1, 96, 112, 112, 96, 3, 3, 2, 1, 96});
    CHECK(l.bwd_flops == 2 * l.fwd_flops);
  }
  SECTION("bias and the first layer") {
    const Layer l = conv_layer("features.0", {3, 224, 224}, ConvSpec{64, 3, 1, 1, 1, true}, false);
    CHECK(l.params == 64 * 3 * 9 + 64);
    REQUIRE(l.bwd.size() == 1);
    CHECK(l.bwd[0].type == OpType::conv_wgrad);
    CHECK(l.bwd_flops == l.fwd_flops);
  }
  CHECK_THROWS_AS(conv_output({30, 8, 8}, ConvSpec{64, 3, 1, 1, 4}),
                  ModelError);  // 4 does not divide 30
  CHECK_THROWS_AS(conv_output({3, 2, 2}, ConvSpec{64, 7, 1, 0}), ModelError);  // window too large
}

TEST_CASE("memory-bound layers: elements, parameters and what they save", "[strategies]") {
  const ImageShape x{64, 56, 56};
  const double n = 64.0 * 56 * 56;
  SECTION("batchnorm: 2c parameters, saves its input, 5 FLOPs per element") {
    const Layer l = batchnorm_layer("bn", x);
    CHECK(l.params == 128);
    CHECK(l.saved_elems == n);
    CHECK(l.fwd[0].shape == Shape{1, 64, 56, 56});
    CHECK(l.fwd[0].param_elems == 128);
    CHECK(l.fwd[0].act_elems == 2 * n);  // read x, write y
    CHECK(l.fwd_flops == 5 * n);
    CHECK(l.bwd_flops == 10 * n);
  }
  SECTION("max-pool 3x3/2 pad 1 saves its input") {
    const Layer l = pool_layer("maxpool", Pool::max, {64, 112, 112}, 3, 2, 1);
    CHECK(l.output_elems == n);  // (112 + 2 - 3) / 2 + 1 = 56
    CHECK(l.saved_elems == 64.0 * 112 * 112);
  }
  SECTION("residual add saves nothing; dropout its mask; ReLU its output") {
    CHECK(add_layer("add", x.dims()).saved_elems == 0.0);
    CHECK(dropout_layer("drop", {512, 1024}).saved_elems == 0.0);  // the mask is a 1-byte mask
    CHECK(dropout_layer("drop", {512, 1024}).saved_mask_elems == 512.0 * 1024);
    CHECK(activation_layer("relu", Activation::relu, x.dims()).saved_elems == n);
  }
  SECTION("norms over tokens") {
    CHECK(norm_layer("ln", Norm::layernorm, 2048, 4096).params == 2LL * 4096);
    CHECK(norm_layer("rms", Norm::rmsnorm, 2048, 4096).params == 4096);
    CHECK(norm_layer("rms", Norm::rmsnorm, 2048, 4096).fwd[0].shape == Shape{1, 2048, 4096});
  }
  SECTION("embedding: tables of parameters, saves the indices, scatter-add backward") {
    const Layer l = embedding_layer("embed", 1024, 768, {50257, 1024});
    CHECK(l.params == (50257LL + 1024) * 768);
    CHECK(l.saved_elems == 2 * 1024);
    CHECK(l.bwd.size() == 2);
    CHECK(l.bwd[0].param_elems == 50257.0 * 768);  // the dense weight gradient written
    CHECK(l.output_elems == 1024.0 * 768);
  }
  SECTION("loss saves the log-probabilities") {
    const Layer l = loss_layer("loss", 2048, 50257);
    CHECK(l.kind == "loss");
    CHECK(l.saved_elems == 2048.0 * 50257);
  }
}

TEST_CASE("linear and attention kernels", "[strategies]") {
  SECTION("linear: three GEMMs of 2 rows in out FLOPs") {
    const Layer l = linear_layer("fc1", 2048, 1024, 4096, true);
    CHECK(l.params == 1024 * 4096 + 4096);
    CHECK(l.saved_elems == 2048.0 * 1024);
    CHECK(l.output_elems == 2048.0 * 4096);
    REQUIRE(l.bwd.size() == 2);
    CHECK(l.fwd[0].shape == Shape{2048, 4096, 1024, 1});
    CHECK(l.bwd[0].shape == Shape{2048, 1024, 4096, 1});
    CHECK(l.bwd[1].shape == Shape{4096, 1024, 2048, 1});
    CHECK(l.bwd[1].batch_axis == 2);
    CHECK(l.fwd_flops == 2.0 * 2048 * 1024 * 4096);
    CHECK(l.bwd_flops == 2 * l.fwd_flops);
    CHECK(linear_layer("head", 2048, 1024, 32000, false, true).params == 0);  // tied
  }
  SECTION("attention with GQA and RoPE") {
    // s 512, 8 query heads, 2 KV heads, d 64: scores {512, 512, 64, 8}, context {512, 64, 512, 8}.
    const Layer l = attention_layer("core", AttentionShape{512, 8, 2, 64, true, false});
    const double s = 512, a = 8, d = 64;
    CHECK(l.fwd.front().kernel == "rope_fwd");
    CHECK(l.fwd.front().shape == Shape{1, 512, (8LL + 2) * 64});
    CHECK(l.fwd[1].shape == Shape{512, 512, 64, 8});
    CHECK(l.fwd.back().shape == Shape{512, 64, 512, 8});
    // Saved: Q (s a d), K and V (2 s kv d), softmax output (a s^2).
    CHECK(l.saved_elems == s * a * d + 2 * s * 2 * d + a * s * s);
    CHECK(l.output_elems == s * a * d);
    // GEMMs 4 s^2 a d forward, 8 s^2 a d backward; RoPE 3 per element over q and k, softmax 1.
    const double rope = 3 * s * (8 + 2) * d;
    CHECK(l.fwd_flops == 4 * s * s * a * d + a * s * s + rope);
    CHECK(l.bwd_flops == 8 * s * s * a * d + 2 * a * s * s + 2 * rope);
  }
  CHECK_THROWS_AS(attention_layer("core", AttentionShape{512, 8, 3, 64, false, false}), ModelError);
}

TEST_CASE("ModelBuilder stamps blocks and checks the model", "[strategies]") {
  ModelBuilder b("toy");
  b.add(linear_layer("fc0", 1, 8, 8, true));
  b.set_block(0);
  b.add(linear_layer("fc1", 1, 8, 8, true));
  b.set_block(-1);
  b.add(loss_layer("loss", 1, 8));
  const Model m = b.finish(8.0);
  CHECK(m.layers.at(0).block == -1);
  CHECK(m.layers.at(1).block == 0);
  CHECK(m.layers.at(2).block == -1);
  CHECK(m.params() == 2LL * (64 + 8));
  CHECK(m.input_elems == 8.0);

  ModelBuilder no_loss("bad");
  no_loss.add(linear_layer("fc", 1, 8, 8, true));
  CHECK_THROWS_AS(no_loss.finish(8.0), ModelError);
  ModelBuilder repeated("bad");
  repeated.add(linear_layer("fc", 1, 8, 8, true));
  repeated.add(linear_layer("fc", 1, 8, 8, true));
  repeated.add(loss_layer("loss", 1, 8));
  CHECK_THROWS_AS(repeated.finish(8.0), ModelError);
  CHECK_THROWS_AS(ModelBuilder("empty").finish(0.0), ModelError);
}

TEST_CASE("transformer specs are validated", "[strategies]") {
  TransformerSpec spec;
  spec.name = "tiny";
  spec.shape = TransformerShape{2, 64, 4, 4, 256, 100, 16, false, true, {}};
  spec.positions = 16;
  const Model m = build_transformer(spec);
  // Per layer 12h^2 + 13h; embeddings (V + positions) h; final LN 2h.
  CHECK(m.params() == 2 * (12 * 64 * 64 + 13 * 64) + (100 + 16) * 64 + 2 * 64);
  spec.shape.heads = 3;  // does not divide 64
  spec.shape.kv_heads = 3;
  CHECK_THROWS_AS(build_transformer(spec), ModelError);
  spec.shape.heads = 4;
  spec.shape.kv_heads = 4;
  spec.shape.seq_len = 32;  // beyond 16 learned positions
  CHECK_THROWS_AS(build_transformer(spec), ModelError);
  spec.shape.seq_len = 0;
  CHECK_THROWS_AS(build_transformer(spec), ModelError);
}
