#include "collectives/collective_config.hpp"

namespace foresight::sim {

const CollectiveCalibration& CollectiveConfig::calibration_for(int compute_capability) const {
  const auto it = by_arch.find(compute_capability);
  return it == by_arch.end() ? fallback : it->second;
}

}  // namespace foresight::sim
