#include "validate/trace_replay.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "collectives/collective_config.hpp"
#include "common/error.hpp"
#include "topologies/cluster_builders.hpp"
#include "topologies/gpu_spec.hpp"
#include "traces/chrome_trace.hpp"
#include "validate/trace_retime.hpp"

namespace foresight::validate {
namespace {

/// On another cluster whose GPUs are another model than the traces', the retimer to it (every
/// trace must have run on one model); else nullopt.
std::optional<trace::KernelRetimer> retimer(const ReplaySettings& s, const std::vector<const trace::KinetoTrace*>& traces,
                                            const topo::Cluster& cluster, bool other) {
  if (!other) return std::nullopt;
  const topo::GpuSpec& from = trace_gpu(*traces.front(), s.trace_gpu);
  for (const trace::KinetoTrace* t : traces) {
    const topo::GpuSpec& g = trace_gpu(*t, s.trace_gpu);
    if (g.name != from.name) {
      throw sim::ConfigError(fmt::format("{} ran on {} but {} on {}: retiming needs one GPU model", t->path, g.name,
                                         traces.front()->path, from.name));
    }
  }
  return retimer_for(*traces.front(), s.trace_gpu, cluster.gpu_model(0));
}

nlohmann::json retime_json(const std::optional<trace::KernelRetimer>& r, const trace::RetimeCounts& n) {
  if (!r) return nullptr;
  return {{"from", r->from().name},        {"to", r->to().name},
          {"bandwidth_factor", r->bandwidth_factor()}, {"scaled", n.scaled},
          {"under_one_wave", n.under_one_wave},       {"link_copies", n.link_copies}};
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

sim::ExecutionResult execute_replay(const sim::ExecutionGraph& graph, const topo::Cluster& cluster, bool other) {
  // Own cluster: the analytical network (only the recorded times count); another: flows.
  return sim::execute(graph, cluster, sim::CollectiveConfig{}, other ? sim::NetworkKind::flow : sim::NetworkKind::analytical);
}

}  // namespace

double error_pct(double replayed, double measured) { return (replayed - measured) / measured * 100.0; }

double step_start_us(const trace::KinetoTrace& t, int number) {
  for (const trace::KinetoStep& s : t.steps) {
    if (s.number == number) return s.ts_us;
  }
  return 0.0;
}

std::vector<trace::KinetoTrace> load_kineto_traces(const std::vector<std::string>& paths) {
  std::vector<trace::KinetoTrace> traces;
  for (const std::string& path : paths) {
    for (trace::KinetoTrace& t : trace::load_kineto_files(path)) traces.push_back(std::move(t));
  }
  return traces;
}

RankReplay replay_rank(const trace::KinetoTrace& t, const ReplaySettings& s) {
  const int gpus = s.gpus > 0 ? s.gpus : std::max(2, t.world_size);
  const bool other = !s.cluster.empty();
  topo::Cluster cluster = topo::resolve_cluster(other ? s.cluster : "dgx-a100", other ? gpus : 1);
  std::optional<trace::KernelRetimer> retime = retimer(s, {&t}, cluster, other);
  trace::ReplayGraph graph = trace::replay_graph(t, s.step, {other ? gpus : 0, retime ? &*retime : nullptr, s.keep_stalls});
  sim::ExecutionResult result = execute_replay(graph.graph, cluster, other);
  const double replayed = trace::replayed_seconds(graph, result.end);
  const trace::StepMeans mean = trace::steady_means(graph.window, result.end);
  return {other, gpus, std::move(cluster), std::move(retime), std::move(graph), std::move(result), replayed, mean};
}

nlohmann::json replay_json(const RankReplay& r, const trace::KinetoTrace& t, const ReplaySettings& s) {
  const trace::ReplayGraph& g = r.graph;
  nlohmann::json window = nlohmann::json::array();
  for (const trace::ReplayedStep& step : g.window) {
    const double x = trace::replayed_seconds(step, r.result.end);
    window.push_back({{"step", step.number}, {"measured_s", step.measured_s}, {"replayed_s", x},
                      {"error_pct", error_pct(x, step.measured_s)}});
  }
  return {{"trace", t.path},
          {"gpu", t.gpu_name},
          {"step", g.step},
          {"measured_s", g.measured_s},
          {"replayed_s", r.replayed_s},
          {"error_pct", error_pct(r.replayed_s, g.measured_s)},
          {"gpu_ops", g.gpu_ops},
          {"nccl_ops", g.nccl_ops},
          {"cluster", r.other ? s.cluster : std::string()},
          {"modelled_collectives", g.modelled_collectives},
          {"retimed", retime_json(r.retime, g.retimed)},
          {"inferred_waits", g.inferred_waits},
          {"unexplained_stalls", stalls_json(t, g.step, g.stalls)},
          {"stalls_kept", s.keep_stalls},
          {"window", window},
          {"steady_mean", {{"steps", r.mean.steps}, {"measured_s", r.mean.measured_s}, {"replayed_s", r.mean.replayed_s},
                           {"error_pct", error_pct(r.mean.replayed_s, r.mean.measured_s)}}}};
}

JointReplay replay_joint(const std::vector<trace::KinetoTrace>& traces, const ReplaySettings& s) {
  const int n = static_cast<int>(traces.size());
  if (s.gpus > 0 && s.gpus != n) {
    throw sim::ConfigError(fmt::format("--gpus: a joint replay runs one GPU per trace, expected {}, found {}", n, s.gpus));
  }
  // topo::Cluster has no empty state: the cluster is built with the result.
  const bool other = !s.cluster.empty();
  JointReplay out{other, topo::resolve_cluster(other ? s.cluster : "dgx-a100", n), {}, {}, {}, {}, {}, {}, 0.0, 0.0};
  std::vector<const trace::KinetoTrace*> all;
  all.reserve(traces.size());
  for (const trace::KinetoTrace& t : traces) all.push_back(&t);
  out.retime = retimer(s, all, out.cluster, out.other);
  out.graph = trace::joint_replay_graph(traces, s.step,
                                        {out.other ? n : 0, out.retime ? &*out.retime : nullptr, s.keep_stalls});
  for (const trace::ReplayRank& x : out.graph.ranks) {
    out.retimed.scaled += x.retimed.scaled;
    out.retimed.under_one_wave += x.retimed.under_one_wave;
    out.retimed.link_copies += x.retimed.link_copies;
    out.retimed.nccl += x.retimed.nccl;
  }
  out.result = execute_replay(out.graph.graph, out.cluster, out.other);
  out.replayed_s = trace::rank_step_seconds(out.graph, out.result.end);
  double abs_sum = 0.0;
  for (std::size_t r = 0; r < out.graph.ranks.size(); ++r) {
    const trace::ReplayRank& x = out.graph.ranks[r];
    out.ranked.push_back(&*std::find_if(traces.begin(), traces.end(), [&](const auto& t) { return t.path == x.path; }));
    const double e = std::abs(error_pct(out.replayed_s[r], x.measured_s));
    abs_sum += e;
    out.worst_pct = std::max(out.worst_pct, e);
  }
  out.mape_pct = abs_sum / n;
  return out;
}

nlohmann::json replay_json(const JointReplay& r, const ReplaySettings& s) {
  nlohmann::json ranks = nlohmann::json::array();
  for (std::size_t k = 0; k < r.graph.ranks.size(); ++k) {
    const trace::ReplayRank& x = r.graph.ranks[k];
    ranks.push_back({{"trace", x.path}, {"rank", x.rank}, {"step", x.step}, {"offset_s", x.offset_s},
                     {"measured_s", x.measured_s}, {"replayed_s", r.replayed_s[k]},
                     {"error_pct", error_pct(r.replayed_s[k], x.measured_s)}, {"gpu_ops", x.gpu_ops},
                     {"nccl_ops", x.nccl_ops}, {"inferred_waits", x.inferred_waits},
                     {"unexplained_stalls", stalls_json(*r.ranked[k], x.step, x.stalls)}});
  }
  return {{"ranks", ranks},
          {"shared_clock", r.graph.shared_clock},
          {"matched_collectives", r.graph.matched_collectives},
          {"modelled_collectives", r.graph.modelled_collectives},
          {"cluster", r.other ? s.cluster : std::string()},
          {"retimed", retime_json(r.retime, r.retimed)},
          {"stalls_kept", s.keep_stalls},
          {"makespan_s", r.result.makespan.seconds()},
          {"mape_pct", r.mape_pct}};
}

void write_replay_timeline(std::ostream& os, const std::vector<std::string>& traces, const sim::ExecutionGraph& graph,
                           const sim::ExecutionResult& result, const std::string& cluster) {
  trace::TraceMetadata meta;
  meta.title = fmt::format("foresight replay {}", fmt::join(traces, " "));
  meta.info = {{"cluster", cluster}, {"makespan_s", fmt::format("{:.9g}", result.makespan.seconds())}};
  trace::write_chrome_trace(os, graph, result, {}, meta);
}

}  // namespace foresight::validate
