#pragma once
/// Timing a micro-benchmark's GPU work (built with CUDA). With CUPTI (where the build found it
/// and CUPTI accepts a subscriber) each repetition's kernels, copies and sets are collected
/// (cupti_collector.hpp) and a repetition's time is the sum of their durations: GPU time only,
/// no launch gaps (records.hpp's gpu_seconds_per_repetition). Otherwise, or when CUPTI lost
/// records, CUDA events around each repetition time it (launch gaps included). The median over
/// repetitions is recorded either way, and which clock timed it is kept.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace foresight::prof {

enum class TimingSource : std::uint8_t { cupti, cuda_events };
/// "cupti", "cuda-events".
std::string_view to_string(TimingSource s);

/// A benchmark's outcome: its median time, or why the signature was not measured.
struct Measurement {
  double seconds = 0.0;  ///< median over repetitions, > 0 when measured
  TimingSource source = TimingSource::cuda_events;
  std::string not_measured;  ///< the reason ("FP8 needs sm_89 or newer"), empty when measured

  bool measured() const { return not_measured.empty(); }
  static Measurement skipped(std::string why);
};

class BenchTimer {
 public:
  /// `warmup` untimed runs (>= 0), then `reps` timed ones (>= 1); CUPTI is tried when
  /// `use_cupti` and the build has it.
  BenchTimer(int warmup, int reps, bool use_cupti);

  /// Times `body`, which enqueues its GPU work on the default stream; the device is synchronized
  /// around every repetition. sim::Error when a CUDA call fails.
  Measurement time(const std::function<void()>& body);

  /// What timed the measurements so far: "cupti", "cuda-events", "mixed", or "none" (nothing
  /// timed yet).
  std::string source_summary() const;
  /// How many each clock timed, and why CUPTI was not used where it was not; empty when CUPTI
  /// timed everything.
  std::string source_note() const;
  int warmup() const { return warmup_; }
  int reps() const { return reps_; }

 private:
  /// The median GPU time by CUPTI, or nullopt (CUPTI refused, or lost records).
  std::optional<double> time_with_cupti(const std::function<void()>& body);
  double time_with_events(const std::function<void()>& body);

  int warmup_;
  int reps_;
  bool cupti_usable_;
  std::string cupti_refusal_;  ///< why CUPTI would not start, once it refused
  int by_cupti_ = 0;
  int by_events_ = 0;
  int cupti_incomplete_ = 0;  ///< measurements CUPTI collected with records missing
};

}  // namespace foresight::prof
