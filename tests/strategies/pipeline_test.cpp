// Pipeline schedules on a hand-made model with uniform stages: bubble, memory in flight,
// interleaving, imbalance and recompute, each against its closed form.
#include <catch2/catch.hpp>

#include <algorithm>

#include "common/error.hpp"
#include "models/model_zoo.hpp"
#include "strategies/memory_model.hpp"
#include "strategies/pipeline.hpp"
#include "strategies/tensor_parallel.hpp"
#include "run/report.hpp"
#include "tests/strategies/toy_model.hpp"
#include "topologies/cluster_builders.hpp"

using namespace foresight;
using foresight::test::dgx;

namespace {

struct Run {
  strategy::CompiledGraph compiled;
  sim::ExecutionResult result;
  std::vector<strategy::RankBreakdown> ranks;
};

/// 8 wide layers (and a loss) on 4 stages of 2 layers, micro-batches of 256: each GEMM runs
/// ~0.3 ms, while an activation (256 x 8192 fp16, 4 MiB) crosses NVLink in ~20 us and a kernel
/// is dispatched in 8 us, so communication and the host are nearly free.
strategy::Plan base_plan(strategy::Schedule schedule, int m) {
  strategy::Plan p;
  p.pp = 4;
  p.micro_batch = 256;
  p.grad_accum = m;
  p.global_batch = 256 * m;
  p.precision = strategy::Precision::amp_bf16;  // no loss scaler: the optimizer phase is the step alone
  p.schedule = schedule;
  p.partition = strategy::PartitionMode::explicit_units;
  p.partition_units = {2, 2, 2, 3};
  p.step_overhead = sim::Time::zero();
  p.p2p_sync = false;
  p.optimizer_impl = strategy::OptimizerImpl::fused;  // the smallest optimizer step: the schedule's own time
  p.steps = 4;
  return p;
}

/// The toy model with a negligible input: its host-to-device copy would make stage 0 slower.
strategy::Model toy(int layers) {
  auto m = test::toy_mlp(layers, 8192);
  m.input_elems = 1;
  return m;
}

Run run(const strategy::Model& model, const strategy::Plan& p) {
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  Run r;
  r.compiled = strategy::compile_pipeline(model, p, dgx(), compute);
  r.result = sim::execute(r.compiled.graph, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::flow);
  const auto& ends = r.compiled.step_end;
  for (sim::RankId rank = 0; rank < r.compiled.graph.ranks(); ++rank) {
    r.ranks.push_back(strategy::breakdown(r.compiled.graph, r.result, rank, r.result.end[ends[1][rank]],
                                          r.result.end[ends.back()[rank]], static_cast<int>(ends.size()) - 2));
  }
  return r;
}

}  // namespace

TEST_CASE("GPipe's bubble is (p-1)/(m+p-1) of the step; 1F1B takes as long but holds p micro-batches", "[training]") {
  const auto model = toy(8);
  const int p = 4;
  const int m = 8;
  const Run gpipe = run(model, base_plan(strategy::Schedule::gpipe, m));
  const Run one = run(model, base_plan(strategy::Schedule::one_f_one_b, m));
  for (int s = 0; s < p; ++s) {
    INFO("stage " << s);
    const auto& b = gpipe.ranks[static_cast<std::size_t>(s)];
    // Tolerance 5% of the step: transfers, launch gaps and the optimizer step are not free.
    REQUIRE(b.bubble_s / b.iteration_s == Approx(double(p - 1) / (m + p - 1)).margin(0.05));
    REQUIRE(one.ranks[static_cast<std::size_t>(s)].iteration_s == Approx(b.iteration_s).epsilon(0.03));
    REQUIRE(gpipe.compiled.rank_in_flight[static_cast<std::size_t>(s)] == m);
    REQUIRE(one.compiled.rank_in_flight[static_cast<std::size_t>(s)] == p - s);
  }
  // The step is (m + p - 1) stage slots of one micro-batch's forward and backward.
  const double slot = gpipe.ranks[0].compute_s / m;
  REQUIRE(gpipe.ranks[0].iteration_s == Approx((m + p - 1) * slot).epsilon(0.05));
  // Stage 0 holds m (GPipe) or p (1F1B) micro-batches of activations.
  REQUIRE(gpipe.compiled.rank_activation_peak_bytes[0] / one.compiled.rank_activation_peak_bytes[0] ==
          Approx(double(m) / p).epsilon(0.1));
}

TEST_CASE("interleaving v virtual stages divides the bubble by v", "[training]") {
  const auto model = toy(16);
  auto one_plan = base_plan(strategy::Schedule::one_f_one_b, 8);
  one_plan.partition_units = {4, 4, 4, 5};
  auto inter_plan = base_plan(strategy::Schedule::interleaved, 8);
  inter_plan.virtual_stages = 2;
  inter_plan.partition_units = {2, 2, 2, 2, 2, 2, 2, 3};
  const Run one = run(model, one_plan);
  const Run inter = run(model, inter_plan);
  // Rank 0 runs chunks 0 and 4 (global), rank 3 chunks 3 and 7.
  REQUIRE(inter.compiled.rank_chunks[0].size() == 2);
  REQUIRE(inter.compiled.rank_chunks[0][1].first == 8);
  for (std::size_t s = 0; s < 4; ++s) {
    INFO("stage " << s);
    REQUIRE(inter.ranks[s].bubble_s / one.ranks[s].bubble_s == Approx(0.5).margin(0.1));
    REQUIRE(inter.ranks[s].iteration_s < one.ranks[s].iteration_s);
  }
}

TEST_CASE("a slower stage slows the pipeline as (m-1) x slowest + sum of stages", "[training]") {
  const auto model = toy(8);
  const int m = 8;
  auto p = base_plan(strategy::Schedule::gpipe, m);
  p.partition_units = {1, 2, 2, 4};  // stage 3: 3 layers (and the loss) against 1 and 2
  const Run r = run(model, p);
  // Per stage: one micro-batch's forward and backward (its compute less the optimizer step,
  // which the slowest stage runs off stage 0's critical path).
  std::vector<double> optimizer(r.ranks.size(), 0.0);
  for (const sim::Node& n : r.compiled.graph.nodes) {
    if (n.phase == sim::Phase::optimizer) optimizer[n.rank] += n.duration.seconds() / p.steps;
  }
  double sum = 0.0;
  double slowest = 0.0;
  std::vector<double> slot;
  for (std::size_t s = 0; s < r.ranks.size(); ++s) {
    slot.push_back((r.ranks[s].compute_s - optimizer[s]) / m);
    sum += slot.back();
    slowest = std::max(slowest, slot.back());
  }
  REQUIRE(slowest > 1.4 * slot[1]);  // the imbalance is real
  // Documented slowdown: the step takes sum of the stages' slots + (m - 1) x the slowest slot,
  // instead of (m + p - 1) x a balanced slot; stage 0 then runs its optimizer step.
  REQUIRE(r.ranks[0].iteration_s == Approx(sum + (m - 1) * slowest + optimizer[0]).epsilon(0.05));
}

TEST_CASE("recompute adds one forward per micro-batch", "[training]") {
  const auto model = toy(8);
  auto count_forward = [](const strategy::CompiledGraph& c) {
    return std::count_if(c.graph.nodes.begin(), c.graph.nodes.end(), [](const sim::Node& n) {
      return n.kind == sim::OpKind::compute && n.phase == sim::Phase::forward && n.layer >= 0;
    });
  };
  auto plan = base_plan(strategy::Schedule::gpipe, 8);
  const Run none = run(model, plan);
  plan.recompute = strategy::Recompute::full;
  const Run full = run(model, plan);
  plan.recompute = strategy::Recompute::except_last;
  const Run except_last = run(model, plan);
  const long fwd = count_forward(none.compiled);  // steps x m x 9 forward kernels
  REQUIRE(fwd == 4 * 8 * 9);
  REQUIRE(count_forward(full.compiled) == 2 * fwd);
  REQUIRE(count_forward(except_last.compiled) == 2 * fwd - 4 * 9);
  // Each stage's compute grows by one forward per micro-batch: a third of forward + backward.
  for (std::size_t s = 0; s < 3; ++s) {
    REQUIRE(full.ranks[s].compute_s / none.ranks[s].compute_s == Approx(4.0 / 3.0).epsilon(0.05));
  }
  // Recompute keeps only each micro-batch's stage input: stage 0's activations shrink.
  REQUIRE(full.compiled.rank_activation_peak_bytes[0] < 0.6 * none.compiled.rank_activation_peak_bytes[0]);
}

TEST_CASE("partitions: by time, by parameters, uniform, explicit, and their errors", "[training]") {
  const auto model = test::toy_mlp(8, 1024);
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  auto p = base_plan(strategy::Schedule::gpipe, 4);
  p.partition = strategy::PartitionMode::params;
  auto chunks = strategy::partition_model(model, p, compute, 80);
  REQUIRE(chunks.size() == 4);
  for (const auto& c : chunks) REQUIRE(c.params == 2 * 1024 * 1024);  // 8 equal layers: 2 per stage
  p.partition = strategy::PartitionMode::time;
  chunks = strategy::partition_model(model, p, compute, 80);
  REQUIRE(chunks.back().last == model.layers.size());
  REQUIRE(chunks.front().first == 0);
  p.pp = 10;
  REQUIRE_THROWS_WITH(strategy::partition_model(model, p, compute, 80), Catch::Contains("has only 9 units"));
  p.pp = 4;
  p.partition = strategy::PartitionMode::explicit_units;
  p.partition_units = {2, 2, 2, 2};
  REQUIRE_THROWS_WITH(strategy::partition_model(model, p, compute, 80),
                      Catch::Contains("expected 4 counts (pp x virtual_stages) summing to the 9 units"));
  p.partition = strategy::PartitionMode::uniform;
  p.pp = 3;
  chunks = strategy::partition_model(model, p, compute, 80);  // 9 units, 3 per stage
  REQUIRE(chunks[0].units == 3);
  p.pp = 2;
  p.virtual_stages = 2;
  REQUIRE_THROWS_WITH(strategy::partition_model(model, p, compute, 80), Catch::Contains("not divisible by pp = 2"));
}

TEST_CASE("the 1F1B and interleaved orders follow Megatron's", "[training]") {
  using strategy::PipeTask;
  // Stage 0 of 4, 6 micro-batches: 3 warm-up forwards, then alternate, then 3 backwards.
  const auto o = strategy::pipeline_order(strategy::Schedule::one_f_one_b, 4, 1, 6, 0);
  REQUIRE(o.size() == 12);
  REQUIRE(o[2] == PipeTask{true, 2, 0});
  REQUIRE(o[3] == PipeTask{true, 3, 0});
  REQUIRE(o[4] == PipeTask{false, 0, 0});
  // The reference's example: p = 2, v = 2, m = 4, rank 0 forwards (0,0)(1,0)(0,1)(1,1)(2,0)(3,0)(2,1)(3,1).
  const auto i = strategy::pipeline_order(strategy::Schedule::interleaved, 2, 2, 4, 0);
  std::vector<std::pair<int, int>> fwd;
  for (const auto& t : i) {
    if (t.forward) fwd.emplace_back(t.micro, t.chunk);
  }
  REQUIRE(fwd == std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {0, 1}, {1, 1}, {2, 0}, {3, 0}, {2, 1}, {3, 1}});
  REQUIRE_THROWS_AS(strategy::pipeline_order(strategy::Schedule::interleaved, 4, 2, 6, 0), sim::ConfigError);
}

TEST_CASE("a stage running a tied LM head without the word embedding keeps a copy of it", "[training]") {
  // GPT-3 125M ties its LM head to the word embedding (vocabulary x hidden). Megatron keeps a
  // copy on the last stage (word_embeddings), DeepSpeed too (TiedLayerSpec): its parameters,
  // gradients and optimizer states are that stage's.
  const auto model = strategy::build_model("gpt3-125m");
  const auto& shape = *model.transformer;
  const double table = static_cast<double>(shape.vocab) * shape.hidden;
  const std::size_t n = model.layers.size();
  using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;
  REQUIRE(strategy::tp_tied_copy_params(model, 1, Ranges{{n / 2, n}}) == Approx(table));
  REQUIRE(strategy::tp_tied_copy_params(model, 2, Ranges{{n / 2, n}}) == Approx(table / 2));  // vocabulary-parallel
  REQUIRE(strategy::tp_tied_copy_params(model, 1, Ranges{{0, n}}) == 0.0);                    // the embedding's own stage
  REQUIRE(strategy::tp_tied_copy_params(model, 1, Ranges{{0, n / 2}}) == 0.0);                // no tied layer

  // Two stages, two replicas, fp16, no bucketing limits: each stage all-reduces exactly its
  // parameters' gradients, the last stage's with the copy's.
  auto p = test::pipeline_plan(2, 1, 2);
  p.dp = 2;
  p.global_batch = 4;
  p.precision = strategy::Precision::fp16;
  p.partition = strategy::PartitionMode::uniform;
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  const auto c = strategy::compile_pipeline(model, p, dgx(), compute);
  for (int s = 0; s < 2; ++s) {
    INFO("stage " << s);
    const sim::RankId rank = c.stage_ranks[static_cast<std::size_t>(s)];
    double reduced = 0.0;
    for (const sim::Node& node : c.graph.nodes) {
      if (node.rank == rank && node.kind == sim::OpKind::collective && node.op == sim::CollectiveOp::all_reduce &&
          c.graph.names[node.name] != "all_reduce tied embedding gradients") {
        reduced += node.bytes;
      }
    }
    double params = 0.0;
    for (const auto& [first, last] : c.rank_chunks[rank]) params += strategy::tp_rank_params(model, 1, first, last);
    REQUIRE(reduced == Approx(2.0 * (params + (s == 1 ? table : 0.0))));
  }
}

namespace {

/// Rank `rank`'s all-reduces of the tied embedding's gradients, and of the data-parallel
/// gradients, in graph order.
struct TiedReduction {
  std::vector<sim::NodeId> tied;
  std::vector<sim::NodeId> data_parallel;
};
TiedReduction tied_reduction(const sim::ExecutionGraph& g, sim::RankId rank) {
  TiedReduction out;
  for (sim::NodeId id = 0; id < g.nodes.size(); ++id) {
    const sim::Node& node = g.nodes[id];
    if (node.rank != rank || node.kind != sim::OpKind::collective) continue;
    const std::string& name = g.names[node.name];
    if (name == "all_reduce tied embedding gradients") out.tied.push_back(id);
    if (name.rfind("all_reduce gradients", 0) == 0) out.data_parallel.push_back(id);
  }
  return out;
}

}  // namespace

TEST_CASE("the first and last stages all-reduce a tied word embedding's gradients once per step", "[training]") {
  // Megatron's embedding group and DeepSpeed's tied-weight group: the word embedding on the
  // first stage and its copy under the LM head on the last each hold a gradient of the
  // vocabulary-parallel table (vocab / tp x hidden), which the two all-reduce before the
  // optimizer step, in the type gradients accumulate in. GPT-3 125M on 2 stages, TP 2, 2 replicas.
  const auto model = strategy::build_model("gpt3-125m");
  const double shard = static_cast<double>(model.transformer->vocab) * model.transformer->hidden / 2;
  for (const bool deepspeed : {false, true}) {
    INFO((deepspeed ? "DeepSpeed's engine" : "Megatron"));
    auto p = test::pipeline_plan(2, 2, 4);
    p.tp = 2;
    p.dp = 2;
    p.global_batch = 16;
    p.precision = strategy::Precision::bf16;
    p.fp32_main_grads = true;
    p.fold = false;
    if (deepspeed) p.pipeline_engine = strategy::PipelineEngine::deepspeed;
    const strategy::ComputeModel compute(dgx().gpu_model(0));
    const auto c = strategy::compile_pipeline(model, p, dgx(), compute);
    const auto& g = c.graph;
    std::uint32_t comm = 0;
    for (sim::RankId r = 0; r < g.ranks(); ++r) {
      const TiedReduction t = tied_reduction(g, r);
      const int stage = static_cast<int>(c.rank_coords[r].stage);
      INFO("rank " << r << ", stage " << stage);
      if (stage != 0 && stage != 1) {
        REQUIRE(t.tied.empty());
        continue;
      }
      REQUIRE(t.tied.size() == 1);  // one per step
      REQUIRE(!t.data_parallel.empty());
      for (const sim::NodeId id : t.tied) {
        const sim::Node& n = g.nodes[id];
        REQUIRE(n.bytes == Approx(4.0 * shard));  // fp32 main gradients of this TP rank's shard
        // Its group: this replica's TP rank j on the first and the last stage.
        const auto& members = g.communicators[n.communicator].ranks;
        REQUIRE(members.size() == 2);
        REQUIRE(c.rank_coords[members[0]].stage == 0);
        REQUIRE(c.rank_coords[members[1]].stage == 1);
        for (const sim::RankId m : members) {
          REQUIRE(c.rank_coords[m].replica == c.rank_coords[r].replica);
          REQUIRE(c.rank_coords[m].tp_rank == c.rank_coords[r].tp_rank);
        }
        comm = n.communicator;
      }
      // Megatron reduces it after the data-parallel reduction (finalize_model_grads), DeepSpeed
      // before (TrainSchedule: ReduceTiedGrads, then ReduceGrads).
      if (deepspeed) {
        REQUIRE(t.tied.front() < t.data_parallel.front());
      } else {
        const auto& deps = g.nodes[t.tied.back()].deps;
        REQUIRE(std::find(deps.begin(), deps.end(), t.data_parallel.back()) != deps.end());
      }
    }
    REQUIRE(comm != 0);
    // Every collective matches: the step runs.
    REQUIRE(sim::execute(g, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::analytical).makespan.seconds() > 0.0);
  }
}
