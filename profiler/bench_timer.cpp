#include "profiler/bench_timer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "profiler/detail/cuda_check.hpp"
#include "profiler/records.hpp"
#ifdef FORESIGHT_HAVE_CUPTI
#include "profiler/cupti_collector.hpp"
#endif

namespace foresight::prof {

using detail::check_cuda;

std::string_view to_string(TimingSource s) { return s == TimingSource::cupti ? "cupti" : "cuda-events"; }

Measurement Measurement::skipped(std::string why) {
  Measurement m;
  m.not_measured = std::move(why);
  return m;
}

BenchTimer::BenchTimer(int warmup, int reps, bool use_cupti)
    : warmup_(std::max(warmup, 0)), reps_(std::max(reps, 1)), cupti_usable_(use_cupti) {
#ifndef FORESIGHT_HAVE_CUPTI
  if (cupti_usable_) cupti_refusal_ = "built without CUPTI";
  cupti_usable_ = false;
#else
  if (!cupti_usable_) cupti_refusal_ = "CUPTI not asked for";
#endif
}

Measurement BenchTimer::time(const std::function<void()>& body) {
  for (int i = 0; i < warmup_; ++i) body();
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize (after warm-up)");
  Measurement m;
  if (const std::optional<double> t = time_with_cupti(body)) {
    m.seconds = *t;
    m.source = TimingSource::cupti;
    ++by_cupti_;
  } else {
    m.seconds = time_with_events(body);
    m.source = TimingSource::cuda_events;
    ++by_events_;
  }
  if (!(m.seconds > 0.0)) return Measurement::skipped("no GPU time measured");
  return m;
}

std::optional<double> BenchTimer::time_with_cupti([[maybe_unused]] const std::function<void()>& body) {
  if (!cupti_usable_) return std::nullopt;
#ifdef FORESIGHT_HAVE_CUPTI
  std::string why;
  if (!start_collection(why)) {
    cupti_usable_ = false;  // it will not change its mind within this process
    cupti_refusal_ = why;
    return std::nullopt;
  }
  std::vector<RepetitionWindow> windows;
  try {
    for (int i = 0; i < reps_; ++i) {
      check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      RepetitionWindow w;
      w.begin_ns = collector_timestamp_ns();
      body();
      check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      w.end_ns = collector_timestamp_ns();
      windows.push_back(w);
    }
  } catch (...) {
    stop_collection();
    throw;
  }
  const std::optional<double> median = median_repetition_seconds(stop_collection(), windows);
  if (!median) ++cupti_incomplete_;
  return median;
#else
  return std::nullopt;
#endif
}

double BenchTimer::time_with_events(const std::function<void()>& body) {
  cudaEvent_t begin = nullptr, end = nullptr;
  check_cuda(cudaEventCreate(&begin), "cudaEventCreate");
  check_cuda(cudaEventCreate(&end), "cudaEventCreate");
  std::vector<double> seconds;
  try {
    for (int i = 0; i < reps_; ++i) {
      check_cuda(cudaEventRecord(begin), "cudaEventRecord");
      body();
      check_cuda(cudaEventRecord(end), "cudaEventRecord");
      check_cuda(cudaEventSynchronize(end), "cudaEventSynchronize");
      float ms = 0.0f;
      check_cuda(cudaEventElapsedTime(&ms, begin, end), "cudaEventElapsedTime");
      seconds.push_back(static_cast<double>(ms) * 1e-3);
    }
  } catch (...) {
    cudaEventDestroy(begin);
    cudaEventDestroy(end);
    throw;
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  return median(std::move(seconds));
}

std::string BenchTimer::source_summary() const {
  if (by_cupti_ == 0 && by_events_ == 0) return "none";
  if (by_events_ == 0) return "cupti";
  if (by_cupti_ == 0) return "cuda-events";
  return "mixed";
}

std::string BenchTimer::source_note() const {
  if (by_events_ == 0) return "";
  std::string note = fmt::format("{} by CUPTI (GPU time), {} by CUDA events", by_cupti_, by_events_);
  if (!cupti_refusal_.empty()) note += fmt::format("; CUPTI not used: {}", cupti_refusal_);
  if (cupti_incomplete_ > 0) note += fmt::format("; CUPTI lost records of {}", cupti_incomplete_);
  return note;
}

}  // namespace foresight::prof
