// ZeRO in the execution graph (Rajbhandari et al. 2020, Z20): stages 1 and 2 reduce-scatter the
// gradients and all-gather the updated parameters (stage 2 after every micro-batch), stage 3
// gathers each layer's parameters before its forward and its backward and reduce-scatters its
// gradients, moving 1.5x the data of an all-reduce (Z20 §7.2). The optimizer updates 1/d.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <map>
#include <set>
#include <tuple>
#include <string>

#include "exec/executor.hpp"

#include "strategies/data_parallel.hpp"
#include "strategies/memory_model.hpp"
#include "strategies/pipeline.hpp"
#include "models/model_zoo.hpp"
#include "strategies/tensor_parallel.hpp"
#include "tests/strategies/toy_model.hpp"
#include "topologies/cluster_builders.hpp"

using namespace foresight;
using foresight::test::dgx;
using sim::CollectiveOp;

namespace {

strategy::Plan plan(int zero, int accum = 1, strategy::Zero3Schedule schedule = strategy::Zero3Schedule::deepspeed) {
  strategy::Plan p;
  p.zero3_schedule = schedule;
  p.dp = 4;
  p.micro_batch = 1;
  p.grad_accum = accum;
  p.global_batch = 4 * accum;
  p.precision = strategy::Precision::bf16;  // 2-byte parameters and gradients
  p.optimizer = strategy::Optimizer::adam;
  p.zero = zero;
  p.steps = 1;
  return p;
}

struct Traffic {
  std::map<CollectiveOp, int> count;
  std::map<CollectiveOp, double> bytes;
  double bus = 0.0;  ///< ring bus bytes per rank: AR 2(n-1)/n S, AG and RS (n-1)/n S
  double optimizer_bytes = 0.0;
  double tied_bytes = 0.0;  ///< the embedding group's all-reduce (pipelines)
};

Traffic traffic(const strategy::Model& m, const strategy::Plan& p) {
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  const auto c = strategy::compile_data_parallel(m, p, dgx(), compute);
  Traffic t;
  const double n = p.dp;
  for (const auto& node : c.graph.nodes) {
    if (node.rank != 0) continue;
    if (node.kind == sim::OpKind::collective && node.stream == strategy::streams::nccl) {
      ++t.count[node.op];
      t.bytes[node.op] += node.bytes;
      t.bus += node.bytes * (n - 1) / n * (node.op == CollectiveOp::all_reduce ? 2.0 : 1.0);
    }
    if (c.graph.names[node.name] == "optimizer step") t.optimizer_bytes += c.graph.signatures[node.signature].bytes;
  }
  return t;
}

}  // namespace

TEST_CASE("ZeRO-1: gradients reduce-scattered, parameters all-gathered, 1/d of the optimizer step", "[training][zero]") {
  const auto m = strategy::build_model("gpt3-125m");
  const double psi = static_cast<double>(m.params());
  const Traffic ddp = traffic(m, plan(0));
  const Traffic z1 = traffic(m, plan(1));
  REQUIRE(ddp.count.at(CollectiveOp::all_reduce) > 1);
  REQUIRE(ddp.bytes.at(CollectiveOp::all_reduce) == Approx(2 * psi));
  REQUIRE(z1.count.count(CollectiveOp::all_reduce) == 0);
  REQUIRE(z1.count.at(CollectiveOp::reduce_scatter) == ddp.count.at(CollectiveOp::all_reduce));
  REQUIRE(z1.bytes.at(CollectiveOp::reduce_scatter) == Approx(2 * psi));
  REQUIRE(z1.bytes.at(CollectiveOp::all_gather) == Approx(2 * psi));
  // Stage 1 moves what an all-reduce moves (Z20 §7.2): RS + AG = AR.
  REQUIRE(z1.bus == Approx(ddp.bus));
  REQUIRE(z1.optimizer_bytes == Approx(ddp.optimizer_bytes / 4));
}

TEST_CASE("ZeRO-2 reduces after every micro-batch; ZeRO-3 moves 1.5x an all-reduce", "[training][zero]") {
  const auto m = strategy::build_model("gpt3-125m");
  const Traffic ddp2 = traffic(m, plan(0, 2));
  const Traffic z2 = traffic(m, plan(2, 2));
  REQUIRE(z2.count.at(CollectiveOp::reduce_scatter) == 2 * ddp2.count.at(CollectiveOp::all_reduce));
  int with_params = 0;
  for (const auto& l : m.layers) with_params += l.params > 0;
  const Traffic ddp = traffic(m, plan(0));
  const Traffic z3 = traffic(m, plan(3));
  REQUIRE(z3.count.at(CollectiveOp::all_gather) == 2 * with_params);  // forward and backward
  REQUIRE(z3.count.at(CollectiveOp::reduce_scatter) == with_params);
  REQUIRE(z3.bus == Approx(1.5 * ddp.bus));
  // Tied LM head: no parameters of its own, so no gather.
  REQUIRE(z3.optimizer_bytes == Approx(ddp.optimizer_bytes / 4));
  // FSDP gathers and reduces per unit (a block, or a layer outside blocks), moving the same bytes.
  std::set<int> blocks;
  int outside = 0;
  for (const auto& l : m.layers) {
    if (l.block >= 0) blocks.insert(l.block);
    outside += l.block < 0 && l.params > 0;
  }
  const int units = static_cast<int>(blocks.size()) + outside;
  const Traffic fsdp = traffic(m, plan(3, 1, strategy::Zero3Schedule::fsdp));
  REQUIRE(fsdp.count.at(CollectiveOp::all_gather) == 2 * units);
  REQUIRE(fsdp.count.at(CollectiveOp::reduce_scatter) == units);
  REQUIRE(fsdp.bus == Approx(z3.bus));
}

TEST_CASE("ZeRO-3: a layer's kernels wait for its gathered parameters", "[training][zero]") {
  const auto m = strategy::build_model("gpt3-125m");
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  const auto c = strategy::compile_data_parallel(m, plan(3, 1, strategy::Zero3Schedule::deepspeed), dgx(), compute);
  const auto& g = c.graph;
  int gated = 0;
  for (const auto& node : g.nodes) {
    if (node.rank != 0 || node.kind != sim::OpKind::compute) continue;
    const std::string& name = g.names[node.name];
    if (name != "h.0.attn.qkv.linear_fwd" && name != "h.0.attn.qkv.linear_dgrad") continue;
    bool waits = false;
    for (const auto d : node.deps) {
      waits = waits || (g.nodes[d].op == CollectiveOp::all_gather && g.names[g.nodes[d].name] == "h.0.attn.qkv parameters");
    }
    REQUIRE(waits);
    ++gated;
  }
  REQUIRE(gated == 2);  // forward and backward
  // And the step runs: every collective matched across the 4 ranks.
  const auto r = sim::execute(g, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::flow);
  REQUIRE(r.makespan.seconds() > 0.0);
}

TEST_CASE("ZeRO-1 inside a pipeline: each stage reduce-scatters and gathers its own parameters", "[training][zero]") {
  // GPT-3 Small on 2 stages x 4 replicas (Megatron's distributed optimizer with a pipeline).
  const auto m = strategy::build_model("gpt3-125m");
  auto p = plan(0, 4);
  p.pp = 2;
  p.schedule = strategy::Schedule::one_f_one_b;
  p.partition = strategy::PartitionMode::uniform;
  p.fold = false;
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  auto stage0 = [&](int zero) {
    p.zero = zero;
    const auto c = strategy::compile_pipeline(m, p, dgx(), compute);
    Traffic t;
    for (const auto& node : c.graph.nodes) {
      if (node.rank != 0) continue;
      const std::string& name = c.graph.names[node.name];
      if (name == "all_reduce tied embedding gradients") {
        t.tied_bytes += node.bytes;  // the embedding group's, counted apart
      } else if (node.kind == sim::OpKind::collective && node.stream == strategy::streams::nccl) {
        ++t.count[node.op];
        t.bytes[node.op] += node.bytes;
      }
      if (name == "optimizer step") t.optimizer_bytes += c.graph.signatures[node.signature].bytes;
    }
    // The step runs: every collective matched across the 4 replicas of each stage.
    REQUIRE(sim::execute(c.graph, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::analytical).makespan.seconds() > 0);
    return std::make_pair(t, c.rank_chunks[0]);
  };
  const auto [ddp, chunks] = stage0(0);
  const auto [z1, chunks1] = stage0(1);
  double params = 0.0;
  for (const auto& [first, last] : chunks) params += strategy::tp_rank_params(m, 1, first, last);
  REQUIRE(params < 0.9 * static_cast<double>(m.params()));  // stage 0 holds part of the model
  // Per step: the stage's bf16 gradients reduced once (after the last micro-batch), as an
  // all-reduce without ZeRO, as reduce-scatters with it, and the parameters gathered after.
  REQUIRE(ddp.bytes.at(CollectiveOp::all_reduce) == Approx(2 * params));
  REQUIRE(z1.count.count(CollectiveOp::all_reduce) == 0);
  REQUIRE(z1.count.at(CollectiveOp::reduce_scatter) == ddp.count.at(CollectiveOp::all_reduce));
  REQUIRE(z1.bytes.at(CollectiveOp::reduce_scatter) == Approx(2 * params));
  REQUIRE(z1.bytes.at(CollectiveOp::all_gather) == Approx(2 * params));
  REQUIRE(z1.optimizer_bytes == Approx(ddp.optimizer_bytes / 4));
  // The word embedding's gradients (tied to the last stage's LM head) are all-reduced whole with
  // the last stage, with or without the distributed optimizer.
  const double table = static_cast<double>(m.transformer->vocab) * m.transformer->hidden;
  REQUIRE(ddp.tied_bytes == Approx(2 * table));
  REQUIRE(z1.tied_bytes == Approx(2 * table));
  // The memory model shards the stage's optimizer states over the 4 replicas (Z20's P_os).
  p.zero = 0;
  const auto mem0 = strategy::pipeline_rank_memory(params, p, 0.0, 1);
  p.zero = 1;
  const auto mem1 = strategy::pipeline_rank_memory(params, p, 0.0, 1);
  REQUIRE(mem1.optimizer == Approx(mem0.optimizer / 4));
  REQUIRE(mem1.weights == mem0.weights);
}

TEST_CASE("hybrid sharding: ZeRO-3 inside each node, gradient shards all-reduced across nodes", "[training][zero]") {
  // FSDP HYBRID_SHARD on 2 DGX nodes: dp 16, shards of 8 (one node), 2 replicas.
  const topo::Cluster two = topo::resolve_cluster("dgx-a100", 16);
  const auto m = strategy::build_model("gpt3-125m");
  auto p = plan(3);
  p.dp = 16;
  p.global_batch = 16;
  p.shard_group = 8;
  p.fold = false;
  REQUIRE(p.hybrid_shard());
  const strategy::ComputeModel compute(two.gpu_model(0));
  const auto c = strategy::compile_data_parallel(m, p, two, compute);
  const auto& g = c.graph;
  int with_params = 0;
  for (const auto& l : m.layers) with_params += l.params > 0;
  std::map<CollectiveOp, int> count;
  std::map<CollectiveOp, double> bytes;
  std::map<CollectiveOp, std::size_t> group;
  for (const auto& node : g.nodes) {
    if (node.rank != 0 || node.kind != sim::OpKind::collective || node.stream != strategy::streams::nccl) continue;
    ++count[node.op];
    bytes[node.op] += node.bytes;
    group[node.op] = g.communicators[node.communicator].ranks.size();
  }
  const double psi = static_cast<double>(m.params());
  REQUIRE(count.at(CollectiveOp::all_gather) == 2 * with_params);
  REQUIRE(count.at(CollectiveOp::reduce_scatter) == with_params);
  REQUIRE(count.at(CollectiveOp::all_reduce) == with_params);  // one per reduce-scatter
  REQUIRE(group.at(CollectiveOp::all_gather) == 8);             // inside the node
  REQUIRE(group.at(CollectiveOp::reduce_scatter) == 8);
  REQUIRE(group.at(CollectiveOp::all_reduce) == 2);             // across the two nodes
  REQUIRE(bytes.at(CollectiveOp::reduce_scatter) == Approx(2 * psi));
  REQUIRE(bytes.at(CollectiveOp::all_reduce) == Approx(2 * psi / 8));  // each rank's 1/8 shard
  // States are sharded 8 ways, not 16.
  const auto mem = strategy::data_parallel_memory(m, p);
  auto full = p;
  full.shard_group = 0;
  const auto mem_full = strategy::data_parallel_memory(m, full);
  REQUIRE(mem.weights == Approx(2 * mem_full.weights));
  REQUIRE(mem.optimizer == Approx(2 * mem_full.optimizer));
  // It runs, and folded it gives the same answer with one simulated rank.
  const auto r = sim::execute(g, two, sim::CollectiveConfig{}, sim::NetworkKind::flow);
  auto folded_plan = p;
  folded_plan.fold = true;
  const auto folded = strategy::compile_data_parallel(m, folded_plan, two, compute);
  REQUIRE(folded.graph.ranks() == 1);
  const auto rf = sim::execute(folded.graph, two, sim::CollectiveConfig{}, sim::NetworkKind::flow);
  REQUIRE(rf.makespan == r.makespan);
}

TEST_CASE("the optimizer step's traffic: torch.optim's foreach kernels against one fused pass", "[training][zero]") {
  // Per parameter, 4-byte states. Fused: p, m, v read and written, g read = 28 (SGD: p, buf r/w,
  // g = 20). Foreach, one pass per operation of torch.optim's _multi_tensor_adamw: mul_(p) 8,
  // lerp_(m, g) 12, mul_(v) 8, addcmul_(v, g, g) 12, sqrt 8, div_ 8, add_(eps) 8,
  // addcdiv_(p, m, d) 16 = 80; _multi_tensor_sgd: mul_(buf) 8, add_(buf, g) 12, add_(p, buf) 12 = 32.
  const auto m = strategy::build_model("gpt3-125m");
  const double params = static_cast<double>(m.params());
  for (const auto& [opt, impl, per_param] :
       {std::tuple{strategy::Optimizer::adam, strategy::OptimizerImpl::foreach, 80.0},
        std::tuple{strategy::Optimizer::adam, strategy::OptimizerImpl::fused, 28.0},
        std::tuple{strategy::Optimizer::sgd, strategy::OptimizerImpl::foreach, 32.0},
        std::tuple{strategy::Optimizer::sgd, strategy::OptimizerImpl::fused, 20.0}}) {
    strategy::Plan p = plan(0);
    p.optimizer = opt;
    p.optimizer_impl = impl;
    CAPTURE(strategy::to_string(opt), strategy::to_string(impl));
    REQUIRE(traffic(m, p).optimizer_bytes == Approx(params * per_param).epsilon(1e-9));
  }
}

TEST_CASE("FSDP: a unit per block, at most two gathered in flight, the next unit prefetched before a backward",
          "[training][zero]") {
  // PyTorch FSDP1's defaults (docs/reference/training-frameworks.md sec. 5): limit_all_gathers
  // (the host waits for the oldest of two recorded frees before a third gather) and
  // BACKWARD_PRE (a unit's backward first issues the next unit's gather, which the NCCL stream
  // then runs before the unit's own reduce-scatter).
  const auto m = strategy::build_model("gpt3-125m");
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  for (const char* recompute : {"none", "full"}) {
    INFO("recompute " << recompute);
    strategy::Plan p = plan(3, 1, strategy::Zero3Schedule::fsdp);
    p.recompute = std::string(recompute) == "full" ? strategy::Recompute::full : strategy::Recompute::none;
    const auto c = strategy::compile_data_parallel(m, p, dgx(), compute);
    const auto& g = c.graph;
    // Rank 0's ops in program order.
    std::vector<sim::NodeId> order;
    for (sim::NodeId n = 0; n < g.nodes.size(); ++n) {
      if (g.nodes[n].rank == 0) order.push_back(n);
    }
    const auto name = [&](sim::NodeId n) { return g.names[g.nodes[n].name]; };
    // Units (a block, or a layer outside blocks) in forward order, with their last kernel of the
    // forward pass (before the first backward op).
    std::vector<std::string> units_in_order;
    std::map<std::string, sim::NodeId> forward_end;
    int blocks = 0;
    for (const sim::NodeId n : order) {
      const auto& node = g.nodes[n];
      if (node.phase == sim::Phase::backward) break;
      if (node.kind != sim::OpKind::compute || node.layer < 0) continue;
      const auto& l = m.layers[static_cast<std::size_t>(node.layer)];
      if (l.params <= 0 && l.block < 0) continue;
      const std::string key = l.block >= 0 ? fmt::format("block {}", l.block) : l.name;
      if (!forward_end.count(key)) units_in_order.push_back(key);
      forward_end[key] = n;
      blocks = std::max(blocks, l.block + 1);
    }
    // Forward: the k-th unit's gather (k >= 2) follows a host wait for the last kernel of unit k-2.
    std::vector<sim::NodeId> waits;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const auto& node = g.nodes[order[k]];
      if (node.phase == sim::Phase::backward) break;
      if (node.kind == sim::OpKind::sync && name(order[k]) == "FSDP rate limit: wait for a free") waits.push_back(order[k]);
    }
    REQUIRE(waits.size() == units_in_order.size() - 2);
    for (std::size_t k = 2; k < units_in_order.size(); ++k) {
      REQUIRE(g.nodes[waits[k - 2]].deps == sim::DepList{forward_end.at(units_in_order[k - 2])});
    }
    // Backward: the NCCL stream's order is block L-1's gather, L-2's, L-1's reduce-scatter,
    // L-3's gather, L-2's reduce-scatter, ...
    std::vector<std::string> nccl;
    for (const sim::NodeId n : order) {
      const auto& node = g.nodes[n];
      if (node.kind == sim::OpKind::collective && node.phase == sim::Phase::backward && name(n).rfind("block ", 0) == 0) {
        nccl.push_back(name(n));
      }
    }
    std::vector<std::string> want{fmt::format("block {} parameters", blocks - 1)};
    for (int u = blocks - 1; u >= 0; --u) {
      if (u > 0) want.push_back(fmt::format("block {} parameters", u - 1));
      want.push_back(fmt::format("block {} gradients", u));
    }
    REQUIRE(nccl == want);
    // A block's recompute finds its parameters gathered: no gathers beyond one per pass.
    int gathers = 0;
    for (const sim::NodeId n : order) gathers += g.nodes[n].kind == sim::OpKind::collective && g.nodes[n].op == CollectiveOp::all_gather;
    int units = 0;
    std::set<int> seen;
    for (const auto& l : m.layers) units += l.block >= 0 ? seen.insert(l.block).second : l.params > 0;
    REQUIRE(gathers == 2 * units);
    // And the step runs.
    REQUIRE(sim::execute(g, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::flow).makespan.seconds() > 0.0);
  }
}
