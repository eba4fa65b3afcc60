#pragma once
/// Named registries of the models sim/ offers, each entry with a one-line description, for
/// `foresight --list` and for error messages. Registration is explicit (static tables next to
/// the implementations), never by self-registering objects that a linker may drop.

#include <span>
#include <string_view>

namespace foresight::sim {

struct RegistryEntry {
  std::string_view name;
  std::string_view description;
};

/// Network models (NetworkKind).
std::span<const RegistryEntry> network_models();
/// Collective algorithms (Algorithm), in enum order.
std::span<const RegistryEntry> collective_algorithms();
/// NCCL protocols (Protocol), in enum order.
std::span<const RegistryEntry> collective_protocols();
/// Collective timing modes (CollectiveTiming).
std::span<const RegistryEntry> collective_timings();

}  // namespace foresight::sim
