#include "profiler/memory_bench.hpp"

#include <algorithm>

#include "profiler/detail/cuda_check.hpp"
#include "profiler/device_buffer.hpp"

namespace foresight::prof {

Measurement measure_memory(double bytes, BenchTimer& timer) {
  const auto half = static_cast<std::size_t>(std::max(1.0, bytes / 2));
  std::optional<DeviceBuffer> src = DeviceBuffer::allocate(half);
  std::optional<DeviceBuffer> dst = DeviceBuffer::allocate(half);
  if (!src || !dst) return Measurement::skipped("out of GPU memory");
  return timer.time([&] {
    detail::check_cuda(cudaMemcpyAsync(dst->get(), src->get(), half, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
  });
}

}  // namespace foresight::prof
