#pragma once
/// One micro-batch's pass through a range of layers on one rank, with what surrounds the kernels:
/// the layers' tensor-parallel collectives (tensor_parallel.hpp), ZeRO-3's parameter gathers and
/// gradient reduce-scatters, and per-layer recompute (full: a transformer layer's forward again
/// before its backward; selective: the attention core's). Data parallelism runs it over the whole
/// model; a pipeline stage over its chunk.

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "strategies/op_recompute.hpp"
#include "strategies/rank_emitter.hpp"
#include "strategies/tensor_parallel.hpp"

namespace foresight::strategy {

class LayerPass {
 public:
  /// `tp` holds tp_exchanges() of every layer of `model`. `layer_recompute`: whether
  /// plan.recompute is applied per layer here (data parallelism) rather than per stage.
  LayerPass(const Model& model, const Plan& plan, const std::vector<TpExchanges>& tp,
            const std::vector<OpRecompute>& op_recompute, RankEmitter& e, std::uint32_t dp_comm, bool layer_recompute,
            int micro);

  /// Forward kernels of layers [first, last), the first waiting for `in` (kNoNode: nothing).
  /// Returns the node after which the output is ready (the last kernel, or the collective that
  /// completes it).
  sim::NodeId forward(std::size_t first, std::size_t last, sim::NodeId in);
  /// The same, recomputing activations before a backward pass: FP8 weights are not cast again.
  sim::NodeId recompute(std::size_t first, std::size_t last, sim::NodeId in);

  /// Backward kernels of layers [first, last), last to first, the first waiting for `in`. After
  /// each layer's kernels, `after_layer(i, its last kernel)` (gradient buckets). ZeRO-3's
  /// reduce-scatters go to `comm` when `reduce`. Returns the node after which the input gradient
  /// is ready.
  sim::NodeId backward(std::size_t first, std::size_t last, sim::NodeId in, bool reduce, std::vector<sim::NodeId>& comm,
                       const std::function<void(std::size_t, sim::NodeId)>& after_layer);

 private:
  sim::NodeId collectives(const std::vector<TpCollective>& list, std::vector<sim::NodeId> after, sim::Phase phase);
  sim::NodeId run(const OpTemplate& t, std::size_t i, sim::Phase phase, sim::Time dispatch);
  /// The same, for a kernel already found (RankEmitter::kernel_info(t, i)).
  sim::NodeId run(const RankEmitter::KernelInfo& k, std::size_t i, sim::Phase phase, sim::Time dispatch);
  sim::NodeId gather(std::size_t i, sim::Phase phase);
  /// Context parallelism over all-to-alls (plan.cp_comm a2a): the exchange before (`before`) or
  /// after attention kernel `t` of layer i; the next kernel waits for it. Returns it.
  sim::NodeId ulysses(std::size_t i, const OpTemplate& t, sim::Phase phase, bool before);
  /// Context parallelism's ring (plan.cp_comm p2p): what its first step waits for, the keys and
  /// values of the rank's own block (what that block waits for, and the kernel before it, whose
  /// run ends here).
  std::vector<sim::NodeId> ring_start();
  // PyTorch FSDP (plan.zero3_schedule fsdp): a unit is a transformer block, or a layer outside
  // blocks. Its parameters are gathered once before its forward and once before its backward,
  // and its gradients reduce-scattered after its backward.
  std::size_t unit_first(std::size_t i) const;
  std::size_t unit_last(std::size_t i) const;
  /// The parameters of the unit starting at layer `first` (this rank's tensor-parallel share),
  /// and the name its collectives take ("block 3", or the layer's).
  double unit_params(std::size_t first) const;
  std::string unit_name(std::size_t first) const;
  /// All-gathers the unit starting at layer `first` (at most two gathered units in flight:
  /// the host first waits for the oldest recorded free, FSDP's limit_all_gathers).
  sim::NodeId unit_gather(std::size_t first, sim::Phase phase);
  /// The unit's backward: its gather (prefetched, or issued now) and the prefetch of the next
  /// unit's (BACKWARD_PRE), before its recompute and gradients; returns its gather.
  sim::NodeId pre_backward(std::size_t i, std::size_t first_layer);
  void forward_layer(std::size_t i);
  /// Whether layer i's tensor-parallel collectives overlap its GEMMs (plan.tp_comm_overlap on a
  /// column- or row-parallel linear layer).
  bool overlaps(std::size_t i) const;
  /// Layer i's part of a block's per-op selective recompute (op_recompute_[i]): its kernels, and
  /// the tensor-parallel collectives around them but reduce-scatters (whose outputs are kept).
  void recompute_ops(std::size_t i);
  /// Whether `t` is an FP8 weight cast that Transformer Engine serves from its cache: after the
  /// step's first micro-batch (Megatron passes is_first_microbatch), and in recompute.
  bool cached_cast(const RankEmitter::KernelInfo& k) const { return (micro_ > 0 || recomputing_) && k.weight_cast; }
  /// Routed experts' forward or backward pass: permute, dispatch all-to-all, each local
  /// expert's FFN at its tokens, combine all-to-all, unpermute; the backward pass mirrored.
  void experts(std::size_t i, bool forward);
  /// recompute_modules layernorm: the MoE pre-MLP norm whose output is rerun before layer i's
  /// backward (the first layer of that norm's MLP the backward reaches), or model size for none.
  std::size_t norm_rerun_before(std::size_t i) const;
  /// Transformer Engine's FP8 current scaling under sequence parallelism: before kernel `t` of
  /// layer i, when it is the scale of a column-parallel layer's input (forward) or of a
  /// row-parallel layer's output gradient (backward), the amax each TP rank took of its sequence
  /// shard is all-reduced over the TP group, so the tensor is gathered in FP8 with one scale.
  void reduce_amax(const OpTemplate& t, std::size_t i, sim::Phase phase);
  /// Runs `t` of experts layer i over `tokens` (nothing for none).
  void run_tokens(const OpTemplate& t, std::size_t i, int expert, double tokens, sim::Phase phase, sim::Time dispatch);
  /// The node after which everything emitted so far that the next consumer needs is done.
  sim::NodeId ready();

  const Model& model_;
  const Plan& plan_;
  const std::vector<TpExchanges>& tp_;
  const std::vector<OpRecompute>& op_recompute_;  ///< op_recompute_layers(), under selective_op
  RankEmitter& e_;
  std::uint32_t dp_comm_;
  bool layer_recompute_;
  bool zero3_;
  int micro_;
  bool recomputing_ = false;             ///< forward kernels re-run before a backward pass
  bool core_rerun_ = false;              ///< rerunning a checkpointed attention core: not its RoPE or QK norm
  bool fsdp_;                            ///< ZeRO-3 with FSDP's schedule
  std::deque<sim::NodeId> frees_;        ///< FSDP: the last kernel of each resharded unit, oldest first
  std::map<std::size_t, sim::NodeId> gathered_;  ///< FSDP: a unit's (first layer's) gather in this pass
  sim::NodeId last_ = kNoNode;           ///< the last kernel on the compute stream
  std::vector<sim::NodeId> waits_;       ///< what the next kernel must wait for
};

}  // namespace foresight::strategy
