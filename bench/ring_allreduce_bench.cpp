// A ring all-reduce on 1024 GPUs (128 DGX A100 nodes of a selene-like fat tree) under the
// flow-level and analytical network models: wall time, events, flows and events/s.
// Usage: ring_allreduce_bench [GPUS] [BYTES]
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>

#include "collectives/collective_engine.hpp"
#include "collectives/collective_run.hpp"
#include "sim/simulator.hpp"
#include "topologies/cluster_builders.hpp"

using namespace foresight;

int main(int argc, char** argv) {
  const int gpus = argc > 1 ? std::atoi(argv[1]) : 1024;
  const double bytes = argc > 2 ? std::atof(argv[2]) : 1024.0 * 1024 * 1024;
  auto t0 = std::chrono::steady_clock::now();
  const topo::Cluster cluster = topo::resolve_cluster("selene", gpus);
  const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("cluster: {} with {} GPUs, {} links, built in {:.3f} s\n", cluster.name(), cluster.gpu_count(),
             cluster.link_count(), build_s);
  sim::CollectiveRequest r;
  r.op = sim::CollectiveOp::all_reduce;
  r.algorithm = sim::Algorithm::ring;
  r.bytes = bytes;
  for (int g = 0; g < gpus; ++g) r.ranks.push_back(static_cast<sim::GpuId>(g));
  const sim::CollectiveConfig config;
  t0 = std::chrono::steady_clock::now();
  const auto plan = sim::plan_collective(cluster, config, r);
  const double plan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("plan: {} rings x {} steps, planned in {:.3f} s\n", plan.phases.front().rings.size(),
             plan.phases.front().steps, plan_s);
  for (const auto kind : {sim::NetworkKind::flow, sim::NetworkKind::analytical}) {
    sim::Simulator s;
    const auto net = sim::make_network(kind, s, cluster, config.links);
    sim::CollectiveEngine engine(s, *net);
    struct Done final : sim::EventHandler {
      void handle(sim::Simulator&, const sim::Event&) override {}
    } done;
    const auto id = s.add_handler(done, "done");
    t0 = std::chrono::steady_clock::now();
    engine.start(plan, {id, 0, 0});
    s.run();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("{:>10}: simulated {:.3f} ms ({:.1f} GB/s busbw) in {:.2f} s wall; {} flows, {} events, {:.2f} M events/s\n",
               sim::to_string(kind), s.now().seconds() * 1e3,
               bytes * 2.0 * (gpus - 1) / gpus / s.now().seconds() * 1e-9, wall, engine.flows_started(),
               s.events_processed(), static_cast<double>(s.events_processed()) / wall * 1e-6);
  }
  return 0;
}
