// Tensor-parallel communication overlap (plan.tp_comm_overlap, Transformer Engine's userbuffers):
// a linear layer's sequence-parallel all-gather or reduce-scatter runs beside its GEMM rather than
// before or after it. Checked on the graph (who waits for whom) and on the simulated step (faster
// than without, never faster than its compute stream alone).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "exec/executor.hpp"
#include "models/model_zoo.hpp"
#include "strategies/data_parallel.hpp"
#include "strategies/pipeline.hpp"
#include "tests/strategies/toy_model.hpp"

using namespace foresight;
using foresight::test::dgx;

namespace {

strategy::Plan plan(bool overlap) {
  strategy::Plan p;
  p.tp = 4;
  p.sequence_parallel = true;
  p.tp_comm_overlap = overlap;
  p.micro_batch = 2;
  p.grad_accum = 1;
  p.global_batch = 2;
  p.precision = strategy::Precision::bf16;
  p.optimizer = strategy::Optimizer::adam;
  p.steps = 1;
  return p;
}

strategy::CompiledGraph compile(bool overlap) {
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  return strategy::compile_data_parallel(strategy::build_model("gpt3-1.3b"), plan(overlap), dgx(), compute);
}

/// Rank 0's first node named `name`.
sim::NodeId find(const strategy::CompiledGraph& c, const std::string& name) {
  for (sim::NodeId i = 0; i < c.graph.nodes.size(); ++i) {
    if (c.graph.nodes[i].rank == 0 && c.graph.names[c.graph.nodes[i].name] == name) return i;
  }
  FAIL("no node " << name);
  return 0;
}

/// Whether node `n` waits for node `d`: through its dependencies or behind earlier nodes of its
/// stream (a stream runs its nodes in order), transitively.
bool waits_for(const sim::ExecutionGraph& g, sim::NodeId n, sim::NodeId d) {
  std::vector<char> seen(n + 1, 0);
  std::vector<sim::NodeId> todo{n};
  while (!todo.empty()) {
    const sim::NodeId x = todo.back();
    todo.pop_back();
    if (x == d) return true;
    if (x < d || seen[x]) continue;
    seen[x] = 1;
    for (const sim::NodeId y : g.nodes[x].deps) todo.push_back(y);
    for (sim::NodeId y = x; y-- > d;) {  // the previous node of x's stream
      if (g.nodes[y].rank == g.nodes[x].rank && g.nodes[y].stream == g.nodes[x].stream) {
        todo.push_back(y);
        break;
      }
    }
  }
  return false;
}

double makespan(const strategy::CompiledGraph& c) {
  return sim::execute(c.graph, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::analytical).makespan.seconds();
}

}  // namespace

TEST_CASE("TP overlap: a column layer's GEMM starts beside its all-gather, a row layer's reduce-scatter beside its GEMM",
          "[training][tp]") {
  for (const bool overlap : {false, true}) {
    INFO("overlap " << overlap);
    const auto c = compile(overlap);
    const auto& g = c.graph;
    const sim::NodeId gather = find(c, "all_gather h.3.attn.qkv input");
    const sim::NodeId qkv = find(c, "h.3.attn.qkv.linear_fwd");
    const sim::NodeId core = find(c, "h.3.attn.core.attn_scores");
    CHECK(waits_for(g, qkv, gather) == !overlap);
    CHECK(waits_for(g, core, gather));  // the attention needs the whole gathered projection
    const sim::NodeId proj = find(c, "h.3.attn.proj.linear_fwd");
    const sim::NodeId scatter = find(c, "reduce_scatter h.3.attn.proj output");
    CHECK(waits_for(g, scatter, proj) == !overlap);
    CHECK(waits_for(g, find(c, "h.3.mlp.fc.linear_fwd"), scatter));
    // Backward: the output gradient's gather beside the input-gradient GEMM; the weight gradient
    // waits for it.
    const sim::NodeId grad_gather = find(c, "all_gather h.3.attn.proj output gradient");
    CHECK(waits_for(g, find(c, "h.3.attn.proj.linear_dgrad"), grad_gather) == !overlap);
    CHECK(waits_for(g, find(c, "h.3.attn.proj.linear_wgrad"), grad_gather));
  }
}

TEST_CASE("TP overlap hides communication but never the compute stream", "[training][tp]") {
  const auto without = compile(false);
  const auto with = compile(true);
  // Rank 0's compute stream runs its kernels one after another: a lower bound on the step.
  const sim::StreamId compute = with.graph.nodes[find(with, "h.3.attn.qkv.linear_fwd")].stream;
  double kernels = 0.0;
  for (const auto& n : with.graph.nodes) {
    if (n.rank == 0 && n.kind == sim::OpKind::compute && n.stream == compute) kernels += n.duration.seconds();
  }
  const double a = makespan(without);
  const double b = makespan(with);
  CHECK(b < 0.97 * a);  // 4 of the 6 collectives per layer were exposed
  CHECK(b >= kernels);
}

TEST_CASE("TP overlap inside an interleaved pipeline with recompute runs and is not slower", "[training][tp]") {
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  const auto m = strategy::build_model("gpt3-1.3b");
  for (const auto r : {strategy::Recompute::full, strategy::Recompute::selective_op}) {
    auto time = [&](bool overlap) {
      auto p = plan(overlap);
      p.tp = 2;
      p.pp = 2;
      p.schedule = strategy::Schedule::interleaved;
      p.virtual_stages = 2;
      p.partition = strategy::PartitionMode::uniform;
      p.grad_accum = 4;
      p.global_batch = 8;
      p.recompute = r;
      return makespan(strategy::compile_pipeline(m, p, dgx(), compute));
    };
    CHECK(time(true) < time(false));
  }
}
