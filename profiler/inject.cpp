// libforesight_inject.so: loaded into any CUDA program through CUDA_INJECTION64_PATH, it
// collects the program's kernels, copies and runtime calls with CUPTI and, at exit, writes them
// as a Kineto-compatible trace to $FORESIGHT_TRACE_OUT (default foresight_trace.json), which
// `foresight replay` reads. Dropped records are written too ("foresightDroppedRecords").
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
  std::fprintf(stderr, "foresight-inject: %zu records (%llu dropped) written to %s\n", log.records.size(),
               static_cast<unsigned long long>(log.dropped), out.c_str());
}

}  // namespace

extern "C" int InitializeInjection() {
  std::string why;
  if (!foresight::prof::start_collection(why)) {
    std::fprintf(stderr, "foresight-inject: CUPTI collection could not start: %s\n", why.c_str());
    return 0;
  }
  std::atexit(write_trace);
  return 1;
}
