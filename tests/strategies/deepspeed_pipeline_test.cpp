// DeepSpeed's pipeline engine (plan.pipeline_engine "deepspeed"), against the facts of
// DeepSpeed v0.6's runtime/pipe (schedule.py's TrainSchedule, engine.py, p2p.py): the order of
// its exchanges, their partitioning over tensor-parallel ranks, gradients accumulated by a kernel
// of their own and reduced only after the last backward, and its type:transformer partition.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "models/model_zoo.hpp"
#include "run/report.hpp"
#include "strategies/pipeline.hpp"
#include "tests/strategies/toy_model.hpp"

using namespace foresight;
using foresight::test::dgx;

namespace {

/// `stages` stages running `m` micro-batches of 64 samples in fp16 on DeepSpeed's engine.
strategy::Plan ds_plan(int stages, int m) {
  auto p = test::pipeline_plan(stages, 64, m);
  p.precision = strategy::Precision::fp16;
  p.pipeline_engine = strategy::PipelineEngine::deepspeed;
  p.p2p_sync = false;
  p.step_overhead = sim::Time::zero();
  return p;
}

strategy::CompiledGraph compile(const strategy::Model& model, const strategy::Plan& p) {
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  return strategy::compile_pipeline(model, p, dgx(), compute);
}

/// Rank `r`'s program as DeepSpeed's instruction names: F<m> and B<m> for a micro-batch's
/// forward and backward kernels (once per pass), RA/SA<m> for activations received and sent,
/// RG/SG<m> for gradients (the data transfers, tags 0 and 1).
std::vector<std::string> program(const sim::ExecutionGraph& g, sim::RankId r) {
  std::vector<std::string> out;
  for (const sim::Node& n : g.nodes) {
    if (n.rank != r) continue;
    std::string token;
    if ((n.kind == sim::OpKind::send || n.kind == sim::OpKind::recv) && n.tag < 2) {
      token = std::string(n.kind == sim::OpKind::recv ? "R" : "S") + (n.tag == 0 ? "A" : "G");
    } else if (n.kind == sim::OpKind::compute && n.micro_batch >= 0 &&
               (n.phase == sim::Phase::forward || n.phase == sim::Phase::backward)) {
      token = n.phase == sim::Phase::forward ? "F" : "B";
    } else {
      continue;
    }
    token += std::to_string(n.micro_batch);
    if (out.empty() || out.back() != token) out.push_back(token);
  }
  return out;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < s.size()) {
    const std::size_t end = std::min(s.find(' ', at), s.size());
    out.push_back(s.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("DeepSpeed's engine exchanges in its TrainSchedule's order", "[training]") {
  // DeepSpeed v0.6.0's TrainSchedule for S = 3, M = 4 (schedule.py L189-289): a forward step
  // receives activations, then sends the previous backward's gradients, then computes; the
  // activations go out at the start of the next step; a backward step receives gradients
  // and computes, its gradients waiting for the next step.
  auto p = ds_plan(3, 4);
  p.partition = strategy::PartitionMode::explicit_units;
  p.partition_units = {2, 2, 3};
  const auto c = compile(test::toy_mlp(6, 1024), p);
  REQUIRE(program(c.graph, c.stage_ranks[0]) == split("F0 SA0 F1 SA1 F2 SA2 RG0 B0 F3 SA3 RG1 B1 RG2 B2 RG3 B3"));
  REQUIRE(program(c.graph, c.stage_ranks[1]) ==
          split("RA0 F0 SA0 RA1 F1 SA1 RG0 B0 RA2 SG0 F2 SA2 RG1 B1 RA3 SG1 F3 SA3 RG2 B2 SG2 RG3 B3 SG3"));
  REQUIRE(program(c.graph, c.stage_ranks[2]) == split("RA0 F0 B0 RA1 SG0 F1 B1 RA2 SG1 F2 B2 RA3 SG2 F3 B3 SG3"));
  // Every exchange blocks the compute stream (p2p.py: dist.send/recv, never async).
  for (const sim::Node& n : c.graph.nodes) {
    if (n.kind == sim::OpKind::send || n.kind == sim::OpKind::recv) REQUIRE(n.stream == strategy::streams::compute);
  }
  // The schedule runs to its end. Stage 0 idles in its cool-down waiting on stage 1, and while
  // its blocking sends wait for stage 1 to receive: the report calls both the bubble, not the
  // host (which has nothing to do here: no step overhead, microseconds of dispatch).
  const auto r = sim::execute(c.graph, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::analytical);
  const sim::RankId first = c.stage_ranks[0];
  const auto b = strategy::breakdown(c.graph, r, first, sim::Time::zero(), r.end[c.step_end[0][first]], 1);
  REQUIRE(b.bubble_s > 0.2 * b.iteration_s);
  REQUIRE(b.host_s < 0.02 * b.iteration_s);
}

TEST_CASE("DeepSpeed accumulates gradients in a kernel and reduces them after the last backward", "[training]") {
  // Two stages of 3 layers of 16384 x 16384 (805 M parameters each), dp 2, bf16: BF16_Optimizer
  // adds every micro-batch's gradients into fp32 ones (18 bytes per parameter), then the stage's
  // gradients are cast to bf16 and all-reduced in pieces of at most 5e8 elements.
  auto p = ds_plan(2, 3);
  p.dp = 2;
  p.precision = strategy::Precision::bf16;
  p.fp32_main_grads = true;
  p.partition = strategy::PartitionMode::explicit_units;
  p.partition_units = {3, 4};
  const int width = 16384;
  const double stage_params = 3.0 * width * width;
  const auto c = compile(test::toy_mlp(6, width), p);
  const auto r = sim::execute(c.graph, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::analytical);
  for (int s = 0; s < 2; ++s) {
    INFO("stage " << s);
    const sim::RankId rank = c.stage_ranks[static_cast<std::size_t>(s)];
    int accumulations = 0;
    double reduced = 0.0;
    int pieces = 0;
    sim::Time last_backward = sim::Time::zero();
    sim::Time first_reduce = sim::Time::max();
    for (sim::NodeId id = 0; id < c.graph.nodes.size(); ++id) {
      const sim::Node& n = c.graph.nodes[id];
      if (n.rank != rank) continue;
      const std::string& name = c.graph.names[n.name];
      if (name == "accumulate gradients") {
        ++accumulations;
        REQUIRE(c.graph.signatures[n.signature].bytes == Approx(18.0 * stage_params));
      }
      if (n.kind == sim::OpKind::compute && n.phase == sim::Phase::backward && n.micro_batch >= 0) {
        last_backward = std::max(last_backward, r.end[id]);
      }
      if (n.kind == sim::OpKind::collective && n.op == sim::CollectiveOp::all_reduce) {
        ++pieces;
        REQUIRE(n.bytes <= 5e8 * 2.0);
        reduced += n.bytes;
        first_reduce = std::min(first_reduce, r.start[id]);
      }
    }
    REQUIRE(accumulations == 3);
    REQUIRE(pieces == 2);                                  // 805 M elements: 5e8 + 305 M
    REQUIRE(reduced == Approx(2.0 * stage_params));        // in bf16, not the fp32 accumulated
    REQUIRE(first_reduce >= last_backward);                // nothing overlaps the backward passes
  }
}

TEST_CASE("DeepSpeed's engine sends 1/t of each boundary tensor and all-gathers it", "[training]") {
  // GPT-3 125M (12 blocks of hidden 768, sequence 2048) at TP 2 on 3 stages, micro-batch 1: the
  // middle stage receives activations (one all-gather), and in backward receives gradients and
  // rebuilds its own sent output (two all-gathers), each exchange a meta tensor and the rank's
  // half of the [s, b, h] tensor (2048 x 768 fp16 = 3 MiB).
  auto p = ds_plan(3, 2);
  p.micro_batch = 1;
  p.global_batch = 2;
  p.tp = 2;
  p.fold = false;
  p.partition = strategy::PartitionMode::uniform;
  const auto c = compile(strategy::build_model("gpt3-125m"), p);
  const double tensor = 2048.0 * 768 * 2;
  const sim::RankId middle = c.stage_ranks[1];
  int data = 0;
  int meta = 0;
  int gathers = 0;
  int host_waits = 0;
  for (const sim::Node& n : c.graph.nodes) {
    if (n.rank != middle) continue;
    const std::string& name = c.graph.names[n.name];
    if (n.kind == sim::OpKind::send || n.kind == sim::OpKind::recv) {
      if (n.tag < 2) {
        ++data;
        REQUIRE(n.bytes == Approx(tensor / 2));
      } else {
        ++meta;
        REQUIRE(n.bytes < 256.0);
      }
    }
    if (n.kind == sim::OpKind::collective && name.find("all_gather partitioned") != std::string::npos) {
      ++gathers;
      REQUIRE(n.bytes == Approx(tensor));
    }
    if (n.kind == sim::OpKind::sync && n.stream == sim::kHostStream && name.find("meta") != std::string::npos) {
      ++host_waits;
    }
  }
  // Per micro-batch: 4 exchanges (RA, SA, RG, SG), each with its meta; 3 all-gathers; the host
  // waits on each meta tensor (read after a receive, copied to the GPU before a send).
  REQUIRE(data == 4 * 2);
  REQUIRE(meta == 4 * 2);
  REQUIRE(gathers == 3 * 2);
  REQUIRE(host_waits == 4 * 2);
}

TEST_CASE("DeepSpeed's type:transformer partition fills stages with ceil(blocks / pp) in turn", "[training]") {
  // partition_balanced on one per unit (runtime/utils.py): 71 units (70 layers and the loss, no
  // blocks) on 12 stages take 6 each in turn, the last the 5 left; Megatron refuses unequal stages.
  const auto model = test::toy_mlp(70, 256);
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  auto p = ds_plan(12, 12);
  p.partition = strategy::PartitionMode::uniform;
  const auto chunks = strategy::partition_model(model, p, compute, 80);
  REQUIRE(chunks.size() == 12);
  for (std::size_t s = 0; s + 1 < chunks.size(); ++s) REQUIRE(chunks[s].units == 6);
  REQUIRE(chunks.back().units == 5);
  p.pipeline_engine = strategy::PipelineEngine::megatron;
  REQUIRE_THROWS_WITH(strategy::partition_model(model, p, compute, 80), Catch::Contains("not divisible by pp = 12"));
}
