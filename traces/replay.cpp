#include "traces/replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "sim/error.hpp"

namespace foresight::trace {
namespace {

bool blocks_host(const std::string& call) {
  return call == "cudaDeviceSynchronize" || call == "cudaStreamSynchronize" || call == "cudaEventSynchronize";
}

sim::Time us(double v) { return sim::Time::from_seconds(std::max(0.0, v) * 1e-6); }

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

ReplayGraph replay_graph(const KinetoTrace& trace, int index, sim::GpuId gpu, int collective_gpus) {
  if (trace.steps.empty()) throw sim::TraceError(fmt::format("{}: no ProfilerStep#N annotation to replay", trace.path));
  const int n = static_cast<int>(trace.steps.size());
  if (index < 0) index += n;
  if (index < 0 || index >= n) {
    throw sim::TraceError(fmt::format("{}: step index {} is outside the trace's {} steps", trace.path, index, n));
  }
  const KinetoStep& step = trace.steps[static_cast<std::size_t>(index)];
  ReplayGraph out;
  out.measured_s = step.dur_us * 1e-6;
  out.step = step.number;
  sim::ExecutionGraph& g = out.graph;
  const sim::RankId rank = g.add_rank(gpu, 0);
  std::uint32_t job = 0;  // the folded communicator of the whole job
  if (collective_gpus > 0) {
    std::vector<sim::GpuId> all;
    for (int k = 0; k < collective_gpus; ++k) all.push_back(static_cast<sim::GpuId>(k));
    job = g.add_communicator({rank}, {all});
  }

  std::map<std::int64_t, const KinetoGpuOp*> by_correlation;
  for (const KinetoGpuOp& op : trace.gpu_ops) {
    if (op.correlation >= 0) by_correlation.emplace(op.correlation, &op);
  }
  // Each call kind's median duration: what an unblocked call costs.
  std::map<std::string, std::vector<double>> durations;
  for (const KinetoRuntimeCall& c : trace.runtime) durations[c.name].push_back(c.dur_us);
  std::map<std::string, double> median;
  for (auto& [name, list] : durations) {
    std::nth_element(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(list.size() / 2), list.end());
    median[name] = list[list.size() / 2];
  }

  std::map<std::int64_t, sim::StreamId> streams;  // trace stream -> graph stream
  std::map<sim::StreamId, sim::NodeId> last_on;    // graph stream -> its last GPU op
  sim::NodeId last_gpu = 0xffffffffu;
  sim::NodeId recorded = 0xffffffffu;
  sim::NodeId wait_for = 0xffffffffu;
  double prev_end = step.ts_us;
  const double end = step.ts_us + step.dur_us;
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
  for (const KinetoRuntimeCall& call : trace.runtime) {
    if (call.ts_us < step.ts_us || call.ts_us >= end) continue;
    const double gap = std::max(0.0, call.ts_us - prev_end);
    prev_end = std::max(prev_end, call.ts_us + call.dur_us);
    const double cap = 10.0 * median[call.name] + 5.0;
    const double cost = std::min(call.dur_us, cap);
    const double pre = gap;  // host time before the call's own cost
    if (blocks_host(call.name)) {
      host("host work", gap);
      sim::Node sync;
      sync.kind = sim::OpKind::sync;
      sync.rank = rank;
      sync.stream = sim::kHostStream;
      sync.name = g.intern(call.name);
      for (const auto& [s, node] : last_on) sync.deps.push_back(node);
      g.add(sync);
      continue;
    }
    if (call.name == "cudaEventRecord") recorded = last_gpu;
    if (call.name == "cudaStreamWaitEvent") wait_for = recorded;
    const auto it = call.correlation >= 0 ? by_correlation.find(call.correlation) : by_correlation.end();
    if (it == by_correlation.end()) {
      host(call.name, pre + cost);
      continue;
    }
    const KinetoGpuOp& op = *it->second;
    const auto [si, added] = streams.emplace(op.stream, static_cast<sim::StreamId>(streams.size() + 1));
    if (added) g.stream_names[si->second] = fmt::format("stream {}", op.stream);
    sim::Node k;
    k.kind = sim::OpKind::compute;
    k.rank = rank;
    k.stream = si->second;
    k.duration = us(op.dur_us);
    const sim::CollectiveOp collective = kineto_collective(op.collective).value_or(sim::CollectiveOp::send_recv);
    const int elem = kineto_dtype_bytes(op.dtype);
    if (collective_gpus > 1 && op.nccl() && collective != sim::CollectiveOp::send_recv && op.message_elems > 0 &&
        elem > 0) {
      k.kind = sim::OpKind::collective;
      k.op = collective;
      k.communicator = job;
      // NCCL's size convention: all_gather names the gathered total, Kineto the input.
      const double factor = collective == sim::CollectiveOp::all_gather ? collective_gpus : 1.0;
      k.bytes = op.message_elems * elem * factor;
      k.duration = sim::Time::zero();
      ++out.modelled_collectives;
    }
    k.dispatch = us(pre + cost);
    k.name = g.intern(op.name);
    if (wait_for != 0xffffffffu && g.nodes[wait_for].stream != k.stream) k.deps.push_back(wait_for);
    wait_for = 0xffffffffu;
    last_gpu = g.add(k);
    last_on[k.stream] = last_gpu;
    ++out.gpu_ops;
    out.nccl_ops += op.nccl() ? 1 : 0;
  }
  host("host work after the last CUDA call", end - prev_end);
  std::map<std::int64_t, bool> launched;
  for (const KinetoRuntimeCall& c : trace.runtime) launched[c.correlation] = true;
  for (const KinetoGpuOp* op : trace.gpu_ops_in(step)) out.unlaunched += launched.count(op->correlation) == 0 ? 1 : 0;
  return out;
}

}  // namespace foresight::trace
