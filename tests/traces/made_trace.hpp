#pragma once
// Hand-made Kineto traces for replay tests, and running their replays on one GPU.
#include <string>
#include <utility>
#include <vector>

#include "collectives/collective_config.hpp"
#include "exec/executor.hpp"
#include "topologies/cluster_builders.hpp"
#include "traces/kineto.hpp"
#include "traces/replay.hpp"

namespace foresight::test {

inline sim::ExecutionResult run(const trace::ReplayGraph& g) {
  const topo::Cluster one = topo::resolve_cluster("dgx-a100", 1);
  return sim::execute(g.graph, one, sim::CollectiveConfig{}, sim::NetworkKind::analytical);
}

inline double us(sim::Time t) { return t.seconds() * 1e6; }

/// The start (us) of the replay's last GPU op.
inline double last_gpu_start(const trace::ReplayGraph& g) {
  const auto r = run(g);
  double start = -1.0;
  for (sim::NodeId n = 0; n < g.graph.nodes.size(); ++n) {
    if (g.graph.nodes[n].kind == sim::OpKind::compute) start = us(r.start[n]);
  }
  return start;
}

/// A step of 1000 us: calls `calls` on one thread, GPU ops by correlation.
inline trace::KinetoTrace made(std::vector<trace::KinetoRuntimeCall> calls, std::vector<trace::KinetoGpuOp> ops) {
  trace::KinetoTrace t;
  t.path = "made.json";
  t.steps.push_back({1, 0.0, 1000.0});
  t.runtime = std::move(calls);
  t.gpu_ops = std::move(ops);
  return t;
}

/// A kernel named "kernel CORRELATION".
inline trace::KinetoGpuOp op(std::int64_t stream, double ts, double dur, std::int64_t correlation) {
  trace::KinetoGpuOp o;
  o.name = "kernel ";
  o.name.append(std::to_string(correlation));
  o.stream = stream;
  o.ts_us = ts;
  o.dur_us = dur;
  o.correlation = correlation;
  return o;
}

}  // namespace foresight::test
