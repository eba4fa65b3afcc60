// foresight replay TRACE...: one iteration of PyTorch-profiler (Kineto) traces rebuilt as an
// execution graph and simulated (validate/trace_replay.hpp), beside the steps they measured. One trace:
// its rank alone. Several (files, or the members of a .tar.gz archive): the ranks jointly, their
// NCCL kernels matched into collectives.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "cli/commands.hpp"
#include "cli/replay_chakra.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "topologies/gpu_spec.hpp"
#include "traces/kernel_agreement.hpp"
#include "traces/kineto.hpp"
#include "traces/profile_db_json.hpp"
#include "traces/profile_import.hpp"
#include "traces/pytorch_et.hpp"
#include "traces/replay.hpp"
#include "validate/et_replay.hpp"
#include "validate/trace_replay.hpp"

namespace foresight::cli {
namespace {

struct ReplayOptions {
  std::vector<std::string> traces;
  int step = -1;
  std::string cluster;
  int gpus = 0;
  bool json = false;
  std::string output;
  std::string trace;  ///< the replayed timeline (Chrome trace JSON), when given
  std::string trace_gpu;  ///< the catalog model the traces ran on, when their recorded name is not one
  bool keep_stalls = false;
  bool compare_kernels = false;  ///< two traces of one program: compare their step kernel for kernel
  std::string comm_groups;       ///< Chakra: the comm-group file
  std::string network;           ///< Chakra: the network model
  bool step_given = false;
  bool from_shapes = false;  ///< host+device ETs: kernels timed from their shapes
};

/// The replay options the library takes (validate/trace_replay.hpp).
validate::ReplaySettings settings(const ReplayOptions& o) {
  return {o.step, o.cluster, o.gpus, o.trace_gpu, o.keep_stalls};
}

/// Writes the replayed timeline of `graph` to o.trace (Perfetto / chrome://tracing), if asked.
void write_timeline(Outputs& out, const ReplayOptions& o, const sim::ExecutionGraph& graph,
                    const sim::ExecutionResult& result, const std::string& cluster) {
  if (o.trace.empty()) return;
  out.emit(o.trace, [&](std::ostream& os) { validate::write_replay_timeline(os, o.traces, graph, result, cluster); });
}

/// The text line saying how kernels were retimed, or that they keep their measured times.
std::string retime_line(const std::optional<trace::KernelRetimer>& r, const trace::RetimeCounts& n) {
  if (!r) return "";
  return fmt::format("gpu         kernels retimed from {} to {} (Habitat's wave scaling): {} scaled by its HBM bandwidth "
                     "(x {:.3f}), {} under one wave kept, {} host and peer copies kept\n",
                     r->from().name, r->to().name, n.scaled, r->bandwidth_factor(), n.under_one_wave, n.link_copies);
}

/// The text line on a rank's unexplained stalls, or "" when it has none.
std::string stalls_line(const trace::KinetoTrace& t, int step, const std::vector<trace::GpuStall>& stalls, bool kept) {
  if (stalls.empty()) return "";
  const trace::KinetoGpuOp& op = t.gpu_ops[stalls.front().op];
  return fmt::format("stalls      {:.3f} ms of GPU idle with work queued and nothing recorded to wait for ({} stall{}; the "
                     "longest {:.3f} ms on stream {} at {:.3f} ms, before {:.60}): the trace lacks what the GPU waited "
                     "for{}\n",
                     trace::total_us(stalls) * 1e-3, stalls.size(), stalls.size() == 1 ? "" : "s", stalls.front().dur_us * 1e-3, op.stream,
                     (stalls.front().begin_us - validate::step_start_us(t, step)) * 1e-3, op.name,
                     kept ? "; kept as GPU time (--keep-stalls)" : "; --keep-stalls keeps them as GPU time");
}

int replay_one(const ReplayOptions& o, const trace::KinetoTrace& t) {
  const validate::RankReplay replay = validate::replay_rank(t, settings(o));
  Outputs out;
  write_timeline(out, o, replay.graph.graph, replay.result, replay.cluster.name());
  if (o.json) {
    out.emit(o.output, validate::replay_json(replay, t, settings(o)).dump(1) + "\n");
    out.commit();
    return 0;
  }
  const trace::ReplayGraph& r = replay.graph;
  const trace::StepMeans& mean = replay.mean;
  std::string steps;
  if (r.window.size() > 1) {
    steps = fmt::format("warm-up     {} back-to-back steps before it replayed first\n{:>6}  {:>11}  {:>11}  {:>7}\n",
                        r.window.size() - 1, "step", "measured ms", "replayed ms", "error");
    for (const trace::ReplayedStep& s : r.window) {
      const double x = trace::replayed_seconds(s, replay.result.end);
      steps += fmt::format("{:>6}  {:>11.3f}  {:>11.3f}  {:>+6.1f}%\n", s.number, s.measured_s * 1e3, x * 1e3,
                           validate::error_pct(x, s.measured_s));
    }
    steps += fmt::format("steady mean {:.3f} ms measured, {:.3f} ms replayed ({:+.1f}%) over the {} steps after the "
                         "first\n",
                         mean.measured_s * 1e3, mean.replayed_s * 1e3, validate::error_pct(mean.replayed_s, mean.measured_s),
                         mean.steps);
  }
  out.emit(o.output, fmt::format("trace       {} ({}{})\nstep        ProfilerStep#{}: {} GPU ops, {} of them NCCL\n"
                             "{}{}{}measured    {:.3f} ms\nreplayed    {:.3f} ms ({:+.1f}%)\n",
                             t.path, t.gpu_name.empty() ? "GPU not recorded" : t.gpu_name,
                             t.world_size > 0 ? fmt::format(", rank {} of {}", t.rank, t.world_size) : "", r.step,
                             r.gpu_ops, r.nccl_ops,
                             replay.other ? fmt::format("cluster     {} ({} GPUs): {} NCCL kernels timed as its collectives\n{}",
                                                        replay.cluster.name(), replay.gpus, r.modelled_collectives,
                                                        retime_line(replay.retime, r.retimed))
                                          : "",
                             stalls_line(t, r.step, r.stalls, o.keep_stalls), steps, r.measured_s * 1e3,
                             replay.replayed_s * 1e3, validate::error_pct(replay.replayed_s, r.measured_s)));
  out.commit();
  return 0;
}

int replay_joint(const ReplayOptions& o, const std::vector<trace::KinetoTrace>& traces) {
  const validate::JointReplay replay = validate::replay_joint(traces, settings(o));
  const trace::JointReplayGraph& g = replay.graph;
  Outputs out;
  write_timeline(out, o, g.graph, replay.result, replay.cluster.name());
  if (o.json) {
    out.emit(o.output, validate::replay_json(replay, settings(o)).dump(1) + "\n");
    out.commit();
    return 0;
  }
  std::string text = fmt::format(
      "traces      {} ranks of {} ({}), ProfilerStep#{}\ncollectives {} per rank, matched across ranks{}\n"
      "clock       {}\n{}\n{:>4}  {:>10}  {:>11}  {:>11}  {:>7}  {}\n",
      traces.size(), traces.front().world_size, traces.front().gpu_name.empty() ? "GPU not recorded" : traces.front().gpu_name,
      g.ranks.front().step, g.matched_collectives,
      replay.other ? fmt::format("; {} timed on {}", g.modelled_collectives, replay.cluster.name()) : "",
      g.shared_clock ? "shared: each rank starts at its recorded step start" : "not shared: every rank starts at 0",
      retime_line(replay.retime, replay.retimed), "rank",
      "offset ms", "measured ms", "replayed ms", "error", "trace");
  for (std::size_t r = 0; r < g.ranks.size(); ++r) {
    const trace::ReplayRank& x = g.ranks[r];
    text += fmt::format("{:>4}  {:>10.3f}  {:>11.3f}  {:>11.3f}  {:>+6.1f}%  {}\n", x.rank, x.offset_s * 1e3,
                        x.measured_s * 1e3, replay.replayed_s[r] * 1e3, validate::error_pct(replay.replayed_s[r], x.measured_s),
                        x.path);
  }
  for (std::size_t r = 0; r < g.ranks.size(); ++r) {
    const std::string line = stalls_line(*replay.ranked[r], g.ranks[r].step, g.ranks[r].stalls, o.keep_stalls);
    if (!line.empty()) text += fmt::format("rank {:<6} {}", g.ranks[r].rank, line.substr(12));
  }
  text += fmt::format("\nmean |error| {:.1f}%, worst {:.1f}%\n", replay.mape_pct, replay.worst_pct);
  out.emit(o.output, text);
  out.commit();
  return 0;
}

/// Two tracers' records of one step, kernel for kernel (traces/kernel_agreement.hpp).
int compare_kernels(const ReplayOptions& o, const std::vector<trace::KinetoTrace>& traces) {
  if (traces.size() != 2) {
    throw sim::ConfigError(fmt::format("--compare-kernels: expected two traces, found {}", traces.size()));
  }
  const trace::KinetoTrace& a = traces[0];
  const trace::KinetoTrace& b = traces[1];
  const trace::KernelAgreement k = trace::compare_step_kernels(a, b, o.step);
  const bool same = k.kernels_a == k.kernels_b && k.same_name_in_order == k.kernels_a;
  std::string text = fmt::format(
      "kernels     {} in {}\n            {} in {}\nin order    {} of {} positions launch the same kernel{}\n"
      "GPU time    {:.3f} ms vs {:.3f} ms ({:+.2f}%)\nper kernel  duration ratio (second / first) median {:.3f}, "
      "10th percentile {:.3f}, 90th {:.3f}\n",
      k.kernels_a, a.path, k.kernels_b, b.path, k.same_name_in_order, std::max(k.kernels_a, k.kernels_b),
      same ? ": the same kernels" : "", k.total_a_us * 1e-3, k.total_b_us * 1e-3,
      k.total_a_us > 0 ? (k.total_b_us / k.total_a_us - 1.0) * 100.0 : 0.0, k.median_ratio, k.p10_ratio, k.p90_ratio);
  if (!k.mismatch_a.empty()) {
    text += fmt::format("first differs at kernel {}: {:.80} vs {:.80}\n", k.first_mismatch, k.mismatch_a, k.mismatch_b);
  }
  emit(o.output, text);
  return 0;
}

/// Refuses the options that only Kineto traces take, for traces of `kind`.
void refuse_kineto_options(const ReplayOptions& o, std::string_view kind) {
  const auto refuse = [&](bool given, std::string_view flag) {
    if (given) throw sim::ConfigError(fmt::format("{}: applies to Kineto traces, not to {}", flag, kind));
  };
  refuse(o.step_given, "--step");
  refuse(!o.trace_gpu.empty(), "--trace-gpu");
  refuse(o.keep_stalls, "--keep-stalls");
  refuse(o.compare_kernels, "--compare-kernels");
}

/// Chakra ETs: a directory, a prefix or one rank's file (cli/replay_chakra.hpp).
int run_chakra(const ReplayOptions& o) {
  if (o.traces.size() != 1) {
    throw sim::ConfigError(fmt::format("replay: Chakra ETs are one workload (a directory, a PREFIX, or one PREFIX.RANK.et), "
                                       "expected one path, found {}",
                                       o.traces.size()));
  }
  refuse_kineto_options(o, "Chakra ETs");
  if (o.from_shapes) throw sim::ConfigError("--from-shapes: applies to PyTorch execution traces, not to Chakra ETs");
  return replay_chakra({o.traces.front(), o.comm_groups, o.cluster, o.gpus, o.network, o.json, o.output, o.trace});
}

/// PyTorch execution traces (host ETs, or Chakra's host+device ETs): validate/et_replay.hpp.
int run_pytorch_et(const ReplayOptions& o) {
  refuse_kineto_options(o, "PyTorch execution traces");
  if (!o.comm_groups.empty()) throw sim::ConfigError("--comm-groups: applies to Chakra ETs; PyTorch execution traces name their groups");
  std::vector<trace::PytorchEt> ets;
  for (const std::string& path : o.traces) {
    for (trace::PytorchEt& e : trace::load_pytorch_ets(path)) ets.push_back(std::move(e));
  }
  validate::EtReplaySettings s;
  if (!o.cluster.empty()) s.cluster = o.cluster;
  s.gpus = o.gpus;
  if (!o.network.empty()) s.network = o.network;
  s.measured = !o.from_shapes;
  const validate::EtReplay r = validate::replay_execution_traces(ets, s);
  Outputs out;
  write_timeline(out, o, r.graph.graph, r.result, r.cluster.name());
  if (o.json) {
    out.emit(o.output, validate::et_replay_json(r, ets, s).dump(1) + "\n");
    out.commit();
    return 0;
  }
  const trace::EtGraph& g = r.graph;
  std::string kinds;
  for (const auto& [name, n] : g.collective_kinds) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", name, n);
  const bool device = std::all_of(ets.begin(), ets.end(), [](const trace::PytorchEt& e) { return e.has_device_ops(); });
  std::string text = fmt::format(
      "trace       {}: {} rank{}, PyTorch execution trace schema {} ({})\n"
      "ops         {} ops: {} kernels ({} GEMMs, {} convolutions, {} attention, {} memory-bound), {} collectives{}, {} "
      "stream waits, {} host syncs\n"
      "timing      {}\n"
      "cluster     {} ({} GPUs), {} network{}\n",
      o.traces.front(), ets.size(), ets.size() == 1 ? "" : "s", ets.front().schema.empty() ? "not recorded" : ets.front().schema,
      device ? "host+device" : "host only", g.ops, g.kernels, g.gemms, g.convolutions, g.attention, g.memory, g.collectives,
      kinds.empty() ? "" : " (" + kinds + ")", g.waits, g.host_syncs,
      g.measured ? "the recorded times of the GPU ops and of the host between them"
                 : fmt::format("kernels timed from their shapes by the {} compute model; host time {:g} us per operator, "
                               "{:g} us more per call from Python, {:g} us per launch",
                               r.cluster.gpu_model(0).name, trace::EtGraphOptions{}.op_overhead.microseconds(),
                               trace::EtGraphOptions{}.python_overhead.microseconds(), trace::EtGraphOptions{}.launch.microseconds()),
      r.cluster.name(), r.cluster.gpu_count(), s.network,
      g.stands_for > static_cast<int>(ets.size()) ? fmt::format("; each trace stands for {} identical ranks", g.stands_for) : "");
  std::string per_rank;
  for (std::size_t k = 0; k < r.replayed_s.size() && k < 16; ++k) per_rank += fmt::format("{}{:.3f}", k == 0 ? "" : ", ", r.replayed_s[k] * 1e3);
  if (r.replayed_s.size() > 16) per_rank += ", ...";
  text += fmt::format("replayed    {:.3f} ms per iteration (the slowest rank; per rank: {} ms)\n", r.iteration_s * 1e3, per_rank);
  if (g.recorded_s) {
    text += fmt::format("recorded    {:.3f} ms (first to last recorded op), replay {:+.1f}%\n", *g.recorded_s * 1e3,
                        (r.iteration_s - *g.recorded_s) / *g.recorded_s * 100.0);
  }
  out.emit(o.output, text);
  out.commit();
  return 0;
}

int run_replay(const ReplayOptions& o) {
  if (std::any_of(o.traces.begin(), o.traces.end(), is_chakra_input)) return run_chakra(o);
  if (std::any_of(o.traces.begin(), o.traces.end(), trace::is_pytorch_et_path)) {
    if (!std::all_of(o.traces.begin(), o.traces.end(), trace::is_pytorch_et_path)) {
      throw sim::ConfigError("replay: PyTorch execution traces and Kineto traces cannot be replayed together");
    }
    return run_pytorch_et(o);
  }
  if (o.from_shapes) throw sim::ConfigError("--from-shapes: applies to PyTorch execution traces, not to Kineto traces");
  if (!o.comm_groups.empty() || !o.network.empty()) {
    throw sim::ConfigError(fmt::format("{}: applies to Chakra ETs, not to Kineto traces", o.comm_groups.empty() ? "--network" : "--comm-groups"));
  }
  const std::vector<trace::KinetoTrace> traces = validate::load_kineto_traces(o.traces);
  if (o.compare_kernels) return compare_kernels(o, traces);
  return traces.size() == 1 ? replay_one(o, traces.front()) : replay_joint(o, traces);
}

struct ImportOptions {
  std::vector<std::string> traces;
  std::string gpu;
  std::string output;
};

int run_import(const ImportOptions& o) {
  if (topo::try_find_gpu_spec(o.gpu) == nullptr) {
    throw sim::ConfigError(fmt::format("--gpu: expected a catalog GPU name (foresight --list), found \"{}\"", o.gpu));
  }
  std::vector<trace::KinetoTrace> traces;
  std::vector<std::pair<std::string, std::string>> provenance;
  for (const std::string& path : o.traces) {
    for (trace::KinetoTrace& t : trace::load_kineto_files(path)) {
      provenance.emplace_back(fmt::format("trace {}", traces.size()),
                              fmt::format("{} ({})", t.path, t.gpu_name.empty() ? "GPU not recorded" : t.gpu_name));
      traces.push_back(std::move(t));
    }
  }
  const trace::ImportedProfile p = trace::import_profile(traces, o.gpu);
  sim::write_file_atomically(o.output, trace::profile_db_json(p.db, provenance));
  fmt::print("import-profile: {} kernels from {} matrix operator instances written to {} ({} without shapes or dtype, "
             "{} without kernels skipped)\n",
             p.db.size(), p.instances, o.output, p.no_shapes, p.no_kernels);
  return 0;
}

}  // namespace

void add_import_profile_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<ImportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "import-profile", "Turn the matrix operators of PyTorch-profiler traces recorded with shapes into a profile database");
  cmd->add_option("traces", o->traces, "Kineto traces (.json, .json.gz, .tar.gz) recorded with record_shapes=True")->required();
  cmd->add_option("--gpu", o->gpu, "The catalog name of the GPU the traces ran on (foresight --list)")->required();
  cmd->add_option("-o,--output", o->output, "Profile database to write (atomically)")->required();
  cmd->callback([o, &run] { run = [o] { return run_import(*o); }; });
}

void add_replay_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<ReplayOptions>();
  CLI::App* cmd = app.add_subcommand(
      "replay", "Replay one iteration of PyTorch-profiler (Kineto) traces, one rank or all ranks jointly, and compare it "
                "with the measured step; or replay MLCommons Chakra execution traces (ASTRA-sim's per-rank .et files)");
  cmd->add_option("traces", o->traces,
                  "Kineto traces (.json, .json.gz, or a .tar.gz of several ranks); several: a joint replay. Or Chakra ETs: "
                  "a directory of PREFIX.RANK.et files, a PREFIX, or one rank's file. Or PyTorch execution traces (host "
                  "ETs, or Chakra's host+device ETs: .json, .json.gz, or a .tar.gz of one per rank)")
      ->required();
  cmd->add_option("--comm-groups", o->comm_groups,
                  "Chakra: the comm-group file ({\"pg_name\": [ranks]}, ASTRA-sim's --comm-group-configuration); default "
                  "PREFIX.comm_groups.json when present");
  cmd->add_option("--network", o->network,
                  "Chakra and PyTorch ETs: the network model, analytical or flow (default: the one the ETs were simulated "
                  "with, else flow)")
      ->check(CLI::IsMember({"analytical", "flow"}));
  auto* step = cmd->add_option("--step", o->step,
                  "Which ProfilerStep to replay, 0-based in the (first) trace; negative counts from the end (default: the "
                  "last)");
  cmd->add_option("--cluster", o->cluster, "Replay on this cluster (preset or topology file): recorded NCCL collectives are timed on its network, and kernels retimed for its GPU model");
  cmd->add_option("--gpus", o->gpus, "GPUs of the job on --cluster (default: the trace's world size; joint: one per trace)")
      ->check(at_least(2));
  cmd->add_option("--trace-gpu", o->trace_gpu,
                  "The catalog model the traces ran on (foresight --list), where their recorded GPU name is not one; "
                  "kernels are retimed when --cluster's GPUs are another model");
  cmd->add_flag("--from-shapes", o->from_shapes,
                "PyTorch host+device ETs: time kernels from their shapes on --cluster's GPU, as for host ETs, instead of "
                "their recorded times");
  cmd->add_flag("--keep-stalls", o->keep_stalls,
                "Keep the GPU's unexplained stalls (queued work held with nothing recorded to wait for: work the trace "
                "lacks) as GPU time of their measured length");
  cmd->add_flag("--compare-kernels", o->compare_kernels,
                "Two traces of one program (e.g. libforesight_inject.so's and the PyTorch profiler's): compare the step's "
                "kernels in launch order (names, count, GPU time, per-kernel duration ratios) instead of replaying");
  cmd->add_flag("--json", o->json,
                "Print one rank's {trace, gpu, step, measured_s, replayed_s, error_pct, gpu_ops, nccl_ops, cluster, "
                "modelled_collectives, retimed, inferred_waits, unexplained_stalls, stalls_kept, window: [{step, measured_s, "
                "replayed_s, error_pct}], steady_mean: {steps, measured_s, replayed_s, error_pct}}, or a joint replay's "
                "{ranks: [{..., inferred_waits, unexplained_stalls}], shared_clock, matched_collectives, "
                "modelled_collectives, cluster, retimed, stalls_kept, makespan_s, mape_pct}; retimed is null or {from, to, "
                "bandwidth_factor, scaled, under_one_wave, link_copies}; unexplained_stalls is {total_s, count, largest: "
                "[{stream, begin_s, dur_s, before}]}");
  cmd->add_option("-o,--output", o->output, "Write to this file (atomically) instead of standard output");
  cmd->add_option("--trace", o->trace,
                  "Write the replayed timeline as a Perfetto/Chrome trace to this file (one process per rank, a thread per "
                  "stream), to lay beside the measured trace");
  cmd->callback([o, step, &run] {
    o->step_given = step->count() > 0;
    run = [o] { return run_replay(*o); };
  });
}

}  // namespace foresight::cli
