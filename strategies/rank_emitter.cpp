#include "strategies/rank_emitter.hpp"

#include <fmt/core.h>

#include "common/error.hpp"
#include "models/model_builder.hpp"

namespace foresight::strategy {
namespace {

sim::DType math_dtype(MathKind m, const Plan& plan, int cc) {
  if (m == MathKind::matmul_fp8) return sim::DType::fp8;
  switch (plan.precision) {
    case Precision::fp32:
      if (m == MathKind::conv) return plan.tf32_conv && cc >= 80 ? sim::DType::tf32 : sim::DType::fp32;
      if (m == MathKind::matmul) return plan.tf32_matmul && cc >= 80 ? sim::DType::tf32 : sim::DType::fp32;
      return sim::DType::fp32;
    case Precision::amp_fp16:
    case Precision::fp16:
      return sim::DType::fp16;
    case Precision::amp_bf16:
    case Precision::bf16:
      return sim::DType::bf16;
  }
  return sim::DType::fp32;
}

}  // namespace

std::map<sim::StreamId, std::string> training_stream_names() {
  return {{sim::kHostStream, "host (python)"},
          {streams::compute, "compute"},
          {streams::nccl, "nccl"},
          {streams::p2p_send_fwd, "p2p send activations"},
          {streams::p2p_recv_fwd, "p2p recv activations"},
          {streams::p2p_send_bwd, "p2p send gradients"},
          {streams::p2p_recv_bwd, "p2p recv gradients"},
          {streams::tensor_parallel, "tensor parallel"},
          {streams::expert, "expert all-to-all"},
          {streams::context_parallel, "context parallel"},
          {streams::amax, "fp8 amax"},
          {streams::dataloader, "dataloader"},
          {streams::horovod, "horovod"}};
}

sim::OpSignature instantiate(const OpTemplate& t, int batch, const Plan& plan, int cc) {
  sim::OpSignature sig;
  sig.type = t.type;
  sig.kernel = t.kernel;
  sig.shape = t.shape;
  sig.batch_axis = t.batch_axis;
  const double scale = t.batched ? batch : 1.0;
  if (t.batched && t.batch_axis < sig.shape.size()) sig.shape[t.batch_axis] *= batch;
  sig.dtype = math_dtype(t.math, plan, cc);
  const int elem = sim::dtype_bytes(sig.dtype);
  sig.flops = t.flops * scale;
  const int param_elem = t.math == MathKind::pointwise ? parameter_bytes(plan.precision) : elem;
  sig.bytes = t.bytes > 0.0 ? t.bytes * scale : t.act_elems * scale * elem + t.param_elems * param_elem;
  sig.path = t.path;
  return sig;
}

bool is_wgrad(const OpTemplate& t) {
  return t.type == sim::OpType::conv_wgrad || t.kernel.find("wgrad") != std::string::npos;
}

double optimizer_bytes_per_param(Optimizer o, OptimizerImpl impl) {
  // Fused: each state read and written once, the gradient read once: AdamW p, m, v r/w + g = 28,
  // SGD with momentum p, buf r/w + g = 20. Foreach (torch/optim/adamw.py and sgd.py,
  // _multi_tensor_*; amsgrad off, weight decay on for AdamW, off for SGD), 4-byte states:
  //   AdamW: mul_(p) 8, lerp_(m, g) 12, mul_(v) 8, addcmul_(v, g, g) 12, sqrt(v) 8, div_ 8,
  //          add_(eps) 8, addcdiv_(p, m, d) 16 = 80;
  //   SGD:   mul_(buf) 8, add_(buf, g) 12, add_(p, buf) 12 = 32.
  // Measured on an H200 (validate/data/kernels/h200_kernel_sweep.json, 1.07 G parameters): foreach
  // AdamW 23.6 ms, fused 8.70 ms, a ratio of 2.71 against 80 / 28 = 2.86.
  if (impl == OptimizerImpl::fused) return o == Optimizer::sgd ? 20.0 : 28.0;
  return o == Optimizer::sgd ? 32.0 : 80.0;
}

sim::Node RankEmitter::make(sim::OpKind kind, sim::StreamId stream, std::string_view name, sim::Phase phase) const {
  return make(kind, stream, g_.intern(name), phase);
}

sim::Node RankEmitter::make(sim::OpKind kind, sim::StreamId stream, std::uint32_t name, sim::Phase phase) const {
  sim::Node n;
  n.kind = kind;
  n.rank = rank_;
  n.stream = stream;
  n.name = name;
  n.phase = phase;
  return n;
}

sim::NodeId RankEmitter::kernel(const OpTemplate& t, std::size_t index, int micro, sim::Phase phase, sim::Time dispatch,
                                sim::DepList deps) {
  return kernel_at(t, index, plan_.micro_batch, -1, micro, phase, dispatch, std::move(deps));
}

sim::NodeId RankEmitter::expert_kernel(const OpTemplate& t, std::size_t index, int expert, double tokens, int micro,
                                       sim::Phase phase, sim::Time dispatch, sim::DepList deps) {
  return kernel_at(t, index, static_cast<int>(tokens), expert, micro, phase, dispatch, std::move(deps));
}

sim::NodeId RankEmitter::expert_all_to_all(std::size_t index, int micro, bool to_experts, const std::string& name,
                                           std::vector<sim::NodeId> deps, sim::Phase phase) {
  const int ep = moe_.routing->ep();
  if (ep == 1) return kNoNode;  // every expert is local
  const RoutingTable& t = moe_.routing->table(index, micro);
  const int local = moe_.routing->experts_per_rank(index);
  // Bytes from EP rank r to EP rank q: the tokens r routes to q's experts, h activations each.
  const double token_bytes = model_.transformer->hidden * static_cast<double>(activation_bytes(plan_.precision));
  std::vector<double> m(static_cast<std::size_t>(ep * ep), 0.0);
  double total = 0.0;
  for (int r = 0; r < ep; ++r) {
    for (int x = 0; x < static_cast<int>(t.count[static_cast<std::size_t>(r)].size()); ++x) {
      const int q = x / local;
      const double b = t.count[static_cast<std::size_t>(r)][static_cast<std::size_t>(x)] * token_bytes;
      m[static_cast<std::size_t>(to_experts ? r * ep + q : q * ep + r)] += b;
      total += b;
    }
  }
  sim::Node n = make(sim::OpKind::collective, streams::expert, name, phase);
  n.op = sim::CollectiveOp::all_to_all;
  n.bytes = total / ep;
  n.communicator = moe_.ep_comm;
  n.matrix = moe_.routing->matrix(g_, index, micro, to_experts, std::move(m));
  n.micro_batch = micro;
  n.deps = std::move(deps);
  return g_.add(std::move(n));
}

sim::NodeId RankEmitter::expert_counts_gather(std::size_t index, int micro, const std::string& name,
                                              std::vector<sim::NodeId> deps, sim::Phase phase) {
  const int ep = moe_.routing->ep();
  if (ep == 1) return kNoNode;
  std::erase(deps, kNoNode);
  sim::Node n = make(sim::OpKind::collective, streams::expert, name, phase);
  n.op = sim::CollectiveOp::all_gather;
  n.bytes = 8.0 * model_.layers[index].experts * ep;  // NCCL's size: the gathered output
  n.communicator = moe_.ep_comm;
  n.micro_batch = micro;
  n.deps = std::move(deps);
  return g_.add(std::move(n));
}

RankEmitter::RankEmitter(const Model& model, const Plan& plan, const topo::Cluster& cluster, const ComputeModel& compute,
                         sim::ExecutionGraph& g, sim::RankId rank)
    : model_(model),
      plan_(plan),
      cluster_(cluster),
      gpu_(cluster.gpu_model(g.rank_gpu[rank])),
      compute_(&compute),
      g_(g),
      rank_(rank) {
  if (gpu_.name != compute.gpu().name) {  // a mixed cluster: this rank's GPU is another model
    own_ = std::make_shared<const ComputeModel>(gpu_);
    compute_ = own_.get();
  }
}

const RankEmitter::KernelInfo& RankEmitter::kernel_info(const OpTemplate& t, std::size_t index, int batch,
                                                        int expert) {
  // A rank runs the same kernels for every micro-batch and step: each is instantiated, costed,
  // named and interned once.
  return kernels_.get_or_make(KernelKey{&t, batch, expert}, [&] {
    const Layer& layer = model_.layers[index];
    const sim::OpSignature sig =
        instantiate(plan_.tp > 1 ? tp_shard(t, layer, plan_) : t, batch, plan_, gpu_.compute_capability);
    KernelInfo info;
    info.duration = compute_->duration(sig);
    const bool matrix = sig.type == sim::OpType::gemm || sig.type == sim::OpType::attention;
    if (matrix && plan_.gemm_efficiency != 1.0 && !compute_->profiled(sig)) {
      info.duration = sim::Time::from_seconds(info.duration.seconds() / plan_.gemm_efficiency);
    }
    info.signature = g_.add_signature(sig);
    info.name = g_.intern(expert < 0 ? layer.name + "." + t.kernel : fmt::format("{}.{}.{}", layer.name, expert, t.kernel));
    // Coalesced kernels run as they would apart only where communication does not change their
    // speed or hold their launch (sim::ExecutionGraph::add_kernel); experts' kernels keep their
    // own nodes for the expert-load report.
    const auto type = static_cast<std::size_t>(sig.type);
    const bool contends = plan_.comm_contention != CommContention::off &&
                          (comm_slowdown_by_type(compute_constants(gpu_))[type] > 0.0 ||
                           comm_waits_by_type(compute_constants(gpu_))[type]);
    info.coalesces = layer.experts == 0 && plan_.comm_compute_slowdown <= 0.0 && !contends;
    info.wgrad = is_wgrad(t);
    info.weight_cast = is_fp8_weight_cast(t.kernel);
    return info;
  });
}

sim::NodeId RankEmitter::kernel_at(const OpTemplate& t, std::size_t index, int batch, int expert, int micro,
                                   sim::Phase phase, sim::Time dispatch, sim::DepList deps) {
  return kernel(kernel_info(t, index, batch, expert), index, micro, phase, dispatch, std::move(deps));
}

sim::NodeId RankEmitter::kernel(const KernelInfo& info, std::size_t index, int micro, sim::Phase phase,
                                sim::Time dispatch, sim::DepList deps) {
  sim::Node n;
  n.kind = sim::OpKind::compute;
  n.rank = rank_;
  n.stream = streams::compute;
  n.name = info.name;
  n.phase = phase;
  n.duration = slowed(info.duration);
  n.dispatch = dispatch;
  n.signature = info.signature;
  n.layer = static_cast<int>(index);
  n.micro_batch = micro;
  n.deps = std::move(deps);
  if (shared_interpreter_ && phase == sim::Phase::forward) n.gil = forward_gil_;
  return info.coalesces ? g_.add_kernel(std::move(n)) : g_.add(std::move(n));
}

sim::NodeId RankEmitter::tp_collective(const TpCollective& c, std::vector<sim::NodeId> deps, sim::Phase phase,
                                      int micro, sim::StreamId stream, std::uint32_t communicator) {
  sim::Node n = make(sim::OpKind::collective, stream,
                     c.label == TpCollective::kNoLabel ? g_.intern(c.name) : c.label, phase);
  n.op = c.op;
  n.bytes = c.bytes;
  n.communicator = communicator == kNoCommunicator ? tp_comm_ : communicator;
  n.micro_batch = micro;
  n.deps = std::move(deps);
  return g_.add(std::move(n));
}

sim::NodeId RankEmitter::expert_tp_collective(const TpCollective& c, std::vector<sim::NodeId> deps, sim::Phase phase,
                                             int micro) {
  return tp_collective(c, std::move(deps), phase, micro, streams::tensor_parallel,
                       moe_.etp_comm != MoeRank::kNoGroup ? moe_.etp_comm : kNoCommunicator);
}

sim::NodeId RankEmitter::cp_exchange(double bytes, std::string_view name, std::size_t layer, std::vector<sim::NodeId> deps,
                                     sim::Phase phase, int micro) {
  return cp_collective(sim::CollectiveOp::all_gather, bytes * plan_.cp / (plan_.cp - 1), name, layer, std::move(deps),
                       phase, micro);
}

sim::NodeId RankEmitter::cp_all_to_all(double bytes, std::string_view name, std::size_t layer,
                                       std::vector<sim::NodeId> deps, sim::Phase phase, int micro) {
  return cp_collective(sim::CollectiveOp::all_to_all, bytes, name, layer, std::move(deps), phase, micro);
}

sim::NodeId RankEmitter::cp_collective(sim::CollectiveOp op, double bytes, std::string_view name, std::size_t layer,
                                       std::vector<sim::NodeId> deps, sim::Phase phase, int micro) {
  std::erase(deps, kNoNode);
  sim::Node n = make(sim::OpKind::collective, streams::context_parallel, g_.intern(name), phase);
  n.op = op;
  n.bytes = bytes;
  n.communicator = cp_comm_;
  n.layer = static_cast<int>(layer);
  n.micro_batch = micro;
  n.deps = std::move(deps);
  return g_.add(std::move(n));
}

sim::NodeId RankEmitter::memory(const std::string& name, double bytes, sim::StreamId stream, std::vector<sim::NodeId> deps,
                                sim::Time dispatch, sim::Phase phase) {
  sim::OpSignature sig;
  sig.kernel = name;
  sig.dtype = sim::DType::fp32;
  sig.shape = {1, static_cast<std::int64_t>(bytes)};
  sig.bytes = bytes;
  sim::Node n = make(sim::OpKind::compute, stream, name, phase);
  n.duration = slowed(compute_->duration(sig));
  n.dispatch = dispatch;
  n.signature = g_.add_signature(sig);
  n.deps = std::move(deps);
  if (shared_interpreter_) n.gil = dispatch;  // the optimizer's Python loop
  return g_.add(std::move(n));
}

sim::NodeId RankEmitter::host(std::string_view name, sim::Time duration, sim::Phase phase, int micro) {
  sim::Node n = make(sim::OpKind::host, sim::kHostStream, name, phase);
  n.duration = duration;
  n.micro_batch = micro;
  if (shared_interpreter_) n.gil = duration;
  return g_.add(std::move(n));
}

sim::NodeId RankEmitter::host_wait(sim::NodeId dep, std::string_view name, sim::Phase phase, int micro) {
  sim::Node wait = make(sim::OpKind::sync, sim::kHostStream, name, phase);
  wait.deps = {dep};
  wait.micro_batch = micro;
  return g_.add(std::move(wait));
}

sim::NodeId RankEmitter::transfer(sim::OpKind kind, sim::StreamId stream, sim::RankId peer, double bytes,
                                  std::uint32_t tag, std::string_view name, sim::Phase phase, int micro,
                                  sim::NodeId dep) {
  sim::Node n = make(kind, stream, name, phase);
  n.peer = peer;
  n.bytes = bytes;
  n.tag = tag;
  n.micro_batch = micro;
  if (dep != kNoNode) n.deps = {dep};
  return g_.add(std::move(n));
}

sim::NodeId RankEmitter::copy_input(int micro) {
  const double in_bytes = model_.input_elems * plan_.micro_batch * 4.0;
  sim::Node h2d = make(sim::OpKind::compute, streams::compute, "copy input to GPU", sim::Phase::data);
  h2d.duration = sim::Time::from_seconds(in_bytes / (cluster_.gpu(g_.rank_gpu[rank_]).pcie.bytes_per_second() * 24.0 / 31.5));
  h2d.dispatch = plan_.dispatch_forward;
  h2d.micro_batch = micro;
  if (shared_interpreter_) h2d.gil = forward_gil_;
  return g_.add(std::move(h2d));
}

void RankEmitter::load_batches(int steps, int samples) {
  if (plan_.input_workers > 0) {
    const int n = plan_.input_workers;
    const double share = plan_.input_cores > 0 && plan_.input_cores < n ? static_cast<double>(n) / plan_.input_cores : 1.0;
    const double seconds = samples * plan_.input_sample_time.seconds() * share;
    constexpr double kMaxBatchSeconds = 1e6;  // 11.6 days: the clock holds +-106 days in all
    if (!(seconds <= kMaxBatchSeconds)) {
      throw sim::ConfigError(fmt::format("plan.input_sample_time: a batch of {} samples would take {:.4g} s on a worker "
                                         "({} per sample{}), expected at most {:.0f} s",
                                         samples, seconds, sim::to_string(plan_.input_sample_time),
                                         share > 1.0 ? fmt::format(", {} workers on {} cores", n, plan_.input_cores) : "",
                                         kMaxBatchSeconds));
    }
    batch_time_ = sim::Time::from_seconds(seconds);
    for (int w = 0; w < n; ++w) g_.stream_names.emplace(streams::dataloader_worker(w), fmt::format("dataloader worker {}", w));
    loads_.assign(static_cast<std::size_t>(steps), kNoNode);
    const std::size_t ahead = static_cast<std::size_t>(n) * static_cast<std::size_t>(plan_.input_prefetch);
    for (std::size_t i = 0; i < loads_.size() && i < ahead; ++i) load_batch(i, kNoNode);
    return;
  }
  if (plan_.input_rate <= 0.0) return;
  for (int s = 0; s < steps; ++s) {
    sim::Node load = make(sim::OpKind::host, streams::dataloader, "load batch", sim::Phase::data);
    load.duration = sim::Time::from_seconds(samples / plan_.input_rate);
    loads_.push_back(g_.add(std::move(load)));
  }
}

void RankEmitter::load_batch(std::size_t i, sim::NodeId sent) {
  const int worker = static_cast<int>(i % static_cast<std::size_t>(plan_.input_workers));
  sim::Node load = make(sim::OpKind::host, streams::dataloader_worker(worker), "load batch", sim::Phase::data);
  load.duration = batch_time_;
  if (sent != kNoNode) load.deps = {sent};
  loads_[i] = g_.add(std::move(load));
}

sim::NodeId RankEmitter::wait_for_batch(int step) {
  if (loads_.empty()) return kNoNode;
  const auto i = static_cast<std::size_t>(step);
  sim::Node wait = make(sim::OpKind::sync, sim::kHostStream, "wait for batch", sim::Phase::data);
  wait.deps = {loads_.at(i)};
  const sim::NodeId taken = g_.add(std::move(wait));
  if (plan_.input_workers > 0) {
    // The slot batch `step` held goes to the batch workers x prefetch later, on the same worker.
    const std::size_t next = i + static_cast<std::size_t>(plan_.input_workers) * static_cast<std::size_t>(plan_.input_prefetch);
    if (next < loads_.size()) load_batch(next, taken);
  }
  return taken;
}

sim::NodeId RankEmitter::dp_collective(sim::CollectiveOp op, double bytes, const std::string& name,
                                      std::uint32_t communicator, std::vector<sim::NodeId> deps, sim::Phase phase,
                                      int micro) {
  sim::Node n = make(sim::OpKind::collective, streams::nccl, name, phase);
  n.op = op;
  n.bytes = bytes;
  n.communicator = communicator;
  n.micro_batch = micro;
  n.deps = std::move(deps);
  return g_.add(std::move(n));
}

void RankEmitter::reduce_bucket(const GradientBucket& bucket, std::size_t index, sim::NodeId ready,
                                std::uint32_t communicator, std::vector<sim::NodeId>& comm, sim::CollectiveOp op) {
  if (bucket.expert && moe_.routing != nullptr && moe_.routing->ep() > 1) {
    // Experts' gradients: over the replicas holding the same experts, if there are others.
    if (!moe_.expert_dp) return;
    communicator = moe_.expert_dp_comm;
  }
  std::vector<sim::NodeId> deps;
  if (ready != kNoNode) deps.push_back(ready);
  sim::StreamId copy_stream = streams::compute;
  if (plan_.framework == Framework::horovod) {
    // The background thread picks the fused tensors up at its next cycle: half a cycle on average.
    sim::Node cycle = make(sim::OpKind::host, streams::horovod, "horovod cycle", sim::Phase::backward);
    cycle.duration = plan_.cycle_time / 2;
    cycle.deps = deps;
    deps = {g_.add(std::move(cycle))};
    copy_stream = streams::nccl;
  }
  const sim::NodeId copy = memory(plan_.framework == Framework::ddp ? "bucket copy in" : "fusion copy in",
                                  2.0 * bucket.bytes, copy_stream, deps, sim::Time{});
  sim::Node ar = make(sim::OpKind::collective, streams::nccl, fmt::format("{} gradients #{}", sim::to_string(op), index),
                      sim::Phase::backward);
  ar.op = op;
  ar.bytes = bucket.bytes;
  ar.communicator = communicator;
  ar.deps = {copy};
  comm.push_back(g_.add(std::move(ar)));
  if (op == sim::CollectiveOp::reduce_scatter) {
    comm.back() = reduce_shard(comm.back(), bucket.bytes, fmt::format("gradient shard #{}", index), sim::Phase::backward);
  }
  if (plan_.framework == Framework::horovod) {
    comm.back() = memory("fusion copy out", 2.0 * bucket.bytes, streams::nccl, {comm.back()}, sim::Time{});
  }
}

sim::NodeId RankEmitter::finish_step(const std::vector<sim::NodeId>& comm, const std::vector<GradientBucket>& buckets,
                                     double params) {
  if (!comm.empty()) {
    sim::Node wait = make(sim::OpKind::sync, streams::compute, "wait for gradients", sim::Phase::backward);
    wait.deps = comm;
    g_.add(std::move(wait));
    if (plan_.framework == Framework::ddp) {
      for (const GradientBucket& b : buckets) memory("bucket copy out", 2.0 * b.bytes, streams::compute, {}, sim::Time{});
    }
  }
  if (plan_.precision == Precision::amp_fp16) {
    // torch.amp.GradScaler.step: unscale_ runs _amp_foreach_non_finite_check_and_unscale_ over
    // the gradients (each read and written once), then _maybe_opt_step reads found_inf with
    // .item(), so the host waits for the GPU before it launches the optimizer step
    // (torch/amp/grad_scaler.py). update()'s one-element kernel is left out.
    const sim::NodeId unscale = memory("unscale gradients", 2.0 * params * gradient_bytes_per_param(plan_), streams::compute,
                                       {}, sim::Time{}, sim::Phase::optimizer);
    host_wait(unscale, "found_inf.item()", sim::Phase::optimizer);
  }
  return memory("optimizer step", params * optimizer_bytes_per_param(plan_.optimizer, plan_.optimizer_impl), streams::compute, {},
                plan_.dispatch_optimizer, sim::Phase::optimizer);
}

sim::NodeId RankEmitter::reduce_shard(sim::NodeId rs, double bytes, const std::string& name, sim::Phase phase,
                                      int micro) {
  if (!plan_.hybrid_shard() || replica_comm_ == 0xffffffffu) return rs;
  return dp_collective(sim::CollectiveOp::all_reduce, bytes / plan_.shard_size(), "all_reduce " + name, replica_comm_,
                       {rs}, phase, micro);
}

sim::NodeId RankEmitter::gather_parameters(const std::vector<GradientBucket>& buckets, sim::NodeId step,
                                           std::uint32_t communicator) {
  std::vector<sim::NodeId> gathers;
  bool skipped = false;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    std::uint32_t c = communicator;
    if (buckets[b].expert && moe_.routing != nullptr && moe_.routing->ep() > 1) {
      // Experts' shards: gathered in the group that reduced them (reduce_bucket), if any.
      skipped = skipped || !moe_.expert_dp;
      if (!moe_.expert_dp) continue;
      c = moe_.expert_dp_comm;
    }
    const double bytes = buckets[b].bytes / gradient_bytes_per_param(plan_) * parameter_bytes(plan_.precision);
    gathers.push_back(dp_collective(sim::CollectiveOp::all_gather, bytes, fmt::format("all_gather parameters #{}", b),
                                    c, {step}, sim::Phase::optimizer));
  }
  if (gathers.empty() && skipped) return step;  // every shard was whole
  sim::Node wait = make(sim::OpKind::sync, streams::compute, "wait for parameters", sim::Phase::optimizer);
  wait.deps = gathers;
  return g_.add(std::move(wait));
}

}  // namespace foresight::strategy
