// Data-parallel strategies on a hand-made model: what a step costs, how DDP buckets and overlaps.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <vector>

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

// PyTorch DataLoader workers (plan.input_workers): the rate a pool of workers sustains, the cores
// they share, and the prefetch bound on how far the loader runs ahead of the training loop.

namespace {

/// Seconds per step of rank 0 over steps [from, to] (ends of step from to step to).
double per_step(const Run& r, std::size_t from, std::size_t to) {
  const auto& ends = r.compiled.step_end;
  return (r.result.end[ends.at(to)[0]] - r.result.end[ends.at(from)[0]]).seconds() /
         static_cast<double>(to - from);
}

/// Rank 0's nodes named `name`, in graph order.
std::vector<sim::NodeId> named(const Run& r, std::string_view name) {
  const sim::ExecutionGraph& g = r.compiled.graph;
  std::vector<sim::NodeId> out;
  for (sim::NodeId n = 0; n < g.nodes.size(); ++n) {
    if (g.nodes[n].rank == 0 && g.names[g.nodes[n].name] == name) out.push_back(n);
  }
  return out;
}

strategy::Plan loader_plan(int workers, double sample_ms, int steps) {
  strategy::Plan p;
  p.dp = 2;
  p.micro_batch = 100;
  p.input_workers = workers;
  p.input_sample_time = sim::Time::from_seconds(sample_ms * 1e-3);
  p.steps = steps;
  return p;
}

}  // namespace


TEST_CASE("DataLoader workers: a loader that cannot keep up delivers n batches per batch time",
          "[training]") {
  const auto model = test::toy_mlp(4, 1024);  // a step's kernels take well under a millisecond
  // 4 workers, 100 samples per batch at 1 ms each: T = 100 ms per batch on a worker, so the loop
  // gets 4 batches every 100 ms: 25 ms per step in steady state, whatever the compute.
  const int n = 4;
  const double batch_s = 100 * 1e-3;
  strategy::Plan p = loader_plan(n, 1.0, 3 * n + 1);
  const Run r = run(model, p);
  // Every window of n steps after the first spans one batch time exactly.
  for (std::size_t from = 0; from + n < r.compiled.step_end.size(); from += n) {
    CAPTURE(from);
    REQUIRE(per_step(r, from, from + n) == Approx(batch_s / n).epsilon(1e-9));
  }
  // The first n batches come at once, after one batch time: each worker's first, then its
  // second (prefetched) one batch time later.
  const auto loads = named(r, "load batch");
  REQUIRE(loads.size() == static_cast<std::size_t>(p.steps));
  for (int i = 0; i < 2 * n; ++i) {
    REQUIRE(r.result.end[loads[i]].seconds() == Approx(batch_s * (1 + i / n)).epsilon(1e-9));
  }

  SECTION("fewer cores than workers share them evenly") {
    p.input_cores = 2;  // 4 workers on 2 cores: each batch takes twice as long
    const Run shared = run(model, p);
    REQUIRE(per_step(shared, 0, n) == Approx(2.0 * batch_s / n).epsilon(1e-9));
    p.input_cores = 8;  // more cores than workers: no change
    REQUIRE(per_step(run(model, p), 0, n) == Approx(batch_s / n).epsilon(1e-9));
  }
  SECTION("the same as a rate of n batches per batch time, once both are steady") {
    strategy::Plan rate = p;
    rate.input_workers = 0;
    rate.input_rate = n * 100 / batch_s;  // samples per second
    const Run by_rate = run(model, rate);
    REQUIRE(per_step(by_rate, 1, static_cast<std::size_t>(p.steps) - 1) ==
            Approx(per_step(r, 1, 1 + n)).epsilon(1e-9));
  }
}

TEST_CASE("DataLoader workers: a loader that keeps up costs the step nothing", "[training]") {
  const auto model = test::toy_mlp(6, 2048);
  strategy::Plan none = loader_plan(0, 0.0, 9);
  none.input_sample_time = sim::Time{};
  const Run base = run(model, none);
  const double step_s = per_step(base, 1, 8);
  // 8 workers whose batches take 4 steps' time: 2 steps' worth per step of loop, twice what it
  // uses.
  const double sample_ms = 4.0 * step_s * 1e3 / 100.0;
  const Run r = run(model, loader_plan(8, sample_ms, 9));
  // The loop waits for the first batch (one batch time), then never again.
  REQUIRE(per_step(r, 1, 8) == Approx(step_s).epsilon(1e-9));
}

TEST_CASE(
    "DataLoader workers: batch i goes to worker i mod n when the loop takes batch i - n x prefetch",
    "[training]") {
  const auto model = test::toy_mlp(6, 2048);
  // Workers far faster than the loop, so each later batch waits for its slot, not its worker.
  for (const int prefetch : {1, 2, 3}) {
    CAPTURE(prefetch);
    strategy::Plan p = loader_plan(3, 1e-4, 14);
    p.input_prefetch = prefetch;
    const Run r = run(model, p);
    const sim::ExecutionGraph& g = r.compiled.graph;
    const auto loads = named(r, "load batch");
    const auto waits = named(r, "wait for batch");
    REQUIRE(loads.size() == waits.size());
    const std::size_t ahead = static_cast<std::size_t>(3 * prefetch);
    std::map<sim::StreamId, int> per_worker;
    int held_by_slot = 0;  // batches that waited for the loop to free a slot, not for their worker
    for (std::size_t i = 0; i < loads.size(); ++i) {
      CAPTURE(i);
      const sim::Node& load = g.nodes[loads[i]];
      REQUIRE(load.stream == strategy::streams::dataloader_worker(static_cast<int>(i % 3)));
      ++per_worker[load.stream];
      // The loop takes batch i after it is loaded.
      REQUIRE(r.result.end[waits[i]] >= r.result.end[loads[i]]);
      if (i < 3) {
        REQUIRE(r.result.start[loads[i]] == sim::Time::zero());  // sent when the iterator starts
      } else if (i < ahead) {
        REQUIRE(r.result.start[loads[i]] == r.result.end[loads[i - 3]]);  // sent then too, queued
      } else {
        // Sent when batch i - ahead is taken; its worker starts it then, or when done with the
        // batch before it (i - n).
        const sim::Time sent = r.result.end[waits[i - ahead]];
        REQUIRE(r.result.start[loads[i]] == std::max(sent, r.result.end[loads[i - 3]]));
        if (r.result.start[loads[i]] == sent && sent > r.result.end[loads[i - 3]]) ++held_by_slot;
      }
    }
    REQUIRE(held_by_slot >= static_cast<int>(loads.size() - ahead) - 3);
    REQUIRE(per_worker.size() == 3);
    for (const auto& [stream, count] : per_worker) REQUIRE(count >= 4);
  }
}

TEST_CASE("amp_fp16: GradScaler unscales every gradient and the host reads found_inf before the optimizer step",
          "[training]") {
  const auto model = test::toy_mlp(6, 2048);
  strategy::Plan p;
  p.dp = 2;
  p.micro_batch = 64;
  p.optimizer = strategy::Optimizer::adam;
  p.dispatch_optimizer = 40_us;
  p.steps = 1;
  const auto count = [](const Run& r, const std::string& name) {
    const auto& g = r.compiled.graph;
    return std::count_if(g.nodes.begin(), g.nodes.end(),
                         [&](const sim::Node& n) { return n.rank == 0 && g.names[n.name] == name; });
  };
  p.precision = strategy::Precision::amp_bf16;  // no loss scaling: no unscale, no sync
  const Run bf16 = run(model, p);
  REQUIRE(count(bf16, "unscale gradients") == 0);
  REQUIRE(count(bf16, "found_inf.item()") == 0);

  p.precision = strategy::Precision::amp_fp16;
  const Run r = run(model, p);
  const auto& g = r.compiled.graph;
  REQUIRE(count(r, "unscale gradients") == 1);
  REQUIRE(count(r, "found_inf.item()") == 1);
  sim::NodeId unscale = 0, found_inf = 0, step = 0;
  for (sim::NodeId n = 0; n < g.nodes.size(); ++n) {
    if (g.nodes[n].rank != 0) continue;
    const std::string& name = g.names[g.nodes[n].name];
    if (name == "unscale gradients") unscale = n;
    if (name == "found_inf.item()") found_inf = n;
    if (name == "optimizer step") step = n;
  }
  // The pass reads and writes each fp32 gradient of the rank's parameters once: 2 x 4 bytes each.
  REQUIRE(g.signatures[g.nodes[unscale].signature].bytes == Approx(8.0 * static_cast<double>(model.params())));
  // The host waits for the pass, then launches the optimizer step: it starts no earlier than the
  // pass's end plus the step's launch cost (the GPU has nothing else queued meanwhile).
  REQUIRE(g.nodes[found_inf].kind == sim::OpKind::sync);
  REQUIRE(g.nodes[found_inf].deps.size() == 1);
  REQUIRE(*g.nodes[found_inf].deps.begin() == unscale);
  REQUIRE(found_inf < step);
  REQUIRE(r.result.start[step] >= r.result.end[unscale] + 40_us);
}
