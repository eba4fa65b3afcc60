#pragma once
/// CUPTI activity records as Foresight keeps them, independent of CUDA (so that turning them
/// into traces and profiles is tested without a GPU): GPU kernels, copies and sets, and the
/// runtime calls that launched them, joined by correlation id. The CUPTI collector
/// (cupti_collector.hpp, built with CUDA) fills a RecordLog; the injection library writes it as
/// a Kineto-compatible trace that `foresight replay` and traces/kineto.hpp read back.

#include <cstdint>
#include <string>
#include <vector>

namespace foresight::prof {

struct ActivityRecord {
  enum class Kind : std::uint8_t { kernel, memcpy, memset, runtime };
  Kind kind = Kind::kernel;
  std::string name;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;       ///< GPU activities
  std::uint32_t correlation = 0;  ///< joins a GPU activity to its runtime call
  std::uint64_t thread = 0;       ///< runtime calls: the CPU thread
  std::uint64_t bytes = 0;        ///< memcpy, memset
};

/// Records of one run, and what CUPTI reported it dropped: never silently lost.
struct RecordLog {
  std::vector<ActivityRecord> records;
  std::uint64_t dropped = 0;
  std::string device_name;
  int sm_count = 0;
};

/// The log as a Kineto-compatible Chrome trace (traceEvents with cat kernel, gpu_memcpy,
/// gpu_memset and cuda_runtime, times in us from the earliest record, args with device, stream
/// and correlation; deviceProperties; and "foresightDroppedRecords").
std::string kineto_json(const RecordLog& log);

/// Median duration in seconds of each kernel name's records (a micro-benchmark's repetitions);
/// names in first-seen order.
std::vector<std::pair<std::string, double>> kernel_medians(const RecordLog& log);

}  // namespace foresight::prof
