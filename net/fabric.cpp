#include "net/fabric.hpp"

namespace foresight::sim {

std::string_view to_string(LinkClass c) {
  switch (c) {
    case LinkClass::nvlink:
      return "nvlink";
    case LinkClass::pcie:
      return "pcie";
    case LinkClass::infiniband:
      return "infiniband";
    case LinkClass::ethernet:
      return "ethernet";
    case LinkClass::cpu_interconnect:
      return "cpu-interconnect";
  }
  return "unknown";
}

}  // namespace foresight::sim
