#include "strategies/data_parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/error.hpp"

namespace foresight::strategy {
namespace {

using sim::NodeId;

bool is_wgrad(const OpTemplate& t) {
  return t.type == sim::OpType::conv_wgrad || t.kernel.find("wgrad") != std::string::npos;
}

/// Emits one data-parallel rank's steps.
class RankCompiler {
 public:
  RankCompiler(const Model& model, const Plan& plan, const std::vector<GradientBucket>& buckets, RankEmitter& e)
      : model_(model), plan_(plan), buckets_(buckets), e_(e) {}

  /// Emits one training step; returns (its first node, its last node).
  std::pair<NodeId, NodeId> step(int s) {
    NodeId first = e_.wait_for_batch(s);
    const NodeId overhead = e_.host("step overhead", plan_.step_overhead, sim::Phase::other);
    if (first == kNoNode) first = overhead;
    std::vector<NodeId> comm;
    for (int a = 0; a < plan_.grad_accum; ++a) micro_step(a, a + 1 == plan_.grad_accum && plan_.dp > 1, comm);
    NodeId last = e_.finish_step(comm, buckets_, static_cast<double>(model_.params()));
    if (plan_.sync_each_step) {
      sim::Node sync = e_.make(sim::OpKind::sync, sim::kHostStream, "loss.item()", sim::Phase::other);
      sync.deps = {last};
      last = e_.graph().add(sync);
    }
    return {first, last};
  }

 private:
  void micro_step(int micro, bool reduce, std::vector<NodeId>& comm) {
    e_.copy_input(micro);
    for (std::size_t i = 0; i < model_.layers.size(); ++i) {
      for (const OpTemplate& t : model_.layers[i].fwd) e_.kernel(t, i, micro, sim::Phase::forward, plan_.dispatch_forward);
    }
    std::size_t next_bucket = 0;
    for (std::size_t i = model_.layers.size(); i-- > 0;) {
      NodeId last = kNoNode;
      for (const OpTemplate& t : model_.layers[i].bwd) {
        last = e_.kernel(t, i, micro, is_wgrad(t) ? sim::Phase::wgrad : sim::Phase::backward, plan_.dispatch_backward);
      }
      if (!reduce) continue;
      // Every bucket whose earliest layer is this one is complete: its gradients were produced last.
      while (next_bucket < buckets_.size() && buckets_[next_bucket].layers.front() == i) {
        e_.reduce_bucket(buckets_[next_bucket], next_bucket, last, 0, comm);
        ++next_bucket;
      }
    }
  }

  const Model& model_;
  const Plan& plan_;
  const std::vector<GradientBucket>& buckets_;
  RankEmitter& e_;
};

}  // namespace

std::vector<GradientBucket> horovod_groups(const Model& model, const Plan& plan, const ComputeModel& compute, int cc,
                                           std::size_t first, std::size_t last) {
  if (last == 0) last = model.layers.size();
  std::vector<GradientBucket> groups;
  const double cycle = plan.cycle_time.seconds();
  double t = 0.0;
  long long window = -1;
  for (std::size_t i = last; i-- > first;) {
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

std::vector<GradientBucket> ddp_buckets(const Model& model, const Plan& plan, std::size_t first, std::size_t last) {
  if (last == 0) last = model.layers.size();
  std::vector<GradientBucket> buckets;
  double limit = plan.first_bucket.as_double();
  for (std::size_t i = first; i < last; ++i) {
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
  g.stream_names = training_stream_names();
  std::vector<sim::RankId> ranks;
  for (int r = 0; r < plan.dp; ++r) ranks.push_back(g.add_rank(static_cast<sim::GpuId>(r), static_cast<std::uint32_t>(r)));
  g.add_communicator(ranks);
  out.buckets = plan.framework == Framework::ddp
                    ? ddp_buckets(model, plan)
                    : horovod_groups(model, plan, compute, cluster.gpu(0).compute_capability);
  out.step_begin.assign(static_cast<std::size_t>(plan.steps), std::vector<sim::NodeId>(ranks.size()));
  out.step_end = out.step_begin;
  for (const sim::RankId r : ranks) {
    RankEmitter e(model, plan, cluster, compute, g, r);
    e.load_batches(plan.steps, plan.micro_batch * plan.grad_accum);
    RankCompiler rc(model, plan, out.buckets, e);
    for (int s = 0; s < plan.steps; ++s) {
      const auto [first, last] = rc.step(s);
      out.step_begin[static_cast<std::size_t>(s)][r] = first;
      out.step_end[static_cast<std::size_t>(s)][r] = last;
    }
  }
  return out;
}

}  // namespace foresight::strategy
