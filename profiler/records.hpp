#pragma once
/// CUPTI activity records as Foresight keeps them, independent of CUDA (so that turning them
/// into traces and profiles is tested without a GPU): GPU kernels, copies and sets, the runtime
/// calls that launched them (joined by correlation id), and NVTX ranges as CPU-side annotations.
/// The CUPTI collector (cupti_collector.hpp, built with CUDA) fills a RecordLog; the injection
/// library writes it as a Kineto-compatible trace that `foresight replay` and traces/kineto.hpp
/// read back; foresight-profile reduces a micro-benchmark's records to one median repetition.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace foresight::prof {

struct ActivityRecord {
  /// annotation: an NVTX range (or instantaneous marker, start == end) on a CPU thread.
  /// runtime, driver: a CUDA runtime or driver API call (cuBLASLt and cuDNN launch their kernels
  /// through the driver's cuLaunchKernelEx).
  enum class Kind : std::uint8_t { kernel, memcpy, memset, runtime, driver, annotation };
  Kind kind = Kind::kernel;
  std::string name;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;       ///< GPU activities
  std::uint32_t correlation = 0;  ///< joins a GPU activity to its runtime call
  std::uint64_t thread = 0;       ///< runtime calls and annotations: the CPU thread
  std::uint64_t bytes = 0;        ///< memcpy, memset
  /// Kernels: the launch configuration (what retiming for another GPU model reads); zero when
  /// not recorded.
  std::int32_t grid[3] = {0, 0, 0};
  std::int32_t block[3] = {0, 0, 0};
  std::uint32_t registers_per_thread = 0;
  std::uint32_t shared_bytes = 0;  ///< static + dynamic shared memory per block

  /// A kernel, copy or set: work on the GPU.
  bool on_gpu() const { return kind == Kind::kernel || kind == Kind::memcpy || kind == Kind::memset; }
};

/// Records of one run, and what could not be kept: never silently lost.
struct RecordLog {
  std::vector<ActivityRecord> records;
  std::uint64_t dropped = 0;            ///< records CUPTI reported it dropped
  std::uint64_t unmatched_markers = 0;  ///< NVTX range starts or ends without their other half
  std::uint64_t filtered_calls = 0;     ///< API calls left out as routine_api_call says
  std::string device_name;
  int sm_count = 0;
};

/// An API function's name as Kineto writes it: CUPTI's callback name without its version suffix
/// ("cudaStreamSynchronize_v3020" -> "cudaStreamSynchronize"), which replay matches on.
std::string api_name(std::string_view cupti_name);
/// Calls that launch nothing, wait for nothing and happen thousands of times per step
/// (cudaGetDevice, cudaGetLastError, ...): the collector counts them instead of recording them,
/// as Kineto leaves them out.
bool routine_api_call(std::string_view name);
/// A kernel's name demangled as Kineto shows it ("void at::native::...(...)"); the name itself
/// when it is not a mangled C++ name.
std::string demangled(const std::string& name);

/// The log as a Kineto-compatible Chrome trace (traceEvents with cat kernel, gpu_memcpy,
/// gpu_memset, cuda_runtime, cuda_driver and user_annotation, times in us from the earliest record, args with
/// device, stream and correlation, and for kernels with a recorded launch configuration grid,
/// block, "registers per thread" and "shared memory" as Kineto writes them; deviceProperties (the
/// GPU's name and SM count where recorded); "foresightDroppedRecords", "foresightUnmatchedMarkers"
/// and "foresightFilteredCalls"). An NVTX range named "ProfilerStep#N" is an iteration to the
/// importer, as in a torch.profiler trace.
std::string kineto_json(const RecordLog& log);

/// Median duration in seconds of each kernel name's records (a micro-benchmark's repetitions);
/// names in first-seen order.
std::vector<std::pair<std::string, double>> kernel_medians(const RecordLog& log);

/// The median of `values` (the mean of the middle two for an even count); InternalError when
/// empty.
double median(std::vector<double> values);

/// One NVTX marker as CUPTI reports it (CUPTI_ACTIVITY_KIND_MARKER): a range's start, carrying
/// its name, and its end share an id; an instantaneous marker (nvtxMark) stands alone.
struct MarkerEvent {
  enum class Phase : std::uint8_t { start, end, instant };
  Phase phase = Phase::instant;
  std::uint32_t id = 0;
  std::uint64_t timestamp_ns = 0;
  std::string name;  ///< start and instant; empty for an end
  std::uint64_t thread = 0;
};

/// NVTX markers as annotation records: each range start joined to the end with its id becomes
/// [start, end] named by the start, on the start's thread; an instantaneous marker becomes a
/// zero-length annotation. Starts without an end and ends without a start are counted in
/// `unmatched` (added to). The records come in start order (then id), whatever the events' order
/// (CUPTI may deliver an end in an earlier buffer than its start).
std::vector<ActivityRecord> annotations_from_markers(const std::vector<MarkerEvent>& markers,
                                                     std::uint64_t& unmatched);

/// One repetition of a micro-benchmark, [begin_ns, end_ns) on the collector's clock: taken
/// before its launches and after the device synchronized, so its GPU work starts inside.
struct RepetitionWindow {
  std::uint64_t begin_ns = 0;
  std::uint64_t end_ns = 0;
};

/// GPU time of each repetition: the sum of the durations (seconds) of the kernels, copies and
/// sets starting inside its window (one stream's work runs back to back, so this is the GPU
/// time without launch gaps). Windows must not overlap; a record in no window is ignored.
std::vector<double> gpu_seconds_per_repetition(const RecordLog& log, const std::vector<RepetitionWindow>& windows);

/// The median over repetitions of their GPU time; nullopt when the log cannot be trusted for
/// it (CUPTI dropped records, or a repetition holds no GPU activity: its records were lost), so
/// the caller times with CUDA events instead.
std::optional<double> median_repetition_seconds(const RecordLog& log, const std::vector<RepetitionWindow>& windows);

}  // namespace foresight::prof
