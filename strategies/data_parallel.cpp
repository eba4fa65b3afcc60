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

/// Emits one data-parallel (and tensor-parallel) rank's steps.
class RankCompiler {
 public:
  RankCompiler(const Model& model, const Plan& plan, const std::vector<GradientBucket>& buckets, RankEmitter& e,
               std::uint32_t dp_comm)
      : model_(model), plan_(plan), buckets_(buckets), e_(e), dp_comm_(dp_comm) {
    for (std::size_t i = 0; i < model.layers.size(); ++i) tp_.push_back(tp_exchanges(model, i, plan));
  }

  /// Emits one training step; returns (its first node, its last node).
  std::pair<NodeId, NodeId> step(int s) {
    NodeId first = e_.wait_for_batch(s);
    const NodeId overhead = e_.host("step overhead", plan_.step_overhead, sim::Phase::other);
    if (first == kNoNode) first = overhead;
    std::vector<NodeId> comm;
    // ZeRO-2 and 3 keep only their gradient shard, so they reduce after every micro-batch.
    for (int a = 0; a < plan_.grad_accum; ++a) {
      micro_step(a, plan_.dp > 1 && (a + 1 == plan_.grad_accum || plan_.zero >= 2), comm);
    }
    const double params = tp_rank_params(model_, plan_.tp);
    // ZeRO: the optimizer updates this rank's 1/dp of the parameters.
    NodeId last = e_.finish_step(comm, buckets_, plan_.zero >= 1 ? params / plan_.dp : params);
    if ((plan_.zero == 1 || plan_.zero == 2) && plan_.dp > 1) {
      // The updated shards are all-gathered after the step (Megatron's distributed optimizer
      // without overlap_param_gather; DeepSpeed ZeRO-1/2), one bucket at a time.
      std::vector<NodeId> gathers;
      for (std::size_t b = 0; b < buckets_.size(); ++b) {
        const double bytes = buckets_[b].bytes / gradient_bytes_per_param(plan_) * parameter_bytes(plan_.precision);
        gathers.push_back(e_.dp_collective(sim::CollectiveOp::all_gather, bytes, fmt::format("all_gather parameters #{}", b),
                                           dp_comm_, {last}, sim::Phase::optimizer));
      }
      sim::Node wait = e_.make(sim::OpKind::sync, streams::compute, "wait for parameters", sim::Phase::optimizer);
      wait.deps = gathers;
      last = e_.graph().add(wait);
    }
    if (plan_.sync_each_step) {
      sim::Node sync = e_.make(sim::OpKind::sync, sim::kHostStream, "loss.item()", sim::Phase::other);
      sync.deps = {last};
      last = e_.graph().add(sync);
    }
    return {first, last};
  }

 private:
  /// Emits `list` one after another, the first after `after` (those that exist); returns the
  /// last, or kNoNode when `list` is empty.
  NodeId collectives(const std::vector<TpCollective>& list, std::vector<NodeId> after, sim::Phase phase, int micro) {
    std::erase(after, kNoNode);
    NodeId prev = kNoNode;
    for (const TpCollective& c : list) {
      prev = e_.tp_collective(c, prev == kNoNode ? after : std::vector<NodeId>{prev}, phase, micro);
    }
    return prev;
  }

  void micro_step(int micro, bool reduce, std::vector<NodeId>& comm) {
    e_.copy_input(micro);
    NodeId last = kNoNode;         // the last kernel on the compute stream
    std::vector<NodeId> waits;     // collectives the next kernel must wait for
    auto run = [&](const OpTemplate& t, std::size_t i, sim::Phase phase, sim::Time dispatch) {
      std::erase(waits, kNoNode);
      last = e_.kernel(t, i, micro, phase, dispatch, std::move(waits));
      waits.clear();
      return last;
    };
    const bool zero3 = plan_.zero == 3 && plan_.dp > 1;
    auto gather = [&](std::size_t i, sim::Phase phase) {
      // ZeRO-3 gathers a layer's parameters before each use; the NCCL stream runs the gathers in
      // order, ahead of the compute stream (DeepSpeed's prefetch).
      const double bytes = tp_layer_params(model_.layers[i], plan_.tp) * parameter_bytes(plan_.precision);
      return e_.dp_collective(sim::CollectiveOp::all_gather, bytes, model_.layers[i].name + " parameters", dp_comm_, {},
                              phase, micro);
    };
    auto forward = [&](std::size_t i) {
      if (zero3 && model_.layers[i].params > 0) waits.push_back(gather(i, sim::Phase::forward));
      if (!tp_[i].forward_before.empty()) {
        std::vector<NodeId> after = waits;
        after.push_back(last);
        waits = {collectives(tp_[i].forward_before, std::move(after), sim::Phase::forward, micro)};
      }
      for (const OpTemplate& t : model_.layers[i].fwd) run(t, i, sim::Phase::forward, plan_.dispatch_forward);
      if (!tp_[i].forward_after.empty()) waits.push_back(collectives(tp_[i].forward_after, {last}, sim::Phase::forward, micro));
    };
    for (std::size_t i = 0; i < model_.layers.size(); ++i) forward(i);
    std::size_t next_bucket = 0;
    std::vector<NodeId> pending;  // input-gradient collectives the previous layer's backward waits for
    for (std::size_t i = model_.layers.size(); i-- > 0;) {
      const Layer& layer = model_.layers[i];
      // Recompute before the backward: a whole block's forward (full) or the attention core's
      // (selective), with its forward collectives.
      const bool block_end = layer.block >= 0 && (i + 1 == model_.layers.size() || model_.layers[i + 1].block != layer.block);
      if ((plan_.recompute == Recompute::full && block_end) ||
          (plan_.recompute == Recompute::selective && layer.saved_score_elems > 0.0)) {
        std::size_t begin = i;
        while (plan_.recompute == Recompute::full && begin > 0 && model_.layers[begin - 1].block == layer.block) --begin;
        waits.insert(waits.end(), pending.begin(), pending.end());
        for (std::size_t k = begin; k <= i; ++k) forward(k);
        pending = std::move(waits);
        waits.clear();
      }
      // The backward waits for the input-gradient collectives of the layer after it, for its own
      // gathers (which follow those), and under ZeRO-3 for its parameters.
      if (!tp_[i].backward_before.empty()) {
        std::vector<NodeId> after = pending;
        after.push_back(last);
        pending = {collectives(tp_[i].backward_before, std::move(after), sim::Phase::backward, micro)};
      }
      if (zero3 && layer.params > 0) pending.push_back(gather(i, sim::Phase::backward));
      waits = std::move(pending);
      pending.clear();
      NodeId dgrad = kNoNode;
      for (const OpTemplate& t : layer.bwd) {
        const bool w = is_wgrad(t);
        run(t, i, w ? sim::Phase::wgrad : sim::Phase::backward, plan_.dispatch_backward);
        if (!w && dgrad == kNoNode) dgrad = last;
      }
      if (!tp_[i].backward_after_dgrad.empty() && dgrad != kNoNode) {
        pending.push_back(collectives(tp_[i].backward_after_dgrad, {dgrad}, sim::Phase::backward, micro));
      }
      if (!reduce) continue;
      if (zero3) {
        // Each layer's gradients are reduce-scattered once its backward is done.
        if (layer.params > 0) {
          const double bytes = tp_layer_params(layer, plan_.tp) * gradient_bytes_per_param(plan_);
          comm.push_back(e_.dp_collective(sim::CollectiveOp::reduce_scatter, bytes, layer.name + " gradients", dp_comm_,
                                          {last}, sim::Phase::backward, micro));
        }
        continue;
      }
      // Every bucket whose earliest layer is this one is complete: its gradients were produced last.
      while (next_bucket < buckets_.size() && buckets_[next_bucket].layers.front() == i) {
        e_.reduce_bucket(buckets_[next_bucket], next_bucket, last, dp_comm_, comm,
                         plan_.zero >= 1 ? sim::CollectiveOp::reduce_scatter : sim::CollectiveOp::all_reduce);
        ++next_bucket;
      }
    }
  }

  const Model& model_;
  const Plan& plan_;
  const std::vector<GradientBucket>& buckets_;
  RankEmitter& e_;
  std::uint32_t dp_comm_;
  std::vector<TpExchanges> tp_;
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
      t += std::max(compute.duration(instantiate(tp_shard(op, layer, plan), plan.micro_batch, plan, cc)).seconds(),
                    plan.dispatch_backward.seconds());
    }
    if (layer.params == 0) continue;
    const double bytes = tp_layer_params(layer, plan.tp) * gradient_bytes_per_param(plan);
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
    buckets.back().bytes += tp_layer_params(model.layers[i], plan.tp) * gradient_bytes_per_param(plan);
    buckets.back().layers.push_back(i);
  }
  std::reverse(buckets.begin(), buckets.end());
  return buckets;
}

CompiledGraph compile_data_parallel(const Model& model, const Plan& plan, const topo::Cluster& cluster,
                                    const ComputeModel& compute) {
  const int tp = std::max(1, plan.tp);
  const int world = plan.dp * tp;
  if (static_cast<std::size_t>(world) > cluster.gpu_count()) {
    throw sim::ConfigError(fmt::format("plan: dp x tp = {} x {} = {} ranks need {} GPUs, but the cluster has {}", plan.dp,
                                       tp, world, world, cluster.gpu_count()));
  }
  if (model.layers.empty()) throw sim::ModelError(fmt::format("model {} has no layers", model.name));
  check_tensor_parallel(model, plan);
  CompiledGraph out;
  sim::ExecutionGraph& g = out.graph;
  g.stream_names = training_stream_names();
  // Rank d x tp + j is TP rank j of replica d on GPU d x tp + j: TP groups are consecutive GPUs,
  // inside a node when tp divides the node's GPUs (Megatron's tp-dp order).
  std::vector<sim::RankId> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(g.add_rank(static_cast<sim::GpuId>(r), static_cast<std::uint32_t>(r)));
  std::vector<std::uint32_t> dp_comm(static_cast<std::size_t>(world));
  std::vector<std::uint32_t> tp_comm(static_cast<std::size_t>(world));
  for (int j = 0; j < tp; ++j) {
    std::vector<sim::RankId> group;
    for (int d = 0; d < plan.dp; ++d) group.push_back(ranks[static_cast<std::size_t>(d * tp + j)]);
    const auto c = g.add_communicator(group);
    for (const sim::RankId r : group) dp_comm[r] = c;
  }
  if (tp > 1) {
    for (int d = 0; d < plan.dp; ++d) {
      std::vector<sim::RankId> group;
      for (int j = 0; j < tp; ++j) group.push_back(ranks[static_cast<std::size_t>(d * tp + j)]);
      const auto c = g.add_communicator(group);
      for (const sim::RankId r : group) tp_comm[r] = c;
    }
  }
  out.buckets = plan.framework == Framework::ddp
                    ? ddp_buckets(model, plan)
                    : horovod_groups(model, plan, compute, cluster.gpu(0).compute_capability);
  out.step_begin.assign(static_cast<std::size_t>(plan.steps), std::vector<sim::NodeId>(ranks.size()));
  out.step_end = out.step_begin;
  for (const sim::RankId r : ranks) {
    RankEmitter e(model, plan, cluster, compute, g, r);
    e.set_tp_communicator(tp_comm[r]);
    e.load_batches(plan.steps, plan.micro_batch * plan.grad_accum);
    RankCompiler rc(model, plan, out.buckets, e, dp_comm[r]);
    for (int s = 0; s < plan.steps; ++s) {
      const auto [first, last] = rc.step(s);
      out.step_begin[static_cast<std::size_t>(s)][r] = first;
      out.step_end[static_cast<std::size_t>(s)][r] = last;
    }
  }
  return out;
}

}  // namespace foresight::strategy
