#pragma once
/// The CUDA devices of this machine and the facts a profile database records as provenance:
/// name, compute capability, SMs, memory, clocks, driver and runtime versions. Built only when
/// CUDA is found (meson option `profiler`).

#include <string>
#include <vector>

namespace foresight::prof {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_capability = 0;  ///< major * 10 + minor
  int sm_count = 0;
  double memory_gib = 0.0;
  double sm_clock_mhz = 0.0;
  double memory_clock_mhz = 0.0;
};

struct Devices {
  int driver_version = 0;   ///< CUDA driver API version (e.g. 13000); 0 when no driver
  int runtime_version = 0;  ///< CUDA runtime version this was built against
  std::vector<DeviceInfo> devices;
  std::string error;  ///< why there is no device, when there is none
};

/// Queries the CUDA runtime; never throws.
Devices query_devices();

}  // namespace foresight::prof
