#pragma once
// A small model built by hand for strategy tests: `layers` linear layers of `width` x `width`
// (per sample: one row), each a forward GEMM and two backward GEMMs, and a loss.

#include <string>

#include "models/model.hpp"
#include "strategies/plan.hpp"
#include "topologies/cluster_builders.hpp"

namespace foresight::test {

/// One DGX A100 node (8 GPUs), built once per test executable and shared read-only.
inline const topo::Cluster& dgx() {
  static const topo::Cluster c = topo::resolve_cluster("dgx-a100", 8);
  return c;
}

inline strategy::Model toy_mlp(int layers, int width) {
  using strategy::MathKind;
  using strategy::OpTemplate;
  strategy::Model m;
  m.name = "toy-mlp";
  m.input_elems = width;
  const double w = width;
  for (int i = 0; i < layers; ++i) {
    strategy::Layer l;
    l.name = "fc" + std::to_string(i);
    l.kind = "linear";
    l.params = static_cast<std::int64_t>(w * w);
    l.fwd_flops = 2 * w * w;
    l.bwd_flops = 4 * w * w;
    l.saved_elems = w;
    l.output_elems = w;
    l.fwd.push_back(OpTemplate{sim::OpType::gemm, MathKind::matmul, "linear_fwd", {1, width, width, 1}, 0, true, 2 * w * w, 2 * w, w * w});
    l.bwd.push_back(OpTemplate{sim::OpType::gemm, MathKind::matmul, "linear_dgrad", {1, width, width, 1}, 0, true, 2 * w * w, 2 * w, w * w});
    l.bwd.push_back(OpTemplate{sim::OpType::gemm, MathKind::matmul, "linear_wgrad", {width, width, 1, 1}, 2, true, 2 * w * w, 2 * w, w * w});
    m.layers.push_back(l);
  }
  strategy::Layer loss;
  loss.name = "loss";
  loss.kind = "loss";
  loss.fwd.push_back(OpTemplate{sim::OpType::memory, MathKind::pointwise, "cross_entropy_fwd", {1, width}, 0, true, 5 * w, w, 0});
  loss.bwd.push_back(OpTemplate{sim::OpType::memory, MathKind::pointwise, "cross_entropy_bwd", {1, width}, 0, true, 5 * w, 2 * w, 0});
  m.layers.push_back(loss);
  return m;
}

/// A 1F1B pipeline of `stages` stages running `m` micro-batches of `micro_batch` samples in one
/// step.
inline strategy::Plan pipeline_plan(int stages, int micro_batch, int m) {
  strategy::Plan p;
  p.pp = stages;
  p.micro_batch = micro_batch;
  p.grad_accum = m;
  p.global_batch = micro_batch * m;
  p.schedule = strategy::Schedule::one_f_one_b;
  p.steps = 1;
  return p;
}

}  // namespace foresight::test
