#pragma once
/// What a simulation answers (docs/architecture.md, "Outputs"): iteration and run time, throughput, a
/// per-rank breakdown that explains the time, and peak memory with an OOM verdict; as text for
/// people and JSON for programs (keys in docs/architecture.md, never renamed).

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "exec/executor.hpp"
#include "strategies/memory_model.hpp"

namespace foresight::strategy {

/// Time of one iteration of a rank, split by what its GPU was doing (seconds):
/// compute = some kernel ran; exposed_comm = communication ran and no kernel did;
/// bubble = idle inside a pipeline schedule; host = idle otherwise (waiting for the host to
/// launch work or for input data).
struct RankBreakdown {
  double iteration_s = 0.0;
  double compute_s = 0.0;
  double comm_s = 0.0;  ///< all communication time, overlapped or not
  double exposed_comm_s = 0.0;
  double bubble_s = 0.0;
  double host_s = 0.0;
  int gpu = 0;         ///< the GPU the rank runs on
  int represents = 1;  ///< GPUs whose identical ranks it stands for (folded runs), itself included
};

/// A rank's measured window [from, to] of a run, holding `iterations` iterations.
struct RankWindow {
  sim::Time from;
  sim::Time to;
  int iterations = 1;
};
/// Splits each rank's window of `result` (one per rank of `graph`) by the union of its kernels'
/// and communication's run intervals, per iteration. One pass over the graph.
std::vector<RankBreakdown> breakdown(const sim::ExecutionGraph& graph, const sim::ExecutionResult& result,
                                     const std::vector<RankWindow>& windows);
/// The same for one rank.
RankBreakdown breakdown(const sim::ExecutionGraph& graph, const sim::ExecutionResult& result, sim::RankId rank,
                        sim::Time from, sim::Time to, int iterations);

struct RankMemory {
  int rank = 0;
  int gpu = 0;
  int represents = 1;  ///< GPUs with this rank's memory (folded runs), itself included
  MemoryBreakdown bytes;
  double capacity = 0.0;  ///< the GPU's memory, bytes
  bool oom = false;
  double overflow = 0.0;  ///< bytes beyond capacity
};

/// One pipeline stage (rank of the first replica): its model chunks and what they hold.
struct StageReport {
  struct Chunk {
    std::string first_layer;
    std::string last_layer;
    std::size_t units = 0;
    double modelled_s = 0.0;  ///< forward + backward of one micro-batch, as the partitioner weighed it
    std::int64_t params = 0;
  };
  int stage = 0;
  int rank = 0;  ///< the rank whose breakdown and memory the stage reports (replica 0, TP rank 0)
  std::vector<Chunk> chunks;
  int in_flight = 0;  ///< most micro-batches whose activations the stage holds at once
};

/// Expert parallelism: one simulated rank's routed load per iteration.
struct ExpertLoad {
  int rank = 0;
  int gpu = 0;
  int stage = 0;
  int ep_rank = 0;
  double tokens = 0.0;    ///< token assignments its experts received, all its MoE layers and micro-batches
  double expert_s = 0.0;  ///< time its experts' kernels ran (forward, backward, recompute)
};

/// What an iteration and the whole run cost and consume (run/prices.hpp); `priced` false with a
/// note when the price table lacks a GPU model of the run.
struct Costs {
  bool priced = false;
  bool powered = false;
  std::string note;
  double gpu_hours_run = 0.0;
  double usd_per_iteration = 0.0;
  double usd_run = 0.0;
  double kwh_per_iteration = 0.0;
  double kwh_run = 0.0;
};

/// The scenario's prediction set against the measured run it reproduces (Scenario::measured).
struct MeasuredComparison {
  bool present = false;
  bool changed = false;  ///< --set or --gpus changed the scenario: the measured run no longer applies
  bool whole_run = true;  ///< run time (true) or one iteration's time (false)
  double measured_s = 0.0;
  double predicted_s = 0.0;
  std::string role;  ///< "calibration" or "prediction"
  std::string source;
  double error_pct() const { return 100.0 * (predicted_s - measured_s) / measured_s; }
};

struct Report {
  std::string scenario;
  std::string model;
  std::int64_t model_params = 0;
  double model_fwd_flops = 0.0;  ///< per sample
  std::string cluster;
  std::string gpu;
  int gpus = 0;
  int nodes = 0;
  std::string plan_summary;
  /// Identical ranks folded (HybridLayout::describe); empty when every rank was simulated.
  std::string folding;
  int simulated_ranks = 0;
  /// Folded runs: collectives and transfers whose groups or mirrors did not all end together,
  /// and the longest time between one's first and last (sim::ExecutionResult::folded_spread).
  /// None: the folded run is the unfolded one.
  std::uint64_t folding_uneven = 0;
  double folding_spread_s = 0.0;

  MeasuredComparison measured;
  double iteration_time_s = 0.0;
  std::int64_t steps_total = 0;
  double run_time_s = 0.0;
  double samples_per_s = 0.0;
  double tokens_per_s = 0.0;
  double tflops_per_gpu = 0.0;
  double mfu = 0.0;
  /// Hardware FLOPs: every kernel the GPUs run, recomputed forwards included (Chowdhery et al.
  /// 2022, App. B: HFU counts them, MFU does not), per GPU per second, and over the peak.
  double hardware_tflops_per_gpu = 0.0;
  double hfu = 0.0;
  double peak_tflops = 0.0;  ///< the MFU's denominator, per GPU

  RankBreakdown breakdown;  ///< of the slowest rank
  int slowest_rank = 0;
  std::vector<RankBreakdown> per_rank;
  std::vector<RankMemory> memory;
  std::string schedule;               ///< pipelines: the schedule's name; empty otherwise
  std::vector<StageReport> stages;    ///< pipelines: per stage of the first replica
  /// Mixture of experts: the routing, per-rank loads and what imbalance costs: per stage, the
  /// slowest EP rank's expert time minus the mean's, the largest over the stages (per iteration).
  std::string moe_routing;
  std::vector<ExpertLoad> expert_loads;
  double moe_imbalance_s = 0.0;
  double moe_dropped_tokens = 0.0;  ///< assignments one EP group drops by capacity, per iteration

  std::size_t kernels = 0;           ///< distinct kernels costed
  std::size_t kernels_profiled = 0;  ///< of which from the profile database
  std::size_t gradient_buckets = 0;
  std::uint64_t events = 0;
  std::uint64_t fingerprint = 0;
  Costs cost;  ///< filled when the run was given a price table

  double peak_bytes_max() const;
  bool oom() const;
};

/// A number rounded to a whole and grouped by thousands: 2905622.4 -> "2,905,622".
std::string grouped_whole(double v);

/// The report as docs/architecture.md's --json object: iteration_time_s, run_time_s, throughput {...},
/// breakdown {...}, memory {peak_bytes_max, oom, per_rank}, plan (given), and more.
nlohmann::json to_json(const Report& r, const nlohmann::json& plan);
/// The report for people.
std::string to_text(const Report& r);

}  // namespace foresight::strategy
