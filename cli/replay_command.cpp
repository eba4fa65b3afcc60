// foresight replay TRACE...: one iteration of PyTorch-profiler (Kineto) traces rebuilt as an
// execution graph and simulated (traces/replay.hpp), beside the steps they measured. One trace:
// its rank alone. Several (files, or the members of a .tar.gz archive): the ranks jointly, their
// NCCL kernels matched into collectives.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "collectives/collective_config.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "exec/executor.hpp"
#include "topologies/cluster_builders.hpp"
#include "topologies/gpu_spec.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/kernel_agreement.hpp"
#include "traces/kineto.hpp"
#include "traces/profile_db_json.hpp"
#include "traces/profile_import.hpp"
#include "traces/replay.hpp"
#include "validate/trace_retime.hpp"

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
};

/// Writes the replayed timeline of `graph` to o.trace (Perfetto / chrome://tracing), if asked.
void write_timeline(const ReplayOptions& o, const sim::ExecutionGraph& graph, const sim::ExecutionResult& result,
                    const std::string& cluster) {
  if (o.trace.empty()) return;
  trace::TraceMetadata meta;
  meta.title = fmt::format("foresight replay {}", fmt::join(o.traces, " "));
  meta.info = {{"cluster", cluster}, {"makespan_s", fmt::format("{:.9g}", result.makespan.seconds())}};
  emit(o.trace, [&](std::ostream& os) { trace::write_chrome_trace(os, graph, result, {}, meta); });
}

double error_pct(double replayed, double measured) { return (replayed - measured) / measured * 100.0; }

/// On another cluster whose GPUs are another model than the traces', the retimer to it (every
/// trace must have run on one model); else nullopt.
std::optional<trace::KernelRetimer> retimer(const ReplayOptions& o, const std::vector<const trace::KinetoTrace*>& traces,
                                            const topo::Cluster& cluster, bool other) {
  if (!other) return std::nullopt;
  const topo::GpuSpec& from = validate::trace_gpu(*traces.front(), o.trace_gpu);
  for (const trace::KinetoTrace* t : traces) {
    const topo::GpuSpec& g = validate::trace_gpu(*t, o.trace_gpu);
    if (g.name != from.name) {
      throw sim::ConfigError(fmt::format("{} ran on {} but {} on {}: retiming needs one GPU model", t->path, g.name,
                                         traces.front()->path, from.name));
    }
  }
  return validate::retimer_for(*traces.front(), o.trace_gpu, cluster.gpu_model(0));
}

/// The text line saying how kernels were retimed, or that they keep their measured times.
std::string retime_line(const std::optional<trace::KernelRetimer>& r, const trace::RetimeCounts& n) {
  if (!r) return "";
  return fmt::format("gpu         kernels retimed from {} to {} (Habitat's wave scaling): {} scaled by its HBM bandwidth "
                     "(x {:.3f}), {} under one wave kept, {} host and peer copies kept\n",
                     r->from().name, r->to().name, n.scaled, r->bandwidth_factor(), n.under_one_wave, n.link_copies);
}

nlohmann::json retime_json(const std::optional<trace::KernelRetimer>& r, const trace::RetimeCounts& n) {
  if (!r) return nullptr;
  return {{"from", r->from().name},        {"to", r->to().name},
          {"bandwidth_factor", r->bandwidth_factor()}, {"scaled", n.scaled},
          {"under_one_wave", n.under_one_wave},       {"link_copies", n.link_copies}};
}

/// Where step `number` of `t` began (us on the trace's clock).
double step_start_us(const trace::KinetoTrace& t, int number) {
  for (const trace::KinetoStep& s : t.steps) {
    if (s.number == number) return s.ts_us;
  }
  return 0.0;
}

/// The unexplained stalls of a rank's step: total, count and the three longest.
nlohmann::json stalls_json(const trace::KinetoTrace& t, int step, const std::vector<trace::GpuStall>& stalls) {
  nlohmann::json largest = nlohmann::json::array();
  for (std::size_t i = 0; i < std::min<std::size_t>(3, stalls.size()); ++i) {
    const trace::KinetoGpuOp& op = t.gpu_ops[stalls[i].op];
    largest.push_back({{"stream", op.stream},
                       {"begin_s", (stalls[i].begin_us - step_start_us(t, step)) * 1e-6},
                       {"dur_s", stalls[i].dur_us * 1e-6},
                       {"before", op.name}});
  }
  return {{"total_s", trace::total_us(stalls) * 1e-6}, {"count", stalls.size()}, {"largest", largest}};
}

/// The text line on a rank's unexplained stalls, or "" when it has none.
std::string stalls_line(const trace::KinetoTrace& t, int step, const std::vector<trace::GpuStall>& stalls, bool kept) {
  if (stalls.empty()) return "";
  const trace::KinetoGpuOp& op = t.gpu_ops[stalls.front().op];
  return fmt::format("stalls      {:.3f} ms of GPU idle with work queued and nothing recorded to wait for ({} stall{}; the "
                     "longest {:.3f} ms on stream {} at {:.3f} ms, before {:.60}): the trace lacks what the GPU waited "
                     "for{}\n",
                     trace::total_us(stalls) * 1e-3, stalls.size(), stalls.size() == 1 ? "" : "s", stalls.front().dur_us * 1e-3, op.stream,
                     (stalls.front().begin_us - step_start_us(t, step)) * 1e-3, op.name,
                     kept ? "; kept as GPU time (--keep-stalls)" : "; --keep-stalls keeps them as GPU time");
}

int replay_one(const ReplayOptions& o, const trace::KinetoTrace& t) {
  // Own cluster: every op at its measured time, on one GPU (the fabric only hosts the rank).
  // Another cluster: the recorded NCCL collectives over its first --gpus GPUs, timed there.
  const int gpus = o.gpus > 0 ? o.gpus : std::max(2, t.world_size);
  const bool other = !o.cluster.empty();
  const topo::Cluster cluster = topo::resolve_cluster(other ? o.cluster : "dgx-a100", other ? gpus : 1);
  const std::optional<trace::KernelRetimer> retime = retimer(o, {&t}, cluster, other);
  const trace::ReplayGraph r = trace::replay_graph(t, o.step, {other ? gpus : 0, retime ? &*retime : nullptr, o.keep_stalls});
  const sim::ExecutionResult result =
      sim::execute(r.graph, cluster, sim::CollectiveConfig{}, other ? sim::NetworkKind::flow : sim::NetworkKind::analytical);
  write_timeline(o, r.graph, result, cluster.name());
  const double replayed = trace::replayed_seconds(r, result.end);
  const double error = error_pct(replayed, r.measured_s);
  const trace::StepMeans mean = trace::steady_means(r.window, result.end);
  if (o.json) {
    nlohmann::json window = nlohmann::json::array();
    for (const trace::ReplayedStep& s : r.window) {
      const double x = trace::replayed_seconds(s, result.end);
      window.push_back({{"step", s.number}, {"measured_s", s.measured_s}, {"replayed_s", x},
                        {"error_pct", error_pct(x, s.measured_s)}});
    }
    const nlohmann::json j = {{"trace", t.path},        {"gpu", t.gpu_name},       {"step", r.step},
                              {"measured_s", r.measured_s}, {"replayed_s", replayed}, {"error_pct", error},
                              {"gpu_ops", r.gpu_ops},   {"nccl_ops", r.nccl_ops},
                              {"cluster", other ? o.cluster : std::string()},
                              {"modelled_collectives", r.modelled_collectives},
                              {"retimed", retime_json(retime, r.retimed)},
                              {"inferred_waits", r.inferred_waits},
                              {"unexplained_stalls", stalls_json(t, r.step, r.stalls)},
                              {"stalls_kept", o.keep_stalls},
                              {"window", window},
                              {"steady_mean", {{"steps", mean.steps}, {"measured_s", mean.measured_s},
                                               {"replayed_s", mean.replayed_s},
                                               {"error_pct", error_pct(mean.replayed_s, mean.measured_s)}}}};
    emit(o.output, j.dump(1) + "\n");
    return 0;
  }
  std::string steps;
  if (r.window.size() > 1) {
    steps = fmt::format("warm-up     {} back-to-back steps before it replayed first\n{:>6}  {:>11}  {:>11}  {:>7}\n",
                        r.window.size() - 1, "step", "measured ms", "replayed ms", "error");
    for (const trace::ReplayedStep& s : r.window) {
      const double x = trace::replayed_seconds(s, result.end);
      steps += fmt::format("{:>6}  {:>11.3f}  {:>11.3f}  {:>+6.1f}%\n", s.number, s.measured_s * 1e3, x * 1e3,
                           error_pct(x, s.measured_s));
    }
    steps += fmt::format("steady mean {:.3f} ms measured, {:.3f} ms replayed ({:+.1f}%) over the {} steps after the "
                         "first\n",
                         mean.measured_s * 1e3, mean.replayed_s * 1e3, error_pct(mean.replayed_s, mean.measured_s),
                         mean.steps);
  }
  emit(o.output, fmt::format("trace       {} ({}{})\nstep        ProfilerStep#{}: {} GPU ops, {} of them NCCL\n"
                             "{}{}{}measured    {:.3f} ms\nreplayed    {:.3f} ms ({:+.1f}%)\n",
                             t.path, t.gpu_name.empty() ? "GPU not recorded" : t.gpu_name,
                             t.world_size > 0 ? fmt::format(", rank {} of {}", t.rank, t.world_size) : "", r.step,
                             r.gpu_ops, r.nccl_ops,
                             other ? fmt::format("cluster     {} ({} GPUs): {} NCCL kernels timed as its collectives\n{}",
                                                 cluster.name(), gpus, r.modelled_collectives,
                                                 retime_line(retime, r.retimed))
                                   : "",
                             stalls_line(t, r.step, r.stalls, o.keep_stalls), steps, r.measured_s * 1e3,
                             replayed * 1e3, error));
  return 0;
}

int replay_joint(const ReplayOptions& o, const std::vector<trace::KinetoTrace>& traces) {
  const int n = static_cast<int>(traces.size());
  if (o.gpus > 0 && o.gpus != n) {
    throw sim::ConfigError(fmt::format("--gpus: a joint replay runs one GPU per trace, expected {}, found {}", n, o.gpus));
  }
  const bool other = !o.cluster.empty();
  const topo::Cluster cluster = topo::resolve_cluster(other ? o.cluster : "dgx-a100", n);
  std::vector<const trace::KinetoTrace*> all;
  for (const trace::KinetoTrace& t : traces) all.push_back(&t);
  const std::optional<trace::KernelRetimer> retime = retimer(o, all, cluster, other);
  const trace::JointReplayGraph g = trace::joint_replay_graph(traces, o.step, {other ? n : 0, retime ? &*retime : nullptr, o.keep_stalls});
  trace::RetimeCounts counted;  // over every rank
  for (const trace::ReplayRank& x : g.ranks) {
    counted.scaled += x.retimed.scaled;
    counted.under_one_wave += x.retimed.under_one_wave;
    counted.link_copies += x.retimed.link_copies;
    counted.nccl += x.retimed.nccl;
  }
  const sim::ExecutionResult result =
      sim::execute(g.graph, cluster, sim::CollectiveConfig{}, other ? sim::NetworkKind::flow : sim::NetworkKind::analytical);
  write_timeline(o, g.graph, result, cluster.name());
  const std::vector<double> replayed = trace::rank_step_seconds(g, result.end);
  std::vector<const trace::KinetoTrace*> ranked;  // the traces in the graph's rank order
  for (const trace::ReplayRank& x : g.ranks) {
    ranked.push_back(&*std::find_if(traces.begin(), traces.end(), [&](const auto& t) { return t.path == x.path; }));
  }
  double abs_sum = 0.0, worst = 0.0;
  for (std::size_t r = 0; r < g.ranks.size(); ++r) {
    const double e = error_pct(replayed[r], g.ranks[r].measured_s);
    abs_sum += std::abs(e);
    worst = std::max(worst, std::abs(e));
  }
  const double mape = abs_sum / n;
  if (o.json) {
    nlohmann::json ranks = nlohmann::json::array();
    for (std::size_t r = 0; r < g.ranks.size(); ++r) {
      const trace::ReplayRank& x = g.ranks[r];
      ranks.push_back({{"trace", x.path}, {"rank", x.rank}, {"step", x.step}, {"offset_s", x.offset_s},
                       {"measured_s", x.measured_s}, {"replayed_s", replayed[r]},
                       {"error_pct", error_pct(replayed[r], x.measured_s)}, {"gpu_ops", x.gpu_ops},
                       {"nccl_ops", x.nccl_ops}, {"inferred_waits", x.inferred_waits},
                       {"unexplained_stalls", stalls_json(*ranked[r], x.step, x.stalls)}});
    }
    const nlohmann::json j = {{"ranks", ranks},
                              {"shared_clock", g.shared_clock},
                              {"matched_collectives", g.matched_collectives},
                              {"modelled_collectives", g.modelled_collectives},
                              {"cluster", other ? o.cluster : std::string()},
                              {"retimed", retime_json(retime, counted)},
                              {"stalls_kept", o.keep_stalls},
                              {"makespan_s", result.makespan.seconds()},
                              {"mape_pct", mape}};
    emit(o.output, j.dump(1) + "\n");
    return 0;
  }
  std::string text = fmt::format(
      "traces      {} ranks of {} ({}), ProfilerStep#{}\ncollectives {} per rank, matched across ranks{}\n"
      "clock       {}\n{}\n{:>4}  {:>10}  {:>11}  {:>11}  {:>7}  {}\n",
      n, traces.front().world_size, traces.front().gpu_name.empty() ? "GPU not recorded" : traces.front().gpu_name,
      g.ranks.front().step, g.matched_collectives,
      other ? fmt::format("; {} timed on {}", g.modelled_collectives, cluster.name()) : "",
      g.shared_clock ? "shared: each rank starts at its recorded step start" : "not shared: every rank starts at 0",
      retime_line(retime, counted), "rank",
      "offset ms", "measured ms", "replayed ms", "error", "trace");
  for (std::size_t r = 0; r < g.ranks.size(); ++r) {
    const trace::ReplayRank& x = g.ranks[r];
    text += fmt::format("{:>4}  {:>10.3f}  {:>11.3f}  {:>11.3f}  {:>+6.1f}%  {}\n", x.rank, x.offset_s * 1e3,
                        x.measured_s * 1e3, replayed[r] * 1e3, error_pct(replayed[r], x.measured_s), x.path);
  }
  for (std::size_t r = 0; r < g.ranks.size(); ++r) {
    const std::string line = stalls_line(*ranked[r], g.ranks[r].step, g.ranks[r].stalls, o.keep_stalls);
    if (!line.empty()) text += fmt::format("rank {:<6} {}", g.ranks[r].rank, line.substr(12));
  }
  text += fmt::format("\nmean |error| {:.1f}%, worst {:.1f}%\n", mape, worst);
  emit(o.output, text);
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

int run_replay(const ReplayOptions& o) {
  std::vector<trace::KinetoTrace> traces;
  for (const std::string& path : o.traces) {
    for (trace::KinetoTrace& t : trace::load_kineto_files(path)) traces.push_back(std::move(t));
  }
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
                "with the measured step");
  cmd->add_option("traces", o->traces,
                  "Kineto traces (.json, .json.gz, or a .tar.gz of several ranks); several: a joint replay")
      ->required();
  cmd->add_option("--step", o->step,
                  "Which ProfilerStep to replay, 0-based in the (first) trace; negative counts from the end (default: the "
                  "last)");
  cmd->add_option("--cluster", o->cluster, "Replay on this cluster (preset or topology file): recorded NCCL collectives are timed on its network, and kernels retimed for its GPU model");
  cmd->add_option("--gpus", o->gpus, "GPUs of the job on --cluster (default: the trace's world size; joint: one per trace)")
      ->check(at_least(2));
  cmd->add_option("--trace-gpu", o->trace_gpu,
                  "The catalog model the traces ran on (foresight --list), where their recorded GPU name is not one; "
                  "kernels are retimed when --cluster's GPUs are another model");
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
  cmd->callback([o, &run] { run = [o] { return run_replay(*o); }; });
}

}  // namespace foresight::cli
