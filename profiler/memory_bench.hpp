#pragma once
/// A memory-bound kernel's stand-in (built with CUDA): elementwise, normalization, softmax,
/// optimizer and copy kernels are costed by the bytes they move, so one device-to-device copy
/// of half the bytes (it reads them and writes them) times them all at HBM speed.

#include "profiler/bench_timer.hpp"

namespace foresight::prof {

/// A copy of `bytes` / 2 (read plus write = `bytes`, at least 1 B) on the current device.
Measurement measure_memory(double bytes, BenchTimer& timer);

}  // namespace foresight::prof
