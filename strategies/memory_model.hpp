#pragma once
/// Peak memory of a rank (docs/architecture.md, "Memory model"): weights, gradients and optimizer states by
/// precision and optimizer; saved activations of one micro-batch; communication buffers; CUDA
/// context and library workspaces; and an allowance for the caching allocator. A predicted OOM is
/// an answer, not a crash: the report names the rank and the overflow.

#include <string>
#include <vector>

#include "models/model.hpp"
#include "strategies/plan.hpp"

namespace foresight::strategy {

struct MemoryBreakdown {
  double weights = 0.0;      ///< bytes
  double gradients = 0.0;
  double optimizer = 0.0;
  double activations = 0.0;
  double buffers = 0.0;      ///< DDP bucket copies or the Horovod fusion buffer
  double workspace = 0.0;    ///< CUDA context and cuBLAS/cuDNN workspaces
  double allocator = 0.0;    ///< caching-allocator fragmentation allowance
  double total() const { return weights + gradients + optimizer + activations + buffers + workspace + allocator; }
};

/// CUDA context plus cuBLAS/cuDNN workspaces of a PyTorch process: 1 GiB, an assumption (the
/// context alone takes 300-600 MB on A100-class GPUs).
inline constexpr double kWorkspaceBytes = 1024.0 * 1024 * 1024;
/// Caching-allocator fragmentation: 10% of the dynamic (activation and buffer) bytes, an assumption.
inline constexpr double kAllocatorFraction = 0.10;

/// Weights, gradients and optimizer states of `params` parameters on one rank, the optimizer
/// states (ZeRO stage >= 1), gradients (>= 2) and weights (3) sharded over `shard` data-parallel
/// ranks (Rajbhandari et al. 2020, Fig. 1). Bytes per parameter: weights by precision (+2 for
/// autocast's half copies); gradients by precision, or 4 with fp32_main_grads; SGD momentum 4 or
/// Adam moments 8, plus 4 for fp32 master weights under pure half precision. Also the
/// communication buffers and the workspace (not sharded). With experts (ep > 1) and ZeRO-1, of
/// `params` the `expert_params` routed experts' keep their states over the expert-data-parallel
/// group, the rest over every replica (Plan::zero_owned_params).
MemoryBreakdown model_state_memory(double params, const Plan& plan, int shard, double expert_params = 0.0);

/// Bytes that one micro-batch's forward pass through layers [first, last) keeps for the
/// backward pass on one tensor-parallel rank, following Korthikanti et al. 2022 (K22) §4:
/// - each layer keeps its saved activations (activation dtype) and 1-byte dropout masks;
/// - with tp = t > 1: layers working on sharded features (attention core, the MLP activation,
///   row-parallel inputs, the vocabulary-parallel loss) keep 1/t; replicated layers and
///   column-parallel inputs keep all of theirs, or 1/t with sequence parallelism;
/// - selective recompute drops the attention scores (the s x s tensors), which are recomputed;
/// - full recompute (when `block_checkpoints`) keeps only each block's input (1/t with sequence
///   parallelism); layers outside blocks keep theirs;
/// - per-op selective recompute (when `block_checkpoints`) keeps each block's input and the
///   outputs its policy saves (op_recompute.hpp);
/// - an FP8 linear layer (with_fp8) keeps its input as Transformer Engine does, as the FP8
///   transpose its weight gradient reads: 1 byte per element.
/// Per transformer layer this gives K22 Table 2's sbh(34 + 5as/h), sbh(10 + 24/t + 5as/ht),
/// sbh(34/t + 5as/ht), sbh(10 + 24/t), 34sbh/t and 2sbh (tests/strategies/memory_test.cpp).
/// Bytes of layer `l`'s output per sample: Layer::output_bytes, else output_elems x `a`.
double layer_output_bytes(const Layer& l, double a);

double saved_activation_bytes(const Model& model, const Plan& plan, std::size_t first, std::size_t last,
                              bool block_checkpoints);

/// A data-parallel rank's peak: every parameter, gradient and optimizer state (nothing is
/// sharded); the activations saved by one micro-batch's forward pass (they peak at the start of
/// the backward pass); autocast's half-precision weight copies (amp); DDP's bucket copies of the
/// gradients (gradient_as_bucket_view=False) or Horovod's fusion buffer when dp > 1.
MemoryBreakdown data_parallel_memory(const Model& model, const Plan& plan);

/// A pipeline rank's peak: the model states of its `params` parameters (as for data
/// parallelism), the activation peak its schedule reaches (see compile_pipeline), and for
/// PipeDream the stashed weight versions, one per extra micro-batch in flight. `expert_params`:
/// of `params`, the routed experts'.
MemoryBreakdown pipeline_rank_memory(double params, const Plan& plan, double activation_peak, int in_flight,
                                     double expert_params = 0.0);

}  // namespace foresight::strategy
