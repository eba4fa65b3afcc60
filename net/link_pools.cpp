#include "net/link_pools.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <map>

#include "common/error.hpp"

namespace foresight::sim {

LinkPools LinkPools::of(const Fabric& fabric, const LinkEfficiency& efficiency) {
  const std::vector<double> link_caps = effective_capacities(fabric, efficiency);
  LinkPools p;
  p.pool_of.resize(link_caps.size());
  std::map<std::uint32_t, std::uint32_t> dense;  // fabric pool id -> index
  for (std::size_t l = 0; l < link_caps.size(); ++l) {
    const auto [it, added] =
        dense.emplace(fabric.link_pool(static_cast<LinkId>(l)), static_cast<std::uint32_t>(p.capacity.size()));
    if (added) p.capacity.push_back(0.0);
    p.pool_of[l] = it->second;
    p.capacity[it->second] += link_caps[l];
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
