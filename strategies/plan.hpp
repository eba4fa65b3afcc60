#pragma once
/// The parallel plan: how a model is trained on a cluster. Every default is stated here with its
/// source; `foresight simulate --json` prints the effective plan.

#include <array>
#include <string_view>
#include <utility>
#include <cstdint>
#include <string>
#include <vector>

#include "net/network_model.hpp"
#include "common/units.hpp"
#include "exec/op_signature.hpp"
#include "models/batchnorm_fusion.hpp"
#include "strategies/moe.hpp"

namespace foresight::strategy {

/// Numeric formats. fp32 computes convolutions (and, when enabled, matmuls) in TF32 on Ampere
/// and later, as PyTorch does by default; amp_* is torch.autocast: fp32 master weights and
/// gradients, half-precision math and activations; fp16/bf16 are pure half precision.
enum class Precision : std::uint8_t { fp32, amp_fp16, amp_bf16, fp16, bf16 };
std::string_view to_string(Precision p);

/// Data-parallel frameworks: PyTorch DDP (gradient buckets) and Horovod (tensor fusion).
enum class Framework : std::uint8_t { ddp, horovod };
std::string_view to_string(Framework f);

enum class Optimizer : std::uint8_t { sgd, adam };
std::string_view to_string(Optimizer o);
/// How the optimizer's step runs: PyTorch's default on CUDA, the multi-tensor "foreach" kernels
/// (one pass over every state per arithmetic operation), or one fused kernel per tensor list
/// (torch.optim's fused=True, Apex/Transformer Engine FusedAdam as Megatron-LM and DeepSpeed use).
enum class OptimizerImpl : std::uint8_t { foreach, fused };
std::string_view to_string(OptimizerImpl o);

/// Pipeline schedules (pp > 1): naive model parallelism (one micro-batch), GPipe (all forwards,
/// then all backwards), 1F1B (PipeDream-flush), interleaved 1F1B with virtual stages, and
/// asynchronous PipeDream (1F1B without a flush, with weight stashing).
enum class Schedule : std::uint8_t { none, naive, gpipe, one_f_one_b, interleaved, pipedream };
std::string_view to_string(Schedule s);

/// How the layers are cut into stages: by modelled time (torchgpipe balance_by_time), by
/// parameters, into equal numbers of blocks (Megatron), or by an explicit list.
enum class PartitionMode : std::uint8_t { time, params, uniform, explicit_units };
std::string_view to_string(PartitionMode m);

/// Who drives the pipeline's stages: one process per stage (Megatron, DeepSpeed) or one process
/// driving every stage (torchgpipe), whose dispatch is then serialized on one host.
/// Whether compute slows while its rank communicates by the compute model's measured values
/// (ComputeConstants::comm_slowdown_*): `measured`, or not at all: `off`.
enum class CommContention : std::uint8_t { off, measured };
/// How ZeRO-3 gathers parameters: PyTorch FSDP's units and limits, or DeepSpeed's per-module
/// prefetch (docs/strategies.md, "ZeRO").
enum class Zero3Schedule : std::uint8_t { fsdp, deepspeed };

/// Which kernels a transformer's non-matmul work runs as: fused (Megatron-LM, Transformer Engine:
/// one kernel per norm, activation or residual add, in the activation dtype), eager (PyTorch
/// eager as Hugging Face transformers' modules run it: unfused activations, RMSNorm and RoPE, and
/// under autocast the casts and the fp32 residual stream) or torchtitan (its Llama in eager
/// PyTorch under FSDP2's bf16 parameters: no autocast, no KV cache, complex RoPE);
/// with_eager_kernels.
enum class Kernels : std::uint8_t { fused, eager, torchtitan };

/// The fused attention kernel, valued as the op signature's codes (sim::kAttention*,
/// exec/op_signature.hpp): the GPU's default (cuDNN's on Hopper), FlashAttention-2 or cuDNN's.
enum class AttentionKernel : std::uint8_t { automatic, flash2, cudnn };
/// Transformer Engine's FP8 scaling (with plan.fp8): delayed (DelayedScaling: each tensor's
/// scale from an amax history, the amax taken by the cast itself) or current (Float8CurrentScaling:
/// each tensor's amax computed by a pass of its own before its cast, then its scale).
enum class Fp8Recipe : std::uint8_t { delayed, current };
/// How context-parallel ranks exchange attention's inputs (Transformer Engine's cp_comm_type):
/// p2p, the keys and values round a ring, overlapped with the blocks; a2a, DeepSpeed-Ulysses'
/// all-to-alls from sequence shards to head shards around one attention over the whole sequence.
enum class CpComm : std::uint8_t { p2p, a2a };
static_assert(static_cast<std::int64_t>(AttentionKernel::automatic) == sim::kAttentionDefault &&
              static_cast<std::int64_t>(AttentionKernel::flash2) == sim::kAttentionFlash2 &&
              static_cast<std::int64_t>(AttentionKernel::cudnn) == sim::kAttentionCudnn,
              "AttentionKernel's values are the op signature's kernel codes");

enum class PipelineDriver : std::uint8_t { per_stage, single_process };
std::string_view to_string(PipelineDriver d);

/// Which framework runs a pipeline: Megatron-LM's own schedules, or DeepSpeed's PipelineEngine
/// as Megatron-DeepSpeed ran it in 2021-22 (BLOOM, MT-NLG; DeepSpeed v0.5.4-v0.6): exchanges that
/// block the compute stream in its TrainSchedule's order, tensor-parallel ranks sending 1/t of
/// each boundary tensor and all-gathering it, gradients accumulated by a separate kernel after
/// each backward and reduced only after the last one (docs/strategies.md, "DeepSpeed's pipeline
/// engine").
enum class PipelineEngine : std::uint8_t { megatron, deepspeed };

/// Whose matrix kernels the framework runs, where no profile measured them: the compute model's
/// (current: its rates, built on today's cuBLASLt benchmark), or those of Megatron-LM v2, the
/// April 2021 code Megatron SC21 ran, and of its forks (Microsoft's and BigScience's
/// Megatron-DeepSpeed, 2021-22: MT-NLG, BLOOM, BigScience's 104B and 13B), at the rate relative
/// to the compute model's that SC21's declared calibration row measured (calibration.json's
/// megatron_sc21.gemm_efficiency; docs/models.md, "Kernel generations").
enum class KernelGeneration : std::uint8_t { current, megatron_2021 };

/// Activation recompute: none; full (each stage re-runs its forward before its backward and
/// keeps only its input); except_last (full, except for the last micro-batch: torchgpipe's
/// default checkpoint mode); selective (Korthikanti et al. 2022 §5: only the attention core,
/// whose s x s tensors are not kept, is recomputed); selective_op (torchtitan's per-op policy:
/// each transformer block keeps its matmul and fused-attention outputs except every second
/// matmul's and recomputes the rest, strategies/op_recompute.hpp).
enum class Recompute : std::uint8_t { none, full, except_last, selective, selective_op };
std::string_view to_string(Recompute r);

/// What selective recompute reruns (Megatron-Core's recompute_modules; bits of
/// Plan::recompute_modules): the attention core (core_attn, checkpointed: unfused, its scores;
/// fused, the kernel, which Transformer Engine reruns from Q, K and V), the routed experts'
/// activation (moe_act), the MoE layers' pre-MLP norm (layernorm: the norm Transformer Engine
/// does not fuse into the next linear, whose output the router reads), both output-discarding:
/// the output is dropped once consumed and recomputed before the backward that needs it; and,
/// checkpointed from their input, a dense layer's whole MLP (mlp: the norm Transformer Engine
/// fuses into its first linear, the linears and the activation; MoE layers are left alone), a
/// MoE layer's (moe: router, dispatch, routed experts, combine, shared experts) and its shared
/// experts (shared_experts).
enum RecomputeModule : std::uint8_t {
  kRecomputeCoreAttn = 1,
  kRecomputeMoeAct = 2,
  kRecomputeLayernorm = 4,
  kRecomputeMlp = 8,
  kRecomputeMoe = 16,
  kRecomputeSharedExperts = 32
};
/// Their names in a scenario, by bit.
inline constexpr std::array<std::pair<std::string_view, RecomputeModule>, 6> kRecomputeModules{
    {{"core_attn", kRecomputeCoreAttn},
     {"moe_act", kRecomputeMoeAct},
     {"layernorm", kRecomputeLayernorm},
     {"mlp", kRecomputeMlp},
     {"moe", kRecomputeMoe},
     {"shared_experts", kRecomputeSharedExperts}}};

/// Which plan axis follows a change of cluster.gpus (--gpus): data parallelism, or the pipeline.
enum class ScaleAxis : std::uint8_t { dp, pp };

/// Steps a pipeline that has not settled after 3 is simulated for (the last 4 measured).
inline constexpr int kUnsettledSteps = 8;

struct Plan {
  int dp = 1;
  int tp = 1;  ///< tensor-parallel ranks (Megatron)
  int pp = 1;  ///< pipeline stages
  int ep = 1;  ///< expert-parallel ranks (MoE models)
  /// Expert tensor parallelism (Megatron-Core's expert_tensor_parallel_size): 0 takes tp, as
  /// Megatron does; a divisor e of tp splits each routed expert over e consecutive TP ranks (1:
  /// whole), and an EP group of ep ranks then spans tp / e TP ranks x ep e / tp replicas
  /// (Megatron's expert order tp-ep-dp). dp stays the experts' data-parallel size: GPUs = dp x e
  /// x pp x ep (x cp).
  int expert_tp = 0;
  int etp() const { return expert_tp > 0 ? expert_tp : tp; }
  /// Context-parallel ranks (Megatron-Core with Transformer Engine's attention): each takes 1/cp
  /// of every sequence, two of its 2 cp chunks (load-balanced causal), and passes its keys and
  /// values around a ring in the attention layers. They are data-parallel ranks to the weights
  /// (gradients reduced and the optimizer sharded over dp x cp) but share their samples: the
  /// global batch is dp x micro_batch x grad_accum (x ep).
  int cp = 1;
  CpComm cp_comm = CpComm::p2p;
  int micro_batch = 1;  ///< samples per rank per forward/backward
  int grad_accum = 1;   ///< forward/backward passes per optimizer step
  int global_batch = 0; ///< samples per optimizer step = dp x micro_batch x grad_accum

  Framework framework = Framework::ddp;
  Precision precision = Precision::fp32;
  /// torch.backends.cudnn.allow_tf32 defaults to True; torch.backends.cuda.matmul.allow_tf32 to
  /// False since PyTorch 1.12 (PyTorch docs, "TensorFloat-32 (TF32) on Ampere devices").
  bool tf32_conv = true;
  bool tf32_matmul = false;
  Optimizer optimizer = Optimizer::sgd;
  OptimizerImpl optimizer_impl = OptimizerImpl::foreach;

  /// DDP: bucket_cap_mb defaults to 25 MiB, the first bucket to 1 MiB (reducer.hpp
  /// kDefaultBucketBytesCap, kDefaultFirstBucketBytes).
  sim::Bytes bucket_cap = sim::Bytes(25LL << 20);
  sim::Bytes first_bucket = sim::Bytes(1LL << 20);
  /// Horovod since v0.21: fusion threshold 128 MiB, cycle time 1 ms (CHANGELOG, operations.cc).
  sim::Bytes fusion_threshold = sim::Bytes(128LL << 20);
  sim::Time cycle_time = sim::Time::from_ps(1'000'000'000);
  /// Horovod: 0 lets the background thread fuse whatever gradients each cycle finds ready; n > 0
  /// reduces them in n explicit groups of layers (Horovod's num_groups, MXNet's
  /// MXNET_HOROVOD_NUM_GROUPS), each once all of its gradients are ready.
  int gradient_groups = 0;

  /// Samples per second one process's input pipeline (DataLoader workers) delivers; 0 means it
  /// always keeps up. No default can be measured for every dataset and machine: set it from a
  /// calibration (the ThetaGPU example fits it).
  double input_rate = 0.0;
  /// PyTorch DataLoader worker processes per process (num_workers); 0: no worker model (the
  /// input_rate above, or an input that always keeps up). Worker w builds batches w, w + n, w +
  /// 2n, ... (n workers), each a step's samples, one after another; the loop takes them in
  /// order, and after it takes batch i the loader sends batch i + n x input_prefetch to its
  /// worker (DataLoader's _try_put_index): it never runs further ahead.
  int input_workers = 0;
  /// CPU time of one sample on one worker (reading, decoding, augmenting, collating), when the
  /// worker has a core to itself. Required with input_workers; measure it on the target host
  /// (a worker's batch time over its batch size).
  sim::Time input_sample_time;
  /// Batches each worker may hold loaded or in progress (DataLoader's prefetch_factor, 2).
  int input_prefetch = 2;
  /// CPU cores the process's workers share (its node's cores over its GPUs, less the main
  /// processes'); 0: one per worker. With fewer cores than workers each batch takes workers /
  /// cores times as long (the cores time-shared evenly).
  int input_cores = 0;
  /// Host time per training step outside the kernels' launches (loop body, zero_grad, logging):
  /// 1 ms, an assumption.
  sim::Time step_overhead = sim::Time::from_ps(1'000'000'000);
  /// Host cost of launching one kernel: 8 us in the forward pass (an eager CUDA op's host submit
  /// on A100, Torch-FL PR #27); 5 us in the backward pass, which autograd drives from C++ (a
  /// CUDA launch is 4-6 us); 50 us for the whole optimizer step (foreach kernels), an assumption.
  sim::Time dispatch_forward = sim::Time::from_ps(8'000'000);
  sim::Time dispatch_backward = sim::Time::from_ps(5'000'000);
  sim::Time dispatch_optimizer = sim::Time::from_ps(50'000'000);
  /// The host waits for the GPU at the end of every step (loss.item() in the training loop).
  bool sync_each_step = true;

  /// Above 0: every compute op slows by this factor while its rank communicates, instead of
  /// comm_contention's values (sim::ExecutorOptions::comm_compute_slowdown).
  double comm_compute_slowdown = 0.0;
  CommContention comm_contention = CommContention::measured;
  sim::NetworkKind network = sim::NetworkKind::flow;
  /// Training steps simulated; the iteration time is the mean of all but the first (pipelines:
  /// the mean of the last half).
  int steps = 3;
  /// Steps left to Foresight for a pipeline: 3 are simulated and the third measured when the
  /// second and third take the same time (to 1 ppm: the pipeline has settled, as one that
  /// flushes every step does at once), else 8 and the mean of the last 4.
  bool settle = false;

  // Pipeline parallelism (pp > 1). grad_accum is then the number of micro-batches per step
  // (Megatron's num_microbatches, torchgpipe's chunks).
  /// Default with pp > 1: 1f1b (Megatron's default).
  Schedule schedule = Schedule::none;
  /// Model chunks per pipeline rank for the interleaved schedule (Megatron's
  /// virtual_pipeline_model_parallel_size).
  int virtual_stages = 1;
  PartitionMode partition = PartitionMode::time;
  /// Units (blocks, and layers outside blocks) per stage, for PartitionMode::explicit_units.
  std::vector<int> partition_units;
  PipelineDriver driver = PipelineDriver::per_stage;
  PipelineEngine pipeline_engine = PipelineEngine::megatron;
  /// Single-process driver: host bookkeeping per micro-batch per stage (torchgpipe's fork/join,
  /// Copy/Wait autograd functions and worker-queue hand-offs): 100 us, an assumption.
  sim::Time microbatch_overhead = sim::Time::from_ps(100'000'000);
  /// Single-process driver: of each forward op's dispatch, the part spent in Python holding the
  /// GIL, which the stages' worker threads take in turn; the rest (dispatcher, kernel launch)
  /// runs with the GIL released, in parallel. Backward ops run on the autograd engine's C++
  /// device threads without it. 3 us, an assumption: an eager op's Python share is about half
  /// of its ~5 us CPU cost (pytorch/pytorch#41383).
  sim::Time dispatch_gil = sim::Time::from_ps(3'000'000);
  /// The host waits for each point-to-point exchange to finish (Megatron's non-interleaved
  /// schedule: batch_isend_irecv, wait, torch.cuda.synchronize). Default: true for a
  /// per-stage driver without interleaving.
  bool p2p_sync = true;
  Recompute recompute = Recompute::none;
  /// With recompute selective: the RecomputeModule bits it reruns (Megatron-Core's default,
  /// the attention core).
  std::uint8_t recompute_modules = kRecomputeCoreAttn;
  /// Whether selective recompute reruns module `m`.
  bool recomputes(RecomputeModule m) const {
    return recompute == Recompute::selective && (recompute_modules & m) != 0;
  }
  ScaleAxis scale_axis = ScaleAxis::dp;

  // Large-model data parallelism and tensor parallelism (memory model; see memory_model.hpp).
  /// Megatron's sequence parallelism (Korthikanti et al. 2022 §4.2.2): with tp > 1, norms and
  /// dropout work on 1/t of the sequence.
  bool sequence_parallel = false;
  /// Transformer Engine's tensor-parallel communication overlap (Megatron-Core's
  /// --tp-comm-overlap, userbuffers; needs sequence parallelism): each linear layer's
  /// sequence-parallel all-gather or reduce-scatter runs beside its GEMM, split into chunks that
  /// the GEMM consumes or produces one by one (docs/strategies.md, "Tensor parallelism").
  bool tp_comm_overlap = false;
  /// ZeRO stage (Rajbhandari et al. 2020): 1 shards optimizer states over the data-parallel
  /// group (Megatron's distributed optimizer), 2 also gradients, 3 also parameters.
  int zero = 0;
  /// Hybrid sharding (PyTorch FSDP's HYBRID_SHARD; DeepSpeed MiCS): ZeRO's states are sharded
  /// over groups of `shard_group` consecutive data-parallel ranks (a node's GPUs, typically) and
  /// replicated across the dp / shard_group groups, which all-reduce their gradient shards.
  /// 0: shard over the whole data-parallel group (FULL_SHARD, ZeRO).
  int shard_group = 0;
  /// ZeRO-3's gathers: FSDP (a unit per transformer block, at most two gathered units in flight,
  /// BACKWARD_PRE prefetch) or DeepSpeed (each layer's, issued ahead without limit).
  Zero3Schedule zero3_schedule = Zero3Schedule::fsdp;
  /// Ranks ZeRO shards over: shard_group, or the whole data-parallel group.
  int shard_size() const { return shard_group > 0 ? shard_group : dp * cp; }
  bool hybrid_shard() const { return zero > 0 && shard_group > 0 && shard_group < dp; }
  /// Of a rank's `params`, `expert_params` of them routed experts', the parameters whose optimizer
  /// states it keeps and updates under ZeRO-1 (Megatron-Core's distributed optimizer): the dense
  /// ones' 1/shard_size() shard, or with experts (ep > 1) their 1/(dp x ep) over every replica
  /// holding them, and the experts' 1/dp over the expert-data-parallel group.
  double zero_owned_params(double params, double expert_params) const {
    if (ep <= 1) return params / shard_size();
    return (params - expert_params) / replicas() + expert_params / dp;
  }
  /// Gradients accumulated and reduced in fp32 whatever the parameters' precision (Megatron-LM's
  /// main_grad buffers, the default with --bf16: arguments.py).
  bool fp32_main_grads = false;
  /// FlashAttention-style fused attention kernels instead of Megatron's unfused core (which
  /// the SC21 runs used).
  bool fused_attention = false;
  /// Which fused attention kernel runs (with fused_attention).
  AttentionKernel attention_kernel = AttentionKernel::automatic;
  Kernels kernels = Kernels::fused;
  /// CNN BatchNorm kernels that take in the ReLU and residual add after them
  /// (models/batchnorm_fusion.hpp): MXNet's, as NVIDIA's MLPerf ResNet-50 runs them.
  BatchNormFusion batchnorm_fusion = BatchNormFusion::none;
  /// Transformer Engine FP8 for the transformer blocks' linear layers (strategy::with_fp8); needs
  /// a GPU with FP8 tensor cores and a bf16 or amp_bf16 precision.
  bool fp8 = false;
  Fp8Recipe fp8_recipe = Fp8Recipe::delayed;
  /// Simulate one data-parallel replica and one tensor-parallel rank per stage for all the
  /// identical ones (docs/architecture.md, "Identical ranks"; strategies/hybrid_layout.hpp): the same
  /// answer for a fraction of the work. Off by choice, and by itself on mixed GPU models.
  bool fold = true;
  /// Not a scenario key: the planner's cheap bound (run/planner.cpp). Replicas fold as if every
  /// block sat as the first one does, whatever their placement, so the graph holds one block's
  /// ranks (HybridLayout::bounds_only). Its ranks' programs, memory and own groups are the real
  /// ones, but its folded groups claim placements alike that are not: it bounds, never simulates.
  bool fold_as_alike = false;
  /// Rank placement, innermost first: "tp-pp-dp" (the default: TP groups inside a node, then the
  /// pipeline, then data parallelism) or any other order of tp, pp and dp, e.g. "tp-dp-pp"
  /// (Megatron-Core's order, data-parallel groups before pipeline stages).
  std::string placement = "tp-pp-dp";
  /// Mixture of experts: how tokens spread over the experts (strategies/moe.hpp).
  RoutingSpec routing;
  /// Mixture of experts: the host waits, once per MoE layer's forward, for the token counts per
  /// expert (Megatron-Core's alltoall dispatcher without padding to capacity: the all-to-all's
  /// split sizes are copied to the host, which synchronizes on them before the dispatch;
  /// token_dispatcher.py, core_v0.8.0 and later). The counts are first all-gathered over the
  /// expert-parallel group. Off by default: it moves every measured MoE prediction by under 1%
  /// while it nearly doubles the flow network's events on large MoE runs (docs/strategies.md).
  /// Off is also right where sizes are known in advance (padded to capacity, DeepSpeed-MoE's
  /// fixed capacity, CUDA graphs of the preprocessing).
  bool moe_host_sync = false;
  /// Slow GPUs: the kernels of ranks on `straggler_gpus` take `straggler_slowdown` times as long,
  /// and every rank's kernels in every step take 1 + X as long, X drawn from an exponential
  /// distribution of mean `straggler_jitter` (0: none), seeded by `straggler_seed` and the
  /// rank's GPU and step (straggler_factor). Ranks that may differ are not folded.
  std::vector<int> straggler_gpus;
  double straggler_slowdown = 1.0;
  double straggler_jitter = 0.0;
  std::uint64_t straggler_seed = 1;
  bool has_stragglers() const { return (!straggler_gpus.empty() && straggler_slowdown != 1.0) || straggler_jitter > 0.0; }
  /// Data-parallel replicas of the dense layers: dp x ep (each EP rank trains on its own
  /// micro-batches; the experts' own data-parallel group is dp), dp x ep / tp with expert TP 1.
  int replicas() const { return ep_replicas() * dp * cp; }
  /// Replicas that train on samples of their own: dp x ep (context-parallel ranks share theirs).
  int sample_replicas() const { return ep_replicas() * dp; }
  /// Replicas one EP group spans: ep, or ep x expert TP / tp (its ranks are then TP ranks of
  /// several replicas; read_plan checks it divides).
  int ep_replicas() const { return ep * etp() / tp; }
  /// GPUs the plan takes: dp x tp x pp x ep x cp (dp x expert TP x pp x ep x cp).
  long long ranks() const { return static_cast<long long>(dp) * etp() * pp * ep * cp; }
  /// The EP rank, and the EP group of a stage, of TP rank j of dense replica d, in Megatron's
  /// expert order: with L = j + tp x (d's place in its group of ep_replicas()), EP rank L /
  /// expert TP, one EP group per expert-TP rank j mod expert TP and group of replicas. With expert
  /// TP = TP: d's place in its group of ep replicas, one group per TP rank.
  int expert_rank(int d, int j) const { return expert_rank_of(d, j, tp, etp(), ep_replicas()); }
  /// The same from the sizes: TP rank j of replica d, TP size tp, expert TP etp, ep_replicas
  /// replicas per EP group.
  static int expert_rank_of(int d, int j, int tp, int etp, int ep_replicas) { return (j + tp * (d % ep_replicas)) / etp; }
  int expert_group(int d, int j) const { return (d / ep_replicas()) * etp() + j % etp(); }
  /// The framework's matrix kernels (GEMMs, fused attention) relative to the compute model's
  /// benchmark-derived rate, where no profile measured them: 1 means cuBLASLt benchmark speed.
  /// A user's factor, on top of the kernel generation's rate (kernel_generation).
  double gemm_efficiency = 1.0;
  /// Whose matrix kernels: megatron_2021 multiplies gemm_efficiency by the generation's measured
  /// rate (SimulationInputs::megatron_2021_gemm_efficiency, from the calibration file).
  KernelGeneration kernel_generation = KernelGeneration::current;
};

/// How many times as long GPU `gpu`'s kernels take in training step `step` under the plan's
/// stragglers: the fixed slowdown where `gpu` is listed, times 1 + X with X exponential of mean
/// straggler_jitter, drawn from a SplitMix64 hash of (seed, gpu, step): the same for the same
/// inputs, whatever order ranks are emitted in.
double straggler_factor(const Plan& plan, int gpu, int step);

/// The plan's GPU count as a formula with its values, for messages: "dp x tp x pp x ep x cp =
/// 2 x 4 x 1 x 1 x 1", or with expert TP 1 "dp x expert_tp x pp x ep x cp = ...".
std::string ranks_formula(const Plan& plan);
/// What multiplies dp to count the replicas with samples of their own, for messages: "", " x ep"
/// or " x ep x expert_tp / tp".
std::string_view ep_factor(const Plan& plan);

/// Bytes per element of activations, of parameters as stored (master weights), and of gradients.
int activation_bytes(Precision p);
int parameter_bytes(Precision p);
int gradient_bytes(Precision p);
/// Bytes per gradient element as reduced: 4 with fp32_main_grads, else gradient_bytes.
int gradient_bytes_per_param(const Plan& plan);

}  // namespace foresight::strategy
