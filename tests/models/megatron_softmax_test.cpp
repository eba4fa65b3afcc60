// Megatron-LM v2's attention softmax (models/megatron_softmax.hpp): when its fused kernel takes
// the scores' shape, and what runs instead on GPT-2 when it does not.
#include "models/megatron_softmax.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "models/model_zoo.hpp"

namespace {

using namespace foresight::strategy;

double pass_elems(const std::vector<OpTemplate>& pass) {
  double e = 0.0;
  for (const OpTemplate& t : pass) e += t.act_elems;
  return e;
}

double layer_kernel_flops(const Layer& l) {
  double f = 0.0;
  for (const auto* pass : {&l.fwd, &l.bwd}) {
    for (const OpTemplate& t : *pass) f += t.flops;
  }
  return f;
}

}  // namespace

TEST_CASE("Megatron's fused softmax: batches per block and the shapes its kernel takes", "[model]") {
  // 128 threads in warps of min(32, next power of two of sk); two rows a warp up to 128 keys.
  CHECK(megatron_softmax_batch_per_block(2048) == 4);
  CHECK(megatron_softmax_batch_per_block(129) == 4);
  CHECK(megatron_softmax_batch_per_block(128) == 8);
  CHECK(megatron_softmax_batch_per_block(64) == 8);
  CHECK(megatron_softmax_batch_per_block(16) == 16);
  // BLOOM's logbook: "(HEADS/TP)*MBS % 4 = 0" at 2048 tokens.
  CHECK(megatron_fused_softmax_available(4, 64 / 8, 2048, 2048, true));
  CHECK_FALSE(megatron_fused_softmax_available(1, 112 / 8, 2048, 2048, true));  // 14 rows
  CHECK(megatron_fused_softmax_available(2, 112 / 8, 2048, 2048, true));        // 28
  CHECK_FALSE(megatron_fused_softmax_available(1, 4, 4096, 4096, true));         // longer than 2048
  CHECK_FALSE(megatron_fused_softmax_available(1, 4, 16, 16, true));             // 16 keys or fewer
  CHECK_FALSE(megatron_fused_softmax_available(1, 4, 2046, 2046, true));         // queries not a multiple of 4
  CHECK_FALSE(megatron_fused_softmax_available(1, 4, 128, 128, true));           // 4 rows, 8 a block
  CHECK(megatron_fused_softmax_available(2, 4, 128, 128, true));
  CHECK(megatron_fused_softmax_available(1, 4, 128, 128, false));  // any other mask: the queries count
}

TEST_CASE("Megatron's softmax on GPT-2: PyTorch's fp32 passes where the kernel does not take the scores",
          "[model]") {
  const Model plain = build_model("gpt2");  // 12 heads of 1024 tokens
  // TP 4 at micro-batch 1: 3 rows of scores per rank; at micro-batch 4, 12.
  const Model unfused = with_megatron_softmax(plain, 1, 4);
  const Model kept = with_megatron_softmax(plain, 4, 4);
  CHECK(unfused_softmax_layers(plain) == 0);
  CHECK(unfused_softmax_layers(kept) == 0);
  CHECK(unfused_softmax_layers(unfused) == 12);
  for (std::size_t i = 0; i < plain.layers.size(); ++i) {
    const Layer& before = plain.layers[i];
    const Layer& after = unfused.layers[i];
    const Layer& same = kept.layers[i];
    CHECK(same.fwd.size() == before.fwd.size());
    CHECK(same.saved_elems == before.saved_elems);
    if (before.kind != "attention") {
      CHECK(after.fwd.size() == before.fwd.size());
      continue;
    }
    INFO(before.name);
    const OpTemplate* fused_fwd = find_op(before.fwd, "softmax_fwd");
    REQUIRE(fused_fwd != nullptr);
    const double scores = 12.0 * 1024.0 * 1024.0;
    REQUIRE(fused_fwd->act_elems == scores * 2.0);  // the kernel reads and writes each score once
    // Five passes each way instead of one.
    CHECK(after.fwd.size() == before.fwd.size() + 4);
    CHECK(after.bwd.size() == before.bwd.size() + 4);
    CHECK(find_op(after.fwd, "softmax_fwd") == nullptr);
    CHECK(find_op(after.bwd, "softmax_bwd") == nullptr);
    for (const char* k : {"softmax_unfused_to_fp32", "softmax_unfused_scale", "softmax_unfused_mask",
                          "softmax_unfused_softmax", "softmax_unfused_to_16bit"}) {
      CHECK(find_op(after.fwd, k) != nullptr);
    }
    // In 16-bit elements per score: forward 3 + 4 + 4.5 + 4 + 3 against 2, backward 3 + 6 + 4.5 +
    // 4 + 3 against the kernel's 3.
    CHECK(pass_elems(after.fwd) - pass_elems(before.fwd) == Approx((18.5 - 2.0) * scores));
    CHECK(pass_elems(after.bwd) - pass_elems(before.bwd) == Approx((20.5 - 3.0) * scores));
    CHECK(layer_kernel_flops(after) == Approx(layer_kernel_flops(before)));  // FLOPs stay
    CHECK(after.fwd_flops == before.fwd_flops);
    CHECK(after.bwd_flops == before.bwd_flops);
    // The fp32 softmax output is kept for backward: one 16-bit copy more with dropout.
    const bool dropout = find_op(before.fwd, "dropout_fwd") != nullptr;
    CHECK(after.saved_elems - before.saved_elems == Approx((dropout ? 1.0 : 2.0) * scores));
    CHECK(after.saved_score_elems - before.saved_score_elems == Approx((dropout ? 1.0 : 2.0) * scores));
  }
  // Applying it twice changes nothing more.
  CHECK(unfused_softmax_layers(with_megatron_softmax(unfused, 1, 4)) == 12);
  CHECK(with_megatron_softmax(unfused, 1, 4).layers[2].fwd.size() == unfused.layers[2].fwd.size());
}
