#pragma once
/// Pipeline parallelism compiled op by op into the execution graph: the model's layers are cut
/// into pp x v chunks, each pipeline rank runs its chunks' forward and backward passes per
/// micro-batch in the schedule's order (naive, GPipe, 1F1B, interleaved 1F1B, PipeDream), and
/// activations and their gradients travel between stages as send/recv over the topology. With
/// dp > 1 each stage's gradients are all-reduced over its data-parallel group during the last
/// backward pass of the step. Ranks are placed stage-major inside a replica: rank = d x pp + s.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "models/compute_model.hpp"
#include "strategies/data_parallel.hpp"
#include "models/model.hpp"
#include "strategies/plan.hpp"
#include "topologies/cluster.hpp"

namespace foresight::strategy {

/// Layers that must stay on one stage: a block (a ResNet block, a transformer layer), or one
/// layer outside any block. [first, last) into Model::layers.
struct PartitionUnit {
  std::size_t first = 0;
  std::size_t last = 0;
  bool block = false;
};
std::vector<PartitionUnit> partition_units(const Model& model);

/// One model chunk (a stage, or a virtual stage when interleaved): its layers and what the
/// partitioner weighed.
struct PipelineChunk {
  std::size_t first = 0;  ///< first layer
  std::size_t last = 0;   ///< one past the last layer
  std::size_t units = 0;
  double seconds = 0.0;   ///< modelled forward + backward time of one micro-batch
  std::int64_t params = 0;
};

/// Modelled forward + backward time of layer `i` for one micro-batch: each kernel's time or its
/// host dispatch cost, whichever is longer (what torchgpipe's balance_by_time measures).
double layer_seconds(const Model& model, std::size_t i, const Plan& plan, const ComputeModel& compute, int cc);

/// Cuts the model into pp x virtual_stages chunks, in order (chunk k runs on pipeline rank
/// k mod pp): by time or parameters, minimizing the largest chunk (contiguous, optimal); into
/// equal numbers of blocks (uniform: non-block layers join the first or last chunk); or by the
/// plan's explicit units per chunk. ConfigError naming the plan field: more chunks than units,
/// blocks not divisible by pp or by the virtual stages per rank, an explicit list that does
/// not cover the model.
std::vector<PipelineChunk> partition_model(const Model& model, const Plan& plan, const ComputeModel& compute, int cc);

/// One task of a pipeline rank: the forward or backward pass of micro-batch `micro` through its
/// local chunk `chunk` (0 .. v-1; global chunk = chunk x pp + stage).
struct PipeTask {
  bool forward = true;
  int micro = 0;
  int chunk = 0;
  bool operator==(const PipeTask&) const = default;
};

/// The order in which pipeline rank `stage` of `p` runs its tasks in one step of `m`
/// micro-batches with `v` chunks per rank (training-frameworks.md section 3):
/// - naive, gpipe: every forward in micro-batch order, then every backward in reverse order;
/// - 1f1b and pipedream: min(p - stage - 1, m) warm-up forwards, then one forward and one
///   backward in turn, then the remaining backwards;
/// - interleaved: Megatron's order over m x v virtual micro-batches in groups of p, with
///   2 (p - stage - 1) + (v - 1) p warm-up forwards. Requires m to be a multiple of p.
std::vector<PipeTask> pipeline_order(Schedule schedule, int p, int v, int m, int stage);

/// Compiles plan.steps steps of pipeline training (plan.pp > 1) on the cluster's first
/// dp x pp GPUs.
CompiledGraph compile_pipeline(const Model& model, const Plan& plan, const topo::Cluster& cluster,
                               const ComputeModel& compute, const CompileOptions& options = {});

}  // namespace foresight::strategy
