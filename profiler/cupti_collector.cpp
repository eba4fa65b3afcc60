#include "profiler/cupti_collector.hpp"

#include <cupti.h>

#include <cstdlib>
#include <mutex>

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
      r.name = k->name != nullptr ? k->name : "";
      r.start_ns = k->start;
      r.end_ns = k->end;
      r.device = k->deviceId;
      r.stream = k->streamId;
      r.correlation = k->correlationId;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      r = transfer(*reinterpret_cast<const CUpti_ActivityMemcpy6*>(a), ActivityRecord::Kind::memcpy, "Memcpy");
      break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      r = transfer(*reinterpret_cast<const CUpti_ActivityMemset4*>(a), ActivityRecord::Kind::memset, "Memset");
      break;
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
      const auto* c = reinterpret_cast<const CUpti_ActivityAPI*>(a);
      const char* name = nullptr;
      cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, c->cbid, &name);
      r.kind = ActivityRecord::Kind::runtime;
      r.name = name != nullptr ? name : "cudaRuntime";
      r.start_ns = c->start;
      r.end_ns = c->end;
      r.thread = c->threadId;
      r.correlation = c->correlationId;
      break;
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
  }
  if (const CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS) {
    const char* text = nullptr;
    cuptiGetResultString(r, &text);
    why = text != nullptr ? text : "CUPTI error";
    return false;
  }
  for (const CUpti_ActivityKind k : kKinds) {
    if (const CUptiResult r = cuptiActivityEnable(k); r != CUPTI_SUCCESS) {
      const char* text = nullptr;
      cuptiGetResultString(r, &text);
      why = text != nullptr ? text : "CUPTI error";
      return false;
    }
  }
  return true;
}

RecordLog stop_collection() {
  cuptiActivityFlushAll(1);
  for (const CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);
  const std::lock_guard<std::mutex> lock(log_mutex());
  return std::move(log());
}

}  // namespace foresight::prof
