#pragma once
/// Per-op selective activation checkpointing as torchtitan applies it to each transformer block
/// (plan.recompute "selective_op"; torchtitan's activation_checkpoint mode "selective" with
/// selective_ac_option "op", `_apply_ac_to_transformer_block` in its parallelize code since 2024):
/// a PyTorch selective-checkpoint policy saves the outputs of the ops on its save list (aten.mm,
/// the fused scaled-dot-product attention kernels, reduce-scatter, abs and max) except every
/// second aten.mm, counted in forward order within the block; every other op is recomputed
/// when the block's backward pass reruns its forward.
///
/// Applied to this project's layers:
/// - a linear layer is one matrix multiply, or several (Layer::matmul_widths: a fused QKV layer is
///   the query, key and value projections, a gated MLP's gate_up the gate and up ones) that
///   advance the count in order; the even-numbered ones are recomputed, as one GEMM of their
///   summed width, and the odd-numbered ones' outputs are kept. For Llama's block (wq wk wv wo
///   w1 w3 w2) that recomputes wk, wo and w3 and keeps q, v, w1's and w2's outputs;
/// - a fused attention kernel's output is kept, the rest of the attention core (RoPE; without
///   fused attention every kernel, since batched matmuls are not aten.mm) recomputed;
/// - norms, activations, residual adds and dropout are recomputed and keep nothing;
/// - routed experts are neither recomputed nor dropped (their grouped GEMMs and all-to-alls:
///   a simplification, docs/strategies.md).
/// The block's input is kept too, as every checkpoint keeps it (saved_activation_bytes adds it).

#include <cstddef>
#include <vector>

#include "models/model.hpp"
#include "strategies/plan.hpp"

namespace foresight::strategy {

/// What per-op selective recompute does with one layer of a block.
struct OpRecompute {
  std::vector<OpTemplate> kernels;  ///< forward kernels rerun before the block's backward pass
  /// Output elements the forward pass keeps, per sample and before tensor parallelism (the
  /// routed experts: their saved elements).
  double saved_elems = 0.0;
};

/// The policy applied to the layers [first, last) of `model`, which form one block (the count of
/// matrix multiplies starts at its first layer). One entry per layer.
std::vector<OpRecompute> op_recompute_block(const Model& model, std::size_t first, std::size_t last);

/// op_recompute_block() of every block, one entry per layer of `model` (layers outside blocks:
/// nothing), when plan.recompute is selective_op; otherwise empty.
std::vector<OpRecompute> op_recompute_layers(const Model& model, const Plan& plan);

}  // namespace foresight::strategy
