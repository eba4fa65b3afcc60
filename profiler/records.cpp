#include "profiler/records.hpp"

#include <cxxabi.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace foresight::prof {

std::string api_name(std::string_view cupti_name) {
  const std::size_t v = cupti_name.rfind("_v");
  if (v == std::string_view::npos || v + 2 == cupti_name.size()) return std::string(cupti_name);
  const std::string_view digits = cupti_name.substr(v + 2);
  const bool versioned = std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  return std::string(versioned ? cupti_name.substr(0, v) : cupti_name);
}

bool routine_api_call(std::string_view name) {
  static constexpr std::array<std::string_view, 16> kRoutine = {
      "cudaGetDevice",         "cudaSetDevice",         "cudaGetLastError",     "cudaPeekAtLastError",
      "cudaGetErrorString",    "cudaStreamIsCapturing", "cudaGetFuncBySymbol",  "cudaDeviceGetAttribute",
      "cudaGetDeviceCount",    "cudaGetDeviceProperties", "cuGetProcAddress",   "cuDeviceGetAttribute",
      "cuCtxGetCurrent",       "cuCtxSetCurrent",       "cuGetErrorString",     "cuDevicePrimaryCtxGetState"};
  return std::find(kRoutine.begin(), kRoutine.end(), name) != kRoutine.end();
}

std::string demangled(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out != nullptr ? std::string(out.get()) : name;
}

std::string kineto_json(const RecordLog& log) {
  using nlohmann::json;
  std::uint64_t origin = UINT64_MAX;
  for (const ActivityRecord& r : log.records) origin = std::min(origin, r.start_ns);
  if (log.records.empty()) origin = 0;
  json events = json::array();
  for (const ActivityRecord& r : log.records) {
    const double ts = static_cast<double>(r.start_ns - origin) * 1e-3;
    const double dur = static_cast<double>(r.end_ns >= r.start_ns ? r.end_ns - r.start_ns : 0) * 1e-3;
    json e = {{"ph", "X"}, {"name", r.name}, {"ts", ts}, {"dur", dur}};
    switch (r.kind) {
      case ActivityRecord::Kind::kernel:
      case ActivityRecord::Kind::memcpy:
      case ActivityRecord::Kind::memset:
        e["cat"] = r.kind == ActivityRecord::Kind::kernel ? "kernel"
                   : r.kind == ActivityRecord::Kind::memcpy ? "gpu_memcpy" : "gpu_memset";
        e["pid"] = r.device;
        e["tid"] = r.stream;
        e["args"] = {{"device", r.device}, {"stream", r.stream}, {"correlation", r.correlation}};
        if (r.kind != ActivityRecord::Kind::kernel) e["args"]["bytes"] = r.bytes;
        if (r.kind == ActivityRecord::Kind::kernel && r.grid[0] > 0 && r.block[0] > 0) {
          e["args"]["grid"] = {r.grid[0], r.grid[1], r.grid[2]};
          e["args"]["block"] = {r.block[0], r.block[1], r.block[2]};
          e["args"]["registers per thread"] = r.registers_per_thread;
          e["args"]["shared memory"] = r.shared_bytes;
        }
        break;
      case ActivityRecord::Kind::runtime:
      case ActivityRecord::Kind::driver:
        e["cat"] = r.kind == ActivityRecord::Kind::runtime ? "cuda_runtime" : "cuda_driver";
        e["pid"] = 0;
        e["tid"] = r.thread;
        e["args"] = {{"correlation", r.correlation}};
        break;
      case ActivityRecord::Kind::annotation:
        // As torch.profiler writes record_function ranges: CPU-side, on the thread that opened them.
        e["cat"] = "user_annotation";
        e["pid"] = 0;
        e["tid"] = r.thread;
        break;
    }
    events.push_back(std::move(e));
  }
  const json doc = {{"schemaVersion", 1},
                    {"traceName", "foresight CUPTI collector"},
                    {"deviceProperties", json::array({json{{"id", 0}, {"name", log.device_name}, {"numSms", log.sm_count}}})},
                    {"foresightDroppedRecords", log.dropped},
                    {"foresightUnmatchedMarkers", log.unmatched_markers},
                    {"foresightFilteredCalls", log.filtered_calls},
                    {"traceEvents", events}};
  return doc.dump(1) + "\n";
}

double median(std::vector<double> values) {
  if (values.empty()) throw sim::InternalError("median of no values");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::vector<std::pair<std::string, double>> kernel_medians(const RecordLog& log) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> times;
  for (const ActivityRecord& r : log.records) {
    if (r.kind != ActivityRecord::Kind::kernel) continue;
    auto [it, added] = times.try_emplace(r.name);
    if (added) order.push_back(r.name);
    it->second.push_back(static_cast<double>(r.end_ns - r.start_ns) * 1e-9);
  }
  std::vector<std::pair<std::string, double>> out;
  out.reserve(order.size());
  for (const std::string& name : order) out.emplace_back(name, median(std::move(times[name])));
  return out;
}

std::vector<ActivityRecord> annotations_from_markers(const std::vector<MarkerEvent>& markers,
                                                     std::uint64_t& unmatched) {
  std::map<std::uint32_t, const MarkerEvent*> starts, ends;
  std::vector<ActivityRecord> out;
  auto annotation = [](const MarkerEvent& first, std::uint64_t end_ns) {
    ActivityRecord r;
    r.kind = ActivityRecord::Kind::annotation;
    r.name = first.name;
    r.start_ns = first.timestamp_ns;
    r.end_ns = std::max(end_ns, first.timestamp_ns);
    r.thread = first.thread;
    return r;
  };
  for (const MarkerEvent& m : markers) {
    switch (m.phase) {
      case MarkerEvent::Phase::instant:
        out.push_back(annotation(m, m.timestamp_ns));
        break;
      case MarkerEvent::Phase::start:
        if (!starts.emplace(m.id, &m).second) ++unmatched;  // a second start with one id
        break;
      case MarkerEvent::Phase::end:
        if (!ends.emplace(m.id, &m).second) ++unmatched;
        break;
    }
  }
  for (const auto& [id, start] : starts) {
    const auto end = ends.find(id);
    if (end == ends.end()) {
      ++unmatched;
      continue;
    }
    out.push_back(annotation(*start, end->second->timestamp_ns));
    ends.erase(end);
  }
  unmatched += ends.size();
  std::stable_sort(out.begin(), out.end(),
                   [](const ActivityRecord& a, const ActivityRecord& b) { return a.start_ns < b.start_ns; });
  return out;
}

std::vector<double> gpu_seconds_per_repetition(const RecordLog& log, const std::vector<RepetitionWindow>& windows) {
  // Windows by begin, to find each record's window by binary search.
  std::vector<std::size_t> order(windows.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return windows[a].begin_ns < windows[b].begin_ns; });
  std::vector<std::uint64_t> sums_ns(windows.size(), 0);
  for (const ActivityRecord& r : log.records) {
    if (!r.on_gpu()) continue;
    const auto after = std::upper_bound(order.begin(), order.end(), r.start_ns,
                                        [&](std::uint64_t t, std::size_t w) { return t < windows[w].begin_ns; });
    if (after == order.begin()) continue;
    const std::size_t w = *(after - 1);
    if (r.start_ns < windows[w].end_ns && r.end_ns >= r.start_ns) sums_ns[w] += r.end_ns - r.start_ns;
  }
  std::vector<double> seconds;
  seconds.reserve(sums_ns.size());
  for (const std::uint64_t ns : sums_ns) seconds.push_back(static_cast<double>(ns) * 1e-9);
  return seconds;
}

std::optional<double> median_repetition_seconds(const RecordLog& log, const std::vector<RepetitionWindow>& windows) {
  if (log.dropped > 0 || windows.empty()) return std::nullopt;
  std::vector<double> seconds = gpu_seconds_per_repetition(log, windows);
  if (std::any_of(seconds.begin(), seconds.end(), [](double s) { return s <= 0.0; })) return std::nullopt;
  return median(std::move(seconds));
}

}  // namespace foresight::prof
