#include "strategies/data_parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/error.hpp"

namespace foresight::strategy {
namespace {

using sim::Node;
using sim::NodeId;
using sim::OpKind;

constexpr NodeId kNoNode = 0xffffffffu;

sim::DType math_dtype(MathKind m, const Plan& plan, int cc) {
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

/// Bytes an optimizer step reads and writes per parameter: SGD with momentum reads the
/// parameter, its gradient and momentum and writes parameter and momentum (5 x 4 bytes); Adam
/// also keeps the second moment (7 x 4 bytes). fp32 states (torch.optim, foreach kernels).
double optimizer_bytes_per_param(Optimizer o) { return o == Optimizer::sgd ? 20.0 : 28.0; }

/// Emits one rank's nodes.
class RankCompiler {
 public:
  RankCompiler(const Model& model, const Plan& plan, const topo::Cluster& cluster, const ComputeModel& compute,
               const std::vector<GradientBucket>& buckets, sim::ExecutionGraph& g, sim::RankId rank)
      : model_(model), plan_(plan), cluster_(cluster), compute_(compute), buckets_(buckets), g_(g), rank_(rank) {}

  /// The input pipeline's batches: DataLoader workers start prefetching when the iterator is
  /// created and then run ahead of training, one batch after another at the plan's rate. (PyTorch
  /// bounds the run-ahead by num_workers x prefetch_factor batches; only the rate matters here.)
  void load_batches(int steps) {
    if (plan_.input_rate <= 0.0) return;
    const int per_step = plan_.micro_batch * plan_.grad_accum;
    for (int s = 0; s < steps; ++s) {
      Node load = make(OpKind::host, streams::dataloader, "load batch", sim::Phase::data);
      load.duration = sim::Time::from_seconds(per_step / plan_.input_rate);
      loads_.push_back(g_.add(load));
    }
  }

  /// Emits one training step; returns (its first node, its last node).
  std::pair<NodeId, NodeId> step(int s) {
    NodeId first = kNoNode;
    auto note_first = [&](NodeId n) {
      if (first == kNoNode) first = n;
      return n;
    };
    if (!loads_.empty()) {
      Node wait = make(OpKind::sync, sim::kHostStream, "wait for batch", sim::Phase::data);
      wait.deps = {loads_.at(static_cast<std::size_t>(s))};
      note_first(g_.add(wait));
    }
    Node overhead = make(OpKind::host, sim::kHostStream, "step overhead", sim::Phase::other);
    overhead.duration = plan_.step_overhead;
    note_first(g_.add(overhead));
    std::vector<NodeId> comm;
    for (int a = 0; a < plan_.grad_accum; ++a) {
      micro_step(a, a + 1 == plan_.grad_accum && plan_.dp > 1, comm);
    }
    NodeId last = kNoNode;
    if (!comm.empty()) {
      Node wait = make(OpKind::sync, streams::compute, "wait for gradients", sim::Phase::backward);
      wait.deps = comm;
      g_.add(wait);
      if (plan_.framework == Framework::ddp) {
        for (std::size_t b = 0; b < buckets_.size(); ++b) {
          emit_memory("bucket copy out", 2.0 * buckets_[b].bytes, streams::compute, {}, sim::Time{});
        }
      }
    }
    double params = static_cast<double>(model_.params());
    last = emit_memory("optimizer step", params * optimizer_bytes_per_param(plan_.optimizer), streams::compute, {},
                       plan_.dispatch_optimizer, sim::Phase::optimizer);
    if (plan_.sync_each_step) {
      Node sync = make(OpKind::sync, sim::kHostStream, "loss.item()", sim::Phase::other);
      sync.deps = {last};
      last = g_.add(sync);
    }
    return {first, last};
  }

 private:
  Node make(OpKind kind, sim::StreamId stream, const std::string& name, sim::Phase phase) {
    Node n;
    n.kind = kind;
    n.rank = rank_;
    n.stream = stream;
    n.name = g_.intern(name);
    n.phase = phase;
    return n;
  }

  NodeId emit_kernel(const OpTemplate& t, const Layer& layer, std::size_t index, int micro, sim::Phase phase,
                     sim::Time dispatch) {
    const sim::OpSignature sig = instantiate(t, plan_.micro_batch, plan_, cluster_.gpu(0).compute_capability);
    Node n = make(OpKind::compute, streams::compute, layer.name + "." + t.kernel, phase);
    n.duration = compute_.duration(sig);
    n.dispatch = dispatch;
    n.signature = g_.add_signature(sig);
    n.layer = static_cast<int>(index);
    n.micro_batch = micro;
    return g_.add(n);
  }

  NodeId emit_memory(const std::string& name, double bytes, sim::StreamId stream, std::vector<NodeId> deps,
                     sim::Time dispatch, sim::Phase phase = sim::Phase::backward) {
    sim::OpSignature sig;
    sig.kernel = name;
    sig.dtype = sim::DType::fp32;
    sig.shape = {1, static_cast<std::int64_t>(bytes)};
    sig.bytes = bytes;
    Node n = make(OpKind::compute, stream, name, phase);
    n.duration = compute_.duration(sig);
    n.dispatch = dispatch;
    n.signature = g_.add_signature(sig);
    n.deps = std::move(deps);
    return g_.add(n);
  }

  void micro_step(int micro, bool reduce, std::vector<NodeId>& comm) {
    // The batch's copy from pinned host memory to the GPU, over PCIe.
    const double in_bytes = model_.input_elems * plan_.micro_batch * 4.0;
    Node h2d = make(OpKind::compute, streams::compute, "copy input to GPU", sim::Phase::data);
    h2d.duration = sim::Time::from_seconds(in_bytes / (cluster_.gpu(0).pcie.bytes_per_second() * 24.0 / 31.5));
    h2d.dispatch = plan_.dispatch_forward;
    h2d.micro_batch = micro;
    g_.add(h2d);
    for (std::size_t i = 0; i < model_.layers.size(); ++i) {
      for (const OpTemplate& t : model_.layers[i].fwd) {
        emit_kernel(t, model_.layers[i], i, micro, sim::Phase::forward, plan_.dispatch_forward);
      }
    }
    std::size_t next_bucket = 0;
    for (std::size_t i = model_.layers.size(); i-- > 0;) {
      const Layer& layer = model_.layers[i];
      NodeId last = kNoNode;
      for (const OpTemplate& t : layer.bwd) {
        const bool wgrad = t.type == sim::OpType::conv_wgrad || t.kernel.find("wgrad") != std::string::npos;
        last = emit_kernel(t, layer, i, micro, wgrad ? sim::Phase::wgrad : sim::Phase::backward, plan_.dispatch_backward);
      }
      if (!reduce) continue;
      // Every bucket whose earliest layer is this one is complete: its gradients were produced last.
      while (next_bucket < buckets_.size() && buckets_[next_bucket].layers.front() == i) {
        reduce_bucket(buckets_[next_bucket], next_bucket, last, comm);
        ++next_bucket;
      }
    }
  }

  void reduce_bucket(const GradientBucket& bucket, std::size_t index, NodeId ready, std::vector<NodeId>& comm) {
    std::vector<NodeId> deps;
    if (ready != kNoNode) deps.push_back(ready);
    sim::StreamId copy_stream = streams::compute;
    if (plan_.framework == Framework::horovod) {
      // The background thread picks the fused tensors up at its next cycle: half a cycle on average.
      Node cycle = make(OpKind::host, streams::horovod, "horovod cycle", sim::Phase::backward);
      cycle.duration = plan_.cycle_time / 2;
      cycle.deps = deps;
      deps = {g_.add(cycle)};
      copy_stream = streams::nccl;
    }
    const NodeId copy = emit_memory(plan_.framework == Framework::ddp ? "bucket copy in" : "fusion copy in",
                                    2.0 * bucket.bytes, copy_stream, deps, sim::Time{});
    Node ar = make(OpKind::collective, streams::nccl, fmt::format("all_reduce gradients #{}", index), sim::Phase::backward);
    ar.op = sim::CollectiveOp::all_reduce;
    ar.bytes = bucket.bytes;
    ar.communicator = 0;
    ar.deps = {copy};
    comm.push_back(g_.add(ar));
    if (plan_.framework == Framework::horovod) {
      comm.back() = emit_memory("fusion copy out", 2.0 * bucket.bytes, streams::nccl, {comm.back()}, sim::Time{});
    }
  }

  const Model& model_;
  const Plan& plan_;
  const topo::Cluster& cluster_;
  const ComputeModel& compute_;
  const std::vector<GradientBucket>& buckets_;
  sim::ExecutionGraph& g_;
  sim::RankId rank_;
  std::vector<NodeId> loads_;
};

/// Horovod fusion groups: gradients whose estimated backward completion falls in one cycle of
/// the background thread are fused (up to the fusion threshold).
std::vector<GradientBucket> horovod_groups(const Model& model, const Plan& plan, const ComputeModel& compute,
                                           int cc) {
  std::vector<GradientBucket> groups;
  const double cycle = plan.cycle_time.seconds();
  double t = 0.0;
  long long window = -1;
  for (std::size_t i = model.layers.size(); i-- > 0;) {
    const Layer& layer = model.layers[i];
    for (const OpTemplate& op : layer.bwd) {
      t += std::max(compute.duration(instantiate(op, plan.micro_batch, plan, cc)).seconds(),
                    plan.dispatch_backward.seconds());
    }
    if (layer.params == 0) continue;
    const double bytes = static_cast<double>(layer.params) * gradient_bytes(plan.precision);
    const auto w = cycle > 0.0 ? static_cast<long long>(t / cycle) : 0;
    if (groups.empty() || w != window || groups.back().bytes + bytes > plan.fusion_threshold.as_double()) {
      groups.push_back(GradientBucket{});
      window = w;
    }
    groups.back().bytes += bytes;
    groups.back().layers.insert(groups.back().layers.begin(), i);
  }
  return groups;
}

}  // namespace

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
  sig.bytes = t.act_elems * scale * elem + t.param_elems * param_elem;
  return sig;
}

std::vector<GradientBucket> ddp_buckets(const Model& model, const Plan& plan) {
  std::vector<GradientBucket> buckets;
  double limit = plan.first_bucket.as_double();
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    if (model.layers[i].params == 0) continue;
    if (buckets.empty() || buckets.back().bytes >= limit) {
      if (!buckets.empty()) limit = plan.bucket_cap.as_double();
      buckets.push_back(GradientBucket{});
    }
    buckets.back().bytes += static_cast<double>(model.layers[i].params) * gradient_bytes(plan.precision);
    buckets.back().layers.push_back(i);
  }
  std::reverse(buckets.begin(), buckets.end());
  return buckets;
}

CompiledGraph compile_data_parallel(const Model& model, const Plan& plan, const topo::Cluster& cluster,
                                    const ComputeModel& compute) {
  if (static_cast<std::size_t>(plan.dp) > cluster.gpu_count()) {
    throw sim::ConfigError(fmt::format("plan.dp: {} ranks need {} GPUs, but the cluster has {}", plan.dp, plan.dp,
                                       cluster.gpu_count()));
  }
  if (model.layers.empty()) throw sim::ModelError(fmt::format("model {} has no layers", model.name));
  CompiledGraph out;
  sim::ExecutionGraph& g = out.graph;
  g.stream_names = {{sim::kHostStream, "host (python)"},
                    {streams::compute, "compute"},
                    {streams::nccl, "nccl"},
                    {streams::dataloader, "dataloader"},
                    {streams::horovod, "horovod"}};
  std::vector<sim::RankId> ranks;
  for (int r = 0; r < plan.dp; ++r) ranks.push_back(g.add_rank(static_cast<sim::GpuId>(r), static_cast<std::uint32_t>(r)));
  g.add_communicator(ranks);
  out.buckets = plan.framework == Framework::ddp
                    ? ddp_buckets(model, plan)
                    : horovod_groups(model, plan, compute, cluster.gpu(0).compute_capability);
  out.step_begin.assign(static_cast<std::size_t>(plan.steps), std::vector<sim::NodeId>(ranks.size()));
  out.step_end = out.step_begin;
  for (const sim::RankId r : ranks) {
    RankCompiler rc(model, plan, cluster, compute, out.buckets, g, r);
    rc.load_batches(plan.steps);
    for (int s = 0; s < plan.steps; ++s) {
      const auto [first, last] = rc.step(s);
      out.step_begin[static_cast<std::size_t>(s)][r] = first;
      out.step_end[static_cast<std::size_t>(s)][r] = last;
    }
  }
  return out;
}

}  // namespace foresight::strategy
