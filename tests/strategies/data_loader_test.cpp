// PyTorch DataLoader workers (plan.input_workers): the rate a pool of workers sustains, the cores
// they share, and the prefetch bound on how far the loader runs ahead of the training loop.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <vector>

#include "run/report.hpp"
#include "strategies/data_parallel.hpp"
#include "tests/strategies/toy_model.hpp"
#include "topologies/cluster_builders.hpp"

using namespace foresight;
using foresight::test::dgx;

namespace {

struct Run {
  strategy::CompiledGraph compiled;
  sim::ExecutionResult result;
};

Run run(const strategy::Model& m, const strategy::Plan& p) {
  const strategy::ComputeModel compute(dgx().gpu_model(0));
  Run r;
  r.compiled = strategy::compile_data_parallel(m, p, dgx(), compute);
  r.result = sim::execute(r.compiled.graph, dgx(), sim::CollectiveConfig{}, sim::NetworkKind::flow);
  return r;
}

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
