#include "strategies/pipeline.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "common/error.hpp"
#include "strategies/deepspeed_stage.hpp"
#include "strategies/hybrid_layout.hpp"
#include "strategies/layer_pass.hpp"
#include "strategies/memory_model.hpp"

namespace foresight::strategy {

using sim::NodeId;

std::vector<PipeTask> pipeline_order(Schedule schedule, int p, int v, int m, int stage) {
  std::vector<PipeTask> out;
  switch (schedule) {
    case Schedule::none:
    case Schedule::naive:
    case Schedule::gpipe:
      for (int i = 0; i < m; ++i) out.push_back({true, i, 0});
      for (int i = m; i-- > 0;) out.push_back({false, i, 0});
      return out;
    case Schedule::one_f_one_b:
    case Schedule::pipedream: {
      const int warmup = std::min(p - stage - 1, m);
      for (int i = 0; i < warmup; ++i) out.push_back({true, i, 0});
      for (int k = 0; k < m - warmup; ++k) {
        out.push_back({true, warmup + k, 0});
        out.push_back({false, k, 0});
      }
      for (int k = m - warmup; k < m; ++k) out.push_back({false, k, 0});
      return out;
    }
    case Schedule::interleaved: {
      if (m % p != 0) {
        throw sim::ConfigError(fmt::format("interleaved schedule: {} micro-batches are not a multiple of pp = {}", m, p));
      }
      const int total = m * v;
      const int group = p;  // Megatron's microbatch_group_size_per_vp_stage default
      auto micro = [&](int k) { return (k / (group * v)) * group + k % group; };
      auto fwd_chunk = [&](int k) { return (k / group) % v; };
      auto bwd_chunk = [&](int k) { return v - 1 - (k / group) % v; };
      const int warmup = std::min(2 * (p - stage - 1) + (v - 1) * group, total);
      for (int k = 0; k < warmup; ++k) out.push_back({true, micro(k), fwd_chunk(k)});
      for (int k = 0; k < total - warmup; ++k) {
        out.push_back({true, micro(warmup + k), fwd_chunk(warmup + k)});
        out.push_back({false, micro(k), bwd_chunk(k)});
      }
      for (int k = total - warmup; k < total; ++k) out.push_back({false, micro(k), bwd_chunk(k)});
      return out;
    }
  }
  return out;
}

namespace {

/// A task of the whole run: which step it belongs to and its micro-batch within that step.
struct RunTask {
  PipeTask task;
  int step = 0;
};

/// Emits the tasks of one pipeline rank as the merged order reaches them.
class StageCompiler {
 public:
  StageCompiler(const Model& model, const Plan& plan, const std::vector<PipelineChunk>& chunks,
                const std::vector<TpExchanges>& tp, const std::vector<OpRecompute>& op_recompute, int stage,
                std::vector<sim::RankId> stage_ranks, std::uint32_t dp_communicator, RankEmitter& e,
                const ComputeModel& compute, int cc)
      : model_(model), plan_(plan), chunks_(chunks), tp_(tp), op_recompute_(op_recompute), stage_(stage),
        stage_ranks_(std::move(stage_ranks)),
        comm_id_(dp_communicator), e_(e) {
    const int v = plan.virtual_stages;
    for (int c = 0; c < v; ++c) {
      const PipelineChunk& ch = chunk(c);
      params_ += tp_rank_params(model, plan.tp, ch.first, ch.last, plan.ep, plan.etp());
      expert_params_ += tp_rank_expert_params(model, plan.tp, ch.first, ch.last, plan.ep, plan.etp());
      auto b = plan.framework == Framework::ddp ? ddp_buckets(model, plan, ch.first, ch.last)
                                                : horovod_groups(model, plan, compute, cc, ch.first, ch.last);
      chunk_buckets_.push_back(std::move(b));
    }
    add_tied_copy(model, plan);
    for (const auto& b : chunk_buckets_) buckets_.insert(buckets_.end(), b.begin(), b.end());
    if (plan.pipeline_engine == PipelineEngine::deepspeed) ds_.emplace(plan, e, params_, dp_communicator);
  }

  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  int global_chunk(int c) const { return c * plan_.pp + stage_; }
  const PipelineChunk& chunk(int c) const { return chunks_[static_cast<std::size_t>(global_chunk(c))]; }
  double params() const { return params_; }

  /// This stage's end of the embedding group (its first or last stage, with pp > 1 and a tied
  /// word embedding): communicator `c` over which `params` gradients per rank (its TP rank's
  /// shard of the embedding) are all-reduced once per step.
  void set_embedding_group(std::uint32_t c, double params) {
    embedding_comm_ = c;
    embedding_params_ = params;
  }

  /// Emits `t`; returns the step's last node when `t` completes the step, else kNoNode (and,
  /// with `defer_step_end`, leaves the step's end to finish_step). `after` are nodes of other
  /// threads of this process the task waits for first (torchgpipe's clock barrier).
  NodeId emit(const RunTask& t, bool step_begins, bool drives_input, NodeId& step_first,
              const std::vector<NodeId>& after = {}, bool defer_step_end = false) {
    e_.set_step(t.step);
    if (step_begins) begin_step(t.step, drives_input, step_first);
    const int gc = global_chunk(t.task.chunk);
    const int chunks_total = plan_.pp * plan_.virtual_stages;
    const PipelineChunk& ch = chunk(t.task.chunk);
    const int micro = t.task.micro;
    if (!after.empty()) {
      sim::Node wait = e_.make(sim::OpKind::sync, sim::kHostStream, "wait for the clock cycle", sim::Phase::other);
      wait.deps = after;
      e_.graph().add(std::move(wait));
    }
    if (plan_.driver == PipelineDriver::single_process) {
      e_.host(t.task.forward ? "pipeline bookkeeping (forward)" : "pipeline bookkeeping (backward)",
              plan_.microbatch_overhead, sim::Phase::other, micro);
    }
    if (t.task.forward) {
      NodeId in = kNoNode;
      if (gc == 0) {
        e_.copy_input(micro);
      } else if (deepspeed()) {
        in = ds_->receive(rank_of(gc - 1), boundary_bytes(ch), 0, "activations", sim::Phase::forward, micro, 1);
      } else {
        in = transfer(sim::OpKind::recv, streams::p2p_recv_fwd, gc - 1, boundary_bytes(ch), 0, "recv activations",
                      sim::Phase::forward, micro);
      }
      // DeepSpeed's forward step sends the previous backward's gradients after receiving.
      if (deepspeed()) send_pending_gradients();
      NodeId last = forward(ch, micro, in);
      if (gc + 1 < chunks_total) {
        const double bytes = boundary_bytes(chunks_[static_cast<std::size_t>(gc + 1)]);
        if (deepspeed()) {
          ds_->send(rank_of(gc + 1), bytes, 0, "activations", sim::Phase::forward, micro, last);
        } else {
          transfer(sim::OpKind::send, streams::p2p_send_fwd, gc + 1, bytes, 0, "send activations", sim::Phase::forward,
                   micro, last);
        }
      }
      return kNoNode;
    }
    NodeId in = kNoNode;
    // A backward step right after another (the cool-down) first sends the previous one's gradients.
    if (deepspeed()) send_pending_gradients();
    if (gc + 1 < chunks_total) {
      const double bytes = boundary_bytes(chunks_[static_cast<std::size_t>(gc + 1)]);
      // DeepSpeed also gathers the chunk's own partitioned output again for autograd.
      in = deepspeed() ? ds_->receive(rank_of(gc + 1), bytes, 1, "gradients", sim::Phase::backward, micro, 2)
                       : transfer(sim::OpKind::recv, streams::p2p_recv_bwd, gc + 1, bytes, 1, "recv gradients",
                                  sim::Phase::backward, micro);
    }
    if (recomputes(micro)) in = forward(ch, micro, in, true);
    // DeepSpeed reduces gradients only after the last backward (DeepSpeedStage::reduce_gradients).
    const bool reduce =
        plan_.replicas() > 1 && ++backwards_[{t.step, t.task.chunk}] == plan_.grad_accum && !deepspeed();
    NodeId last = backward(t.task.chunk, micro, in, reduce);
    if (deepspeed()) {
      last = ds_->accumulate(micro, last);
      if (gc > 0) pending_gradients_ = {micro, last};
    } else if (gc > 0) {
      transfer(sim::OpKind::send, streams::p2p_send_bwd, gc - 1, boundary_bytes(ch), 1, "send gradients",
               sim::Phase::backward, micro, last);
    }
    last_backward_ = last;
    if (++step_backwards_[t.step] < plan_.grad_accum * plan_.virtual_stages) return kNoNode;
    step_done_ = true;
    if (deepspeed()) {
      send_pending_gradients();
      // TrainSchedule's ReduceTiedGrads comes before ReduceGrads; dist.all_reduce blocks the stream.
      if (embedding_params_ > 0.0) {
        sim::Node wait = e_.make(sim::OpKind::sync, streams::compute, "wait for tied gradients", sim::Phase::backward);
        wait.deps = {reduce_tied_gradients({last})};
        e_.graph().add(std::move(wait));
      }
      ds_->reduce_gradients();
    }
    return defer_step_end ? kNoNode : finish_step({});
  }

  /// The last node of the last task emitted, and whether it completed its step.
  NodeId last_backward() const { return last_backward_; }
  bool take_step_done() { return std::exchange(step_done_, false); }

  /// A host-stream marker: done when this thread has dispatched everything before it.
  NodeId dispatched_marker() {
    return e_.graph().add(e_.make(sim::OpKind::sync, sim::kHostStream, "task dispatched", sim::Phase::other));
  }

  /// Closes the step: the host first waits for `join` (every stage's backward, when one process
  /// runs the optimizer after loss.backward() returns), then the gradient reduction and the
  /// optimizer step. Returns the step's last node.
  NodeId finish_step(const std::vector<NodeId>& join) {
    if (!join.empty()) {
      sim::Node wait = e_.make(sim::OpKind::sync, sim::kHostStream, "wait for loss.backward()", sim::Phase::backward);
      wait.deps = join;
      e_.graph().add(std::move(wait));
    }
    // ZeRO-1 (Megatron's distributed optimizer, DeepSpeed's ZeRO-1 and BF16_Optimizer): each rank
    // updates its 1/dp of the stage's parameters, then the updated shards are gathered.
    const bool zero = (ds_ ? ds_->shards_step() : plan_.zero >= 1) && plan_.replicas() > 1;
    // Megatron all-reduces the embedding group's gradients after the data-parallel reduction
    // (finalize_model_grads: finish_grad_sync, then _allreduce_word_embedding_grads).
    if (!ds_ && embedding_params_ > 0.0) {
      comm_.push_back(reduce_tied_gradients(comm_.empty() ? std::vector<NodeId>{last_backward_} : comm_));
    }
    const auto& buckets = ds_ ? ds_->buckets() : buckets_;
    // DeepSpeed copied its reduced gradients back already (DeepSpeedStage::reduce_gradients).
    NodeId end = e_.finish_step(comm_, ds_ ? std::vector<GradientBucket>{} : buckets,
                                zero ? plan_.zero_owned_params(params_, expert_params_) : params_);
    if (zero) end = e_.gather_parameters(buckets, end, comm_id_);
    comm_.clear();
    if (plan_.sync_each_step && stage_ == plan_.pp - 1) {
      sim::Node sync = e_.make(sim::OpKind::sync, sim::kHostStream, "loss.item()", sim::Phase::other);
      sync.deps = {end};
      end = e_.graph().add(std::move(sync));
    }
    return end;
  }

  /// Bytes crossing into chunk `ch` per micro-batch: its first layer's input (with sequence
  /// parallelism each TP rank sends its 1/t of the sequence: Megatron's p2p shape [s/t, b, h]).
  double boundary_bytes(const PipelineChunk& ch) const {
    const double elems = ch.first == 0 ? model_.input_elems : model_.layers[ch.first - 1].output_elems;
    const double sp = plan_.sequence_parallel && plan_.tp > 1 ? plan_.tp : 1.0;
    return elems * plan_.micro_batch * activation_bytes(plan_.precision) / sp;
  }

  /// Whether micro-batch `micro`'s backward re-runs the chunk's forward first (torchgpipe's
  /// checkpointing of a whole partition).
  bool recomputes(int micro) const {
    return (plan_.recompute == Recompute::full && !layer_recompute()) ||
           (plan_.recompute == Recompute::except_last && micro != plan_.grad_accum - 1);
  }
  /// Whether recompute works per transformer layer (Megatron's full and selective
  /// checkpointing: each layer's forward again before its backward, the embedding, LM head and
  /// loss never) rather than per chunk.
  bool layer_recompute() const {
    return plan_.recompute == Recompute::selective || plan_.recompute == Recompute::selective_op ||
           (plan_.recompute == Recompute::full && model_.transformer);
  }

 private:
  void begin_step(int step, bool drives_input, NodeId& step_first) {
    step_first = kNoNode;
    if (stage_ == 0) step_first = e_.wait_for_batch(step);
    if (drives_input || plan_.driver == PipelineDriver::per_stage) {
      const NodeId o = e_.host("step overhead", plan_.step_overhead, sim::Phase::other);
      if (step_first == kNoNode) step_first = o;
    }
  }

  NodeId transfer(sim::OpKind kind, sim::StreamId stream, int peer_chunk, double bytes, std::uint32_t tag,
                  std::string_view name, sim::Phase phase, int micro, NodeId dep = kNoNode) {
    const NodeId id = e_.transfer(kind, stream, rank_of(peer_chunk), bytes, tag, name, phase, micro, dep);
    if (kind == sim::OpKind::recv && plan_.p2p_sync) e_.host_wait(id, "wait for " + std::string(name), phase, micro);
    return id;
  }

  bool deepspeed() const { return ds_.has_value(); }

  /// The copy of a tied weight (the LM head's word embedding) this stage keeps: its parameters,
  /// and its gradient reduced as a bucket of its own, first of its chunk's, once the tied layer's
  /// backward is done.
  void add_tied_copy(const Model& model, const Plan& plan) {
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    for (int c = 0; c < plan.virtual_stages; ++c) ranges.emplace_back(chunk(c).first, chunk(c).last);
    const double copy = tp_tied_copy_params(model, plan.tp, ranges);
    if (copy <= 0.0) return;
    params_ += copy;
    for (int c = 0; c < plan.virtual_stages; ++c) {
      for (std::size_t i = chunk(c).first; i < chunk(c).last; ++i) {
        if (model.layers[i].tied_params <= 0) continue;
        GradientBucket b;
        b.bytes = copy * gradient_bytes_per_param(plan);
        b.layers = {i};
        auto& buckets = chunk_buckets_[static_cast<std::size_t>(c)];
        buckets.insert(buckets.begin(), std::move(b));
        return;
      }
    }
  }
  /// The all-reduce of the tied word embedding's gradients between the first and last stages
  /// (in their accumulated type: Megatron's main_grad, DeepSpeed's fp32 _hp_grad with bf16),
  /// after `deps`.
  NodeId reduce_tied_gradients(std::vector<NodeId> deps) {
    return e_.dp_collective(sim::CollectiveOp::all_reduce, embedding_params_ * gradient_bytes_per_param(plan_),
                            "all_reduce tied embedding gradients", embedding_comm_, std::move(deps),
                            sim::Phase::backward);
  }

  /// The rank of global chunk `gc`'s stage in this pipeline.
  sim::RankId rank_of(int gc) const { return stage_ranks_[static_cast<std::size_t>(gc % plan_.pp)]; }

  /// DeepSpeed's SendGrad of the last backward, where its schedule puts it: in the next step.
  void send_pending_gradients() {
    if (pending_gradients_.second == kNoNode) return;
    const int gc = global_chunk(0);
    ds_->send(rank_of(gc - 1), boundary_bytes(chunk(0)), 1, "gradients", sim::Phase::backward,
              pending_gradients_.first, pending_gradients_.second);
    pending_gradients_ = {-1, kNoNode};
  }

  /// The chunk's forward (with its tensor-parallel collectives), or its recompute before the
  /// backward pass; returns when its output is ready.
  NodeId forward(const PipelineChunk& ch, int micro, NodeId in, bool recompute = false) {
    LayerPass pass(model_, plan_, tp_, op_recompute_, e_, comm_id_, false, micro);
    return recompute ? pass.recompute(ch.first, ch.last, in) : pass.forward(ch.first, ch.last, in);
  }

  /// The chunk's backward; returns when its input gradient is ready.
  NodeId backward(int c, int micro, NodeId in, bool reduce) {
    const PipelineChunk& ch = chunk(c);
    const auto& buckets = chunk_buckets_[static_cast<std::size_t>(c)];
    std::size_t next_bucket = 0;
    // Per-layer recompute (transformers) runs inside the backward pass; a partition's runs in emit.
    LayerPass pass(model_, plan_, tp_, op_recompute_, e_, comm_id_, layer_recompute(), micro);
    return pass.backward(ch.first, ch.last, in, reduce, comm_, [&](std::size_t i, NodeId last) {
      if (!reduce) return;
      while (next_bucket < buckets.size() && buckets[next_bucket].ready_layer() == i) {
        e_.reduce_bucket(buckets[next_bucket], bucket_index_++, last, comm_id_, comm_,
                         plan_.zero >= 1 ? sim::CollectiveOp::reduce_scatter : sim::CollectiveOp::all_reduce);
        ++next_bucket;
      }
    });
  }

  const Model& model_;
  const Plan& plan_;
  const std::vector<PipelineChunk>& chunks_;
  const std::vector<TpExchanges>& tp_;
  const std::vector<OpRecompute>& op_recompute_;
  int stage_;
  std::vector<sim::RankId> stage_ranks_;  ///< the rank of each stage in this pipeline
  std::uint32_t comm_id_;
  RankEmitter& e_;
  std::vector<std::vector<GradientBucket>> chunk_buckets_;
  std::vector<GradientBucket> buckets_;
  std::optional<DeepSpeedStage> ds_;  ///< with pipeline_engine deepspeed
  std::pair<int, NodeId> pending_gradients_{-1, kNoNode};  ///< DeepSpeed: a backward's unsent gradients
  double params_ = 0.0;
  double expert_params_ = 0.0;  ///< of params_, the routed experts'
  std::uint32_t embedding_comm_ = 0;
  double embedding_params_ = 0.0;  ///< > 0: this stage all-reduces the tied embedding's gradients
  std::map<std::pair<int, int>, int> backwards_;  ///< (step, chunk) -> backwards done
  std::map<int, int> step_backwards_;
  std::vector<NodeId> comm_;
  std::size_t bucket_index_ = 0;
  NodeId last_backward_ = kNoNode;
  bool step_done_ = false;
};

/// Every task of rank `stage` over the run, in its order. PipeDream runs one 1F1B sequence
/// over all steps' micro-batches, without a flush.
std::vector<RunTask> run_order(const Plan& plan, int stage) {
  std::vector<RunTask> out;
  const int m = plan.grad_accum;
  if (plan.schedule == Schedule::pipedream) {
    for (const PipeTask& t : pipeline_order(Schedule::pipedream, plan.pp, 1, m * plan.steps, stage)) {
      out.push_back({{t.forward, t.micro % m, t.chunk}, t.micro / m});
    }
    return out;
  }
  const auto one = pipeline_order(plan.schedule, plan.pp, plan.virtual_stages, m, stage);
  for (int s = 0; s < plan.steps; ++s) {
    for (const PipeTask& t : one) out.push_back({t, s});
  }
  return out;
}

/// Peak activation bytes and most micro-batches in flight on one rank, walking its order:
/// a forward keeps its chunk's saved activations (only the chunk's input when that micro-batch
/// will be recomputed), a backward frees them; a recompute briefly holds the full set again.
std::pair<double, int> activation_peak(const Model& model, const Plan& plan, const StageCompiler& sc,
                                       const std::vector<RunTask>& order) {
  const int bytes = activation_bytes(plan.precision);
  // Chunk-level recompute is the schedule's (below); per-layer recompute keeps each block's input.
  const bool layers = sc.layer_recompute();
  auto saved = [&](int c) { return saved_activation_bytes(model, plan, sc.chunk(c).first, sc.chunk(c).last, layers); };
  // Per-layer full recompute briefly holds one block's activations again in the backward pass.
  double block_transient = 0.0;
  if (layers && (plan.recompute == Recompute::full || plan.recompute == Recompute::selective_op)) {
    for (int c = 0; c < plan.virtual_stages; ++c) {
      for (std::size_t i = sc.chunk(c).first; i < sc.chunk(c).last;) {
        std::size_t end = i + 1;
        while (end < sc.chunk(c).last && model.layers[i].block >= 0 && model.layers[end].block == model.layers[i].block) ++end;
        if (model.layers[i].block >= 0) {
          block_transient = std::max(block_transient, saved_activation_bytes(model, plan, i, end, false));
        }
        i = end;
      }
    }
  }
  double live = 0.0;
  double peak = 0.0;
  int in_flight = 0;
  int most = 0;
  for (const RunTask& t : order) {
    const bool rc = sc.recomputes(t.task.micro);
    const double kept = rc ? sc.boundary_bytes(sc.chunk(t.task.chunk)) : saved(t.task.chunk);
    if (t.task.forward) {
      live += kept;
      most = std::max(most, ++in_flight);
      peak = std::max(peak, live);
    } else {
      if (rc) peak = std::max(peak, live + saved(t.task.chunk));
      peak = std::max(peak, live + block_transient);
      live -= kept;
      --in_flight;
    }
  }
  double largest_output = 0.0;
  for (int c = 0; c < plan.virtual_stages; ++c) {
    for (std::size_t i = sc.chunk(c).first; i < sc.chunk(c).last; ++i) {
      largest_output = std::max(largest_output, layer_output_bytes(model.layers[i], bytes));
    }
  }
  // The tensors in flight at the turn from forward to backward: an output and its gradient.
  return {peak + 2.0 * largest_output * plan.micro_batch, most};
}

}  // namespace

CompiledGraph compile_pipeline(const Model& model, const Plan& plan, const topo::Cluster& cluster,
                               const ComputeModel& compute, const CompileOptions& options) {
  const int p = plan.pp;
  const int tp = std::max(1, plan.tp);
  const int ranks = plan.replicas() * p * tp;
  if (static_cast<std::size_t>(ranks) > cluster.gpu_count()) {
    throw sim::ConfigError(fmt::format("plan: dp x pp x tp = {} x {} x {} = {} ranks, but the cluster has {} GPUs",
                                       plan.replicas(), p, tp, ranks, cluster.gpu_count()));
  }
  check_tensor_parallel(model, plan);
  std::vector<TpExchanges> exchanges = tp_exchanges(model, plan);
  const std::vector<OpRecompute> op_recompute = op_recompute_layers(model, plan);
  // TP rank j of stage s of replica d runs on GPU (d x pp + s) x tp + j: TP innermost (inside a
  // node), then the pipeline, then data parallelism (Megatron's placement). Identical ranks fold.
  auto routing = moe_routing(model, plan);
  const int cc = cluster.gpu(0).compute_capability;
  const auto chunks = partition_model(model, plan, compute, cc);
  // The embedding group per (replica, TP rank): the last stage's copy of a tied word embedding
  // and the first stage's embedding, whose gradients are all-reduced between them.
  double tied_params = 0.0;
  if (p > 1) {
    std::vector<std::pair<std::size_t, std::size_t>> last_stage;
    for (int c = 0; c < plan.virtual_stages; ++c) {
      const auto& ch = chunks[static_cast<std::size_t>(c * p + p - 1)];
      last_stage.emplace_back(ch.first, ch.last);
    }
    tied_params = tp_tied_copy_params(model, tp, last_stage);
  }
  const HybridLayout layout(plan, p, cluster, routing && routing->ranks_alike(), tied_params > 0.0);
  CompiledGraph out;
  begin_compile(out, options);
  sim::ExecutionGraph& g = out.graph;
  intern_labels(exchanges, g);
  g.stream_names = training_stream_names();
  out.folding = layout.describe();
  out.ep_folded = layout.folds_ep();
  out.bounds_only = layout.bounds_only();
  out.rank_coords = layout.coords<CompiledGraph::Coords>();
  // A host thread per rank. One process per stage (per_stage), or one per replica whose worker
  // threads, one per device, share its GIL (single_process, torchgpipe).
  layout.add_ranks(g, [&](int d, int s, int j) {
    return plan.driver == PipelineDriver::per_stage ? static_cast<std::uint32_t>(layout.rank(d, s, j))
                                                    : static_cast<std::uint32_t>(d * layout.live_tp() + j);
  });
  const auto simulated = g.ranks();
  // Data-parallel groups per (stage, TP rank); TP groups per (replica, stage).
  std::vector<std::uint32_t> dp_comm(static_cast<std::size_t>(p * layout.live_tp()), 0);
  if (plan.replicas() > 1) {
    for (int s = 0; s < p; ++s) {
      for (int j = 0; j < layout.live_tp(); ++j) {
        dp_comm[static_cast<std::size_t>(s * layout.live_tp() + j)] = layout.add_dp_communicator(g, s, j);
      }
    }
  }
  std::vector<std::uint32_t> tp_comm(simulated, 0);
  if (tp > 1) {
    for (int d = 0; d < layout.live_dp(); ++d) {
      for (int s = 0; s < p; ++s) {
        const auto c = layout.add_tp_communicator(g, d, s);
        for (int j = 0; j < layout.live_tp(); ++j) tp_comm[layout.rank(d, s, j)] = c;
      }
    }
  }
  std::vector<std::uint32_t> embedding_comm;
  if (tied_params > 0.0) {
    for (int d = 0; d < layout.live_dp(); ++d) {
      for (int j = 0; j < layout.live_tp(); ++j) embedding_comm.push_back(layout.add_embedding_communicator(g, d, j));
    }
  }
  for (int s = 0; s < p; ++s) out.stage_ranks.push_back(layout.rank(0, s, 0));
  out.step_begin.assign(static_cast<std::size_t>(plan.steps), std::vector<NodeId>(simulated, kNoNode));
  out.step_end = out.step_begin;
  out.rank_chunks.resize(simulated);
  out.rank_activation_peak_bytes.resize(simulated);
  out.rank_in_flight.resize(simulated);

  std::map<std::tuple<bool, int, int, int>, std::uint32_t> expert_comms;
  std::map<std::tuple<int, int, int>, std::uint32_t> cp_comms;
  for (int replica = 0; replica < layout.live_dp() * layout.live_tp(); ++replica) {
    // Each (replica d, TP rank j) pipeline is emitted alone, in the same order as its TP peers,
    // so their collectives match.
    const int d = replica / layout.live_tp();
    const int j = replica % layout.live_tp();
    std::vector<sim::RankId> stage_ranks;
    for (int s = 0; s < p; ++s) stage_ranks.push_back(layout.rank(d, s, j));
    std::vector<RankEmitter> emitters;
    emitters.reserve(static_cast<std::size_t>(p));
    std::vector<StageCompiler> stages;
    stages.reserve(static_cast<std::size_t>(p));
    std::vector<std::vector<RunTask>> orders;
    for (int s = 0; s < p; ++s) {
      emitters.emplace_back(model, plan, cluster, compute, g, stage_ranks[static_cast<std::size_t>(s)]);
      emitters.back().set_moe(layout.moe_rank(g, routing ? &*routing : nullptr, d, s, j, expert_comms));
      emitters.back().set_tp_communicator(tp_comm[stage_ranks[static_cast<std::size_t>(s)]]);
      if (plan.cp > 1) emitters.back().set_cp_communicator(layout.cp_communicator(g, plan.cp, d, s, j, cp_comms));
      if (plan.driver == PipelineDriver::single_process) emitters.back().share_interpreter(plan.dispatch_gil);
      if (s == 0) emitters.back().load_batches(plan.steps, plan.micro_batch * plan.grad_accum);
    }
    for (int s = 0; s < p; ++s) {
      stages.emplace_back(model, plan, chunks, exchanges, op_recompute, s, stage_ranks, dp_comm[static_cast<std::size_t>(s * layout.live_tp() + j)],
                          emitters[static_cast<std::size_t>(s)], compute, cc);
      if (!embedding_comm.empty() && (s == 0 || s == p - 1)) {
        stages.back().set_embedding_group(embedding_comm[static_cast<std::size_t>(replica)], tied_params);
      }
      orders.push_back(run_order(plan, s));
      const auto r = static_cast<std::size_t>(stage_ranks[static_cast<std::size_t>(s)]);
      for (int c = 0; c < plan.virtual_stages; ++c) out.rank_chunks[r].emplace_back(stages.back().chunk(c).first, stages.back().chunk(c).last);
      const auto [peak, most] = activation_peak(model, plan, stages.back(), orders.back());
      out.rank_activation_peak_bytes[r] = peak;
      out.rank_in_flight[r] = most;
      if (replica == 0) out.buckets.insert(out.buckets.end(), stages.back().buckets().begin(), stages.back().buckets().end());
    }
    // Merge the ranks' orders tick by tick: each rank emits at most one task per tick, once the
    // task feeding it (the previous chunk's forward, the next chunk's backward) is emitted. A
    // single-process driver dispatches in exactly this order (torchgpipe's clock cycles).
    const int chunks_total = p * plan.virtual_stages;
    // Emitted tasks, by (step, micro-batch, global chunk, forward): one flag each.
    std::vector<std::uint8_t> done(static_cast<std::size_t>(plan.steps) * static_cast<std::size_t>(plan.grad_accum) *
                                       static_cast<std::size_t>(chunks_total) * 2,
                                   0);
    const auto task = [&](int step, int micro, int gc, bool forward) {
      return ((static_cast<std::size_t>(step) * static_cast<std::size_t>(plan.grad_accum) + static_cast<std::size_t>(micro)) *
                  static_cast<std::size_t>(chunks_total) +
              static_cast<std::size_t>(gc)) * 2 + (forward ? 1 : 0);
    };
    std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
    std::vector<int> started(static_cast<std::size_t>(p), -1);
    std::size_t remaining = 0;
    for (const auto& o : orders) remaining += o.size();
    // One process: forward tasks of a clock cycle wait until the previous cycle's are
    // dispatched (torchgpipe's scheduler joins each cycle), and the optimizer runs once every
    // stage's backward is done.
    const bool one_process = plan.driver == PipelineDriver::single_process;
    std::vector<NodeId> previous_cycle;
    std::vector<NodeId> this_cycle;
    std::vector<NodeId> step_join;
    std::vector<int> step_done_stages;
    while (remaining > 0) {
      bool progressed = false;
      previous_cycle = std::move(this_cycle);
      this_cycle.clear();
      for (int s = 0; s < p; ++s) {
        const auto si = static_cast<std::size_t>(s);
        if (next[si] >= orders[si].size()) continue;
        const RunTask& t = orders[si][next[si]];
        const int gc = stages[si].global_chunk(t.task.chunk);
        const bool ready = t.task.forward ? (gc == 0 || done[task(t.step, t.task.micro, gc - 1, true)] != 0)
                                          : (gc == chunks_total - 1 || done[task(t.step, t.task.micro, gc + 1, false)] != 0);
        if (!ready) continue;
        const auto r = static_cast<std::size_t>(stage_ranks[si]);
        const bool begins = t.step > started[si];
        NodeId first = kNoNode;
        const NodeId before = g.next_id();  // the task's first node, if nothing else begins the step
        const NodeId end = stages[si].emit(t, begins, s == 0, first,
                                           one_process && t.task.forward ? previous_cycle : std::vector<NodeId>{},
                                           one_process);
        if (begins) {
          started[si] = t.step;
          out.step_begin[static_cast<std::size_t>(t.step)][r] = first != kNoNode ? first : before;
        }
        if (end != kNoNode) out.step_end[static_cast<std::size_t>(t.step)][r] = end;
        if (one_process && t.task.forward) this_cycle.push_back(stages[si].dispatched_marker());
        if (one_process && stages[si].take_step_done()) {
          step_join.push_back(stages[si].last_backward());
          step_done_stages.push_back(s);
          if (static_cast<int>(step_done_stages.size()) == p) {
            for (const int st : step_done_stages) {
              const auto rr = static_cast<std::size_t>(stage_ranks[static_cast<std::size_t>(st)]);
              out.step_end[static_cast<std::size_t>(t.step)][rr] = stages[static_cast<std::size_t>(st)].finish_step(step_join);
            }
            step_join.clear();
            step_done_stages.clear();
            this_cycle.clear();
          }
        }
        done[task(t.step, t.task.micro, gc, t.task.forward)] = 1;
        ++next[si];
        --remaining;
        progressed = true;
      }
      if (!progressed) throw sim::GraphError("pipeline schedule: the stages' task orders wait on each other");
    }
  }
  if (!end_compile(out)) return compile_pipeline(model, plan, cluster, compute, {});
  return out;
}

}  // namespace foresight::strategy
