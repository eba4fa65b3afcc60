#pragma once
/// Plans of one communication job that move alike. A folded collective's plans stand for groups
/// that often sit alike on the hardware (the DP rings of a stage's TP ranks, one per rail): same
/// phases, bytes, caps and latencies, over links of the same capacities met in the same pattern.
/// On a network of the job's own (CommJobs::rebuild), such plans run exactly as each would alone
/// when they share only links with room, which never limit a flow: in a job whose flows all keep
/// their standalone rates, any link (each flow moves at exactly that rate); otherwise links its
/// flows can never fill (the most they carry at once is below the capacity by a margin rounding
/// never reaches), which are never saturated. Flows there keep the rates their own links and
/// caps give them, and a re-solve around one plan's links never moves another plan's flows
/// (net/flow_network.hpp). One run of a representative gives every plan of its class: the same
/// progress and events, and the same flows on the corresponding links. Links without room (a
/// plan's own flows may crowd them, as an all-to-all's do) must belong to one plan.
///
/// Two plans are alike when a walk along their phases, rings, hops and flows meets equal numbers
/// and, link for link, links of equal capacity that first appear at the same places, the same
/// ones among the links with room, and the others in the same relative order of link ids (so
/// that ties the flow network breaks by link id fall alike).

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "collectives/collective_plan.hpp"

namespace foresight::sim {

struct PlanClasses {
  /// Per plan: the plans its replay stands for, itself first then in increasing index, when it
  /// represents a class; empty for the other members of its class.
  std::vector<std::vector<std::uint32_t>> copies;
  /// Per plan: its links in the order a walk along it first meets them. Entry i of a member
  /// corresponds to entry i of its representative.
  std::vector<std::vector<LinkId>> links;
};

/// A plan's shape alone (every link may bind): equal for two plans that run alike, each on a
/// network of its own (CommJobs on the analytical network reuses one's time for the other).
std::vector<std::uint64_t> plan_shape(const CollectivePlan& plan, const std::vector<double>& capacity);

/// The classes of `plans` (links indexing `capacity`; `room`, sorted: the links with room for
/// all of the job's flows, see above), or none when two plans share a link without room or no
/// two plans are alike (nothing to gain).
std::optional<PlanClasses> plan_classes(const std::vector<const CollectivePlan*>& plans,
                                        const std::vector<double>& capacity, std::span<const LinkId> room);

}  // namespace foresight::sim
