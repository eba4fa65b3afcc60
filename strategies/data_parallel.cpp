#include "strategies/data_parallel.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "common/error.hpp"
#include "strategies/hybrid_layout.hpp"
#include "strategies/layer_pass.hpp"

namespace foresight::strategy {
namespace {

using sim::NodeId;

/// Emits one data-parallel (and tensor-parallel) rank's steps.
class RankCompiler {
 public:
  RankCompiler(const Model& model, const Plan& plan, const std::vector<GradientBucket>& buckets,
               const std::vector<TpExchanges>& tp, const std::vector<OpRecompute>& op_recompute, RankEmitter& e,
               std::uint32_t dp_comm)
      : model_(model), plan_(plan), buckets_(buckets), e_(e), dp_comm_(dp_comm), tp_(tp), op_recompute_(op_recompute) {}

  /// Emits one training step; returns (its first node, its last node).
  std::pair<NodeId, NodeId> step(int s) {
    e_.set_step(s);
    NodeId first = e_.wait_for_batch(s);
    const NodeId overhead = e_.host("step overhead", plan_.step_overhead, sim::Phase::other);
    if (first == kNoNode) first = overhead;
    std::vector<NodeId> comm;
    // ZeRO-2 and 3 keep only their gradient shard, so they reduce after every micro-batch.
    for (int a = 0; a < plan_.grad_accum; ++a) {
      micro_step(a, plan_.replicas() > 1 && (a + 1 == plan_.grad_accum || plan_.zero >= 2), comm);
    }
    const double params = tp_rank_params(model_, plan_.tp, 0, 0, plan_.ep, plan_.etp());
    // ZeRO: the optimizer updates this rank's shard of the parameters (with experts, the dense
    // ones' over every replica and the experts' over their expert-data-parallel group).
    const double owned = plan_.zero_owned_params(params, tp_rank_expert_params(model_, plan_.tp, 0, 0, plan_.ep, plan_.etp()));
    NodeId last = e_.finish_step(comm, buckets_, plan_.zero >= 1 ? owned : params);
    if ((plan_.zero == 1 || plan_.zero == 2) && plan_.replicas() > 1) {
      last = e_.gather_parameters(buckets_, last, dp_comm_);
    }
    if (plan_.sync_each_step) {
      sim::Node sync = e_.make(sim::OpKind::sync, sim::kHostStream, "loss.item()", sim::Phase::other);
      sync.deps = {last};
      last = e_.graph().add(std::move(sync));
    }
    return {first, last};
  }

 private:
  void micro_step(int micro, bool reduce, std::vector<NodeId>& comm) {
    e_.copy_input(micro);
    LayerPass pass(model_, plan_, tp_, op_recompute_, e_, dp_comm_, true, micro);
    const std::size_t n = model_.layers.size();
    const NodeId out = pass.forward(0, n, kNoNode);
    std::size_t next_bucket = 0;
    const bool buckets = reduce && !(plan_.zero == 3 && plan_.dp * plan_.cp > 1);
    pass.backward(0, n, out, reduce, comm, [&](std::size_t i, NodeId last) {
      if (!buckets) return;
      // Every bucket whose earliest layer is this one is complete: its gradients were produced last.
      while (next_bucket < buckets_.size() && buckets_[next_bucket].ready_layer() == i) {
        e_.reduce_bucket(buckets_[next_bucket], next_bucket, last, dp_comm_, comm,
                         plan_.zero >= 1 ? sim::CollectiveOp::reduce_scatter : sim::CollectiveOp::all_reduce);
        ++next_bucket;
      }
    });
  }

  const Model& model_;
  const Plan& plan_;
  const std::vector<GradientBucket>& buckets_;
  RankEmitter& e_;
  std::uint32_t dp_comm_;
  const std::vector<TpExchanges>& tp_;
  const std::vector<OpRecompute>& op_recompute_;
};

}  // namespace

std::vector<GradientBucket> horovod_groups(const Model& model, const Plan& plan, const ComputeModel& compute, int cc,
                                           std::size_t first, std::size_t last) {
  if (last == 0) last = model.layers.size();
  std::vector<GradientBucket> groups;
  if (plan.gradient_groups > 0) {
    // Explicit groups (Horovod's num_groups, MXNet's MXNET_HOROVOD_NUM_GROUPS): the layers with
    // parameters split in model order into that many runs of nearly equal length (the first ones
    // one longer, as numpy's array_split), each reduced once its every gradient is ready; a group
    // past the fusion threshold goes in several fused pieces.
    std::vector<std::size_t> with_params;
    for (std::size_t i = first; i < last; ++i) {
      if (model.layers[i].params > 0) with_params.push_back(i);
    }
    const std::size_t n = with_params.size();
    const std::size_t count = std::min<std::size_t>(n, static_cast<std::size_t>(plan.gradient_groups));
    for (std::size_t g = count; g-- > 0;) {  // last group first: backward order
      // Group g holds with_params[begin, end); the first n % count groups are one longer.
      const std::size_t begin = g * (n / count) + std::min(g, n % count);
      const std::size_t end = begin + n / count + (g < n % count ? 1 : 0);
      const std::size_t first_piece = groups.size();
      groups.push_back(GradientBucket{});
      for (std::size_t k = end; k-- > begin;) {
        const double bytes = tp_layer_params(model.layers[with_params[k]], plan.tp, plan.ep, plan.etp()) *
                             gradient_bytes_per_param(plan);
        if (!groups.back().layers.empty() && groups.back().bytes + bytes > plan.fusion_threshold.as_double()) {
          groups.push_back(GradientBucket{});
        }
        groups.back().bytes += bytes;
        groups.back().layers.insert(groups.back().layers.begin(), with_params[k]);
      }
      // Every piece of the group goes once the group's earliest layer is ready.
      for (std::size_t b = first_piece; b < groups.size(); ++b) groups[b].ready_after = with_params[begin];
    }
    return groups;
  }
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
    const double bytes = tp_layer_params(layer, plan.tp, plan.ep, plan.etp()) * gradient_bytes_per_param(plan);
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
    // Routed experts' gradients go to buckets of their own: they are reduced over another group.
    const bool expert = model.layers[i].experts > 0;
    if (buckets.empty() || buckets.back().bytes >= limit || buckets.back().expert != expert) {
      if (!buckets.empty()) limit = plan.bucket_cap.as_double();
      buckets.push_back(GradientBucket{});
      buckets.back().expert = expert;
    }
    buckets.back().bytes += tp_layer_params(model.layers[i], plan.tp, plan.ep, plan.etp()) * gradient_bytes_per_param(plan);
    buckets.back().layers.push_back(i);
  }
  std::reverse(buckets.begin(), buckets.end());
  return buckets;
}

void begin_compile(CompiledGraph& out, const CompileOptions& o) {
  if (o.coalesce) out.graph.start_coalescing();
}

bool end_compile(CompiledGraph& out) {
  sim::ExecutionGraph& g = out.graph;
  if (!g.coalescing()) return true;
  for (auto* ids : {&out.step_begin, &out.step_end}) {
    const bool last = ids == &out.step_end;
    for (auto& step : *ids) {
      for (sim::NodeId& id : step) {
        if (id != kNoNode) id = g.node_of(id, last);
      }
    }
  }
  g.finish_coalescing();
  out.coalesced = g.coalescing_exact();
  return out.coalesced;
}

CompiledGraph compile_data_parallel(const Model& model, const Plan& plan, const topo::Cluster& cluster,
                                    const ComputeModel& compute, const CompileOptions& options) {
  const int tp = std::max(1, plan.tp);
  const int world = plan.replicas() * tp;
  if (static_cast<std::size_t>(world) > cluster.gpu_count()) {
    throw sim::ConfigError(fmt::format("plan: dp x tp = {} x {} = {} ranks need {} GPUs, but the cluster has {}", plan.replicas(),
                                       tp, world, world, cluster.gpu_count()));
  }
  if (model.layers.empty()) throw sim::ModelError(fmt::format("model {} has no layers", model.name));
  check_tensor_parallel(model, plan);
  std::vector<TpExchanges> exchanges = tp_exchanges(model, plan);
  const std::vector<OpRecompute> op_recompute = op_recompute_layers(model, plan);
  CompiledGraph out;
  begin_compile(out, options);
  sim::ExecutionGraph& g = out.graph;
  intern_labels(exchanges, g);
  g.stream_names = training_stream_names();
  // TP rank j of replica d runs on GPU d x tp + j: TP groups are consecutive GPUs, inside a node
  // when tp divides the node's GPUs (Megatron's tp-dp order). Identical ranks fold.
  auto routing = moe_routing(model, plan);
  const HybridLayout layout(plan, 1, cluster, routing && routing->ranks_alike(), false);
  layout.add_ranks(g);
  out.folding = layout.describe();
  out.ep_folded = layout.folds_ep();
  out.bounds_only = layout.bounds_only();
  out.rank_coords = layout.coords<CompiledGraph::Coords>();
  std::vector<sim::RankId> ranks;
  for (sim::RankId r = 0; r < g.ranks(); ++r) ranks.push_back(r);
  const auto comms = layout.add_data_parallel_communicators(g, plan);
  out.buckets = plan.framework == Framework::ddp
                    ? ddp_buckets(model, plan)
                    : horovod_groups(model, plan, compute, cluster.gpu(0).compute_capability);
  out.step_begin.assign(static_cast<std::size_t>(plan.steps), std::vector<sim::NodeId>(ranks.size()));
  out.step_end = out.step_begin;
  std::map<std::tuple<bool, int, int, int>, std::uint32_t> expert_comms;
  std::map<std::tuple<int, int, int>, std::uint32_t> cp_comms;
  for (const sim::RankId r : ranks) {
    RankEmitter e(model, plan, cluster, compute, g, r);
    e.set_tp_communicator(comms.tp[r]);
    const int d = static_cast<int>(r) / layout.live_tp();
    if (plan.cp > 1) e.set_cp_communicator(layout.cp_communicator(g, plan.cp, d, 0, static_cast<int>(r) % layout.live_tp(), cp_comms));
    e.set_moe(layout.moe_rank(g, routing ? &*routing : nullptr, d, 0, static_cast<int>(r) % layout.live_tp(), expert_comms));
    e.set_replica_communicator(comms.replica[r]);
    e.load_batches(plan.steps, plan.micro_batch * plan.grad_accum);
    RankCompiler rc(model, plan, out.buckets, exchanges, op_recompute, e, comms.dp[r]);
    for (int s = 0; s < plan.steps; ++s) {
      const auto [first, last] = rc.step(s);
      out.step_begin[static_cast<std::size_t>(s)][r] = first;
      out.step_end[static_cast<std::size_t>(s)][r] = last;
    }
  }
  if (!end_compile(out)) return compile_data_parallel(model, plan, cluster, compute, {});
  return out;
}

}  // namespace foresight::strategy
