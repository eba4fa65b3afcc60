#include "collectives/plan_timing.hpp"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <unordered_map>

#include "net/network_model.hpp"

namespace foresight::sim {
namespace {

/// The smallest period P of `a` (a[p] == a[p + P]) that divides its length, as a cyclic
/// sequence; the length itself when there is none shorter. Knuth-Morris-Pratt's prefix function.
template <typename T>
std::size_t cyclic_period(const std::vector<T>& a) {
  const std::size_t n = a.size();
  if (n == 0) return 0;
  std::vector<std::size_t> pi(n, 0);
  for (std::size_t i = 1; i < n; ++i) {
    std::size_t k = pi[i - 1];
    while (k > 0 && !(a[i] == a[k])) k = pi[k - 1];
    if (a[i] == a[k]) ++k;
    pi[i] = k;
  }
  const std::size_t p = n - pi[n - 1];
  return n % p == 0 ? p : n;
}

struct Hop {
  std::int64_t t = 0;  ///< a step's transfer time, ps
  std::int64_t l = 0;  ///< hop latency, ps
  bool operator==(const Hop&) const = default;
};

/// Time from a ring phase's start to its last step's arrival on one ring.
std::int64_t ring_time(const PlannedPhase& ph, const PlannedRing& ring, const std::vector<double>& capacity,
                       bool flow_level) {
  const std::size_t n = ring.order.size();
  std::vector<Hop> hops(n);
  const std::uint32_t weight = flow_level ? ring.weight : 1;
  for (std::size_t p = 0; p < n; ++p) {
    hops[p].t = standalone_time(ph.step_bytes, standalone_rate(ring.hops[p], ph.step_cap, capacity, weight)).ps();
    hops[p].l = ring.hop_latency[p].ps();
  }
  const std::size_t period = cyclic_period(hops);
  hops.resize(period);
  // x[p] = S(k, p) for the positions of one period (every period alike).
  std::vector<std::int64_t> x(period, 0), y(period, 0);
  const std::int64_t last = ph.steps - 1;
  for (std::int64_t k = 1; k <= last; ++k) {
    for (std::size_t p = 0; p < period; ++p) {
      const std::size_t q = p == 0 ? period - 1 : p - 1;
      y[p] = std::max(x[p] + hops[p].t, x[q] + hops[q].t + hops[q].l);
    }
    const std::int64_t d = y[0] - x[0];
    bool uniform = true;
    for (std::size_t p = 1; p < period && uniform; ++p) uniform = y[p] - x[p] == d;
    x.swap(y);
    if (uniform) {  // every later step adds d to every position
      for (std::int64_t& v : x) v += (last - k) * d;
      break;
    }
  }
  std::int64_t end = 0;
  for (std::size_t p = 0; p < period; ++p) end = std::max(end, x[p] + hops[p].t + hops[p].l);
  return end;
}

Time phase_time(const PlannedPhase& ph, const std::vector<double>& capacity, bool flow_level) {
  std::int64_t end = 0;
  if (ph.kind == PlannedPhase::Kind::flows) {
    for (const PlannedFlow& f : ph.flows) {
      const double rate = standalone_rate(f.path, f.cap, capacity, flow_level ? f.weight : 1);
      end = std::max(end, (standalone_time(f.bytes, rate) + f.latency).ps());
    }
    return Time::from_ps(end);
  }
  if (ph.steps <= 0) return Time::zero();
  for (const PlannedRing& ring : ph.rings) end = std::max(end, ring_time(ph, ring, capacity, flow_level));
  return Time::from_ps(end);
}

}  // namespace

Time standalone_duration(const CollectivePlan& plan, const std::vector<double>& capacity, bool flow_level) {
  return standalone_rest(plan, 0, capacity, flow_level);
}

Time standalone_rest(const CollectivePlan& plan, std::size_t first, const std::vector<double>& capacity,
                     bool flow_level) {
  Time t;
  for (std::size_t i = first; i < plan.phases.size(); ++i) {
    t += plan.phases[i].start_delay + phase_time(plan.phases[i], capacity, flow_level);
  }
  return t;
}

std::optional<Time> ring_end_from(const PlannedPhase& ph, const PlannedRing& ring, const RingState& state,
                                  const std::vector<double>& capacity, bool flow_level) {
  const std::size_t n = ring.order.size();
  const auto steps = static_cast<std::int64_t>(ph.steps);
  if (n == 0 || steps <= 0) return Time::zero();
  constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::min() / 4;
  std::vector<Hop> hops(n);
  const std::uint32_t weight = flow_level ? ring.weight : 1;
  for (std::size_t p = 0; p < n; ++p) {
    hops[p].t = standalone_time(ph.step_bytes, standalone_rate(ring.hops[p], ph.step_cap, capacity, weight)).ps();
    hops[p].l = ring.hop_latency[p].ps();
  }
  const auto next = [n](std::size_t p) { return p + 1 == n ? 0 : p + 1; };
  std::int64_t first = steps;  // the first step some position has not started
  std::int64_t settled = 0;    // from this step on, every send and arrival of it is still to come
  for (std::size_t p = 0; p < n; ++p) {
    const std::int64_t sent = state.sent[p];
    const std::int64_t finished = sent - state.busy[p];
    if (finished > static_cast<std::int64_t>(state.received[next(p)]) + 1) return std::nullopt;
    first = std::min(first, sent);
    settled = std::max({settled, sent, static_cast<std::int64_t>(state.received[p]) + 1});
  }
  if (first == 0) return std::nullopt;  // a position that never sent: the phase has not begun
  // done(p, k) of a step position p has started: in flight, or finished (only the latest
  // finished one can still be on its way, checked above).
  const auto known = [&](std::size_t p, std::int64_t k) {
    const std::int64_t sent = state.sent[p];
    if (k == sent - 1 && state.busy[p] != 0) return state.in_flight_done[p].ps();
    return sent > 0 ? state.last_done[p].ps() : kNever;
  };
  // x[p] = done(p, k - 1) as step k is computed.
  std::vector<std::int64_t> x(n), y(n);
  std::int64_t k = std::max<std::int64_t>(first, 1);
  for (std::size_t p = 0; p < n; ++p) x[p] = k - 1 < static_cast<std::int64_t>(state.sent[p]) ? known(p, k - 1) : kNever;
  for (; k < steps; ++k) {
    for (std::size_t p = 0; p < n; ++p) {
      if (k < static_cast<std::int64_t>(state.sent[p])) {
        y[p] = known(p, k);
        continue;
      }
      const std::size_t q = p == 0 ? n - 1 : p - 1;
      const std::int64_t arrival = k - 1 < static_cast<std::int64_t>(state.received[p]) ? kNever : x[q] + hops[q].l;
      y[p] = std::max(x[p], arrival) + hops[p].t;
    }
    if (k > settled) {  // steps k - 1 and k both follow the plain recurrence, which is max-plus
                        // linear: once every position moves by d, it always does
      const std::int64_t d = y[0] - x[0];
      bool uniform = true;
      for (std::size_t p = 1; p < n && uniform; ++p) uniform = y[p] - x[p] == d;
      if (uniform) {
        for (std::int64_t& v : y) v += (steps - 1 - k) * d;
        x.swap(y);
        k = steps;
        break;
      }
    }
    x.swap(y);
  }
  std::int64_t end = kNever;
  for (std::size_t p = 0; p < n; ++p) {
    if (steps - 1 >= static_cast<std::int64_t>(state.received[next(p)])) end = std::max(end, x[p] + hops[p].l);
  }
  if (end == kNever) return std::nullopt;  // every step has arrived: the phase has ended already
  return Time::from_ps(end);
}

namespace {

/// Calls fn(path, standalone rate, weight) for each flow of phase `ph` that crosses a link: its
/// flows, or its rings' hops when it has steps.
template <typename Fn>
void each_standalone_flow(const PlannedPhase& ph, const std::vector<double>& capacity, Fn&& fn) {
  if (ph.kind == PlannedPhase::Kind::flows) {
    for (const PlannedFlow& f : ph.flows) {
      if (!f.path.empty()) fn(f.path, standalone_rate(f.path, f.cap, capacity, f.weight), f.weight);
    }
  } else if (ph.steps > 0) {
    for (const PlannedRing& ring : ph.rings) {
      for (const auto& hop : ring.hops) {
        if (!hop.empty()) fn(hop, standalone_rate(hop, ph.step_cap, capacity, ring.weight), ring.weight);
      }
    }
  }
}

}  // namespace

void StandaloneLoadScratch::prepare(std::size_t links) {
  total_.size(links);
  plan_.size(links);
  phase_.size(links);
}

std::vector<LinkLoad> standalone_load(const std::vector<const CollectivePlan*>& plans,
                                      const std::vector<double>& capacity, StandaloneLoadScratch* scratch) {
  StandaloneLoadScratch own;
  StandaloneLoadScratch& s = scratch != nullptr ? *scratch : own;
  const std::size_t links = capacity.size();
  s.prepare(links);
  if (s.group_of_.size() < links) s.group_of_.resize(links, 0);
  std::vector<LinkId> group_keys;  // this phase's groups' first links, to clear group_of_
  auto add = [&](const std::vector<LinkId>& path, double rate, std::uint32_t weight) {
    rate *= weight;
    s.sorted_.assign(path.begin(), path.end());
    std::sort(s.sorted_.begin(), s.sorted_.end());
    std::uint32_t& index = s.group_of_[path.front()];
    if (index == 0) {
      if (s.live_groups_ == s.groups_.size()) s.groups_.emplace_back();
      StandaloneLoadScratch::Group& fresh = s.groups_[s.live_groups_++];
      fresh.common = s.sorted_;
      fresh.rate.clear();
      index = static_cast<std::uint32_t>(s.live_groups_);
      group_keys.push_back(path.front());
    } else {
      StandaloneLoadScratch::Group& g = s.groups_[index - 1];
      if (g.common != s.sorted_) {
        std::vector<LinkId> both;
        std::set_intersection(g.common.begin(), g.common.end(), s.sorted_.begin(), s.sorted_.end(),
                              std::back_inserter(both));
        g.common.swap(both);
      }
    }
    StandaloneLoadScratch::Group& g = s.groups_[index - 1];
    for (const LinkId l : path) {
      LinkLoad& p = s.phase_.at(l);
      p.flows += 1;
      p.rate += rate;
      const auto at = std::find_if(g.rate.begin(), g.rate.end(), [l](const auto& x) { return x.first == l; });
      if (at == g.rate.end()) {
        g.rate.emplace_back(l, rate);
      } else {
        at->second += rate;
      }
    }
  };
  for (const CollectivePlan* plan : plans) {
    s.plan_.reset();
    for (const PlannedPhase& ph : plan->phases) {
      s.phase_.reset();
      each_standalone_flow(ph, capacity, add);
      for (std::size_t gi = 0; gi < s.live_groups_; ++gi) {
        const StandaloneLoadScratch::Group& g = s.groups_[gi];
        double cap = std::numeric_limits<double>::infinity();
        for (const LinkId l : g.common) cap = std::min(cap, capacity[l]);
        for (const auto& [l, rate] : g.rate) s.phase_.at(l).peak += std::min(rate, cap);
      }
      for (const LinkId k : group_keys) s.group_of_[k] = 0;
      group_keys.clear();
      s.live_groups_ = 0;
      for (const LinkId l : s.phase_.links) {
        const LinkLoad& load = s.phase_.load[l];
        LinkLoad& p = s.plan_.at(l);
        p.flows = std::max(p.flows, load.flows);
        p.rate = std::max(p.rate, load.rate);
        p.peak = std::max(p.peak, load.peak);
      }
    }
    for (const LinkId l : s.plan_.links) {
      const LinkLoad& load = s.plan_.load[l];
      LinkLoad& t = s.total_.at(l);
      t.flows += load.flows;
      t.rate += load.rate;
      t.peak += load.peak;
    }
  }
  std::vector<LinkLoad> out;
  out.reserve(s.total_.links.size());
  for (const LinkId l : s.total_.links) {
    LinkLoad load = s.total_.load[l];
    load.link = l;
    out.push_back(load);
  }
  std::sort(out.begin(), out.end(), [](const LinkLoad& a, const LinkLoad& b) { return a.link < b.link; });
  s.total_.reset();
  s.plan_.reset();
  s.phase_.reset();
  return out;
}

bool leaves_room(int flows, double rate, double capacity) {
  // The flow-level model's rounding tolerance (net/flow_network.hpp): a share within it of a
  // flow's standalone rate is that rate.
  constexpr double kTolerance = 1e-12;
  return flows <= 1 || rate <= capacity * (1.0 + kTolerance);
}

bool keeps_standalone_rates(const std::vector<LinkLoad>& load, const std::vector<double>& capacity) {
  return std::all_of(load.begin(), load.end(),
                     [&](const LinkLoad& l) { return leaves_room(l.flows, l.rate, capacity[l.link]); });
}

bool keeps_standalone_rates(const std::vector<const CollectivePlan*>& plans, const std::vector<double>& capacity,
                            StandaloneLoadScratch* scratch) {
  // standalone_load's flows and rates, summed in the same order, without the peaks the check
  // does not read: no path is copied or sorted and nothing is returned (the analytical network
  // asks this of every group of every job). A plan of one phase is its phase, and one plan is
  // the total, so those layers are not filled again.
  StandaloneLoadScratch own;
  StandaloneLoadScratch& s = scratch != nullptr ? *scratch : own;
  s.prepare(capacity.size());
  const auto add = [&](const std::vector<LinkId>& path, double rate, std::uint32_t weight) {
    rate *= weight;
    for (const LinkId l : path) {
      LinkLoad& p = s.phase_.at(l);
      p.flows += 1;
      p.rate += rate;
    }
  };
  const auto max_into = [](StandaloneLoadScratch::Layer& from, StandaloneLoadScratch::Layer& into) {
    for (const LinkId l : from.links) {
      const LinkLoad& load = from.load[l];
      LinkLoad& p = into.at(l);
      p.flows = std::max(p.flows, load.flows);
      p.rate = std::max(p.rate, load.rate);
    }
    from.reset();
  };
  StandaloneLoadScratch::Layer* last = &s.total_;  // the layer holding the answer
  for (const CollectivePlan* plan : plans) {
    for (const PlannedPhase& ph : plan->phases) {
      each_standalone_flow(ph, capacity, add);
      if (plan->phases.size() > 1) max_into(s.phase_, s.plan_);
    }
    StandaloneLoadScratch::Layer& whole = plan->phases.size() > 1 ? s.plan_ : s.phase_;
    if (plans.size() == 1) {
      last = &whole;
      break;
    }
    for (const LinkId l : whole.links) {
      const LinkLoad& load = whole.load[l];
      LinkLoad& t = s.total_.at(l);
      t.flows += load.flows;
      t.rate += load.rate;
    }
    whole.reset();
  }
  const bool room = std::all_of(last->links.begin(), last->links.end(), [&](LinkId l) {
    return leaves_room(last->load[l].flows, last->load[l].rate, capacity[l]);
  });
  s.total_.reset();
  s.plan_.reset();
  s.phase_.reset();
  return room;
}

}  // namespace foresight::sim
