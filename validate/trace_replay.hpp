#pragma once
/// `foresight replay` of PyTorch-profiler (Kineto) traces and foresight.replay(): one step rebuilt
/// and simulated (traces/replay.hpp), for one rank alone or several ranks jointly, on the traces'
/// own GPU or on another cluster (collectives timed by its network, kernels retimed for its GPU
/// model: validate/trace_retime.hpp), and the JSON both print. The text report and the Chakra
/// replay are the command's.

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "exec/executor.hpp"
#include "topologies/cluster.hpp"
#include "traces/gpu_retime.hpp"
#include "traces/kineto.hpp"
#include "traces/replay.hpp"

namespace foresight::validate {

/// The replay options (--step, --cluster, --gpus, --trace-gpu, --keep-stalls).
struct ReplaySettings {
  int step = -1;           ///< 0-based among the (first) trace's steps; negative from the end
  std::string cluster;     ///< empty: the traces' own GPU; else a preset or topology file
  int gpus = 0;            ///< GPUs on `cluster` (0: the world size; joint: one per trace)
  std::string trace_gpu;   ///< the catalog GPU the traces ran on, when not recorded as one
  bool keep_stalls = false;
};

/// (replayed - measured) / measured, in percent.
double error_pct(double replayed, double measured);
/// Where step `number` of `t` began (us on the trace's clock); 0 when the trace lacks it.
double step_start_us(const trace::KinetoTrace& t, int number);

/// Every trace in `paths` (a .tar.gz gives each member), in order.
std::vector<trace::KinetoTrace> load_kineto_traces(const std::vector<std::string>& paths);

/// One rank replayed alone.
struct RankReplay {
  bool other = false;  ///< on ReplaySettings::cluster rather than the trace's own GPU
  int gpus = 0;        ///< the job's GPUs on that cluster
  topo::Cluster cluster;
  std::optional<trace::KernelRetimer> retime;  ///< none: kernels keep their measured times
  trace::ReplayGraph graph;
  sim::ExecutionResult result;
  double replayed_s = 0.0;  ///< the replayed step
  trace::StepMeans mean;    ///< over the back-to-back steps after the first (the window)
};

/// Own cluster: every op at its measured time, on one GPU (the fabric only hosts the rank).
/// Another cluster: the recorded NCCL collectives over its first `gpus` GPUs (default: the
/// trace's world size, at least 2), timed there.
RankReplay replay_rank(const trace::KinetoTrace& t, const ReplaySettings& s);
/// {trace, gpu, step, measured_s, replayed_s, error_pct, gpu_ops, nccl_ops, cluster,
/// modelled_collectives, retimed, inferred_waits, unexplained_stalls, stalls_kept, window,
/// steady_mean} (keys in docs/usage.md).
nlohmann::json replay_json(const RankReplay& r, const trace::KinetoTrace& t, const ReplaySettings& s);

/// Several ranks replayed in one graph, their NCCL kernels matched across ranks.
struct JointReplay {
  bool other = false;
  topo::Cluster cluster;
  std::optional<trace::KernelRetimer> retime;
  trace::JointReplayGraph graph;
  trace::RetimeCounts retimed;  ///< over every rank
  sim::ExecutionResult result;
  std::vector<double> replayed_s;                 ///< per graph rank
  std::vector<const trace::KinetoTrace*> ranked;  ///< the traces in the graph's rank order
  double mape_pct = 0.0;                          ///< mean |error| over the ranks
  double worst_pct = 0.0;                         ///< largest |error|
};

/// One GPU per trace (ConfigError when `gpus` says otherwise). `traces` must outlive the result.
JointReplay replay_joint(const std::vector<trace::KinetoTrace>& traces, const ReplaySettings& s);
/// {ranks, shared_clock, matched_collectives, modelled_collectives, cluster, retimed, stalls_kept,
/// makespan_s, mape_pct} (keys in docs/usage.md).
nlohmann::json replay_json(const JointReplay& r, const ReplaySettings& s);

/// The replayed timeline as a Perfetto/Chrome trace, titled with the traces replayed.
void write_replay_timeline(std::ostream& os, const std::vector<std::string>& traces, const sim::ExecutionGraph& graph,
                           const sim::ExecutionResult& result, const std::string& cluster);

}  // namespace foresight::validate
