#pragma once
/// The building blocks every training strategy emits for one rank: kernels of a layer for a
/// micro-batch, memory-bound kernels, the input pipeline's batches, gradient-bucket reductions
/// and the optimizer step. Strategies decide the order; this class decides what each op costs.

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <optional>
#include <vector>

#include "common/flat_map.hpp"
#include "exec/execution_graph.hpp"
#include "models/compute_model.hpp"
#include "models/model.hpp"
#include "strategies/moe.hpp"
#include "strategies/plan.hpp"
#include "strategies/tensor_parallel.hpp"
#include "topologies/cluster.hpp"

namespace foresight::strategy {

/// Streams of a training rank.
namespace streams {
inline constexpr sim::StreamId compute = 1;
inline constexpr sim::StreamId nccl = 2;
inline constexpr sim::StreamId p2p_send_fwd = 3;  ///< activations to the next stage
inline constexpr sim::StreamId p2p_recv_fwd = 4;  ///< activations from the previous stage
inline constexpr sim::StreamId p2p_send_bwd = 5;  ///< gradients to the previous stage
inline constexpr sim::StreamId p2p_recv_bwd = 6;  ///< gradients from the next stage
inline constexpr sim::StreamId tensor_parallel = 7;  ///< TP/SP collectives
inline constexpr sim::StreamId expert = 8;           ///< MoE dispatch and combine all-to-alls
inline constexpr sim::StreamId context_parallel = 9;  ///< the context-parallel ring's exchanges
/// FP8 current scaling's amax all-reduces over the TP group: torch.distributed's stream of that
/// group, apart from the sequence-parallel gathers Transformer Engine overlaps with its GEMMs.
inline constexpr sim::StreamId amax = 10;
inline constexpr sim::StreamId dataloader = 100;  ///< the DataLoader's worker processes
inline constexpr sim::StreamId horovod = 101;     ///< Horovod's background thread
/// DataLoader worker w's process (plan.input_workers), 1000 + w.
constexpr sim::StreamId dataloader_worker(int w) { return 1000 + static_cast<sim::StreamId>(w); }
}  // namespace streams

/// Names of the streams above, for timelines.
std::map<sim::StreamId, std::string> training_stream_names();

/// One gradient bucket (DDP) or fusion group (Horovod) of a step.
struct GradientBucket {
  double bytes = 0.0;
  std::vector<std::size_t> layers;  ///< indices into Model::layers, forward order
  /// Routed experts' gradients: reduced over the expert-data-parallel group (the replicas
  /// holding the same experts), not over every replica.
  bool expert = false;
  /// The layer whose backward pass makes it ready: its earliest, or, for a piece of an explicit
  /// Horovod group that passes the fusion threshold, the group's earliest.
  std::optional<std::size_t> ready_after;
  std::size_t ready_layer() const { return ready_after ? *ready_after : layers.front(); }
};


inline constexpr sim::NodeId kNoNode = 0xffffffffu;

/// The kernel `t` of a micro-batch of `batch` samples in the plan's precision on a GPU of
/// compute capability `cc`: shape, dtype, FLOPs and bytes.
sim::OpSignature instantiate(const OpTemplate& t, int batch, const Plan& plan, int cc);

/// Whether `t` computes a weight gradient.
bool is_wgrad(const OpTemplate& t);

/// Bytes an optimizer step reads and writes per parameter, fp32 states: fused, each state read
/// and written once and the gradient read once (SGD with momentum 5 x 4, AdamW 7 x 4); foreach,
/// one pass per arithmetic operation of torch.optim's multi-tensor code (SGD 32, AdamW 80).
double optimizer_bytes_per_param(Optimizer o, OptimizerImpl impl);

class RankEmitter {
 public:
  /// Emits rank `rank` of `g` (already added, on its GPU). Its kernels are costed for its own
  /// GPU: by `compute` when that is the GPU's model (the cluster's first GPU), else by the
  /// analytical model of the rank's GPU (a profile database applies to the GPU it measured).
  RankEmitter(const Model& model, const Plan& plan, const topo::Cluster& cluster, const ComputeModel& compute,
              sim::ExecutionGraph& g, sim::RankId rank);

  sim::RankId rank() const { return rank_; }
  /// The training step the kernels emitted next belong to (stragglers' per-step jitter).
  void set_step(int step) { slow_ = straggler_factor(plan_, static_cast<int>(g_.rank_gpu[rank_]), step); }
  /// The rank's host thread shares a Python process with others: forward (and input, host and
  /// optimizer) ops take the process's GIL for `forward_gil` of their dispatch, host ops for
  /// their whole duration; backward kernels none.
  void share_interpreter(sim::Time forward_gil) {
    shared_interpreter_ = true;
    forward_gil_ = forward_gil;
  }
  sim::ExecutionGraph& graph() { return g_; }

  /// A node of this rank, not yet added.
  sim::Node make(sim::OpKind kind, sim::StreamId stream, std::string_view name, sim::Phase phase) const;
  /// The same, named by a label already interned in the graph.
  sim::Node make(sim::OpKind kind, sim::StreamId stream, std::uint32_t name, sim::Phase phase) const;
  /// Hybrid sharding: the communicator of this rank's replica group, over which gradient shards
  /// are all-reduced after each reduce-scatter in the shard group.
  void set_replica_communicator(std::uint32_t c) { replica_comm_ = c; }
  /// After the gradient reduce-scatter `rs` of `bytes` (the unsharded size): with hybrid
  /// sharding, the all-reduce of this rank's 1/shard over its replica group, which is then the
  /// node whose end means the gradients are reduced; otherwise `rs` itself.
  sim::NodeId reduce_shard(sim::NodeId rs, double bytes, const std::string& name, sim::Phase phase, int micro = -1);
  /// The communicator of this rank's tensor-parallel group (plan.tp > 1).
  void set_tp_communicator(std::uint32_t c) { tp_comm_ = c; }
  /// Expert parallelism for this rank (ep > 1, or any MoE model).
  void set_moe(const MoeRank& m) { moe_ = m; }
  const MoeRank& moe() const { return moe_; }
  /// Kernel `t` of experts layer `index` over `tokens` tokens (an expert's share of the routed
  /// assignments), named for `expert` (-1: the rank's permutation kernels).
  sim::NodeId expert_kernel(const OpTemplate& t, std::size_t index, int expert, double tokens, int micro,
                            sim::Phase phase, sim::Time dispatch, sim::DepList deps);
  /// The all-to-allv of experts layer `index`'s tokens for micro-batch `micro` over the EP group
  /// on the expert stream: toward the experts (dispatch, and the combine's gradients) or back.
  sim::NodeId expert_all_to_all(std::size_t index, int micro, bool to_experts, const std::string& name,
                                std::vector<sim::NodeId> deps, sim::Phase phase);
  /// The all-gather of experts layer `index`'s token counts (one int64 per expert from each rank)
  /// over the EP group on the expert stream, after `deps` (Megatron-Core's alltoall dispatcher
  /// gathers them to size its all-to-alls); kNoNode with ep = 1.
  sim::NodeId expert_counts_gather(std::size_t index, int micro, const std::string& name, std::vector<sim::NodeId> deps,
                                   sim::Phase phase);
  /// One tensor-parallel collective of a micro-batch on the TP stream, after `deps`.
  /// `communicator`: the TP group's (kNoCommunicator), or another.
  static constexpr std::uint32_t kNoCommunicator = 0xffffffffu;
  sim::NodeId tp_collective(const TpCollective& c, std::vector<sim::NodeId> deps, sim::Phase phase, int micro,
                            sim::StreamId stream = streams::tensor_parallel,
                            std::uint32_t communicator = kNoCommunicator);
  /// The same over the experts' TP group: the expert-TP group where experts split over part of
  /// the TP group, else the TP group.
  sim::NodeId expert_tp_collective(const TpCollective& c, std::vector<sim::NodeId> deps, sim::Phase phase, int micro);
  /// The communicator of this rank's context-parallel group (plan.cp > 1).
  void set_cp_communicator(std::uint32_t c) { cp_comm_ = c; }
  /// One step of the context-parallel ring on its stream, after `deps`: every rank of the group
  /// sends `bytes` to the next and receives as much from the one before. Simulated as an
  /// all-gather over the group whose ring moves those bytes per rank (NCCL's size: bytes x cp /
  /// (cp - 1)): exact for cp = 2, the same bytes on the same ring links in cp - 1 hops for more.
  sim::NodeId cp_exchange(double bytes, std::string_view name, std::size_t layer, std::vector<sim::NodeId> deps,
                          sim::Phase phase, int micro);
  /// An all-to-all over the context-parallel group on its stream, after `deps` (plan.cp_comm
  /// a2a): every rank's `bytes`, 1/cp of them to each rank.
  sim::NodeId cp_all_to_all(double bytes, std::string_view name, std::size_t layer, std::vector<sim::NodeId> deps,
                            sim::Phase phase, int micro);

  /// What a kernel of this rank costs and is, worked out once per rank (instantiated, costed,
  /// named and interned) and found again for every micro-batch and step.
  struct KernelInfo {
    std::uint32_t signature = 0;
    std::uint32_t name = 0;
    sim::Time duration;
    /// Whether the kernel may be coalesced with its neighbours (sim::ExecutionGraph::add_kernel):
    /// it neither slows under communication nor holds SMs on this rank's GPU, and is no expert's.
    bool coalesces = false;
    bool wgrad = false;        ///< a weight-gradient kernel (a phase of its own in reports)
    bool weight_cast = false;  ///< FP8's cast of the weights, which later micro-batches reuse
  };
  /// Kernel `t` of layer `index` for one micro-batch (this rank's tensor-parallel share of it).
  const KernelInfo& kernel_info(const OpTemplate& t, std::size_t index) {
    return kernel_info(t, index, plan_.micro_batch, -1);
  }
  /// Kernel `t` of layer `index` for one micro-batch on the compute stream (this rank's
  /// tensor-parallel share of it when plan.tp > 1).
  sim::NodeId kernel(const OpTemplate& t, std::size_t index, int micro, sim::Phase phase, sim::Time dispatch,
                     sim::DepList deps = {});
  /// The same for the kernel `k` of layer `index`, already found (kernel_info).
  sim::NodeId kernel(const KernelInfo& k, std::size_t index, int micro, sim::Phase phase, sim::Time dispatch,
                     sim::DepList deps = {});
  /// A memory-bound kernel moving `bytes` on `stream`.
  sim::NodeId memory(const std::string& name, double bytes, sim::StreamId stream, std::vector<sim::NodeId> deps,
                     sim::Time dispatch, sim::Phase phase = sim::Phase::backward);
  /// A host op of `duration` on the host thread.
  sim::NodeId host(std::string_view name, sim::Time duration, sim::Phase phase, int micro = -1);
  /// The host thread waits until `dep` is done (a synchronizing read or copy, a blocking wait).
  sim::NodeId host_wait(sim::NodeId dep, std::string_view name, sim::Phase phase, int micro = -1);
  /// A point-to-point send or receive (`kind`) of `bytes` with `peer` on `stream`, after `dep`.
  sim::NodeId transfer(sim::OpKind kind, sim::StreamId stream, sim::RankId peer, double bytes, std::uint32_t tag,
                       std::string_view name, sim::Phase phase, int micro, sim::NodeId dep = kNoNode);
  /// The batch's copy from pinned host memory to the GPU over PCIe (24 of 31.5 GB/s on Gen4 x16).
  sim::NodeId copy_input(int micro);

  /// The input pipeline: `steps` batches of `samples` each, from the iterator's creation at time
  /// 0. With plan.input_workers, PyTorch's DataLoader: n worker processes, worker w building
  /// batches w, w + n, ... on a stream of its own (streams::dataloader_worker), each in
  /// samples x input_sample_time (slowed by workers / cores when input_cores is fewer), the
  /// first n x input_prefetch at once and each later one when the loop has taken the batch
  /// n x input_prefetch before it (wait_for_batch). Else one producer at plan.input_rate,
  /// unbounded ahead; nothing when the rate is unlimited. ConfigError when a batch would take
  /// longer than the simulator's clock holds.
  void load_batches(int steps, int samples);
  /// The host waits for batch `step` (steps in order); returns the wait node, or kNoNode without
  /// an input pipeline. With workers, the batch input_workers x input_prefetch later is sent to
  /// its worker after it.
  sim::NodeId wait_for_batch(int step);

  /// All-reduces `bucket` over `communicator` once `ready` is done: DDP copies it into its flat
  /// buffer on the compute stream; Horovod's background thread picks it up at its next cycle and
  /// fuses it on the NCCL stream. Appends the node whose end means the gradients are reduced.
  void reduce_bucket(const GradientBucket& bucket, std::size_t index, sim::NodeId ready, std::uint32_t communicator,
                     std::vector<sim::NodeId>& comm, sim::CollectiveOp op = sim::CollectiveOp::all_reduce);
  /// A data-parallel collective of `bytes` on the NCCL stream after `deps` (ZeRO's parameter
  /// gathers and gradient reduce-scatters).
  sim::NodeId dp_collective(sim::CollectiveOp op, double bytes, const std::string& name, std::uint32_t communicator,
                            std::vector<sim::NodeId> deps, sim::Phase phase, int micro = -1);
  /// After the reductions in `comm`: the compute stream waits for them, DDP copies buckets back;
  /// then the optimizer step over `params` parameters. Returns the optimizer node.
  sim::NodeId finish_step(const std::vector<sim::NodeId>& comm, const std::vector<GradientBucket>& buckets,
                          double params);
  /// ZeRO-1/2 after the optimizer step `step`: each bucket's updated parameter shards are
  /// all-gathered over `communicator` (Megatron's distributed optimizer without
  /// overlap_param_gather; DeepSpeed ZeRO-1/2), routed experts' over their expert-data-parallel
  /// group (none when it is one rank), and the compute stream waits for them. Returns the wait
  /// node.
  sim::NodeId gather_parameters(const std::vector<GradientBucket>& buckets, sim::NodeId step, std::uint32_t communicator);

 private:
  const Model& model_;
  const Plan& plan_;
  const topo::Cluster& cluster_;
  const topo::GpuSpec& gpu_;                 ///< the rank's GPU
  std::shared_ptr<const ComputeModel> own_;  ///< the rank's compute model, where not the given one
  const ComputeModel* compute_;              ///< the given one or own_
  sim::ExecutionGraph& g_;
  sim::RankId rank_;
  double slow_ = 1.0;  ///< the stragglers' factor of this rank's kernels in the current step
  /// `d` slowed by slow_.
  sim::Time slowed(sim::Time d) const {
    return slow_ == 1.0 ? d : sim::Time::from_ps(std::llround(static_cast<double>(d.ps()) * slow_));
  }
  std::vector<sim::NodeId> loads_;  ///< each step's batch (kNoNode: not yet sent to a worker)
  sim::Time batch_time_;            ///< with DataLoader workers: one batch on one worker
  /// Batch `i` on its worker (i mod input_workers), sent after `sent` (kNoNode: at the start).
  void load_batch(std::size_t i, sim::NodeId sent);
  bool shared_interpreter_ = false;
  sim::Time forward_gil_;
  std::uint32_t tp_comm_ = 0;
  std::uint32_t cp_comm_ = 0;
  /// A collective of `bytes` (NCCL's size) over the context-parallel group on its stream.
  sim::NodeId cp_collective(sim::CollectiveOp op, double bytes, std::string_view name, std::size_t layer,
                            std::vector<sim::NodeId> deps, sim::Phase phase, int micro);
  MoeRank moe_;
  /// Kernel `t` of layer `index` over `batch` (expert >= 0: that expert's share, named for it).
  sim::NodeId kernel_at(const OpTemplate& t, std::size_t index, int batch, int expert, int micro, sim::Phase phase,
                        sim::Time dispatch, sim::DepList deps);
  struct KernelKey {
    const OpTemplate* t = nullptr;  ///< a template of the model's layers (which outlive this)
    int batch = 0;
    int expert = 0;
    bool operator==(const KernelKey&) const = default;
  };
  struct KernelKeyHash {
    std::size_t operator()(const KernelKey& k) const noexcept {
      const auto p = reinterpret_cast<std::uintptr_t>(k.t);
      return p ^ (std::uint64_t(std::uint32_t(k.batch)) << 20) ^ (std::uint64_t(std::uint32_t(k.expert)) << 44);
    }
  };
  /// The kernel `t` of layer `index` over `batch`, named for `expert` (-1: none).
  const KernelInfo& kernel_info(const OpTemplate& t, std::size_t index, int batch, int expert);
  FlatMap<KernelKey, KernelInfo, KernelKeyHash> kernels_;
  std::uint32_t replica_comm_ = 0xffffffffu;
};

}  // namespace foresight::strategy
