#include "traces/gpu_timeline.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace foresight::trace {

GpuTimeline read_timeline(const KinetoTrace& trace) {
  const std::vector<KinetoGpuOp>& ops = trace.gpu_ops;
  std::map<std::int64_t, double> returned;  // correlation -> when its launching call returned
  for (const KinetoRuntimeCall& c : trace.runtime) {
    if (c.correlation >= 0) returned[c.correlation] = c.ts_us + c.dur_us;
  }
  GpuTimeline out;
  out.ready_us.resize(ops.size());
  out.waited_on.assign(ops.size(), GpuTimeline::kNone);
  std::map<std::pair<int, std::int64_t>, std::size_t> previous;  // (device, stream) -> its last op so far
  std::map<int, std::vector<std::pair<double, std::size_t>>> ends;  // device -> (end, op), by end
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const KinetoGpuOp& op = ops[i];
    double ready = -1.0;
    const auto launch = returned.find(op.correlation);
    if (launch != returned.end()) ready = launch->second;
    const auto key = std::make_pair(op.device, op.stream);
    const auto prev = previous.find(key);
    if (prev != previous.end()) ready = std::max(ready, ops[prev->second].ts_us + ops[prev->second].dur_us);
    out.ready_us[i] = ready < 0.0 ? op.ts_us : std::min(ready, op.ts_us);
    previous[key] = i;
    ends[op.device].emplace_back(op.ts_us + op.dur_us, i);
  }
  for (auto& [device, list] : ends) std::sort(list.begin(), list.end());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (!out.held(i, trace)) continue;
    const KinetoGpuOp& op = ops[i];
    const auto& list = ends[op.device];
    // The latest end in [start - kWaitBeforeUs, start + kWaitAfterUs] on another stream.
    auto it = std::upper_bound(list.begin(), list.end(), std::make_pair(op.ts_us + kWaitAfterUs, ops.size()));
    while (it != list.begin()) {
      --it;
      if (it->first < op.ts_us - kWaitBeforeUs) break;
      if (ops[it->second].stream != op.stream) {
        out.waited_on[i] = static_cast<std::ptrdiff_t>(it->second);
        break;
      }
    }
  }
  return out;
}

std::vector<GpuStall> unexplained_stalls(const KinetoTrace& trace, const GpuTimeline& timeline, const KinetoStep& s) {
  std::vector<GpuStall> out;
  const double begin = s.ts_us, end = s.ts_us + s.dur_us;
  for (std::size_t i = 0; i < trace.gpu_ops.size(); ++i) {
    if (!timeline.held(i, trace) || timeline.waited_on[i] != GpuTimeline::kNone) continue;
    const double from = std::max(begin, timeline.ready_us[i]);
    const double to = std::min(end, trace.gpu_ops[i].ts_us);
    if (to > from) out.push_back({i, from, to - from});
  }
  std::stable_sort(out.begin(), out.end(), [](const GpuStall& a, const GpuStall& b) { return a.dur_us > b.dur_us; });
  return out;
}

double total_us(const std::vector<GpuStall>& stalls) {
  double sum = 0.0;
  for (const GpuStall& s : stalls) sum += s.dur_us;
  return sum;
}

}  // namespace foresight::trace
