#pragma once
/// Data-parallel training compiled into an execution graph: PyTorch DDP (gradient buckets
/// all-reduced on a communication stream as soon as each is ready, overlapping the backward
/// pass) and Horovod (tensor fusion per background-thread cycle), with gradient accumulation,
/// mixed precision, a host input pipeline and per-step framework overhead. A strategy is a pure
/// function of (model, plan, cluster, compute model): it never touches the simulator.

#include <string>
#include <vector>

#include "exec/execution_graph.hpp"
#include "models/compute_model.hpp"
#include "models/model.hpp"
#include "strategies/plan.hpp"
#include "strategies/rank_emitter.hpp"
#include "topologies/cluster.hpp"

namespace foresight::strategy {

struct CompiledGraph {
  sim::ExecutionGraph graph;
  /// step_end[s][r]: the node of rank r whose end closes training step s.
  std::vector<std::vector<sim::NodeId>> step_end;
  /// step_begin[s][r]: the first node of rank r's step s.
  std::vector<std::vector<sim::NodeId>> step_begin;
  std::vector<GradientBucket> buckets;  ///< in launch order (a pipeline: every stage's, by stage)
  /// Pipelines: each rank's model chunks as layer ranges [first, last), and the most micro-batches
  /// whose activations a rank holds at once, by the schedule.
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> rank_chunks;
  std::vector<double> rank_activation_peak_bytes;
  std::vector<int> rank_in_flight;
  /// Per simulated rank: its (replica, stage, TP rank).
  struct Coords {
    int replica = 0;
    int stage = 0;
    int tp_rank = 0;
  };
  std::vector<Coords> rank_coords;
  /// Pipelines: the rank of each stage's replica 0, TP rank 0.
  std::vector<sim::RankId> stage_ranks;
  /// What folding did (HybridLayout::describe), empty when nothing folded.
  std::string folding;
  /// One simulated EP rank stands for its whole EP group (alike routing).
  bool ep_folded = false;
  /// Folded as if every placement were the first (plan.fold_as_alike): for bounds, never run.
  bool bounds_only = false;
  /// Kernels were coalesced. False when not asked, or when the builder read the end of a kernel
  /// that others had joined, and the graph was built again one node per kernel (twice the work).
  bool coalesced = false;
};

/// How a strategy builds its graph.
struct CompileOptions {
  /// Coalesce runs of kernels into single nodes (sim::ExecutionGraph::add_kernel): the same
  /// simulation with fewer nodes and events. Off where every kernel's node is read (timelines,
  /// Chakra export, tests that look at kernels).
  bool coalesce = false;
};

/// Starts coalescing `out`'s graph where `o` asks (before any node is added).
void begin_compile(CompiledGraph& out, const CompileOptions& o);
/// Ends it: the step boundaries become node indices. Returns false where coalescing could not
/// keep the answer exact (a builder id read that is not the end or start of its node): the
/// caller then compiles again without it.
bool end_compile(CompiledGraph& out);

/// DDP buckets: parameters in registration (forward) order fill buckets that close at the first
/// at least `first_bucket` bytes, then at least `bucket_cap` bytes; the list is then reversed,
/// so bucket 0 holds the last layers and the small first bucket is reduced last (PyTorch
/// reducer.cpp compute_bucket_assignment_by_size; distributed.py _ddp_init_helper).
/// Only layers [first, last) take part (a pipeline stage's); last = 0 means all.
std::vector<GradientBucket> ddp_buckets(const Model& model, const Plan& plan, std::size_t first = 0,
                                        std::size_t last = 0);
/// Horovod fusion groups of layers [first, last): gradients whose estimated backward completion
/// falls in one cycle of the background thread are fused, up to the fusion threshold.
std::vector<GradientBucket> horovod_groups(const Model& model, const Plan& plan, const ComputeModel& compute, int cc,
                                           std::size_t first = 0, std::size_t last = 0);

/// Compiles `plan.steps` training steps of data-parallel training on the cluster's first
/// plan.dp GPUs (one process, one host thread, per GPU).
CompiledGraph compile_data_parallel(const Model& model, const Plan& plan, const topo::Cluster& cluster,
                                    const ComputeModel& compute, const CompileOptions& options = {});

}  // namespace foresight::strategy
