// foresight-devices: lists this machine's CUDA devices, or says in one line why there is none
// (exit status 3).
#include <fmt/format.h>

#include "profiler/device_info.hpp"

int main() {
  const auto d = foresight::prof::query_devices();
  if (d.devices.empty()) {
    fmt::print(stderr, "foresight-devices: no usable CUDA device ({}); CUDA runtime {}, driver {}\n", d.error,
               d.runtime_version, d.driver_version);
    return 3;
  }
  fmt::print("# CUDA runtime {}, driver {}\n", d.runtime_version, d.driver_version);
  for (const auto& g : d.devices) {
    fmt::print("{}: {} sm{} {} SMs {:.1f} GiB SM clock {:.0f} MHz memory clock {:.0f} MHz\n", g.index, g.name,
               g.compute_capability, g.sm_count, g.memory_gib, g.sm_clock_mhz, g.memory_clock_mhz);
  }
  return 0;
}
