#include "run/params.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "common/error.hpp"

namespace foresight::strategy {
namespace {

using nlohmann::json;
using topo::JsonPath;
using topo::JsonReader;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMaxRanks = 1 << 30;
constexpr double kMaxCount = 1LL << 40;

// Choices, in enum order (a choice is stored as its index and cast to the enum).
constexpr std::array<std::string_view, 5> kPrecisions{"fp32", "amp_fp16", "amp_bf16", "fp16", "bf16"};
constexpr std::array<std::string_view, 2> kFrameworks{"ddp", "horovod"};
constexpr std::array<std::string_view, 2> kOptimizers{"sgd", "adam"};
constexpr std::array<std::string_view, 2> kOptimizerImpls{"foreach", "fused"};
constexpr std::array<std::string_view, 6> kSchedules{"none", "naive", "gpipe", "1f1b", "interleaved", "pipedream"};
constexpr std::array<std::string_view, 3> kPartitions{"time", "params", "uniform"};
constexpr std::array<std::string_view, 2> kDrivers{"per_stage", "single_process"};
constexpr std::array<std::string_view, 2> kPipelineEngines{"megatron", "deepspeed"};
constexpr std::array<std::string_view, 2> kKernelGenerations{"current", "megatron-2021"};
constexpr std::array<std::string_view, 5> kRecomputes{"none", "full", "except_last", "selective", "selective_op"};
constexpr std::array<std::string_view, 2> kScaleAxes{"dp", "pp"};
constexpr std::array<std::string_view, 2> kNetworks{"analytical", "flow"};
constexpr std::array<std::string_view, 2> kCommContention{"off", "measured"};
constexpr std::array<std::string_view, 2> kZero3Schedules{"fsdp", "deepspeed"};
constexpr std::array<std::string_view, 3> kKernels{"fused", "eager", "torchtitan"};
constexpr std::array<std::string_view, 3> kAttentionKernels{"auto", "flash2", "cudnn"};
constexpr std::array<std::string_view, 2> kCpComms{"p2p", "a2a"};
constexpr std::array<std::string_view, 4> kBatchNormFusions{"none", "bn_relu", "conv_stats", "conv_mainloop"};
constexpr std::array<std::string_view, 2> kFp8Recipes{"delayed", "current"};
constexpr std::array<std::string_view, 3> kDistributions{"balanced", "zipf", "histogram"};
constexpr std::array<std::string_view, 2> kRoles{"calibration", "prediction"};

static_assert(static_cast<int>(Schedule::pipedream) == 5 && static_cast<int>(Recompute::selective_op) == 4 &&
              static_cast<int>(sim::NetworkKind::flow) == 1 && static_cast<int>(Precision::bf16) == 4 &&
              static_cast<int>(Kernels::torchtitan) == 2 && static_cast<int>(AttentionKernel::cudnn) == 2);

/// Stores a value into member `Field` of the scenario part `Part`.
template <auto Part, auto Field>
void store(Scenario& s, const ParamValue& v) {
  auto& field = (s.*Part).*Field;
  using T = std::remove_cvref_t<decltype(field)>;
  if constexpr (std::is_same_v<T, bool>) {
    field = std::get<bool>(v);
  } else if constexpr (std::is_same_v<T, double>) {
    field = std::get<double>(v);
  } else if constexpr (std::is_enum_v<T> || std::is_integral_v<T>) {
    field = static_cast<T>(std::get<long long>(v));
  } else {
    field = std::get<T>(v);
  }
}

/// The effective value of member `Field` of part `Part`; enums by their name in `Names`.
template <auto Part, auto Field, const auto* Names = static_cast<const std::array<std::string_view, 0>*>(nullptr)>
json echo(const Scenario& s) {
  const auto& field = (s.*Part).*Field;
  using T = std::remove_cvref_t<decltype(field)>;
  if constexpr (std::is_enum_v<T>) {
    return std::string((*Names)[static_cast<std::size_t>(field)]);
  } else if constexpr (std::is_same_v<T, sim::Bytes> || std::is_same_v<T, sim::Time>) {
    return sim::to_string(field);
  } else {
    return field;
  }
}

json echo_recompute_modules(const Scenario& s) {
  json out = json::array();
  for (const auto& [name, bit] : kRecomputeModules) {
    if ((s.plan.recompute_modules & bit) != 0) out.push_back(std::string(name));
  }
  return out;
}

json echo_expert_tp(const Scenario& s) { return s.plan.etp(); }

json echo_partition(const Scenario& s) {
  const Plan& p = s.plan;
  if (p.partition == PartitionMode::explicit_units) return p.partition_units;
  return std::string(kPartitions[static_cast<std::size_t>(p.partition)]);
}

constexpr auto M = &Scenario::model;
constexpr auto C = &Scenario::cluster;
constexpr auto P = &Scenario::plan;
constexpr auto W = &Scenario::workload;
constexpr auto MR = &Scenario::measured;
using K = ParamKind;

Param integer(std::string_view section, std::string_view key, std::string_view unit, std::string_view dflt, double lo,
              double hi, std::string_view doc, void (*st)(Scenario&, const ParamValue&),
              json (*ec)(const Scenario&) = nullptr) {
  return Param{section, key, K::integer, unit, dflt, lo, hi, false, {}, doc, st, ec};
}
Param of_kind(std::string_view section, std::string_view key, ParamKind kind, std::string_view unit, std::string_view dflt,
              std::string_view doc, void (*st)(Scenario&, const ParamValue&), json (*ec)(const Scenario&)) {
  return Param{section, key, kind, unit, dflt, 0.0, 0.0, false, {}, doc, st, ec};
}
Param choice(std::string_view section, std::string_view key, std::span<const std::string_view> names,
             std::string_view dflt, std::string_view doc, void (*st)(Scenario&, const ParamValue&),
             json (*ec)(const Scenario&)) {
  return Param{section, key, K::choice, "", dflt, 0.0, 0.0, false, names, doc, st, ec};
}
Param number(std::string_view section, std::string_view key, std::string_view unit, std::string_view dflt, double lo,
             bool lo_open, double hi, std::string_view doc, void (*st)(Scenario&, const ParamValue&),
             json (*ec)(const Scenario&)) {
  return Param{section, key, K::number, unit, dflt, lo, hi, lo_open, {}, doc, st, ec};
}

std::vector<Param> make_table() {
  std::vector<Param> t;
  // model
  t.push_back(of_kind("model", "name", K::text, "", "(one of name, hf_config)",
                      "a zoo model (`foresight --list` names them)", nullptr, nullptr));
  t.push_back(of_kind("model", "hf_config", K::path, "", "(one of name, hf_config)",
                      "a Hugging Face config.json of a decoder-only transformer (Llama, Mistral, Mixtral, GPT-2, ...)",
                      nullptr, nullptr));
  t.push_back(integer("model", "classes", "classes", "the model's own", 1, 1 << 24, "CNN classifier size",
                      store<M, &ModelSpec::classes>));
  t.push_back(integer("model", "seq_len", "tokens", "the model's own", 1, 1 << 24, "transformer sequence length",
                      store<M, &ModelSpec::seq_len>));
  // cluster
  t.push_back(of_kind("cluster", "preset", K::text, "", "(one of preset, topology)",
                      "a cluster preset (`foresight --list` names them)", nullptr, nullptr));
  t.push_back(of_kind("cluster", "topology", K::path, "", "(one of preset, topology)",
                      "a topology JSON file (docs/networks.md)", nullptr, nullptr));
  t.push_back(integer("cluster", "gpus", "GPUs", "the preset's own", 1, 1 << 24,
                      "GPUs of the cluster; with a preset, nodes are added to reach it", store<C, &ClusterSpec::gpus>));
  // plan: parallelism and batch
  t.push_back(integer("plan", "dp", "ranks", "gpus / (tp x pp x ep x cp), with expert_tp e gpus / (e x pp x ep)", 1,
                      kMaxRanks, "data-parallel replicas (with experts: of each EP group, the experts' data-parallel size)",
                      store<P, &Plan::dp>, echo<P, &Plan::dp>));
  t.push_back(integer("plan", "tp", "ranks", "1", 1, kMaxRanks, "tensor-parallel ranks (Megatron)",
                      store<P, &Plan::tp>, echo<P, &Plan::tp>));
  t.push_back(integer("plan", "pp", "stages", "1", 1, kMaxRanks, "pipeline stages", store<P, &Plan::pp>,
                      echo<P, &Plan::pp>));
  t.push_back(integer("plan", "ep", "ranks", "1", 1, kMaxRanks, "expert-parallel ranks (MoE models)",
                      store<P, &Plan::ep>, echo<P, &Plan::ep>));
  t.push_back(integer("plan", "expert_tp", "ranks", "tp", 1, kMaxRanks,
                      "expert tensor parallelism (Megatron-Core's expert_tensor_parallel_size): tp, or a divisor e "
                      "of tp with sequence_parallel and tp / e dividing ep: each expert split over e TP ranks (1: "
                      "whole), an EP group across the TP ranks",
                      store<P, &Plan::expert_tp>, echo_expert_tp));
  t.push_back(integer("plan", "cp", "ranks", "1", 1, kMaxRanks,
                      "context-parallel ranks (Megatron-Core, Transformer Engine's ring attention): 1/cp of each sequence",
                      store<P, &Plan::cp>, echo<P, &Plan::cp>));
  t.push_back(choice("plan", "cp_comm", kCpComms, "p2p",
                     "context parallelism's exchange (Transformer Engine's cp_comm_type): p2p, keys and values round a "
                     "ring beside the attention blocks; a2a, DeepSpeed-Ulysses' all-to-alls to head shards and back",
                     store<P, &Plan::cp_comm>, echo<P, &Plan::cp_comm, &kCpComms>));
  t.push_back(integer("plan", "micro_batch", "samples", "1", 1, kMaxRanks, "samples per rank per forward/backward",
                      store<P, &Plan::micro_batch>, echo<P, &Plan::micro_batch>));
  t.push_back(integer("plan", "grad_accum", "micro-batches", "1, or global_batch / (dp x ep x micro_batch)", 1,
                      kMaxRanks, "forward/backward passes per optimizer step (a pipeline's micro-batches per step)",
                      store<P, &Plan::grad_accum>, echo<P, &Plan::grad_accum>));
  t.push_back(integer("plan", "global_batch", "samples", "dp x ep x micro_batch x grad_accum", 1, kMaxRanks,
                      "samples per optimizer step; sets grad_accum", store<P, &Plan::global_batch>,
                      echo<P, &Plan::global_batch>));
  t.push_back(integer("plan", "steps", "steps", "3 (pipelines: 3, or 8 when unsettled)", 1, 1000,
                      "training steps simulated; the iteration time is the mean of all but the first",
                      store<P, &Plan::steps>, echo<P, &Plan::steps>));
  // plan: numerics and framework
  t.push_back(choice("plan", "precision", kPrecisions, "fp32",
                     "fp32 (TF32 convolutions on Ampere+), amp_* (torch.autocast: fp32 master weights), fp16/bf16 (pure)",
                     store<P, &Plan::precision>, echo<P, &Plan::precision, &kPrecisions>));
  t.push_back(of_kind("plan", "tf32_conv", K::boolean, "", "true",
                      "convolutions in TF32 under fp32 (torch.backends.cudnn.allow_tf32)", store<P, &Plan::tf32_conv>,
                      echo<P, &Plan::tf32_conv>));
  t.push_back(of_kind("plan", "tf32_matmul", K::boolean, "", "false",
                      "matmuls in TF32 under fp32 (torch.backends.cuda.matmul.allow_tf32)", store<P, &Plan::tf32_matmul>,
                      echo<P, &Plan::tf32_matmul>));
  t.push_back(choice("plan", "optimizer", kOptimizers, "sgd", "sgd (momentum: 1 state per parameter) or adam (2 states)",
                     store<P, &Plan::optimizer>, echo<P, &Plan::optimizer, &kOptimizers>));
  t.push_back(choice("plan", "optimizer_impl", kOptimizerImpls, "foreach",
                     "the optimizer step's kernels: foreach (torch.optim's default on CUDA: a pass over the states per "
                     "operation, AdamW 80 and SGD 32 bytes per parameter) or fused (torch.optim fused=True, Apex/TE "
                     "FusedAdam in Megatron-LM and DeepSpeed: 28 and 20)",
                     store<P, &Plan::optimizer_impl>, echo<P, &Plan::optimizer_impl, &kOptimizerImpls>));
  t.push_back(of_kind("plan", "fp32_main_grads", K::boolean, "", "false",
                      "Megatron-LM's fp32 main_grad buffers (its default with --bf16): gradients kept and reduced in "
                      "fp32, 18 bytes per parameter with bf16 and Adam",
                      store<P, &Plan::fp32_main_grads>, echo<P, &Plan::fp32_main_grads>));
  t.push_back(choice("plan", "framework", kFrameworks, "ddp",
                     "data-parallel framework: PyTorch DDP (gradient buckets) or Horovod (tensor fusion)",
                     store<P, &Plan::framework>, echo<P, &Plan::framework, &kFrameworks>));
  t.push_back(of_kind("plan", "bucket_cap", K::bytes, "", "25 MiB", "DDP gradient bucket size (bucket_cap_mb)",
                      store<P, &Plan::bucket_cap>, echo<P, &Plan::bucket_cap>));
  t.push_back(of_kind("plan", "first_bucket", K::bytes, "", "1 MiB", "DDP's first (smaller) bucket",
                      store<P, &Plan::first_bucket>, echo<P, &Plan::first_bucket>));
  t.push_back(of_kind("plan", "fusion_threshold", K::bytes, "", "128 MiB", "Horovod tensor-fusion threshold",
                      store<P, &Plan::fusion_threshold>, echo<P, &Plan::fusion_threshold>));
  t.push_back(of_kind("plan", "cycle_time", K::time, "", "1 ms", "Horovod cycle time", store<P, &Plan::cycle_time>,
                      echo<P, &Plan::cycle_time>));
  t.push_back(integer("plan", "gradient_groups", "groups", "0", 0, 1000000,
                      "Horovod: 0 fuses the gradients each cycle finds ready; n > 0 reduces them in n explicit groups "
                      "of layers, each once all of its gradients are ready (Horovod's num_groups, MXNet's "
                      "MXNET_HOROVOD_NUM_GROUPS)",
                      store<P, &Plan::gradient_groups>, echo<P, &Plan::gradient_groups>));
  // plan: sharding and large models
  t.push_back(integer("plan", "zero", "stage", "0", 0, 3,
                      "ZeRO stage: 1 shards optimizer states, 2 also gradients, 3 also parameters (FSDP FULL_SHARD)",
                      store<P, &Plan::zero>, echo<P, &Plan::zero>));
  t.push_back(integer("plan", "shard_group", "ranks", "0 (the whole data-parallel group)", 0, 1 << 20,
                      "hybrid sharding (FSDP HYBRID_SHARD): ZeRO shards over groups of this many data-parallel ranks",
                      store<P, &Plan::shard_group>, echo<P, &Plan::shard_group>));
  t.push_back(choice("plan", "zero3_schedule", kZero3Schedules, "fsdp",
                     "ZeRO-3's parameter gathers: fsdp (PyTorch FSDP: one unit per transformer block, at most two "
                     "gathered units in flight, BACKWARD_PRE prefetch) or deepspeed (each layer's, issued ahead)",
                     store<P, &Plan::zero3_schedule>, echo<P, &Plan::zero3_schedule, &kZero3Schedules>));
  t.push_back(of_kind("plan", "sequence_parallel", K::boolean, "", "false",
                      "Megatron sequence parallelism (needs tp > 1)", store<P, &Plan::sequence_parallel>,
                      echo<P, &Plan::sequence_parallel>));
  t.push_back(choice("plan", "recompute", kRecomputes, "none",
                     "activation recompute: full, except_last (torchgpipe), selective (the attention core, or recompute_modules), selective_op (torchtitan's per-op policy: every second matmul and the non-matmul ops of each block)",
                     store<P, &Plan::recompute>, echo<P, &Plan::recompute, &kRecomputes>));
  t.push_back(of_kind("plan", "recompute_modules", K::list, "names", "[\"core_attn\"]",
                      "with recompute selective, what it reruns (Megatron-Core's recompute_modules): core_attn (the "
                      "attention core; fused, its kernel), moe_act (the routed experts' activation), layernorm (the MoE "
                      "layers' pre-MLP norm), mlp (a dense layer's MLP with its norm), moe (a MoE layer: router, "
                      "dispatch, experts, combine), shared_experts (a MoE layer's shared experts)",
                      nullptr, echo_recompute_modules));
  t.push_back(of_kind("plan", "tp_comm_overlap", K::boolean, "", "false",
                      "Transformer Engine's tensor-parallel communication overlap: sequence-parallel all-gathers and "
                      "reduce-scatters beside their GEMMs (needs sequence_parallel)",
                      store<P, &Plan::tp_comm_overlap>, echo<P, &Plan::tp_comm_overlap>));
  t.push_back(of_kind("plan", "fused_attention", K::boolean, "", "false",
                      "FlashAttention-style fused attention instead of Megatron's unfused core",
                      store<P, &Plan::fused_attention>, echo<P, &Plan::fused_attention>));
  t.push_back(choice("plan", "attention_kernel", kAttentionKernels, "auto",
                     "the fused attention kernel (with fused_attention): auto (cuDNN's on Hopper, as Transformer Engine "
                     "and recent PyTorch SDPA pick it; FlashAttention-2's published rate elsewhere), flash2 "
                     "(FlashAttention-2: PyTorch SDPA from 2.5.1 to about 2.7, the flash-attn package) or cudnn",
                     store<P, &Plan::attention_kernel>, echo<P, &Plan::attention_kernel, &kAttentionKernels>));
  t.push_back(choice("plan", "kernels", kKernels, "fused",
                     "the transformer's non-matmul kernels: fused (Megatron, Transformer Engine), eager (PyTorch eager "
                     "as Hugging Face transformers runs it: unfused GELU, RMSNorm and RoPE; under amp precisions "
                     "autocast's casts and an fp32 residual stream) or torchtitan (its Llama without torch.compile: "
                     "bf16 FSDP2 parameters, no autocast, complex RoPE)",
                     store<P, &Plan::kernels>, echo<P, &Plan::kernels, &kKernels>));
  t.push_back(choice("plan", "batchnorm_fusion", kBatchNormFusions, "none",
                     "a CNN's BatchNorm kernels: none (PyTorch: BatchNorm, ReLU and the residual add apart), bn_relu "
                     "(MXNet's --fuse-bn-relu and --fuse-bn-add-relu: the ReLU, and at a block's end the add, inside "
                     "BatchNorm's kernels), conv_stats (as bn_relu, and the convolutions compute BatchNorm's "
                     "statistics, leaving its forward an elementwise pass: NVIDIA's MLPerf ResNet-50, "
                     "resnet-v1b-stats-fl) or conv_mainloop (as conv_stats, and a block's inner BatchNorms are "
                     "applied by the next convolution as it loads its input: resnet-v1b-mainloop-fl)",
                     store<P, &Plan::batchnorm_fusion>, echo<P, &Plan::batchnorm_fusion, &kBatchNormFusions>));
  t.push_back(of_kind("plan", "fp8", K::boolean, "", "false",
                      "Transformer Engine FP8: the transformer blocks' linear GEMMs in FP8, with their casts (H100 and later)",
                      store<P, &Plan::fp8>, echo<P, &Plan::fp8>));
  t.push_back(choice("plan", "fp8_recipe", kFp8Recipes, "delayed",
                     "with fp8, Transformer Engine's scaling: delayed (amax history, taken by each cast) or current "
                     "(Float8CurrentScaling: an amax pass and a scale kernel before each cast)",
                     store<P, &Plan::fp8_recipe>, echo<P, &Plan::fp8_recipe, &kFp8Recipes>));
  t.push_back(of_kind("plan", "placement", K::text, "", "tp-pp-dp (tp-dp-pp with ep > 1)",
                      "rank placement, innermost first: an order of tp, pp and dp joined by '-'", nullptr,
                      echo<P, &Plan::placement>));
  t.push_back(of_kind("plan", "moe_routing", K::object, "", "balanced",
                      "how tokens spread over the experts (plan.moe_routing.*)", nullptr, nullptr));
  t.push_back(of_kind("plan", "moe_host_sync", K::boolean, "", "false",
                      "MoE: the host waits once per MoE layer's forward for the all-gathered token counts before the "
                      "dispatch all-to-all (Megatron-Core's dropless alltoall dispatcher; off by default: under 1% on "
                      "every measured case, twice the flow network's cost on large MoE runs)",
                      store<P, &Plan::moe_host_sync>, echo<P, &Plan::moe_host_sync>));
  // plan: pipeline
  t.push_back(choice("plan", "schedule", kSchedules, "none (1f1b when pp > 1)",
                     "pipeline schedule: naive, gpipe, 1f1b (PipeDream-flush), interleaved, pipedream (async)",
                     store<P, &Plan::schedule>, echo<P, &Plan::schedule, &kSchedules>));
  t.push_back(integer("plan", "virtual_stages", "chunks", "1", 1, 1024,
                      "model chunks per pipeline rank for the interleaved schedule", store<P, &Plan::virtual_stages>,
                      echo<P, &Plan::virtual_stages>));
  t.push_back(Param{"plan", "partition", K::choice, "", "time (uniform when interleaved)", 0.0, 0.0, false, kPartitions,
                    "how layers are cut into stages: by modelled time, params, uniform blocks, or a list of units per "
                    "stage",
                    nullptr, echo_partition});
  t.push_back(choice("plan", "driver", kDrivers, "per_stage",
                     "one process per stage (Megatron) or one process driving every stage (torchgpipe)",
                     store<P, &Plan::driver>, echo<P, &Plan::driver, &kDrivers>));
  t.push_back(choice("plan", "pipeline_engine", kPipelineEngines, "megatron",
                     "who runs the pipeline: Megatron-LM's schedules, or DeepSpeed's PipelineEngine (Megatron-DeepSpeed, "
                     "2021-22: blocking exchanges, gradients reduced after the last backward)",
                     store<P, &Plan::pipeline_engine>, echo<P, &Plan::pipeline_engine, &kPipelineEngines>));
  t.push_back(of_kind("plan", "p2p_sync", K::boolean, "", "true for per_stage without interleaving",
                      "the host waits for each point-to-point exchange (Megatron's non-interleaved schedule)",
                      store<P, &Plan::p2p_sync>, echo<P, &Plan::p2p_sync>));
  t.push_back(of_kind("plan", "microbatch_overhead", K::time, "", "100 us",
                      "single-process driver: host bookkeeping per micro-batch per stage",
                      store<P, &Plan::microbatch_overhead>, echo<P, &Plan::microbatch_overhead>));
  t.push_back(of_kind("plan", "dispatch_gil", K::time, "", "3 us",
                      "single-process driver: the GIL-held part of a forward op's dispatch (at most dispatch_forward)",
                      store<P, &Plan::dispatch_gil>, echo<P, &Plan::dispatch_gil>));
  t.push_back(choice("plan", "scale_axis", kScaleAxes, "dp", "the axis that follows a change of cluster.gpus (--gpus)",
                     store<P, &Plan::scale_axis>, echo<P, &Plan::scale_axis, &kScaleAxes>));
  // plan: host and input
  t.push_back(number("plan", "input_rate", "samples/s", "0 (unlimited)", 0.0, false, kInf,
                     "samples per second one process's input pipeline delivers", store<P, &Plan::input_rate>,
                     echo<P, &Plan::input_rate>));
  t.push_back(integer("plan", "input_workers", "processes", "0 (no worker model)", 0, 4096,
                      "DataLoader worker processes per process (num_workers), each building whole batches",
                      store<P, &Plan::input_workers>, echo<P, &Plan::input_workers>));
  t.push_back(of_kind("plan", "input_sample_time", K::time, "", "(required with input_workers)",
                      "CPU time of one sample on one worker (read, decode, augment, collate) on a core of its own",
                      store<P, &Plan::input_sample_time>, echo<P, &Plan::input_sample_time>));
  t.push_back(integer("plan", "input_prefetch", "batches", "2", 1, 1 << 20,
                      "batches each worker may hold loaded or in progress (DataLoader's prefetch_factor)",
                      store<P, &Plan::input_prefetch>, echo<P, &Plan::input_prefetch>));
  t.push_back(integer("plan", "input_cores", "cores", "0 (one per worker)", 0, 1 << 20,
                      "CPU cores the process's workers share: fewer than workers slow each batch by workers / cores",
                      store<P, &Plan::input_cores>, echo<P, &Plan::input_cores>));
  t.push_back(of_kind("plan", "step_overhead", K::time, "", "1 ms",
                      "host time per step outside kernel launches (loop, zero_grad, logging)",
                      store<P, &Plan::step_overhead>, echo<P, &Plan::step_overhead>));
  t.push_back(of_kind("plan", "dispatch_forward", K::time, "", "8 us", "host cost of launching one forward kernel",
                      store<P, &Plan::dispatch_forward>, echo<P, &Plan::dispatch_forward>));
  t.push_back(of_kind("plan", "dispatch_backward", K::time, "", "5 us",
                      "host cost of launching one backward kernel (autograd in C++)", store<P, &Plan::dispatch_backward>,
                      echo<P, &Plan::dispatch_backward>));
  t.push_back(of_kind("plan", "dispatch_optimizer", K::time, "", "50 us", "host cost of the whole optimizer step",
                      store<P, &Plan::dispatch_optimizer>, echo<P, &Plan::dispatch_optimizer>));
  t.push_back(of_kind("plan", "sync_each_step", K::boolean, "", "true",
                      "the host waits for the GPU at the end of every step (loss.item())", store<P, &Plan::sync_each_step>,
                      echo<P, &Plan::sync_each_step>));
  // plan: simulation
  t.push_back(choice("plan", "network", kNetworks, "flow",
                     "network model: analytical (bandwidth-latency) or flow (max-min fair sharing)",
                     store<P, &Plan::network>, echo<P, &Plan::network, &kNetworks>));
  t.push_back(choice("plan", "comm_contention", kCommContention, "measured",
                     "compute slowed while a collective runs on its GPU: measured (H100/H200: GEMMs 35.8% slower, "
                     "convolutions 35.7%, fused attention 16.2%, memory-bound 24.4%, and collectives wait for a running GEMM's SMs; "
                     "none where unmeasured) or off",
                     store<P, &Plan::comm_contention>, echo<P, &Plan::comm_contention, &kCommContention>));
  t.push_back(number("plan", "comm_compute_slowdown", "factor", "0", 0.0, false, kInf,
                     "above 0: every kernel's slowdown while a collective runs on its GPU, instead of comm_contention",
                     store<P, &Plan::comm_compute_slowdown>, echo<P, &Plan::comm_compute_slowdown>));
  t.push_back(number("plan", "gemm_efficiency", "factor", "1", 0.0, true, 2.0,
                     "the framework's matrix kernels relative to the cuBLASLt benchmark rate, on top of kernel_generation's",
                     store<P, &Plan::gemm_efficiency>, echo<P, &Plan::gemm_efficiency>));
  t.push_back(choice("plan", "kernel_generation", kKernelGenerations, "current",
                     "whose matrix kernels: the compute model's, or Megatron-LM v2's (April 2021, the code SC21 ran) and "
                     "its Megatron-DeepSpeed forks' (2021-22), at the rate SC21's calibration row measured "
                     "(calibration.json: megatron_sc21.gemm_efficiency), times gemm_efficiency",
                     store<P, &Plan::kernel_generation>, echo<P, &Plan::kernel_generation, &kKernelGenerations>));
  t.push_back(of_kind("plan", "fold", K::boolean, "", "true",
                      "simulate one of each set of identical ranks (same answer, less work)", store<P, &Plan::fold>,
                      echo<P, &Plan::fold>));
  t.push_back(of_kind("plan", "stragglers", K::object, "", "none",
                      "slow GPUs: a fixed slowdown of some GPUs and a per-step jitter of all (plan.stragglers.*)",
                      nullptr, nullptr));
  // plan.stragglers
  t.push_back(of_kind("plan.stragglers", "gpus", K::list, "GPU indices", "[]",
                      "the GPUs (0-based, in cluster order) whose kernels take `slowdown` times as long", nullptr,
                      nullptr));
  t.push_back(number("plan.stragglers", "slowdown", "factor", "1", 1.0, false, 100.0,
                     "how many times as long the listed GPUs' kernels take", store<P, &Plan::straggler_slowdown>,
                     nullptr));
  t.push_back(number("plan.stragglers", "jitter", "factor", "0", 0.0, false, 10.0,
                     "every GPU's kernels in every step take 1 + X as long, X exponential with this mean",
                     store<P, &Plan::straggler_jitter>, nullptr));
  t.push_back(integer("plan.stragglers", "seed", "", "1", 0, static_cast<double>(1LL << 62),
                      "seed of the jitter draw (per GPU and step)", store<P, &Plan::straggler_seed>));
  // plan.moe_routing (read by run/scenario.cpp: its keys depend on the distribution)
  t.push_back(choice("plan.moe_routing", "distribution", kDistributions, "balanced",
                     "tokens per expert: balanced, zipf (exponent s) or a measured histogram (file)", nullptr, nullptr));
  t.push_back(number("plan.moe_routing", "s", "exponent", "1", 0.0, true, 10.0, "zipf exponent", nullptr, nullptr));
  t.push_back(of_kind("plan.moe_routing", "file", K::path, "", "(histogram only)",
                      "histogram file: {\"source\", \"shares\": [...] or one list per MoE layer}", nullptr, nullptr));
  t.push_back(integer("plan.moe_routing", "seed", "", "1", 0, static_cast<double>(1LL << 62),
                      "seed of the routing draw", nullptr));
  t.push_back(of_kind("plan.moe_routing", "expected", K::boolean, "", "false",
                      "use the rounded expected counts instead of a draw", nullptr, nullptr));
  // workload
  t.push_back(integer("workload", "steps", "steps", "(or tokens, or epochs x dataset_samples)", 1, kMaxCount,
                      "optimizer steps of the run", store<W, &Workload::steps>));
  t.push_back(integer("workload", "tokens", "tokens", "(or steps, or epochs x dataset_samples)", 1,
                      static_cast<double>(1LL << 53),
                      "tokens to train on (transformers): steps = ceil(tokens / (global_batch x seq_len))",
                      store<W, &Workload::tokens>));
  t.push_back(integer("workload", "epochs", "epochs", "(with dataset_samples)", 1, 1 << 24, "epochs of the run",
                      store<W, &Workload::epochs>));
  t.push_back(integer("workload", "dataset_samples", "samples", "(with epochs)", 1, kMaxCount,
                      "samples per epoch", store<W, &Workload::dataset_samples>));
  // measured
  t.push_back(number("measured", "run_s", "s", "(one of run_s, iteration_s)", 0.0, true, kInf,
                     "the measured time of the whole workload", store<MR, &Measured::run_s>, nullptr));
  t.push_back(number("measured", "iteration_s", "s", "(one of run_s, iteration_s)", 0.0, true, kInf,
                     "the measured time of one iteration", store<MR, &Measured::iteration_s>, nullptr));
  t.push_back(choice("measured", "role", kRoles, "prediction",
                     "calibration: constants were fitted to it; prediction: they were not",
                     store<MR, &Measured::role>, nullptr));
  t.push_back(of_kind("measured", "source", K::text, "", "(required)",
                      "where the measured figure comes from (dataset, paper, run)", store<MR, &Measured::source>,
                      nullptr));
  return t;
}

const std::vector<Param>& table() {
  static const std::vector<Param> t = make_table();  // immutable after its first use
  return t;
}

/// `items` joined by `sep`.
template <typename Items>
std::string joined(const Items& items, std::string_view sep) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out.append(sep);
    out.append(item);
  }
  return out;
}

std::string range_text(const Param& p) {
  if (p.kind == K::integer) return fmt::format("{} to {}", static_cast<long long>(p.lo), static_cast<long long>(p.hi));
  if (p.kind == K::number) {
    if (std::isinf(p.hi)) return fmt::format("{} {}", p.lo_open ? ">" : ">=", p.lo);
    return fmt::format("{}{}, {}]", p.lo_open ? "(" : "[", p.lo, p.hi);
  }
  if (p.kind == K::choice) return joined(p.choices, " | ");
  return "";
}

std::string type_text(const Param& p);

}  // namespace

std::string_view to_string(ParamKind k) {
  static constexpr std::array<std::string_view, 10> kNames{"integer", "number", "boolean", "choice", "size",
                                                          "duration", "text",   "path",    "list",   "object"};
  return kNames[static_cast<std::size_t>(k)];
}

namespace {

/// "integer 1 to 1024", "choice fp32 | amp_fp16", "size".
std::string type_text(const Param& p) {
  const std::string range = range_text(p);
  return range.empty() ? std::string(to_string(p.kind)) : fmt::format("{} {}", to_string(p.kind), range);
}

}  // namespace

std::string Param::path() const { return fmt::format("{}.{}", section, key); }

std::span<const Param> scenario_params() { return table(); }

const Param* find_param(std::string_view section, std::string_view key) {
  for (const Param& p : table()) {
    if (p.section == section && p.key == key) return &p;
  }
  return nullptr;
}

std::vector<std::string_view> section_keys(std::string_view section) {
  std::vector<std::string_view> keys;
  for (const Param& p : table()) {
    if (p.section == section) keys.push_back(p.key);
  }
  return keys;
}

ParamValue read_value(const JsonReader& r, const json& obj, const JsonPath& p, const Param& param, std::string_view what) {
  switch (param.kind) {
    case K::integer:
      return r.integer_at(obj, param.key, p, what, static_cast<long long>(param.lo), static_cast<long long>(param.hi));
    case K::number: {
      const double v = r.number_at(obj, param.key, p, what);
      const bool ok = (param.lo_open ? v > param.lo : v >= param.lo) && v <= param.hi;
      if (!ok) {
        r.fail(p.at(param.key), fmt::format("expected a number {}{}, found {}", range_text(param),
                                            param.unit.empty() ? "" : fmt::format(" ({})", param.unit), v));
      }
      return v;
    }
    case K::boolean:
      return r.bool_at(obj, param.key, p, what);
    case K::choice: {
      const std::string text = r.string_at(obj, param.key, p, what);
      for (std::size_t i = 0; i < param.choices.size(); ++i) {
        if (param.choices[i] == text) return static_cast<long long>(i);
      }
      r.fail(p.at(param.key), fmt::format("expected one of {}, found \"{}\"", joined(param.choices, ", "), text));
    }
    case K::bytes:
      return r.bytes_at(obj, param.key, p, what);
    case K::time:
      return r.time_at(obj, param.key, p, what);
    case K::text:
    case K::path:
      return r.string_at(obj, param.key, p, what);
    case K::list:
    case K::object:
      break;
  }
  throw sim::InternalError(fmt::format("parameter {} has no scalar value", param.path()));
}

void read_section(const JsonReader& r, const json& obj, const JsonPath& p, std::string_view section, std::string_view what,
                  Scenario& s) {
  const auto keys = section_keys(section);
  r.check_object(obj, keys, p, what);
  for (const Param& param : table()) {
    if (param.section != section || param.store == nullptr || !obj.contains(param.key)) continue;
    param.store(s, read_value(r, obj, p, param, what));
  }
}

void check_param_path(const std::string& path) {
  const auto dot = path.rfind('.');
  const std::string section = dot == std::string::npos ? "" : path.substr(0, dot);
  const std::string key = dot == std::string::npos ? path : path.substr(dot + 1);
  if (find_param(section, key) != nullptr) return;
  const auto keys = section_keys(section);
  if (keys.empty()) {
    throw sim::ConfigError(fmt::format("--set {}: expected a path under model, cluster, plan, plan.moe_routing, "
                                       "plan.stragglers, workload or measured, found \"{}\" (`foresight params` lists every key)",
                                       path, section.empty() ? path : section));
  }
  throw sim::ConfigError(fmt::format("--set {}: unknown key \"{}\" in {}; expected one of {}", path, key, section,
                                     joined(keys, ", ")));
}

json section_to_json(const Scenario& s, std::string_view section) {
  json out = json::object();
  for (const Param& p : table()) {
    if (p.section == section && p.echo != nullptr) out[std::string(p.key)] = p.echo(s);
  }
  return out;
}

std::string params_text() {
  std::string out =
      "Scenario keys (a scenario is {\"description\", \"model\", \"cluster\", \"plan\", \"workload\"}; any key may "
      "be set with --set PATH=VALUE):\n";
  std::string_view section;
  for (const Param& p : table()) {
    if (p.section != section) {
      section = p.section;
      out += fmt::format("\n{}:\n", section);
    }
    out += fmt::format("  {:<22} {}\n  {:<22}   {}{}{}; default {}\n", p.key, p.doc, "", type_text(p),
                       p.unit.empty() ? "" : " ", p.unit, p.default_text);
  }
  return out;
}

std::string params_markdown() {
  std::string out =
      "# Scenario reference\n\n"
      "Generated from the parameter table (run/params.cpp) by `foresight params --markdown`; a test keeps this file "
      "equal to it. A scenario is one JSON object with `description` (optional), `model`, `cluster`, `plan`, "
      "`workload` and `measured` (optional); unknown keys are rejected. Any key can be set from the command line with `--set PATH=VALUE` "
      "(e.g. `--set plan.tp=8`). An optional `measured` object names the measured run the scenario reproduces; "
      "`simulate` prints its prediction against it. Sizes and durations are strings with units (`\"25 MiB\"`, `\"8 us\"`); relative "
      "paths are relative to the scenario file. `foresight simulate --json` prints the effective plan.\n";
  std::string_view section;
  for (const Param& p : table()) {
    if (p.section != section) {
      section = p.section;
      out += fmt::format("\n## `{}`\n\n| key | type | unit | default | description |\n|---|---|---|---|---|\n", section);
    }
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", p.key, type_text(p), p.unit.empty() ? "-" : p.unit, p.default_text,
                       p.doc);
  }
  return out;
}

json params_json() {
  json out = json::array();
  for (const Param& p : table()) {
    json e{{"path", p.path()}, {"type", std::string(to_string(p.kind))}, {"default", p.default_text}, {"doc", p.doc}};
    if (!p.unit.empty()) e["unit"] = p.unit;
    if (p.kind == K::integer || p.kind == K::number) {
      e["min"] = p.lo;
      if (!std::isinf(p.hi)) e["max"] = p.hi;
      if (p.lo_open) e["min_excluded"] = true;
    }
    if (p.kind == K::choice) {
      e["choices"] = json::array();
      for (const auto c : p.choices) e["choices"].push_back(std::string(c));
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace foresight::strategy
