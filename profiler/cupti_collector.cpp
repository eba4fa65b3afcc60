#include "profiler/cupti_collector.hpp"

#include <cupti.h>
#include <dlfcn.h>

#include <cstdlib>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

namespace foresight::prof {
namespace {

constexpr std::size_t kBufferBytes = 8u << 20;
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME};

std::mutex& log_mutex() {
  static std::mutex m;
  return m;
}
RecordLog& log() {
  static RecordLog l;
  return l;
}
/// NVTX markers as they arrive; paired when the collection stops (an end may come first).
std::vector<MarkerEvent>& markers() {
  static std::vector<MarkerEvent> m;
  return m;
}
bool& markers_enabled() {
  static bool enabled = false;
  return enabled;
}
/// The kinds enabled where CUPTI allows, without which a collection still runs: driver API calls
/// (cuBLASLt's and cuDNN's launches) and the device record (only before a context exists, so
/// the injection library gets it and foresight-profile does not).
constexpr CUpti_ActivityKind kOptionalKinds[] = {CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_DEVICE};
std::vector<CUpti_ActivityKind>& optional_enabled() {
  static std::vector<CUpti_ActivityKind> kinds;
  return kinds;
}

std::string result_text(CUptiResult r) {
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  return text != nullptr ? text : "CUPTI error";
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = kBufferBytes;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *max_records = 0;
}

/// A memcpy or memset record (their CUPTI structs share these fields).
template <typename Record>
ActivityRecord transfer(const Record& m, ActivityRecord::Kind kind, const char* name) {
  ActivityRecord r;
  r.kind = kind;
  r.name = name;
  r.start_ns = m.start;
  r.end_ns = m.end;
  r.device = m.deviceId;
  r.stream = m.streamId;
  r.correlation = m.correlationId;
  r.bytes = m.bytes;
  return r;
}

void convert(const CUpti_Activity* a, RecordLog& out) {
  ActivityRecord r;
  switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(a);
      r.kind = ActivityRecord::Kind::kernel;
      r.name = k->name != nullptr ? demangled(k->name) : "";
      r.start_ns = k->start;
      r.end_ns = k->end;
      r.device = k->deviceId;
      r.stream = k->streamId;
      r.correlation = k->correlationId;
      r.grid[0] = k->gridX;
      r.grid[1] = k->gridY;
      r.grid[2] = k->gridZ;
      r.block[0] = k->blockX;
      r.block[1] = k->blockY;
      r.block[2] = k->blockZ;
      r.registers_per_thread = k->registersPerThread;
      r.shared_bytes = static_cast<std::uint32_t>(k->staticSharedMemory + k->dynamicSharedMemory);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      r = transfer(*reinterpret_cast<const CUpti_ActivityMemcpy6*>(a), ActivityRecord::Kind::memcpy, "Memcpy");
      break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      r = transfer(*reinterpret_cast<const CUpti_ActivityMemset4*>(a), ActivityRecord::Kind::memset, "Memset");
      break;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const bool runtime = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
      const auto* c = reinterpret_cast<const CUpti_ActivityAPI*>(a);
      const char* name = nullptr;
      cuptiGetCallbackName(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, c->cbid, &name);
      r.name = api_name(name != nullptr ? name : (runtime ? "cudaRuntime" : "cuDriver"));
      if (routine_api_call(r.name)) {
        ++out.filtered_calls;
        return;
      }
      r.kind = runtime ? ActivityRecord::Kind::runtime : ActivityRecord::Kind::driver;
      r.start_ns = c->start;
      r.end_ns = c->end;
      r.thread = c->threadId;
      r.correlation = c->correlationId;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
      const auto* k = reinterpret_cast<const CUpti_ActivityMarker2*>(a);
      MarkerEvent m;
      m.phase = (k->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) != 0 ? MarkerEvent::Phase::start
                : (k->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) != 0 ? MarkerEvent::Phase::end
                                                                    : MarkerEvent::Phase::instant;
      m.id = k->id;
      m.timestamp_ns = k->timestamp;
      m.name = k->name != nullptr ? k->name : "";
      if (k->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD) m.thread = k->objectId.pt.threadId;
      markers().push_back(std::move(m));
      return;
    }
    case CUPTI_ACTIVITY_KIND_DEVICE: {
      const auto* d = reinterpret_cast<const CUpti_ActivityDevice5*>(a);
      if (out.device_name.empty() && d->name != nullptr) {
        out.device_name = d->name;
        out.sm_count = static_cast<int>(d->numMultiprocessors);
      }
      return;
    }
    default:
      return;
  }
  out.records.push_back(std::move(r));
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t /*size*/, size_t valid) {
  {
    const std::lock_guard<std::mutex> lock(log_mutex());
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) convert(record, log());
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS) log().dropped += dropped;
  }
  std::free(buffer);
}

}  // namespace

bool start_collection(std::string& why) {
  {
    const std::lock_guard<std::mutex> lock(log_mutex());
    log() = RecordLog{};
    markers().clear();
  }
  // The callbacks are registered once per process; collections after the first only enable
  // and disable the kinds (as foresight-profile does once per benchmark).
  static bool registered = false;
  if (!registered) {
    if (const CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS) {
      why = result_text(r);
      return false;
    }
    registered = true;
  }
  for (const CUpti_ActivityKind k : kKinds) {
    if (const CUptiResult r = cuptiActivityEnable(k); r != CUPTI_SUCCESS) {
      why = result_text(r);
      for (const CUpti_ActivityKind enabled : kKinds) {
        if (enabled == k) break;
        cuptiActivityDisable(enabled);
      }
      return false;
    }
  }
  markers_enabled() = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MARKER) == CUPTI_SUCCESS;
  optional_enabled().clear();
  for (const CUpti_ActivityKind k : kOptionalKinds) {
    if (cuptiActivityEnable(k) == CUPTI_SUCCESS) optional_enabled().push_back(k);
  }
  return true;
}

RecordLog stop_collection() {
  cuptiActivityFlushAll(1);
  for (const CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
  if (markers_enabled()) cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MARKER);
  markers_enabled() = false;
  for (const CUpti_ActivityKind k : optional_enabled()) cuptiActivityDisable(k);
  optional_enabled().clear();
  const std::lock_guard<std::mutex> lock(log_mutex());
  RecordLog out = std::move(log());
  std::vector<ActivityRecord> notes = annotations_from_markers(markers(), out.unmatched_markers);
  markers().clear();
  out.records.insert(out.records.end(), std::make_move_iterator(notes.begin()), std::make_move_iterator(notes.end()));
  return out;
}

std::uint64_t collector_timestamp_ns() {
  std::uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return t;
}

std::string route_nvtx_to_cupti() {
  const char* set = std::getenv("NVTX_INJECTION64_PATH");
  if (set != nullptr && *set != '\0') return "";
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiActivityEnable), &info) == 0 || info.dli_fname == nullptr) return "";
  setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
  return info.dli_fname;
}

}  // namespace foresight::prof
