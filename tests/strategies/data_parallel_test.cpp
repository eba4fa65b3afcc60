// Data-parallel strategies on a hand-made model: what a step costs, how DDP buckets and overlaps.
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "strategies/data_parallel.hpp"
#include "strategies/memory_model.hpp"
#include "run/report.hpp"
#include "tests/strategies/toy_model.hpp"
#include "topologies/cluster_builders.hpp"

using namespace foresight;
using foresight::test::dgx;
using namespace foresight::sim::literals;

namespace {

struct Run {
  strategy::CompiledGraph compiled;
  sim::ExecutionResult result;
  strategy::RankBreakdown breakdown;
};

Run run(const strategy::Model& m, const strategy::Plan& p) {
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  Run r;
  r.compiled = strategy::compile_data_parallel(m, p, dgx(), compute);
  r.result = sim::execute(r.compiled.graph, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::flow);
  const auto& ends = r.compiled.step_end;
  r.breakdown = strategy::breakdown(r.compiled.graph, r.result, 0, r.result.end[ends.front()[0]],
                                    r.result.end[ends.back()[0]], static_cast<int>(ends.size()) - 1);
  return r;
}

}  // namespace

TEST_CASE("a 1-GPU DDP step is its kernels plus host time, without communication", "[training]") {
  const auto model = test::toy_mlp(6, 2048);
  strategy::Plan p;
  p.dp = 1;
  p.micro_batch = 64;
  p.dispatch_forward = p.dispatch_backward = p.dispatch_optimizer = sim::Time{};
  p.step_overhead = sim::Time{};
  const Run r = run(model, p);
  REQUIRE(r.breakdown.comm_s == 0.0);
  REQUIRE(r.breakdown.exposed_comm_s == 0.0);
  // With nothing to wait for on the host, the GPU never idles: the step is the sum of its
  // kernels' durations (each costed by the compute model), one after another on one stream.
  double kernels = 0.0;
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  for (sim::NodeId n = 0; n < r.compiled.graph.nodes.size(); ++n) {
    const auto& node = r.compiled.graph.nodes[n];
    if (node.rank == 0 && node.kind == sim::OpKind::compute && r.result.start[n] >= r.result.end[r.compiled.step_end[0][0]] &&
        r.result.end[n] <= r.result.end[r.compiled.step_end[1][0]]) {
      kernels += node.duration.seconds();
    }
  }
  REQUIRE(r.breakdown.compute_s == Approx(kernels).epsilon(1e-9));
  REQUIRE(r.breakdown.iteration_s == Approx(r.breakdown.compute_s + r.breakdown.host_s).epsilon(1e-9));
  REQUIRE(r.breakdown.host_s < 1e-6);
  // With dispatch costs the host becomes the bottleneck of these small kernels: idle shows as host time.
  p.dispatch_forward = p.dispatch_backward = 200_us;
  const Run slow = run(model, p);
  REQUIRE(slow.breakdown.iteration_s == Approx(slow.breakdown.compute_s + slow.breakdown.host_s).epsilon(1e-9));
  REQUIRE(slow.breakdown.host_s > 1e-3);
}

TEST_CASE("DDP on 8 GPUs overlaps its all-reduces with the backward pass", "[training]") {
  const auto model = test::toy_mlp(24, 4096);  // 24 x 64 MiB of fp32 gradients
  strategy::Plan p;
  p.dp = 8;
  p.micro_batch = 256;
  const Run r = run(model, p);
  REQUIRE(r.breakdown.comm_s > 0.0);
  REQUIRE(r.breakdown.exposed_comm_s < r.breakdown.comm_s);
  REQUIRE(r.compiled.buckets.size() > 1);
  // Every bucket's all-reduce starts before the last backward kernel ends.
  sim::Time last_backward;
  std::vector<sim::Time> reduce_starts;
  const auto& g = r.compiled.graph;
  for (sim::NodeId n = 0; n < g.nodes.size(); ++n) {
    if (g.nodes[n].rank != 0 || r.result.end[n] > r.result.end[r.compiled.step_end[0][0]]) continue;
    if (g.nodes[n].phase == sim::Phase::wgrad) last_backward = std::max(last_backward, r.result.end[n]);
    if (g.nodes[n].kind == sim::OpKind::collective) reduce_starts.push_back(r.result.start[n]);
  }
  REQUIRE(reduce_starts.size() == r.compiled.buckets.size());
  REQUIRE(reduce_starts.front() < last_backward);
}

TEST_CASE("DDP bucket count follows the gradient bytes and the bucket size", "[training]") {
  // 100 layers of 512 x 512 fp32 = 1 MiB of gradients each. The first bucket closes at 1 MiB (one
  // layer), the others at 25 MiB (25 layers): 1 + ceil(99 / 25) = 5 buckets, reversed so the
  // small first bucket (layer 0) is reduced last.
  const auto model = test::toy_mlp(100, 512);
  strategy::Plan p;
  const auto b = strategy::ddp_buckets(model, p);
  REQUIRE(b.size() == 5);
  REQUIRE(b.back().layers == std::vector<std::size_t>{0});
  REQUIRE(b.back().bytes == 1 << 20);
  REQUIRE(b.front().layers.size() == 24);
  REQUIRE(b[1].bytes == 25.0 * (1 << 20));
  // Half precision halves the bytes: 2 layers per first bucket? No: a bucket closes at >= 1 MiB,
  // so the first holds layers 0 and 1 (0.5 + 0.5 MiB), then 50 layers per 25 MiB: 1 + ceil(98/50) = 3.
  p.precision = strategy::Precision::fp16;
  REQUIRE(strategy::ddp_buckets(model, p).size() == 3);
  p.bucket_cap = sim::Bytes(100LL << 20);
  p.precision = strategy::Precision::fp32;
  REQUIRE(strategy::ddp_buckets(model, p).size() == 2);
}

TEST_CASE("gradient accumulation reduces once per step", "[training]") {
  const auto model = test::toy_mlp(4, 1024);
  strategy::Plan p;
  p.dp = 4;
  p.micro_batch = 8;
  p.grad_accum = 3;
  p.steps = 2;
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  const auto c = strategy::compile_data_parallel(model, p, dgx(), compute);
  std::size_t reduces = 0, fwd = 0;
  for (const auto& n : c.graph.nodes) {
    if (n.rank != 0) continue;
    reduces += n.kind == sim::OpKind::collective ? 1 : 0;
    fwd += n.phase == sim::Phase::forward ? 1 : 0;
  }
  REQUIRE(reduces == 2 * c.buckets.size());  // 2 steps
  REQUIRE(fwd == 2 * 3 * 5);  // 2 steps x 3 micro-batches x (4 forward GEMMs + the loss)
}

TEST_CASE("Horovod fuses gradients per cycle and waits for its background thread", "[training]") {
  const auto model = test::toy_mlp(12, 2048);
  strategy::Plan p;
  p.dp = 8;
  p.micro_batch = 64;
  p.framework = strategy::Framework::horovod;
  const Run r = run(model, p);
  std::size_t cycles = 0;
  for (const auto& n : r.compiled.graph.nodes) {
    if (n.rank == 0 && n.stream == strategy::streams::horovod) ++cycles;
  }
  REQUIRE(cycles == p.steps * r.compiled.buckets.size());
  double total = 0.0;
  for (const auto& b : r.compiled.buckets) total += b.bytes;
  REQUIRE(total == Approx(12.0 * 2048 * 2048 * 4));  // every gradient is fused exactly once
  // A 1 s cycle puts every gradient in one cycle; the 128 MiB fusion threshold then splits the
  // 12 x 16 MiB, filled in backward order: the last 8 layers (128 MiB), then the first 4.
  p.cycle_time = sim::Time::from_ps(1'000'000'000'000);
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  const auto groups = strategy::compile_data_parallel(model, p, dgx(), compute).buckets;
  REQUIRE(groups.size() == 2);
  REQUIRE(groups[0].layers.size() == 8);
  REQUIRE(groups[0].layers.front() == 4);
  REQUIRE(groups[1].layers.size() == 4);
}

TEST_CASE("Horovod's explicit groups reduce each group once all of its gradients are ready", "[training]") {
  const auto model = test::toy_mlp(12, 2048);  // 12 layers of 16 MiB of fp32 gradients
  strategy::Plan p;
  p.dp = 8;
  p.micro_batch = 64;
  p.framework = strategy::Framework::horovod;
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  using Layers = std::vector<std::size_t>;
  SECTION("5 groups: 12 layers in runs of 3, 3, 2, 2, 2, reduced last group first") {
    p.gradient_groups = 5;
    const auto b = strategy::compile_data_parallel(model, p, dgx(), compute).buckets;
    REQUIRE(b.size() == 5);
    CHECK(b[0].layers == Layers{10, 11});
    CHECK(b[1].layers == Layers{8, 9});
    CHECK(b[2].layers == Layers{6, 7});
    CHECK(b[3].layers == Layers{3, 4, 5});
    CHECK(b[4].layers == Layers{0, 1, 2});
    for (const auto& g : b) CHECK(g.ready_layer() == g.layers.front());
  }
  SECTION("1 group past the fusion threshold: two pieces, both after the last backward kernel") {
    p.gradient_groups = 1;
    p.micro_batch = 32768;  // each layer's backward (2 GEMMs of 0.27 TFLOP) outlasts a cycle and a copy
    const Run r = run(model, p);
    const auto& b = r.compiled.buckets;
    REQUIRE(b.size() == 2);  // 192 MiB in pieces of at most 128 MiB, filled in backward order
    CHECK(b[0].layers.size() == 8);
    CHECK(b[1].layers == Layers{0, 1, 2, 3});
    CHECK(b[0].ready_layer() == 0);
    CHECK(b[1].ready_layer() == 0);
    // Rank 0's first step: every gradient all-reduce starts after its last backward kernel.
    const auto& g = r.compiled.graph;
    const auto step_end = r.result.end[r.compiled.step_end.front()[0]];
    sim::Time last_backward;
    std::vector<sim::NodeId> reduces;
    for (sim::NodeId n = 0; n < g.nodes.size(); ++n) {
      const auto& node = g.nodes[n];
      if (node.rank != 0 || r.result.end[n] > step_end) continue;
      if (node.kind == sim::OpKind::compute && node.stream == strategy::streams::compute &&
          node.phase == sim::Phase::backward) {
        last_backward = std::max(last_backward, r.result.end[n]);
      }
      if (node.kind == sim::OpKind::collective) reduces.push_back(n);
    }
    REQUIRE(reduces.size() == 2);
    for (const sim::NodeId n : reduces) CHECK(r.result.start[n] >= last_backward);
  }
}

TEST_CASE("a slow input pipeline makes the step host-bound", "[training]") {
  const auto model = test::toy_mlp(4, 1024);
  strategy::Plan p;
  p.dp = 2;
  p.micro_batch = 100;
  p.input_rate = 1000;  // 100 samples per step at 1000/s: 100 ms per step
  const Run r = run(model, p);
  REQUIRE(r.breakdown.iteration_s == Approx(0.1).epsilon(1e-6));
  REQUIRE(r.breakdown.host_s > 0.09);
}

TEST_CASE("memory: weights, gradients, optimizer, activations and buffers by precision", "[training]") {
  const auto model = test::toy_mlp(10, 1000);  // 10 M parameters
  strategy::Plan p;
  p.dp = 8;
  p.micro_batch = 32;
  auto m = strategy::data_parallel_memory(model, p);
  REQUIRE(m.weights == 10e6 * 4);
  REQUIRE(m.gradients == 10e6 * 4);
  REQUIRE(m.optimizer == 10e6 * 4);  // SGD momentum
  REQUIRE(m.buffers == m.gradients);  // DDP bucket copies
  // Saved: 10 layers x 1000 elements + 2 x the largest output (1000), x 32 samples x 4 bytes.
  REQUIRE(m.activations == (10 * 1000.0 + 2000.0) * 32 * 4);
  p.optimizer = strategy::Optimizer::adam;
  p.precision = strategy::Precision::amp_bf16;
  m = strategy::data_parallel_memory(model, p);
  REQUIRE(m.weights == 10e6 * (4 + 2));  // fp32 master + autocast's bf16 copies
  REQUIRE(m.optimizer == 10e6 * 8);
  REQUIRE(m.activations == (10 * 1000.0 + 2000.0) * 32 * 2);
}
