#pragma once
/// One pipeline stage's work as DeepSpeed's PipelineEngine does it (plan.pipeline_engine
/// "deepspeed"; DeepSpeed v0.5.4-v0.6 under Megatron-DeepSpeed, docs/strategies.md, "DeepSpeed's
/// pipeline engine"): exchanges that block the compute stream, partitioned over the
/// tensor-parallel ranks; gradients accumulated by a kernel of their own after each backward;
/// the data-parallel reduction after the last one. The pipeline compiler decides when each is
/// emitted (TrainSchedule's order); this class emits it.

#include <cstdint>
#include <string_view>
#include <vector>

#include "strategies/plan.hpp"
#include "strategies/rank_emitter.hpp"

namespace foresight::strategy {

class DeepSpeedStage {
 public:
  /// Pieces of the stage's gradients DeepSpeed reduces and gathers in turn: at most 5e8 elements
  /// (pipe/engine.py's MEMORY_OPT_ALLREDUCE_SIZE; ZeRO's reduce_bucket_size and
  /// allgather_bucket_size default to the same).
  static constexpr double kBucketElems = 5e8;

  /// The stage of rank `e.rank()` holding `params` parameters (this TP rank's), reducing over
  /// data-parallel communicator `dp_communicator`.
  DeepSpeedStage(const Plan& plan, RankEmitter& e, double params, std::uint32_t dp_communicator);

  /// Whether the optimizer step updates only this rank's 1/dp of the parameters: ZeRO-1, or
  /// BF16_Optimizer (bf16 training), which shards at any ZeRO stage.
  bool shards_step() const { return plan_.zero >= 1 || plan_.precision == Precision::bf16; }
  /// The reduction pieces, as buckets of gradient bytes (for the parameter gathers).
  const std::vector<GradientBucket>& buckets() const { return buckets_; }

  /// RecvActivation or RecvGrad of `bytes` from `peer` (p2p.py's dist.recv: it blocks the compute
  /// stream). With tensor parallelism: a meta tensor, which the host reads (meta.tolist() waits
  /// for the stream), then this rank's 1/t of the tensor, then `gathers` all-gathers over the TP
  /// group that rebuild it (backward also rebuilds the stage's own sent output). Returns the node
  /// after which the tensor is whole.
  sim::NodeId receive(sim::RankId peer, double bytes, std::uint32_t tag, std::string_view what, sim::Phase phase,
                      int micro, int gathers);
  /// SendActivation or SendGrad of `bytes` to `peer` after `dep`: with tensor parallelism the meta
  /// tensor is first copied to the GPU (to_meta: a blocking copy, the host waits for the
  /// stream) and sent, then this rank's 1/t of the tensor.
  void send(sim::RankId peer, double bytes, std::uint32_t tag, std::string_view what, sim::Phase phase, int micro,
            sim::NodeId dep);
  /// Adds micro-batch `micro`'s gradients (ready after `last`) to the accumulated ones, in a kernel
  /// of its own: BF16_Optimizer's hp_grad.add_(lp_grad.to(fp32)) per parameter (2 + 4 bytes for
  /// the cast, 4 + 4 + 4 for the add), or else autograd's AccumulateGrad from the second
  /// micro-batch on (read two, write one). Returns the node after which they are accumulated.
  sim::NodeId accumulate(int micro, sim::NodeId last);
  /// ReduceGrads after the last backward: each piece cast (or flattened) to the communication type
  /// (engine.py's communication_data_type: fp16 or bf16), all-reduced over the data-parallel
  /// group, the compute stream waiting (dist.all_reduce is synchronous), and copied back. ZeRO-1
  /// and BF16_Optimizer all-reduce too: with pipelines DeepSpeed turns off the contiguous
  /// gradients a reduce-scatter needs.
  void reduce_gradients();

 private:
  const Plan& plan_;
  RankEmitter& e_;
  double params_;
  std::uint32_t dp_comm_;
  std::vector<GradientBucket> buckets_;
};

}  // namespace foresight::strategy
