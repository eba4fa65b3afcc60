#include "collectives/plan_classes.hpp"

#include <algorithm>
#include <bit>
#include <map>
#include <numeric>
#include <span>
#include <unordered_map>

namespace foresight::sim {
namespace {

/// A plan's shape: every number a walk along it meets (links as their place of first
/// appearance), then its links' capacities and relative order; and its links in that order.
struct Shape {
  std::vector<std::uint64_t> key;
  std::vector<LinkId> links;
};

std::uint64_t bits(double v) { return std::bit_cast<std::uint64_t>(v); }
std::uint64_t bits(Time t) { return static_cast<std::uint64_t>(t.ps()); }

Shape shape_of(const CollectivePlan& plan, const std::vector<double>& capacity, std::span<const LinkId> room) {
  Shape s;
  std::unordered_map<LinkId, std::uint32_t> place;
  const auto path = [&](const std::vector<LinkId>& p) {
    s.key.push_back(p.size());
    for (const LinkId l : p) {
      const auto [it, added] = place.emplace(l, static_cast<std::uint32_t>(s.links.size()));
      if (added) s.links.push_back(l);
      s.key.push_back(it->second);
    }
  };
  s.key.push_back(plan.phases.size());
  for (const PlannedPhase& ph : plan.phases) {
    s.key.insert(s.key.end(), {static_cast<std::uint64_t>(ph.kind), bits(ph.start_delay),
                               static_cast<std::uint64_t>(ph.steps), bits(ph.step_bytes), bits(ph.step_cap),
                               ph.rings.size(), ph.flows.size()});
    for (const PlannedRing& r : ph.rings) {
      s.key.insert(s.key.end(), {r.weight, r.hops.size(), r.hop_latency.size()});
      for (const Time t : r.hop_latency) s.key.push_back(bits(t));
      for (const auto& hop : r.hops) path(hop);
    }
    for (const PlannedFlow& f : ph.flows) {
      s.key.insert(s.key.end(), {bits(f.bytes), bits(f.cap), bits(f.latency), f.weight});
      path(f.path);
    }
  }
  std::vector<std::uint32_t> order;  // places of the links that may bind, by link id
  for (std::uint32_t i = 0; i < s.links.size(); ++i) {
    const bool spare = std::binary_search(room.begin(), room.end(), s.links[i]);
    s.key.insert(s.key.end(), {bits(capacity.at(s.links[i])), spare ? 1U : 0U});
    if (!spare) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return s.links[a] < s.links[b]; });
  s.key.insert(s.key.end(), order.begin(), order.end());
  return s;
}

}  // namespace

std::vector<std::uint64_t> plan_shape(const CollectivePlan& plan, const std::vector<double>& capacity) {
  return shape_of(plan, capacity, {}).key;
}

std::optional<PlanClasses> plan_classes(const std::vector<const CollectivePlan*>& plans,
                                        const std::vector<double>& capacity, std::span<const LinkId> room) {
  PlanClasses out;
  out.copies.resize(plans.size());
  out.links.reserve(plans.size());
  std::map<std::vector<std::uint64_t>, std::uint32_t> representative;
  std::size_t link_count = 0;
  for (std::uint32_t p = 0; p < plans.size(); ++p) {
    Shape s = shape_of(*plans[p], capacity, room);
    link_count += s.links.size();
    out.links.push_back(std::move(s.links));
    const auto [it, added] = representative.emplace(std::move(s.key), p);
    out.copies[it->second].push_back(p);
  }
  if (representative.size() == plans.size()) return std::nullopt;  // no two alike
  std::vector<LinkId> all;  // the links that may bind, each plan's
  all.reserve(link_count);
  for (const auto& links : out.links) {
    for (const LinkId l : links) {
      if (!std::binary_search(room.begin(), room.end(), l)) all.push_back(l);
    }
  }
  std::sort(all.begin(), all.end());
  if (std::adjacent_find(all.begin(), all.end()) != all.end()) return std::nullopt;  // shared
  return out;
}

}  // namespace foresight::sim
