#include "strategies/layer_pass.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <string_view>
#include <utility>

#include "models/context_parallel.hpp"
#include "models/model_builder.hpp"

namespace foresight::strategy {

using sim::NodeId;

LayerPass::LayerPass(const Model& model, const Plan& plan, const std::vector<TpExchanges>& tp,
                     const std::vector<OpRecompute>& op_recompute, RankEmitter& e, std::uint32_t dp_comm,
                     bool layer_recompute, int micro)
    : model_(model),
      plan_(plan),
      tp_(tp),
      op_recompute_(op_recompute),
      e_(e),
      dp_comm_(dp_comm),
      layer_recompute_(layer_recompute),
      zero3_(plan.zero == 3 && plan.dp * plan.cp > 1),
      micro_(micro),
      fsdp_(zero3_ && plan.zero3_schedule == Zero3Schedule::fsdp) {}

NodeId LayerPass::collectives(const std::vector<TpCollective>& list, std::vector<NodeId> after, sim::Phase phase) {
  std::erase(after, kNoNode);
  NodeId prev = kNoNode;
  for (const TpCollective& c : list) {
    prev = e_.tp_collective(c, prev == kNoNode ? after : std::vector<NodeId>{prev}, phase, micro_);
  }
  return prev;
}

NodeId LayerPass::run(const OpTemplate& t, std::size_t i, sim::Phase phase, sim::Time dispatch) {
  return run(e_.kernel_info(t, i), i, phase, dispatch);
}

NodeId LayerPass::run(const RankEmitter::KernelInfo& k, std::size_t i, sim::Phase phase, sim::Time dispatch) {
  std::erase(waits_, kNoNode);
  last_ = e_.kernel(k, i, micro_, phase, dispatch, waits_);
  waits_.clear();  // keeps its buffer for the next kernel's
  return last_;
}

std::vector<NodeId> LayerPass::ring_start() {
  std::vector<NodeId> ready = waits_;
  ready.push_back(last_);
  e_.graph().end_run();  // the ring's first step reads the end of the kernel before
  return ready;
}

NodeId LayerPass::ulysses(std::size_t i, const OpTemplate& t, sim::Phase phase, bool before) {
  // Forward: Q, K, V before (queries and keys-values), the output after (queries' size);
  // backward: the output gradient before, dQ, dK, dV after.
  const bool qkv = (phase == sim::Phase::forward) == before;
  const auto bytes = [&](bool queries) {
    return cp_a2a_bytes(t, *model_.transformer, plan_.cp, plan_.micro_batch, plan_.tp, activation_bytes(plan_.precision),
                        queries);
  };
  std::vector<NodeId> deps = waits_;
  deps.push_back(last_);
  if (!before) e_.graph().end_run();  // the all-to-all reads the attention kernel's end
  const NodeId a2a = e_.cp_all_to_all(qkv ? bytes(true) + bytes(false) : bytes(true),
                                      phase == sim::Phase::forward
                                          ? (before ? "cp all-to-all: queries, keys and values" : "cp all-to-all: attention output")
                                          : (before ? "cp all-to-all: output gradient" : "cp all-to-all: query, key and value gradients"),
                                      i, before ? std::move(deps) : std::vector<NodeId>{last_}, phase, micro_);
  waits_.push_back(a2a);
  return a2a;
}

NodeId LayerPass::gather(std::size_t i, sim::Phase phase) {
  // ZeRO-3 gathers a layer's parameters before each use; the NCCL stream runs the gathers in
  // order, ahead of the compute stream (DeepSpeed's prefetch).
  const double bytes = tp_layer_params(model_.layers[i], plan_.tp) * parameter_bytes(plan_.precision);
  return e_.dp_collective(sim::CollectiveOp::all_gather, bytes, model_.layers[i].name + " parameters", dp_comm_, {},
                          phase, micro_);
}

std::size_t LayerPass::unit_first(std::size_t i) const {
  const int b = model_.layers[i].block;
  while (b >= 0 && i > 0 && model_.layers[i - 1].block == b) --i;
  return i;
}

std::size_t LayerPass::unit_last(std::size_t i) const {
  const int b = model_.layers[i].block;
  while (b >= 0 && i + 1 < model_.layers.size() && model_.layers[i + 1].block == b) ++i;
  return i;
}

double LayerPass::unit_params(std::size_t first) const {
  double params = 0.0;
  for (std::size_t k = first; k <= unit_last(first); ++k) params += tp_layer_params(model_.layers[k], plan_.tp);
  return params;
}

std::string LayerPass::unit_name(std::size_t first) const {
  const int b = model_.layers[first].block;
  return b >= 0 ? "block " + std::to_string(b) : model_.layers[first].name;
}

NodeId LayerPass::unit_gather(std::size_t first, sim::Phase phase) {
  const auto it = gathered_.find(first);
  if (it != gathered_.end()) return it->second;
  const double params = unit_params(first);
  if (params <= 0.0) return gathered_[first] = kNoNode;
  if (frees_.size() >= 2) {
    // limit_all_gathers: the host blocks on the oldest free before a third unit's gather.
    sim::Node wait = e_.make(sim::OpKind::sync, sim::kHostStream, "FSDP rate limit: wait for a free", phase);
    wait.deps = {frees_.front()};
    wait.micro_batch = micro_;
    frees_.pop_front();
    e_.graph().add(std::move(wait));
  }
  return gathered_[first] = e_.dp_collective(sim::CollectiveOp::all_gather, params * parameter_bytes(plan_.precision),
                                             unit_name(first) + " parameters", dp_comm_, {}, phase, micro_);
}

NodeId LayerPass::pre_backward(std::size_t i, std::size_t first_layer) {
  const std::size_t first = unit_first(i);
  const NodeId own = unit_gather(first, sim::Phase::backward);
  if (first > first_layer) unit_gather(unit_first(first - 1), sim::Phase::backward);  // BACKWARD_PRE
  return own;
}

void LayerPass::forward_layer(std::size_t i) {
  if (fsdp_) {
    // The unit's parameters: gathered before its first layer (recompute finds them gathered).
    if (!recomputing_ && unit_first(i) == i) {
      if (const NodeId g = unit_gather(i, sim::Phase::forward); g != kNoNode) waits_.push_back(g);
    }
  } else if (zero3_ && model_.layers[i].params > 0) {
    waits_.push_back(gather(i, sim::Phase::forward));
  }
  // With TP communication overlap, a linear layer's all-gather (column) or reduce-scatter (row)
  // starts with its GEMM, which consumes or produces its chunks as they go, rather than before
  // or after it; what follows waits for both.
  const bool overlap = overlaps(i);
  NodeId gathered = kNoNode;
  if (!tp_[i].forward_before.empty()) {
    std::vector<NodeId> after = waits_;
    after.push_back(last_);
    const NodeId c = collectives(tp_[i].forward_before, std::move(after), sim::Phase::forward);
    if (overlap) {
      gathered = c;
    } else {
      waits_ = {c};
    }
  }
  std::vector<NodeId> start = waits_;
  start.push_back(last_);
  // The overlapped collective after the GEMMs, added after them, reads the end of the kernel
  // before them: none of them may join it.
  if (overlap && !tp_[i].forward_after.empty()) e_.graph().end_run();
  if (model_.layers[i].experts > 0) {
    experts(i, true);
  } else {
    // Context parallelism: the ring's steps pass the keys and values on, one after another, from
    // when the rank's own block starts; each later block waits for its step.
    const bool cp = plan_.cp > 1 && model_.layers[i].kind == "attention";
    const bool ring = cp && plan_.cp_comm == CpComm::p2p;
    std::vector<NodeId> kv_ready;
    NodeId step = kNoNode;
    double kv = 0.0;
    for (const OpTemplate& t : model_.layers[i].fwd) {
      const RankEmitter::KernelInfo& k = e_.kernel_info(t, i);
      if (cp && !ring && t.kernel == "flash_attn_fwd") {
        // Ulysses: Q, K and V to head shards before, the output back to sequence shards after.
        ulysses(i, t, sim::Phase::forward, true);
        run(k, i, sim::Phase::forward, plan_.dispatch_forward);
        ulysses(i, t, sim::Phase::forward, false);
        continue;
      }
      if (ring && t.kernel == "flash_attn_fwd") {
        kv = cp_kv_bytes(t, *model_.transformer, plan_.micro_batch, plan_.tp, activation_bytes(plan_.precision));
        kv_ready = ring_start();
      } else if (ring && t.kernel == kCpAttentionFwd) {
        step = e_.cp_exchange(kv, "cp ring: keys and values", i, step == kNoNode ? kv_ready : std::vector<NodeId>{step},
                              sim::Phase::forward, micro_);
        waits_.push_back(step);
      }
      if (core_rerun_ && (t.kernel.starts_with("rope") || t.kernel.starts_with("qk_norm"))) continue;
      if (cached_cast(k)) continue;
      reduce_amax(t, i, sim::Phase::forward);
      run(k, i, sim::Phase::forward, plan_.dispatch_forward);
    }
  }
  if (gathered != kNoNode) waits_.push_back(gathered);
  if (!tp_[i].forward_after.empty()) {
    waits_.push_back(collectives(tp_[i].forward_after, overlap ? std::move(start) : std::vector<NodeId>{last_},
                                 sim::Phase::forward));
  }
  // FSDP reshards a unit after its forward: its free is recorded after its last kernel.
  if (fsdp_ && !recomputing_ && unit_last(i) == i && last_ != kNoNode) {
    const auto g = gathered_.find(unit_first(i));
    if (g != gathered_.end() && g->second != kNoNode) frees_.push_back(last_);
  }
}

void LayerPass::recompute_ops(std::size_t i) {
  const std::vector<OpTemplate>& kernels = op_recompute_[i].kernels;
  if (kernels.empty()) return;
  // DeepSpeed-style ZeRO-3 gathers a layer's parameters before each use (FSDP's unit gather
  // came before the recompute).
  if (zero3_ && !fsdp_ && model_.layers[i].params > 0) waits_.push_back(gather(i, sim::Phase::forward));
  if (!tp_[i].forward_before.empty()) {
    std::vector<NodeId> after = waits_;
    after.push_back(last_);
    waits_ = {collectives(tp_[i].forward_before, std::move(after), sim::Phase::forward)};
  }
  for (const OpTemplate& t : kernels) run(t, i, sim::Phase::forward, plan_.dispatch_forward);
  std::vector<TpCollective> rerun;
  for (const TpCollective& c : tp_[i].forward_after) {
    if (c.op != sim::CollectiveOp::reduce_scatter) rerun.push_back(c);
  }
  if (!rerun.empty()) waits_.push_back(collectives(rerun, {last_}, sim::Phase::forward));
}

void LayerPass::reduce_amax(const OpTemplate& t, std::size_t i, sim::Phase phase) {
  // Transformer Engine v2.9, _customize_quantizers_float8_current_scaling (linear.py,
  // layernorm_linear.py, layernorm_mlp.py): with_amax_reduction over the TP group for the input
  // quantizer of a column-parallel layer and the output-gradient quantizer of a row-parallel one
  // under sequence parallelism. One fp32 value.
  if (!plan_.fp8 || plan_.fp8_recipe != Fp8Recipe::current || plan_.tp <= 1 || !plan_.sequence_parallel) return;
  const Layer& l = model_.layers[i];
  if (l.kind != "linear") return;
  const bool input = l.tp == TpRole::column && t.kernel == "fp8_scale_input";
  const bool grad = l.tp == TpRole::row && t.kernel == "fp8_scale_grad";
  if (!input && !grad) return;
  e_.graph().end_run();  // the all-reduce reads the amax pass's end: the scale may not join its run
  const TpCollective c{sim::CollectiveOp::all_reduce, 4.0,
                       fmt::format("all_reduce {} {} amax", l.name, input ? "input" : "output gradient")};
  waits_.push_back(e_.tp_collective(c, {last_}, phase, micro_, streams::amax));
}

void LayerPass::run_tokens(const OpTemplate& t, std::size_t i, int expert, double tokens, sim::Phase phase,
                           sim::Time dispatch) {
  if (tokens <= 0.0) return;
  std::erase(waits_, kNoNode);
  last_ = e_.expert_kernel(t, i, expert, tokens, micro_, phase, dispatch, waits_);
  waits_.clear();
}

void LayerPass::experts(std::size_t i, bool forward) {
  // Kernels (model_builder.cpp experts_layer). Forward: permute, sort, up, activation, down,
  // unsort, unpermute. Backward: unpermute_bwd, unsort_bwd, down dgrad/wgrad, activation_bwd, up
  // dgrad/wgrad, sort_bwd, permute_bwd. The first all-to-all goes to the experts (the dispatch,
  // or the combine's gradients), the second back to the tokens; the sorts run where a rank holds
  // more than one expert.
  const Layer& l = model_.layers[i];
  const auto& kernels = forward ? l.fwd : l.bwd;
  const MoeRank& m = e_.moe();
  const RoutingTable& t = m.routing->table(i, micro_);
  double sent = 0.0;
  for (const double c : t.count[static_cast<std::size_t>(m.ep_rank)]) sent += c;
  const sim::Time d = forward ? plan_.dispatch_forward : plan_.dispatch_backward;
  const sim::Phase phase = forward ? sim::Phase::forward : sim::Phase::backward;
  // Megatron-Core's alltoall dispatcher (forward, recomputation included): the token counts per
  // expert, all-gathered over the EP group, size the all-to-alls and the experts' GEMMs on the
  // host, which waits for them after launching the permutation (plan.moe_host_sync).
  NodeId counts = kNoNode;
  const bool sync = forward && plan_.moe_host_sync;
  if (sync) {
    std::vector<NodeId> router = waits_;
    if (last_ != kNoNode) router.push_back(last_);
    counts = e_.expert_counts_gather(i, micro_, l.name + " token counts", std::move(router), phase);
    if (counts == kNoNode) counts = last_;  // ep = 1: the router's counts on this GPU
  }
  run_tokens(kernels.front(), i, -1, sent, phase, d);
  if (sync && counts != kNoNode) e_.host_wait(counts, l.name + " wait for token counts", phase, micro_);
  std::erase(waits_, kNoNode);
  std::vector<NodeId> deps = waits_;
  if (last_ != kNoNode) deps.push_back(last_);
  waits_ = {e_.expert_all_to_all(i, micro_, true, l.name + (forward ? " dispatch" : " combine backward"), std::move(deps),
                                 phase)};
  const int local = m.routing->experts_per_rank(i);
  // Under sequence parallelism with experts split over an expert-TP group (expert TP > 1), each
  // TP rank sends its own tokens over its EP group; the expert-TP group then gathers what its
  // ranks received, for their split experts, and reduce-scatters the experts' outputs before the
  // all-to-all back (Megatron-Core's alltoall dispatcher: gather_from_sequence_parallel_region
  // over the expert-TP group after the EP all-to-all). Backward: the output gradients gathered,
  // the input gradients scattered.
  const bool gather = plan_.tp > 1 && plan_.sequence_parallel && plan_.etp() > 1;
  const double per_rank = gather ? plan_.etp() : 1.0;  // tokens an expert runs per token it received
  double received = 0.0;  // tokens this rank's experts run
  for (int x = m.ep_rank * local; x < (m.ep_rank + 1) * local; ++x) received += per_rank * t.expert_tokens(x);
  double gathered = 0.0;
  if (gather) {
    gathered = received * model_.transformer->hidden * static_cast<double>(activation_bytes(plan_.precision));
    const TpCollective c{sim::CollectiveOp::all_gather, gathered,
                         fmt::format("all_gather {} {}", l.name, forward ? "dispatched tokens" : "output gradients")};
    std::erase(waits_, kNoNode);
    waits_ = {e_.expert_tp_collective(c, waits_, phase, micro_)};
  }
  // recompute_modules moe_act: each expert's activation output, dropped once the down
  // projection has consumed it, again before the down projection's backward (with FP8 its cast
  // too, which the weight gradient reads).
  std::vector<const OpTemplate*> act_rerun;
  if (!forward && plan_.recomputes(kRecomputeMoeAct)) {
    for (const OpTemplate& k : l.fwd) {
      if (k.kernel == "expert_swiglu_fwd" || k.kernel == "expert_gelu_fwd" || fp8_cast_of(k.kernel) == "expert_hidden") {
        act_rerun.push_back(&k);
      }
    }
  }
  const std::size_t n = kernels.size();
  if (local > 1) run_tokens(kernels[1], i, -1, received, phase, d);
  for (int x = m.ep_rank * local; x < (m.ep_rank + 1) * local; ++x) {
    const double tokens = per_rank * t.expert_tokens(x);
    for (const OpTemplate* k : act_rerun) run_tokens(*k, i, x, tokens, sim::Phase::forward, plan_.dispatch_backward);
    for (std::size_t k = 2; k + 2 < n; ++k) {
      // FP8's expert weight casts: the step's first micro-batch only, as for linear layers.
      if ((micro_ > 0 || recomputing_) && is_fp8_weight_cast(kernels[k].kernel)) continue;
      run_tokens(kernels[k], i, x, tokens, !forward && is_wgrad(kernels[k]) ? sim::Phase::wgrad : phase, d);
    }
  }
  if (local > 1) run_tokens(kernels[n - 2], i, -1, received, phase, d);
  NodeId done = last_;
  if (gather) {
    const TpCollective c{sim::CollectiveOp::reduce_scatter, gathered,
                         fmt::format("reduce_scatter {} {}", l.name, forward ? "expert outputs" : "input gradients")};
    done = e_.expert_tp_collective(c, {last_}, phase, micro_);
  }
  waits_.push_back(
      e_.expert_all_to_all(i, micro_, false, l.name + (forward ? " combine" : " dispatch backward"), {done}, phase));
  run_tokens(kernels.back(), i, -1, sent, phase, d);
}

std::size_t LayerPass::norm_rerun_before(std::size_t i) const {
  const auto& layers = model_.layers;
  const std::size_t none = layers.size();
  if (!plan_.recomputes(kRecomputeLayernorm)) return none;
  // i is the last layer of a MoE MLP, which starts with its router right after a norm of the same
  // block: the norm that Transformer Engine leaves unfused (pre_mlp_layernorm of a MoE layer).
  const std::optional<LayerSpan> mlp = moe_mlp(model_, i);
  if (!mlp || mlp->last != i || mlp->first == 0) return none;
  const Layer& norm = layers[mlp->first - 1];
  return is_norm(norm) && norm.block == layers[i].block ? mlp->first - 1 : none;
}

bool LayerPass::overlaps(std::size_t i) const {
  const Layer& l = model_.layers[i];
  return plan_.tp_comm_overlap && plan_.tp > 1 && l.kind == "linear" && (l.tp == TpRole::column || l.tp == TpRole::row);
}

NodeId LayerPass::ready() {
  std::erase(waits_, kNoNode);
  if (waits_.empty()) return last_;
  std::vector<NodeId> deps = waits_;
  if (last_ != kNoNode) deps.push_back(last_);
  if (deps.size() == 1) return deps.front();
  sim::Node n = e_.make(sim::OpKind::sync, streams::compute, "wait for tensor-parallel collectives", sim::Phase::other);
  n.deps = std::move(deps);
  n.micro_batch = micro_;
  waits_.clear();
  return last_ = e_.graph().add(std::move(n));
}

NodeId LayerPass::forward(std::size_t first, std::size_t last, NodeId in) {
  if (in != kNoNode) waits_.push_back(in);
  for (std::size_t i = first; i < last; ++i) forward_layer(i);
  return ready();
}

NodeId LayerPass::recompute(std::size_t first, std::size_t last, NodeId in) {
  recomputing_ = true;
  const NodeId out = forward(first, last, in);
  recomputing_ = false;
  return out;
}

NodeId LayerPass::backward(std::size_t first, std::size_t last, NodeId in, bool reduce, std::vector<NodeId>& comm,
                           const std::function<void(std::size_t, NodeId)>& after_layer) {
  std::vector<NodeId> pending;  // input-gradient collectives the previous layer's backward waits for
  if (in != kNoNode) pending.push_back(in);
  if (fsdp_) {
    frees_.clear();  // the backward's limit counts the units it reshards
    gathered_.clear();
  }
  for (std::size_t i = last; i-- > first;) {
    const Layer& layer = model_.layers[i];
    if (fsdp_) {
      // FSDP: the unit's gather, which its recompute and backward wait for.
      if (const NodeId unit = pre_backward(i, first); unit != kNoNode) pending.push_back(unit);
    }
    // Recompute before the backward: a whole block's forward (full), the attention core's
    // (selective) or what the per-op policy drops from a block (selective_op), with its forward
    // collectives.
    const bool block_end =
        layer.block >= 0 && (i + 1 == model_.layers.size() || model_.layers[i + 1].block != layer.block);
    const bool whole_block = plan_.recompute == Recompute::full || plan_.recompute == Recompute::selective_op;
    if (const std::size_t norm = norm_rerun_before(i); layer_recompute_ && norm < model_.layers.size()) {
      // recompute_modules layernorm: the MoE norm's output, dropped once consumed, again before
      // its MLP's backward.
      waits_.insert(waits_.end(), pending.begin(), pending.end());
      recomputing_ = true;
      forward_layer(norm);
      recomputing_ = false;
      pending = std::move(waits_);
      waits_.clear();
    }
    // Checkpointed recompute modules: each span below ends at layer i and reruns, in this order,
    // before its backward: a MoE layer (moe), its shared experts (shared_experts: again under
    // moe, as Megatron checkpoints them inside it), a dense MLP from its norm on (mlp).
    std::vector<std::size_t> spans;  // first layers of the spans to rerun through i
    const auto ending = [&](RecomputeModule m, std::optional<LayerSpan> (*span_of)(const Model&, std::size_t)) {
      if (!layer_recompute_ || !plan_.recomputes(m)) return;  // no span looked for: the common case
      const std::optional<LayerSpan> span = span_of(model_, i);
      if (span && span->last == i && span->first >= first) spans.push_back(span->first);
    };
    ending(kRecomputeMoe, moe_mlp);
    ending(kRecomputeSharedExperts, shared_experts);
    ending(kRecomputeMlp, dense_mlp);
    // core_attn: the attention core as Megatron checkpoints it, its RoPE and QK norm outside.
    const bool core = plan_.recomputes(kRecomputeCoreAttn) && layer.saved_score_elems > 0.0;
    if (layer_recompute_ && ((whole_block && block_end) || core)) {
      std::size_t begin = i;
      while (whole_block && begin > first && model_.layers[begin - 1].block == layer.block) --begin;
      spans.push_back(begin);
    }
    for (const std::size_t begin : spans) {
      waits_.insert(waits_.end(), pending.begin(), pending.end());
      recomputing_ = true;
      core_rerun_ = core && !whole_block;
      for (std::size_t k = begin; k <= i; ++k) {
        if (plan_.recompute == Recompute::selective_op) {
          recompute_ops(k);
        } else {
          forward_layer(k);
        }
      }
      core_rerun_ = false;
      recomputing_ = false;
      pending = std::move(waits_);
      waits_.clear();
    }
    // The backward waits for the input-gradient collectives of the layer after it, for its own
    // gathers (which follow those), and under ZeRO-3 for its parameters.
    // With TP communication overlap the gather runs beside the input-gradient GEMM (the output
    // gradient's, chunk by chunk; the input's for the weight gradient, in bulk), and the
    // weight-gradient GEMM waits for it.
    NodeId gathered = kNoNode;
    if (!tp_[i].backward_before.empty()) {
      std::vector<NodeId> after = pending;
      after.push_back(last_);
      const NodeId c = collectives(tp_[i].backward_before, std::move(after), sim::Phase::backward);
      if (overlaps(i)) {
        gathered = c;
      } else {
        pending = {c};
      }
    }
    if (zero3_ && !fsdp_ && layer.params > 0) pending.push_back(gather(i, sim::Phase::backward));
    waits_ = std::move(pending);
    pending.clear();
    NodeId dgrad = kNoNode;
    if (layer.experts > 0) {
      experts(i, false);
      pending = std::move(waits_);
      waits_.clear();
      if (!tp_[i].backward_after_dgrad.empty()) {
        pending.push_back(collectives(tp_[i].backward_after_dgrad, {last_}, sim::Phase::backward));
      }
      after_layer(i, last_);
      continue;
    }
    // Context parallelism: the keys and values go round again, each step after the first with the
    // partial key and value gradients of the block before; after the last block they go home.
    const bool cp = plan_.cp > 1 && layer.kind == "attention";
    const bool ring = cp && plan_.cp_comm == CpComm::p2p;
    std::vector<NodeId> kv_ready;
    NodeId step = kNoNode;
    double kv = 0.0;
    int remote = 0;
    for (const OpTemplate& t : layer.bwd) {
      const RankEmitter::KernelInfo& k = e_.kernel_info(t, i);
      const bool w = k.wgrad;
      if (w && gathered != kNoNode) waits_.push_back(std::exchange(gathered, kNoNode));
      if (cp && !ring && t.kernel == "flash_attn_bwd") {
        // Ulysses: the output gradient to head shards before, dQ, dK and dV back after.
        ulysses(i, t, sim::Phase::backward, true);
        run(k, i, sim::Phase::backward, plan_.dispatch_backward);
        pending.push_back(ulysses(i, t, sim::Phase::backward, false));
        if (dgrad == kNoNode) dgrad = last_;
        continue;
      }
      if (ring && t.kernel == "flash_attn_bwd") {
        kv = cp_kv_bytes(t, *model_.transformer, plan_.micro_batch, plan_.tp, activation_bytes(plan_.precision));
        kv_ready = ring_start();
      } else if (ring && t.kernel == kCpAttentionBwd) {
        const bool first_step = step == kNoNode;
        step = e_.cp_exchange(first_step ? kv : 2.0 * kv,
                              first_step ? "cp ring: keys and values" : "cp ring: keys, values and their gradients", i,
                              first_step ? kv_ready : std::vector<NodeId>{step, last_}, sim::Phase::backward, micro_);
        waits_.push_back(step);
        e_.graph().end_run();  // the next step reads this block's end
      }
      reduce_amax(t, i, sim::Phase::backward);
      run(k, i, w ? sim::Phase::wgrad : sim::Phase::backward, plan_.dispatch_backward);
      if (ring && t.kernel == kCpAttentionBwd && ++remote == plan_.cp - 1) {
        e_.graph().end_run();
        const NodeId home = e_.cp_exchange(kv, "cp ring: key and value gradients home", i, {step, last_},
                                           sim::Phase::backward, micro_);
        waits_.push_back(home);
        pending.push_back(home);
      }
      if (!w && dgrad == kNoNode) {
        dgrad = last_;
        // Its collectives, added after the weight gradient, read its end: the weight gradient
        // may not join it.
        if (!tp_[i].backward_after_dgrad.empty()) e_.graph().end_run();
      }
    }
    if (gathered != kNoNode) waits_.push_back(gathered);
    if (!tp_[i].backward_after_dgrad.empty() && dgrad != kNoNode) {
      pending.push_back(collectives(tp_[i].backward_after_dgrad, {dgrad}, sim::Phase::backward));
    }
    if (fsdp_ && unit_first(i) == i) {
      // FSDP: the unit's gradients are reduce-scattered once its backward is done, and the unit
      // resharded.
      const double params = unit_params(i);
      if (reduce && params > 0.0) {
        const double bytes = params * gradient_bytes_per_param(plan_);
        const std::string name = unit_name(i) + " gradients";
        const NodeId rs = e_.dp_collective(sim::CollectiveOp::reduce_scatter, bytes, name, dp_comm_, {last_},
                                           sim::Phase::backward, micro_);
        comm.push_back(e_.reduce_shard(rs, bytes, name + " shard", sim::Phase::backward, micro_));
      }
      if (params > 0.0 && last_ != kNoNode) frees_.push_back(last_);
    } else if (reduce && zero3_ && !fsdp_ && layer.params > 0) {
      // Each layer's gradients are reduce-scattered once its backward is done.
      const double bytes = tp_layer_params(layer, plan_.tp) * gradient_bytes_per_param(plan_);
      const NodeId rs = e_.dp_collective(sim::CollectiveOp::reduce_scatter, bytes, layer.name + " gradients", dp_comm_,
                                         {last_}, sim::Phase::backward, micro_);
      comm.push_back(e_.reduce_shard(rs, bytes, layer.name + " gradient shard", sim::Phase::backward, micro_));
    }
    after_layer(i, last_);
  }
  waits_ = std::move(pending);
  return ready();
}

}  // namespace foresight::strategy
