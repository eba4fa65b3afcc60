#pragma once
/// Megatron-LM v2's attention softmax (plan.kernel_generation megatron-2021, unfused attention):
/// FusedScaleMaskSoftmax runs its CUDA kernel (scale, causal mask and softmax in one pass each
/// way) only where the kernel takes the shape, and PyTorch's ops otherwise
/// (megatron/model/fused_softmax.py of 2021, as Megatron-DeepSpeed kept it; BigScience's
/// logbook for BLOOM names the rule: "(HEADS/TP)*MBS % 4 = 0"). The kernel takes 16-bit scores
/// [b, np, sq, sk] with 16 < sk <= 2048, sq % 4 == 0 and b.np % 4 == 0, and then b.np (a causal
/// mask) or sq (any other: Megatron-DeepSpeed's ALiBi runs) a multiple of its batches per block
/// (scaled_masked_softmax.h: 4 from sk > 128 up, 8 below). Elsewhere the scores go through five
/// passes each way, in fp32 since Megatron's query-key layer scaling turns softmax_in_fp32 on:
/// forward input.float(), the scale, masked_fill and softmax, then .half(); backward each in turn.
/// See docs/models.md, "Kernel generations".

#include <cstdint>

#include "models/model.hpp"

namespace foresight::strategy {

/// The fused kernel's batches per thread block for `sk` keys (scaled_masked_softmax.h's
/// get_batch_per_block): 128 threads in warps of min(32, next power of two of sk), each warp
/// taking two rows up to 128 keys and one beyond.
int megatron_softmax_batch_per_block(std::int64_t sk);

/// Whether Megatron-LM v2's fused softmax kernel takes scores of `batch` samples x `heads`
/// heads (this rank's) x `sq` queries x `sk` keys; `causal` for the upper-triangular mask.
bool megatron_fused_softmax_available(std::int64_t batch, std::int64_t heads, std::int64_t sq,
                                      std::int64_t sk, bool causal);

/// `model` with each attention layer whose scores the kernel does not take at `micro_batch`
/// and `tp` (heads / tp per rank) running PyTorch's passes instead: kernels
/// softmax_unfused_{to_fp32, scale, mask, softmax, to_16bit} forward, the same backward in reverse
/// (their bytes per score: 6, 8, 9, 8, 6 forward, 6, 12, 9, 8, 6 backward, against 4 and 6 for
/// the kernel), the layer's FLOPs on the softmax pass, and the fp32 softmax output kept for
/// backward (the saved scores grow by one 16-bit copy with dropout, two without). Layers the
/// kernel takes stay as they are.
Model with_megatron_softmax(Model model, int micro_batch, int tp);

/// Attention layers of `model` running PyTorch's softmax passes (with_megatron_softmax).
int unfused_softmax_layers(const Model& model);

}  // namespace foresight::strategy
