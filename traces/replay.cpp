#include "traces/replay.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <functional>
#include <map>

#include "common/error.hpp"

namespace foresight::trace {
namespace {

bool blocks_host(const std::string& call) {
  return call == "cudaDeviceSynchronize" || call == "cudaStreamSynchronize" || call == "cudaEventSynchronize";
}

/// Whether the host waits for copy `op`, launched by `call`, to finish (CUDA Runtime API,
/// "API synchronization behavior"): cudaMemcpy returns once its copy is done, and so does
/// cudaMemcpyAsync to pageable host memory (Kineto: "Memcpy DtoH (Device -> Pageable)").
bool host_waits_for_copy(const KinetoRuntimeCall& call, const KinetoGpuOp& op) {
  if (op.kind != KinetoGpuOp::Kind::memcpy) return false;
  if (call.name == "cudaMemcpy" || call.name == "cudaMemcpy2D") return true;
  return op.name.find("Pageable)") != std::string::npos && op.name.find("DtoH") != std::string::npos;
}

sim::Time us(double v) { return sim::Time::from_seconds(std::max(0.0, v) * 1e-6); }

constexpr sim::NodeId kNone = 0xffffffffu;

/// The step at `index` and the steps right before it that ran back to back with it (each
/// begins within kContiguousUs of the previous one's end), oldest first: replayed before it,
/// they fill the GPU's queues as they were when it began.
constexpr double kContiguousUs = 1000.0;
std::vector<const KinetoStep*> with_warmup(const KinetoTrace& trace, const KinetoStep& step) {
  std::vector<const KinetoStep*> out{&step};
  for (auto i = static_cast<std::size_t>(&step - trace.steps.data()); i > 0; --i) {
    const KinetoStep& prev = trace.steps[i - 1];
    if (trace.steps[i].ts_us - (prev.ts_us + prev.dur_us) > kContiguousUs) break;
    out.insert(out.begin(), &prev);
  }
  return out;
}

/// A runtime call and the GPU ops it launched, in start order (none for most calls; several for
/// a cudaGraphLaunch).
struct Call {
  const KinetoRuntimeCall* call;
  std::vector<const KinetoGpuOp*> ops;
};

/// The runtime calls from `begin_us` to `end_us` in start order, with their GPU ops by
/// correlation id.
std::vector<Call> window_calls(const KinetoTrace& trace, double begin_us, double end_us) {
  std::map<std::int64_t, std::vector<const KinetoGpuOp*>> by_correlation;
  for (const KinetoGpuOp& op : trace.gpu_ops) {
    if (op.correlation >= 0) by_correlation[op.correlation].push_back(&op);
  }
  for (auto& [id, ops] : by_correlation) {
    std::stable_sort(ops.begin(), ops.end(), [](const KinetoGpuOp* a, const KinetoGpuOp* b) { return a->ts_us < b->ts_us; });
  }
  std::vector<Call> out;
  for (const KinetoRuntimeCall& call : trace.runtime) {
    if (call.ts_us < begin_us || call.ts_us >= end_us) continue;
    const auto it = call.correlation >= 0 ? by_correlation.find(call.correlation) : by_correlation.end();
    out.push_back({&call, it == by_correlation.end() ? std::vector<const KinetoGpuOp*>{} : it->second});
  }
  return out;
}

/// The NCCL kernels the calls launch, in launch order.
std::vector<const KinetoGpuOp*> launched_nccl(const std::vector<Call>& calls) {
  std::vector<const KinetoGpuOp*> out;
  for (const Call& c : calls) {
    for (const KinetoGpuOp* op : c.ops) {
      if (op->nccl()) out.push_back(op);
    }
  }
  return out;
}

/// GPU ops starting in the step whose launching call is not in the trace.
std::size_t count_unlaunched(const KinetoTrace& trace, const KinetoStep& step) {
  std::map<std::int64_t, bool> launched;
  for (const KinetoRuntimeCall& c : trace.runtime) launched[c.correlation] = true;
  std::size_t n = 0;
  for (const KinetoGpuOp* op : trace.gpu_ops_in(step)) n += launched.count(op->correlation) == 0 ? 1 : 0;
  return n;
}

/// Fills the node of the `ordinal`-th NCCL kernel of a rank's step (a compute op of the
/// measured duration until the hook says otherwise).
using NcclHook = std::function<void(const KinetoGpuOp& op, std::size_t ordinal, sim::Node& node)>;

/// Appends `steps` of `trace` (consecutive; the last is the measured one, those before it warm
/// the GPU's queues up) as the ops of graph rank `rank` (see replay.hpp).
/// With `retime`, GPU ops take their times on its target GPU; with `keep_stalls`, unexplained
/// stalls stay as GPU time. What it returns counts the measured step.
RankSteps build_rank(sim::ExecutionGraph& g, sim::RankId rank, const KinetoTrace& trace,
                 const std::vector<const KinetoStep*>& steps, const NcclHook& nccl, const ReplayOptions& options) {
  const KernelRetimer* retime = options.retime;
  // Each call kind's median duration: what an unblocked call costs.
  std::map<std::string, std::vector<double>> durations;
  for (const KinetoRuntimeCall& c : trace.runtime) durations[c.name].push_back(c.dur_us);
  std::map<std::string, double> median;
  for (auto& [name, list] : durations) {
    std::nth_element(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(list.size() / 2), list.end());
    median[name] = list[list.size() / 2];
  }
  const KinetoStep& measured = *steps.back();
  RankSteps out;
  out.step = measured.number;
  out.measured_s = measured.dur_us * 1e-6;
  out.warmup_steps = steps.size() - 1;
  out.unlaunched = count_unlaunched(trace, measured);
  out.begin = out.end = kNone;
  const GpuTimeline timeline = read_timeline(trace);
  std::vector<sim::NodeId> node_of(trace.gpu_ops.size(), kNone);  // trace op -> its node, once added
  std::map<std::int64_t, bool> waits;  // host thread -> whether its next GPU op follows a cudaStreamWaitEvent
  std::map<std::int64_t, sim::StreamId> streams;  // trace stream -> graph stream
  std::map<sim::StreamId, sim::NodeId> last_on;    // graph stream -> this rank's last GPU op
  sim::NodeId last_gpu = kNone;
  sim::NodeId recorded = kNone;
  sim::NodeId wait_for = kNone;
  double prev_end = steps.front()->ts_us;
  const double end = measured.ts_us + measured.dur_us;
  std::size_t nccl_seen = 0;
  auto host = [&](const std::string& name, double dur) {
    if (dur <= 0.0) return;
    sim::Node h;
    h.kind = sim::OpKind::host;
    h.rank = rank;
    h.stream = sim::kHostStream;
    h.duration = us(dur);
    h.name = g.intern(name);
    g.add(h);
  };
  // Blocks the host until `deps` are done; with none, marks where the host is (a step's start
  // or end).
  auto host_sync = [&](const std::string& name, std::vector<sim::NodeId> deps) {
    sim::Node m;
    m.kind = sim::OpKind::sync;
    m.rank = rank;
    m.stream = sim::kHostStream;
    m.name = g.intern(name);
    m.deps = std::move(deps);
    return g.add(m);
  };
  std::size_t next_step = 0;  // the next step whose start the host has not passed
  auto pass_steps = [&](double ts) {
    while (next_step < steps.size() && steps[next_step]->ts_us <= ts) {
      const KinetoStep& s = *steps[next_step];
      if (s.ts_us > prev_end) {  // host work before the step's start
        host("host work", s.ts_us - prev_end);
        prev_end = s.ts_us;
      }
      const sim::NodeId m = host_sync(fmt::format("ProfilerStep#{}", s.number), {});
      if (next_step + 1 == steps.size()) out.begin = m;
      if (!out.window.empty()) out.window.back().end = m;
      out.window.push_back({s.number, s.dur_us * 1e-6, m, kNone});
      ++next_step;
    }
  };
  for (const Call& c : window_calls(trace, steps.front()->ts_us, end)) {
    const KinetoRuntimeCall& call = *c.call;
    pass_steps(call.ts_us);
    const bool in_measured = call.ts_us >= measured.ts_us;
    const double gap = std::max(0.0, call.ts_us - prev_end);  // host time before the call
    prev_end = std::max(prev_end, call.ts_us + call.dur_us);
    const double cost = std::min(call.dur_us, 10.0 * median[call.name] + 5.0);
    if (blocks_host(call.name)) {
      host("host work", gap);
      std::vector<sim::NodeId> issued;
      for (const auto& [s, node] : last_on) issued.push_back(node);
      host_sync(call.name, std::move(issued));
      continue;
    }
    if (call.name == "cudaEventRecord") recorded = last_gpu;
    if (call.name == "cudaStreamWaitEvent") {
      wait_for = recorded;
      waits[call.tid] = true;
    }
    if (c.ops.empty()) {
      host(call.name, gap + cost);
      continue;
    }
    for (std::size_t i = 0; i < c.ops.size(); ++i) {  // a graph launch's ops: issued together
      const KinetoGpuOp& op = *c.ops[i];
      const auto [si, added] = streams.emplace(op.stream, static_cast<sim::StreamId>(streams.size() + 1));
      if (added) g.stream_names.emplace(si->second, fmt::format("stream {}", op.stream));
      sim::Node k;
      k.kind = sim::OpKind::compute;
      k.rank = rank;
      k.stream = si->second;
      k.duration = us(op.dur_us);
      if (retime != nullptr) {
        const KernelRetimer::Retimed t = retime->retime(op);
        k.duration = us(t.dur_us);
        if (in_measured) out.retimed.add(t.rule);
      }
      if (op.nccl()) {
        nccl(op, nccl_seen++, k);
        out.nccl_ops += in_measured ? 1 : 0;
      }
      k.dispatch = i == 0 ? us(gap + cost) : sim::Time::zero();
      k.name = g.intern(op.name);
      const auto index = static_cast<std::size_t>(&op - trace.gpu_ops.data());
      if (wait_for != kNone && g.nodes[wait_for].stream != k.stream) {
        k.deps.push_back(wait_for);
      } else if (waits[call.tid] && timeline.waited_on[index] != GpuTimeline::kNone) {
        // No recorded event to pair with: the op on another stream that ended as this one began.
        const sim::NodeId source = node_of[static_cast<std::size_t>(timeline.waited_on[index])];
        if (source != kNone && g.nodes[source].stream != k.stream) {
          k.deps.push_back(source);
          out.inferred_waits += in_measured ? 1 : 0;
        }
      }
      waits[call.tid] = false;
      if (options.keep_stalls && timeline.held(index, trace) && timeline.waited_on[index] == GpuTimeline::kNone) {
        sim::Node stall;  // the unrecorded work the op waited for, before it on its stream
        stall.kind = sim::OpKind::compute;
        stall.rank = rank;
        stall.stream = k.stream;
        stall.duration = us(op.ts_us - timeline.ready_us[index]);
        stall.dispatch = k.dispatch;
        stall.name = g.intern("unexplained stall (kept)");
        stall.deps = std::move(k.deps);
        k.deps.clear();
        k.dispatch = sim::Time::zero();
        g.add(stall);
      }
      if (i > 0 && k.stream != g.nodes[last_gpu].stream) k.deps.push_back(last_gpu);  // the graph's order
      wait_for = kNone;
      last_gpu = g.add(k);
      node_of[index] = last_gpu;
      last_on[k.stream] = last_gpu;
      out.gpu_ops += in_measured ? 1 : 0;
      if (host_waits_for_copy(call, op)) host_sync(call.name, {last_gpu});
    }
  }
  pass_steps(end);
  out.stalls = unexplained_stalls(trace, timeline, measured);
  host("host work after the last CUDA call", end - prev_end);
  out.end = host_sync("end of the step", {});
  out.window.back().end = out.end;
  return out;
}

/// The modelled size of a recorded collective (NCCL's convention: all_gather names the gathered
/// total, Kineto the input), or 0 when Kineto did not record it.
double modelled_bytes(const KinetoGpuOp& op, sim::CollectiveOp collective, int gpus) {
  const int elem = kineto_dtype_bytes(op.dtype);
  if (op.message_elems <= 0 || elem <= 0) return 0.0;
  return op.message_elems * elem * (collective == sim::CollectiveOp::all_gather ? gpus : 1.0);
}

}  // namespace

std::optional<sim::CollectiveOp> kineto_collective(const std::string& name) {
  if (name == "allreduce" || name == "all_reduce") return sim::CollectiveOp::all_reduce;
  if (name == "broadcast") return sim::CollectiveOp::broadcast;
  if (name == "allgather" || name == "all_gather" || name == "_allgather_base") return sim::CollectiveOp::all_gather;
  if (name == "reduce_scatter" || name == "reducescatter" || name == "_reduce_scatter_base") {
    return sim::CollectiveOp::reduce_scatter;
  }
  if (name == "reduce") return sim::CollectiveOp::reduce;
  if (name == "alltoall" || name == "all_to_all" || name == "alltoall_base") return sim::CollectiveOp::all_to_all;
  return std::nullopt;
}

int kineto_dtype_bytes(const std::string& dtype) {
  if (dtype == "Float" || dtype == "Int" || dtype == "float") return 4;
  if (dtype == "Half" || dtype == "BFloat16" || dtype == "Short") return 2;
  if (dtype == "Double" || dtype == "Long") return 8;
  if (dtype == "Byte" || dtype == "Char" || dtype == "Bool") return 1;
  return 0;
}

ReplayGraph replay_graph(const KinetoTrace& trace, int index, const ReplayOptions& options) {
  const int collective_gpus = options.collective_gpus;
  const KinetoStep& step = trace.step_at(index);
  ReplayGraph out;
  sim::ExecutionGraph& g = out.graph;
  const sim::RankId rank = g.add_rank(0, 0);
  std::uint32_t job = 0;  // the folded communicator of the whole job
  if (collective_gpus > 0) {
    std::vector<sim::GpuId> all;
    for (int k = 0; k < collective_gpus; ++k) all.push_back(static_cast<sim::GpuId>(k));
    job = g.add_communicator({rank}, {all});
  }
  const auto nccl = [&](const KinetoGpuOp& op, std::size_t, sim::Node& k) {
    const auto collective = kineto_collective(op.collective);
    if (collective_gpus <= 1 || !collective) return;
    const double bytes = modelled_bytes(op, *collective, collective_gpus);
    if (bytes <= 0.0) return;
    k.kind = sim::OpKind::collective;
    k.op = *collective;
    k.communicator = job;
    k.bytes = bytes;
    k.duration = sim::Time::zero();
  };
  const std::vector<const KinetoStep*> steps = with_warmup(trace, step);
  static_cast<RankSteps&>(out) = build_rank(g, rank, trace, steps, nccl, options);
  for (sim::NodeId n = out.begin; n < out.end; ++n) out.modelled_collectives += g.nodes[n].kind == sim::OpKind::collective ? 1 : 0;
  return out;
}

namespace {

/// The traces' indices in rank order: by recorded rank when every trace has one (TraceError for
/// a rank given twice), else file order.
std::vector<std::size_t> rank_order(const std::vector<KinetoTrace>& traces) {
  std::vector<std::size_t> order(traces.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  bool recorded = true;
  for (const KinetoTrace& t : traces) recorded = recorded && t.rank >= 0;
  if (!recorded) return order;
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return traces[a].rank < traces[b].rank; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    const KinetoTrace& a = traces[order[i - 1]];
    const KinetoTrace& b = traces[order[i]];
    if (a.rank == b.rank) {
      throw sim::TraceError(fmt::format("{} and {} are both rank {}: give each rank's trace once", a.path, b.path, a.rank));
    }
  }
  return order;
}

/// What the ranks' windows are called in errors: "ProfilerStep#4", or "ProfilerStep#2-#4".
std::string window_label(const std::vector<const KinetoStep*>& steps) {
  if (steps.size() == 1) return fmt::format("ProfilerStep#{}", steps.front()->number);
  return fmt::format("ProfilerStep#{}-#{}", steps.front()->number, steps.back()->number);
}

/// Every rank's NCCL kernels of its replayed steps, checked to match rank 0's in count and kind.
std::vector<std::vector<const KinetoGpuOp*>> matched_nccl(const std::vector<const KinetoTrace*>& traces,
                                                           const std::vector<std::vector<const KinetoStep*>>& windows) {
  const std::size_t n = traces.size();
  std::vector<std::vector<const KinetoGpuOp*>> nccl(n);
  for (std::size_t r = 0; r < n; ++r) {
    const KinetoStep& last = *windows[r].back();
    nccl[r] = launched_nccl(window_calls(*traces[r], windows[r].front()->ts_us, last.ts_us + last.dur_us));
  }
  const KinetoTrace& first = *traces.front();
  const std::string label = window_label(windows.front());
  for (std::size_t r = 1; r < n; ++r) {
    const KinetoTrace& t = *traces[r];
    if (nccl[r].size() != nccl[0].size()) {
      throw sim::TraceError(fmt::format("{}: {} launches {} NCCL kernels but {} launches {}: the ranks' "
                                        "collectives cannot be matched",
                                        t.path, label, nccl[r].size(), first.path, nccl[0].size()));
    }
    for (std::size_t k = 0; k < nccl[r].size(); ++k) {
      if (nccl[r][k]->collective != nccl[0][k]->collective) {
        throw sim::TraceError(fmt::format("{}: NCCL kernel #{} of {} is {} ({}) but {}'s is {} ({})", t.path, k, label,
                                          nccl[r][k]->collective, nccl[r][k]->name, first.path,
                                          nccl[0][k]->collective, nccl[0][k]->name));
      }
    }
  }
  return nccl;
}

}  // namespace

JointReplayGraph joint_replay_graph(const std::vector<KinetoTrace>& traces, int index, const ReplayOptions& options) {
  const int collective_gpus = options.collective_gpus;
  if (traces.empty()) throw sim::TraceError("joint replay: no trace given");
  std::vector<const KinetoTrace*> ranked;
  for (const std::size_t i : rank_order(traces)) ranked.push_back(&traces[i]);
  const KinetoTrace& first = *ranked.front();
  for (const KinetoTrace* t : ranked) {
    if (t->world_size != first.world_size) {
      throw sim::TraceError(fmt::format("{}: world size {}, but {} has {}: the traces are not of one job", t->path,
                                        t->world_size, first.path, first.world_size));
    }
  }
  const int number = first.step_at(index).number;
  std::vector<const KinetoStep*> steps;
  for (const KinetoTrace* t : ranked) {
    const auto it = std::find_if(t->steps.begin(), t->steps.end(), [&](const KinetoStep& s) { return s.number == number; });
    if (it == t->steps.end()) {
      throw sim::TraceError(fmt::format("{}: no ProfilerStep#{} (replayed from {})", t->path, number, first.path));
    }
    steps.push_back(&*it);
  }
  // Warm-up: the back-to-back steps before it that every rank has.
  std::vector<std::vector<const KinetoStep*>> windows;
  std::size_t common = steps.size() > 0 ? with_warmup(*ranked.front(), *steps.front()).size() : 0;
  for (std::size_t r = 0; r < ranked.size(); ++r) {
    windows.push_back(with_warmup(*ranked[r], *steps[r]));
    common = std::min(common, windows.back().size());
  }
  for (auto& w : windows) w.erase(w.begin(), w.end() - static_cast<std::ptrdiff_t>(common));
  JointReplayGraph out;
  // One clock: the ranks' steps overlap in time. Then a rank that began later starts later.
  double latest_start = steps.front()->ts_us, earliest_end = steps.front()->ts_us + steps.front()->dur_us;
  double origin = windows.front().front()->ts_us;
  for (std::size_t r = 0; r < steps.size(); ++r) {
    latest_start = std::max(latest_start, steps[r]->ts_us);
    earliest_end = std::min(earliest_end, steps[r]->ts_us + steps[r]->dur_us);
    origin = std::min(origin, windows[r].front()->ts_us);
  }
  out.shared_clock = latest_start < earliest_end;

  // The k-th NCCL kernel of every rank: one collective, its time the shortest measured kernel.
  const std::vector<std::vector<const KinetoGpuOp*>> nccl = matched_nccl(ranked, windows);
  const std::size_t n = ranked.size();
  sim::ExecutionGraph& g = out.graph;
  std::vector<sim::RankId> members;
  for (std::size_t r = 0; r < n; ++r) members.push_back(g.add_rank(static_cast<sim::GpuId>(r), static_cast<std::uint32_t>(r)));
  const std::uint32_t job = g.add_communicator(members);
  const int gpus = static_cast<int>(n);
  std::vector<sim::Node> collectives(nccl[0].size());
  for (std::size_t k = 0; k < collectives.size(); ++k) {
    sim::Node& c = collectives[k];
    c.kind = sim::OpKind::collective;
    c.communicator = job;
    const auto recorded = kineto_collective(nccl[0][k]->collective);
    c.op = recorded.value_or(sim::CollectiveOp::all_to_all);  // SendRecv kernels: grouped sends and receives
    double shortest = nccl[0][k]->dur_us, bytes = 0.0;
    for (std::size_t r = 0; r < n; ++r) {
      shortest = std::min(shortest, nccl[r][k]->dur_us);
      bytes = std::max(bytes, modelled_bytes(*nccl[r][k], c.op, gpus));
    }
    const bool modelled = collective_gpus > 0 && bytes > 0.0 && recorded.has_value();
    c.bytes = modelled ? bytes : 0.0;
    c.duration = modelled ? sim::Time::zero() : us(std::max(shortest, 1e-3));
  }
  for (std::size_t r = 0; r < n; ++r) {
    const KinetoTrace& t = *ranked[r];
    ReplayRank info;
    info.path = t.path;
    info.rank = t.rank;
    info.offset_s = out.shared_clock ? (windows[r].front()->ts_us - origin) * 1e-6 : 0.0;
    if (info.offset_s > 0.0) {
      sim::Node wait;
      wait.kind = sim::OpKind::host;
      wait.rank = members[r];
      wait.stream = sim::kHostStream;
      wait.duration = sim::Time::from_seconds(info.offset_s);
      wait.name = g.intern("before its first replayed step (a later start on the shared clock)");
      g.add(wait);
    }
    const auto hook = [&](const KinetoGpuOp&, std::size_t k, sim::Node& node) {
      const sim::Node& c = collectives[k];
      node.kind = c.kind;
      node.communicator = c.communicator;
      node.op = c.op;
      node.bytes = c.bytes;
      node.duration = c.duration;
    };
    static_cast<RankSteps&>(info) = build_rank(g, members[r], t, windows[r], hook, options);
    out.ranks.push_back(std::move(info));
  }
  // The measured step's collectives: the last nccl_ops of the matched ones.
  out.matched_collectives = out.ranks.front().nccl_ops;
  for (std::size_t k = collectives.size() - out.matched_collectives; k < collectives.size(); ++k) {
    out.modelled_collectives += collectives[k].bytes > 0.0 ? 1 : 0;
  }
  return out;
}

double replayed_seconds(const ReplayedStep& s, const sim::LargeVector<sim::Time>& node_end) {
  return (node_end.at(s.end) - node_end.at(s.begin)).seconds();
}

StepMeans steady_means(const std::vector<ReplayedStep>& window, const sim::LargeVector<sim::Time>& node_end) {
  StepMeans m;
  const std::size_t first = window.size() > 1 ? 1 : 0;
  for (std::size_t k = first; k < window.size(); ++k) {
    m.measured_s += window[k].measured_s;
    m.replayed_s += replayed_seconds(window[k], node_end);
    ++m.steps;
  }
  if (m.steps > 0) {
    m.measured_s /= static_cast<double>(m.steps);
    m.replayed_s /= static_cast<double>(m.steps);
  }
  return m;
}

double replayed_seconds(const ReplayGraph& g, const sim::LargeVector<sim::Time>& node_end) {
  return (node_end.at(g.end) - node_end.at(g.begin)).seconds();
}

std::vector<double> rank_step_seconds(const JointReplayGraph& g, const sim::LargeVector<sim::Time>& node_end) {
  std::vector<double> out;
  for (const ReplayRank& r : g.ranks) out.push_back((node_end.at(r.end) - node_end.at(r.begin)).seconds());
  return out;
}

}  // namespace foresight::trace
