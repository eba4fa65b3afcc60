#pragma once
/// Context parallelism as Megatron-Core runs it through Transformer Engine's fused attention
/// (its "p2p" communication type): each of the cp ranks of a group holds 1/cp of every
/// sequence, as two of 2 cp equal chunks (rank r chunks r and 2 cp - 1 - r, so that causal
/// attention's work is the same on every rank), runs every layer but the attention core on
/// its s / cp tokens, and computes attention in cp steps while the keys and values go around
/// the group's ring (Liu et al. 2023, Ring Attention; Megatron-Core's context_parallel docs).

#include <cstdint>
#include <string_view>

#include "models/model.hpp"

namespace foresight::strategy {

/// The kernels of a CP rank's attention steps after the first (its own chunks, causal): each a
/// fused attention over its s / cp queries and the keys and values of another rank, half of
/// them when causal (load balancing makes every such step half a block's work).
inline constexpr std::string_view kCpAttentionFwd = "flash_attn_cp_fwd";
inline constexpr std::string_view kCpAttentionBwd = "flash_attn_cp_bwd";

/// One CP rank's model: `part`, the model built at s / cp tokens per sequence with fused
/// attention, whose attention layers become the ring's cp steps (the first its own chunks, as
/// `part` has it; cp - 1 more kCpAttention kernels, forward and backward). Its sequence length
/// and every layer's FLOPs are `whole`'s (the same model at s tokens): what a sample counts for
/// throughput and MFU, while the kernels are the rank's. ModelError unless both are the same
/// transformer with fused attention.
Model with_context_parallel(const Model& whole, Model part, int cp);

/// The same for DeepSpeed-Ulysses' exchange (Transformer Engine's cp_comm_type a2a): the layers
/// at s / cp tokens as above, but each attention layer one fused attention over the whole
/// sequence and 1/cp of `whole`'s heads (its kernels', FLOPs and bytes over cp), between the
/// all-to-alls that trade sequence shards for head shards. ModelError as above, or unless cp
/// divides the heads and key-value heads.
Model with_context_parallel_a2a(const Model& whole, Model part, int cp);

/// Bytes one CP rank holds, per micro-batch of `samples`, of the queries (`queries`) or of the
/// keys and values together, in the a2a exchange: `local` is the rank's attention kernel
/// (shape {heads / cp, s, s, head dim, ...}), `t`'s key-value heads per head, over tp.
double cp_a2a_bytes(const OpTemplate& local, const TransformerShape& t, int cp, int samples, int tp,
                    double activation_bytes, bool queries);

/// Bytes of the keys and values one CP rank holds for a micro-batch of `samples` sequences,
/// what each step of the ring passes on: from its own block's kernel `local` (flash_attn_fwd
/// or _bwd, shape {heads, s / cp, s / cp, head dim, ...}), `t`'s key-value heads per head, over
/// tp, at activation_bytes per element.
double cp_kv_bytes(const OpTemplate& local, const TransformerShape& t, int samples, int tp,
                   double activation_bytes);

}  // namespace foresight::strategy
