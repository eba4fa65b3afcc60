#include "net/link_efficiency.hpp"

namespace foresight::sim {

LinkEfficiency LinkEfficiency::defaults() {
  LinkEfficiency e;
  e.by_class[static_cast<std::size_t>(LinkClass::nvlink)] = 0.80;
  e.by_class[static_cast<std::size_t>(LinkClass::pcie)] = 24.0 / 31.5;
  e.by_class[static_cast<std::size_t>(LinkClass::infiniband)] = 0.96;
  e.by_class[static_cast<std::size_t>(LinkClass::ethernet)] = 0.90;
  e.by_class[static_cast<std::size_t>(LinkClass::cpu_interconnect)] = 0.15;
  return e;
}

std::vector<double> effective_capacities(const Fabric& fabric, const LinkEfficiency& eff) {
  std::vector<double> caps(fabric.link_count());
  for (std::size_t i = 0; i < caps.size(); ++i) {
    const LinkInfo& l = fabric.link(static_cast<LinkId>(i));
    caps[i] = l.capacity.bytes_per_second() * eff.of(l.cls);
  }
  return caps;
}

}  // namespace foresight::sim
