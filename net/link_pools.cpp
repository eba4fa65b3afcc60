#include "net/link_pools.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <vector>

#include "common/error.hpp"

namespace foresight::sim {

LinkPools LinkPools::of(const Fabric& fabric, const LinkEfficiency& efficiency) {
  const std::vector<double> link_caps = effective_capacities(fabric, efficiency);
  LinkPools p;
  p.pool_of.resize(link_caps.size());
  // Fabric pool id (below the link count, Fabric::link_pool) -> index, in the order first met.
  constexpr std::uint32_t kUnseen = 0xffffffffu;
  std::vector<std::uint32_t> dense(link_caps.size(), kUnseen);
  for (std::size_t l = 0; l < link_caps.size(); ++l) {
    const std::uint32_t pool = fabric.link_pool(static_cast<LinkId>(l));
    if (pool >= dense.size()) {
      throw InternalError(fmt::format("network: link {} is in pool {}, past the fabric's {} links", l, pool, dense.size()));
    }
    if (dense[pool] == kUnseen) {
      dense[pool] = static_cast<std::uint32_t>(p.capacity.size());
      p.capacity.push_back(0.0);
    }
    p.pool_of[l] = dense[pool];
    p.capacity[dense[pool]] += link_caps[l];
  }
  return p;
}

std::vector<LinkId> LinkPools::translate(std::span<const LinkId> path) const {
  std::vector<LinkId> out(path.begin(), path.end());
  translate_in_place(out);
  return out;
}

void LinkPools::translate_in_place(std::vector<LinkId>& path) const {
  // Pools are written over the prefix already read: the k-th pool kept never lies past the k-th
  // link, so the links still to read are intact.
  std::size_t kept = 0;
  for (const LinkId l : path) {
    if (l >= pool_of.size()) throw InternalError(fmt::format("network: path names link {} of {}", l, pool_of.size()));
    const LinkId p = pool_of[l];
    if (std::find(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(kept), p) == path.begin() + static_cast<std::ptrdiff_t>(kept)) {
      path[kept++] = p;
    }
  }
  path.resize(kept);
}

}  // namespace foresight::sim
