// libforesight_inject.so: loaded into any CUDA program through CUDA_INJECTION64_PATH, it
// collects the program's kernels, copies, runtime calls and NVTX ranges with CUPTI and, at exit,
// writes them as a Kineto-compatible trace to $FORESIGHT_TRACE_OUT (default
// foresight_trace.json), which `foresight replay` reads; NVTX ranges become user annotations, so
// a range named "ProfilerStep#N" is an iteration. Dropped records are written too
// ("foresightDroppedRecords"), and unpaired NVTX range ends ("foresightUnmatchedMarkers").
// NVTX ranges need NVTX_INJECTION64_PATH to name libcupti.so when the program's first NVTX call
// is made; the library sets it at CUDA initialization when it is unset (cupti_collector.hpp).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "profiler/cupti_collector.hpp"

namespace {

void write_trace() {
  const foresight::prof::RecordLog log = foresight::prof::stop_collection();
  const char* path = std::getenv("FORESIGHT_TRACE_OUT");
  const std::string out = path != nullptr && *path != '\0' ? path : "foresight_trace.json";
  std::ofstream(out) << foresight::prof::kineto_json(log);
  std::fprintf(stderr, "foresight-inject: %zu records (%llu dropped, %llu unmatched NVTX markers) written to %s\n",
               log.records.size(), static_cast<unsigned long long>(log.dropped),
               static_cast<unsigned long long>(log.unmatched_markers), out.c_str());
}

}  // namespace

extern "C" int InitializeInjection() {
  foresight::prof::route_nvtx_to_cupti();
  std::string why;
  if (!foresight::prof::start_collection(why)) {
    std::fprintf(stderr, "foresight-inject: CUPTI collection could not start: %s\n", why.c_str());
    return 0;
  }
  std::atexit(write_trace);
  return 1;
}
