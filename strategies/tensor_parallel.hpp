#pragma once
/// Megatron-style tensor parallelism (Shoeybi et al. 2019, S19) and sequence parallelism
/// (Korthikanti et al. 2022, K22) for one rank of a TP group of t: how each layer's kernels
/// shrink and which collectives surround it. A layer's TpRole (model.hpp) decides both.
///
/// Kernels (tp_shard): a column-parallel linear computes 1/t of its outputs, a row-parallel one
/// 1/t of its inputs; attention keeps 1/t of the heads; the MLP activation and the
/// vocabulary-parallel loss 1/t of their features; replicated layers run whole, or on 1/t of the
/// sequence with SP.
///
/// Collectives per micro-batch (tp_exchanges; sizes are the whole s x b x h tensor in the
/// activation dtype, NCCL's convention):
/// - without SP: a row-parallel layer's output and the vocabulary-parallel embedding's output
///   are all-reduced in forward (S19's g); a column-parallel layer's input gradient is
///   all-reduced in backward (S19's f), overlapped with its weight gradient (Megatron-LM
///   layers.py); per transformer layer, 2 all-reduces forward and 2 backward;
/// - with SP: all-reduce becomes reduce-scatter + all-gather (K22 §4.2.2): column-parallel input
///   all-gathered in forward, re-gathered in backward for the weight gradient and its input
///   gradient reduce-scattered; row-parallel output reduce-scattered in forward, its gradient
///   all-gathered in backward: per transformer layer 2 AG + 2 RS forward, 4 AG + 2 RS backward;
/// - the vocabulary-parallel cross-entropy all-reduces 3 values per token (max, target logit,
///   sum of exponentials) in fp32.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "collectives/collective_types.hpp"
#include "models/model.hpp"
#include "strategies/plan.hpp"

namespace foresight::sim {
struct ExecutionGraph;
}

namespace foresight::strategy {

/// ConfigError unless `model` can be split t ways: a transformer whose heads, key/value heads
/// and FFN size are multiples of plan.tp.
void check_tensor_parallel(const Model& model, const Plan& plan);

/// One rank's share of a dimension of n split t ways: n / t, or for a vocabulary that t does not
/// divide, Megatron's padding to a multiple of 128 x t (make-vocab-size-divisible-by) over t.
std::int64_t tp_split(std::int64_t n, int tp);
/// One rank's share of a vocabulary of n split t > 1 ways as Megatron splits it: n padded to a
/// multiple of 128 x t (make-vocab-size-divisible-by) whether or not t divides n, over t.
std::int64_t tp_vocab_split(std::int64_t n, int tp);

/// The kernel `t` of `layer` on one rank of a TP group of plan.tp. ConfigError when the split
/// axis is not divisible (a vocabulary is padded instead).
OpTemplate tp_shard(const OpTemplate& t, const Layer& layer, const Plan& plan);

/// Parameters one TP rank holds of `layer` (replicated layers: all); of routed experts, its
/// 1/ep of them, split over `etp` expert TP ranks (0: tp, Plan::etp).
double tp_layer_params(const Layer& layer, int tp, int ep = 1, int etp = 0);
/// Parameters one TP rank holds of layers [first, last) (last = 0: all).
double tp_rank_params(const Model& model, int tp, std::size_t first = 0, std::size_t last = 0, int ep = 1, int etp = 0);
/// Of tp_rank_params, the routed experts' (layers with experts): their states shard over the
/// expert-data-parallel group, not every replica.
double tp_rank_expert_params(const Model& model, int tp, std::size_t first = 0, std::size_t last = 0, int ep = 1,
                             int etp = 0);
/// Of one TP rank of a pipeline rank running the layer ranges `chunks`: the copies it keeps of
/// tied weights its layers use while the word embedding (the model's first embedding layer) runs
/// on another rank (Layer::tied_params).
double tp_tied_copy_params(const Model& model, int tp, const std::vector<std::pair<std::size_t, std::size_t>>& chunks);

struct TpCollective {
  sim::CollectiveOp op = sim::CollectiveOp::all_reduce;
  double bytes = 0.0;  ///< NCCL size convention: the whole tensor for all_gather/reduce_scatter
  /// The node's label, built once: the op and what it moves ("all_reduce attn.proj output").
  std::string name;
  /// `name` interned in the graph being built (intern_labels), or kNoLabel: every micro-batch
  /// of every rank emits the collective, and interning its label each time was 4% of building
  /// the SC21 3072-GPU row's graph.
  std::uint32_t label = kNoLabel;
  static constexpr std::uint32_t kNoLabel = 0xffffffffu;
};

/// The tensor-parallel collectives around layer `index` for one micro-batch.
struct TpExchanges {
  std::vector<TpCollective> forward_before;  ///< the layer's forward kernels wait for these
  std::vector<TpCollective> forward_after;   ///< after its forward; the next layer waits
  std::vector<TpCollective> backward_before; ///< the layer's backward kernels wait for these
  /// After its input-gradient kernel, overlapping the weight gradient; the previous layer's
  /// backward waits for them.
  std::vector<TpCollective> backward_after_dgrad;
};
TpExchanges tp_exchanges(const Model& model, std::size_t index, const Plan& plan);
/// tp_exchanges of every layer, in order (the same on every rank).
std::vector<TpExchanges> tp_exchanges(const Model& model, const Plan& plan);
/// Interns every collective's label in `g`, the graph the exchanges are emitted into.
void intern_labels(std::vector<TpExchanges>& exchanges, sim::ExecutionGraph& g);

}  // namespace foresight::strategy
