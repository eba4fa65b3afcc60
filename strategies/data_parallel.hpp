#pragma once
/// Data-parallel training compiled into an execution graph: PyTorch DDP (gradient buckets
/// all-reduced on a communication stream as soon as each is ready, overlapping the backward
/// pass) and Horovod (tensor fusion per background-thread cycle), with gradient accumulation,
/// mixed precision, a host input pipeline and per-step framework overhead. A strategy is a pure
/// function of (model, plan, cluster, compute model): it never touches the simulator.

#include <vector>

#include "sim/execution_graph.hpp"
#include "strategies/compute_model.hpp"
#include "strategies/model.hpp"
#include "strategies/plan.hpp"
#include "topologies/cluster.hpp"

namespace foresight::strategy {

/// Streams of a data-parallel rank.
namespace streams {
inline constexpr sim::StreamId compute = 1;
inline constexpr sim::StreamId nccl = 2;
inline constexpr sim::StreamId dataloader = 100;  ///< the DataLoader's worker processes
inline constexpr sim::StreamId horovod = 101;     ///< Horovod's background thread
}  // namespace streams

/// One gradient bucket (DDP) or fusion group (Horovod) of a step.
struct GradientBucket {
  double bytes = 0.0;
  std::vector<std::size_t> layers;  ///< indices into Model::layers, forward order
};

struct CompiledGraph {
  sim::ExecutionGraph graph;
  /// step_end[s][r]: the node of rank r whose end closes training step s.
  std::vector<std::vector<sim::NodeId>> step_end;
  /// step_begin[s][r]: the first node of rank r's step s.
  std::vector<std::vector<sim::NodeId>> step_begin;
  std::vector<GradientBucket> buckets;  ///< in launch order
};

/// The kernel `t` of a micro-batch of `batch` samples in the plan's precision on a GPU of
/// compute capability `cc`: shape, dtype, FLOPs and bytes.
sim::OpSignature instantiate(const OpTemplate& t, int batch, const Plan& plan, int cc);

/// DDP buckets: parameters in registration (forward) order fill buckets that close at the first
/// at least `first_bucket` bytes, then at least `bucket_cap` bytes; the list is then reversed,
/// so bucket 0 holds the last layers and the small first bucket is reduced last (PyTorch
/// reducer.cpp compute_bucket_assignment_by_size; distributed.py _ddp_init_helper).
std::vector<GradientBucket> ddp_buckets(const Model& model, const Plan& plan);

/// Compiles `plan.steps` training steps of data-parallel training on the cluster's first
/// plan.dp GPUs (one process, one host thread, per GPU).
CompiledGraph compile_data_parallel(const Model& model, const Plan& plan, const topo::Cluster& cluster,
                                    const ComputeModel& compute);

}  // namespace foresight::strategy
