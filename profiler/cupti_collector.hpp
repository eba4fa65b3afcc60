#pragma once
/// A CUPTI Activity API collector: GPU kernels (concurrent), memcpy, memset and CUDA runtime
/// calls, joined by correlation id, into a RecordLog. Buffers are 8 MiB; every completed buffer
/// is read whole, and the records CUPTI reports dropped are counted in RecordLog::dropped, never
/// lost silently. CUPTI's buffer callbacks carry no user pointer, so one collection per process
/// runs at a time (a mutex guards the log): the project's one process-wide state, forced by the
/// API.

#include "profiler/records.hpp"

namespace foresight::prof {

/// Enables the activity kinds and registers the buffer callbacks; false (with `why`) when CUPTI
/// refuses (no driver, no device, another subscriber).
bool start_collection(std::string& why);
/// Flushes every buffer, disables the kinds and returns what was collected.
RecordLog stop_collection();

}  // namespace foresight::prof
