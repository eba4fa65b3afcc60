#include "profiler/device_info.hpp"

#include <cuda_runtime_api.h>

namespace foresight::prof {

Devices query_devices() {
  Devices d;
  cudaRuntimeGetVersion(&d.runtime_version);
  cudaDriverGetVersion(&d.driver_version);
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    d.error = cudaGetErrorString(err);
    return d;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    DeviceInfo info;
    info.index = i;
    info.name = p.name;
    info.compute_capability = p.major * 10 + p.minor;
    info.sm_count = p.multiProcessorCount;
    info.memory_gib = static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
    int clock_khz = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, i) == cudaSuccess) info.sm_clock_mhz = clock_khz / 1000.0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, i) == cudaSuccess) {
      info.memory_clock_mhz = clock_khz / 1000.0;
    }
    d.devices.push_back(info);
  }
  if (d.devices.empty() && d.error.empty()) d.error = "no CUDA device";
  return d;
}

}  // namespace foresight::prof
