#include "profiler/records.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

namespace foresight::prof {

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
        break;
      case ActivityRecord::Kind::runtime:
        e["cat"] = "cuda_runtime";
        e["pid"] = 0;
        e["tid"] = r.thread;
        e["args"] = {{"correlation", r.correlation}};
        break;
    }
    events.push_back(std::move(e));
  }
  const json doc = {{"schemaVersion", 1},
                    {"traceName", "foresight CUPTI collector"},
                    {"deviceProperties", json::array({json{{"id", 0}, {"name", log.device_name}, {"numSms", log.sm_count}}})},
                    {"foresightDroppedRecords", log.dropped},
                    {"traceEvents", events}};
  return doc.dump(1) + "\n";
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
  for (const std::string& name : order) {
    auto& v = times[name];
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    out.emplace_back(name, n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
  }
  return out;
}

}  // namespace foresight::prof
