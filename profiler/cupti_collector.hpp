#pragma once
/// A CUPTI Activity API collector: GPU kernels (concurrent), memcpy, memset and CUDA runtime
/// calls, joined by correlation id, and NVTX ranges (CUPTI_ACTIVITY_KIND_MARKER, paired into
/// annotation records by records.hpp's annotations_from_markers), into a RecordLog. Buffers are
/// 8 MiB; every completed buffer is read whole, and the records CUPTI reports dropped are counted
/// in RecordLog::dropped, never lost silently. CUPTI's buffer callbacks carry no user pointer, so
/// one collection per process runs at a time (a mutex guards the log): the project's one
/// process-wide state, forced by the API.
///
/// NVTX reaches CUPTI only through NVTX's injection: the program's NVTX (header-only nvtx3 or
/// libnvToolsExt) loads the library NVTX_INJECTION64_PATH names at its first NVTX call, and that
/// must be libcupti.so (CUPTI documentation, "NVTX"; the markers are then delivered as activity
/// records once CUPTI_ACTIVITY_KIND_MARKER is enabled). route_nvtx_to_cupti() sets the variable
/// to the libcupti this process loaded, which is in time when the program's first NVTX call comes
/// after it (libforesight_inject.so runs at CUDA initialization: ranges opened before the first
/// CUDA call are missed unless the variable is set in the environment beforehand).

#include <cstdint>

#include "profiler/records.hpp"

namespace foresight::prof {

/// Enables the activity kinds (registering the buffer callbacks at the first collection of the
/// process); false (with `why`) when CUPTI refuses (no driver, no device, another subscriber).
/// Markers are collected where CUPTI allows; a refusal to trace them alone does not stop the
/// collection.
bool start_collection(std::string& why);
/// Flushes every buffer, disables the kinds and returns what was collected, NVTX ranges paired
/// into annotation records (after the activities).
RecordLog stop_collection();
/// Now on the clock of the activity records (CUPTI normalizes GPU timestamps to it), in ns.
std::uint64_t collector_timestamp_ns();
/// Sets NVTX_INJECTION64_PATH to this process's libcupti unless it is set already; the path
/// set, or empty when it was set already or libcupti's path is unknown.
std::string route_nvtx_to_cupti();

}  // namespace foresight::prof
