#pragma once
/// The links a network model shares bandwidth on. Under adaptive routing the equal-cost links
/// between two switching stages form one capacity pool (Fabric::link_pool); a network model
/// works on pools: a pool's capacity is the sum of its links' effective capacities (line rate x
/// link-class efficiency), and a path crosses each of its pools once.

#include <cstdint>
#include <span>
#include <vector>

#include "net/fabric.hpp"
#include "net/link_efficiency.hpp"

namespace foresight::sim {

struct LinkPools {
  /// Per fabric link: its pool, 0 .. capacity.size() - 1 (pools numbered in order of first link).
  std::vector<std::uint32_t> pool_of;
  /// Per pool: bytes/s.
  std::vector<double> capacity;

  static LinkPools of(const Fabric& fabric, const LinkEfficiency& efficiency);
  /// Every link its own pool.
  bool trivial() const { return pool_of.size() == capacity.size(); }
  /// `path` (fabric links) as pools, in order, each once.
  std::vector<LinkId> translate(std::span<const LinkId> path) const;
  /// translate(path), written over `path` (no allocation).
  void translate_in_place(std::vector<LinkId>& path) const;
};

}  // namespace foresight::sim
