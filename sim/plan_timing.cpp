#include "sim/plan_timing.hpp"

#include <algorithm>
#include <cstdint>
#include <map>

#include "sim/network_model.hpp"

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
std::int64_t ring_time(const PlannedPhase& ph, const PlannedRing& ring, const std::vector<double>& capacity) {
  const std::size_t n = ring.order.size();
  std::vector<Hop> hops(n);
  for (std::size_t p = 0; p < n; ++p) {
    hops[p].t = standalone_time(ph.step_bytes, standalone_rate(ring.hops[p], ph.step_cap, capacity)).ps();
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

Time phase_time(const PlannedPhase& ph, const std::vector<double>& capacity) {
  std::int64_t end = 0;
  if (ph.kind == PlannedPhase::Kind::flows) {
    for (const PlannedFlow& f : ph.flows) {
      end = std::max(end, (standalone_time(f.bytes, standalone_rate(f.path, f.cap, capacity)) + f.latency).ps());
    }
    return Time::from_ps(end);
  }
  if (ph.steps <= 0) return Time::zero();
  for (const PlannedRing& ring : ph.rings) end = std::max(end, ring_time(ph, ring, capacity));
  return Time::from_ps(end);
}

}  // namespace

Time standalone_duration(const CollectivePlan& plan, const std::vector<double>& capacity) {
  Time t;
  for (const PlannedPhase& ph : plan.phases) t += ph.start_delay + phase_time(ph, capacity);
  return t;
}

bool keeps_standalone_rates(const std::vector<const CollectivePlan*>& plans, const std::vector<double>& capacity) {
  struct Load {
    int flows = 0;
    double rate = 0.0;
  };
  std::map<LinkId, Load> total;  // over the plans: each plan's busiest phase per link
  std::map<LinkId, Load> plan_load;
  std::map<LinkId, Load> phase_load;
  auto add = [&](const std::vector<LinkId>& path, double rate) {
    for (const LinkId l : path) {
      Load& p = phase_load[l];
      ++p.flows;
      p.rate += rate;
    }
  };
  for (const CollectivePlan* plan : plans) {
    plan_load.clear();
    for (const PlannedPhase& ph : plan->phases) {
      phase_load.clear();
      if (ph.kind == PlannedPhase::Kind::flows) {
        for (const PlannedFlow& f : ph.flows) add(f.path, standalone_rate(f.path, f.cap, capacity));
      } else if (ph.steps > 0) {
        for (const PlannedRing& ring : ph.rings) {
          for (const auto& hop : ring.hops) add(hop, standalone_rate(hop, ph.step_cap, capacity));
        }
      }
      for (const auto& [l, load] : phase_load) {
        Load& p = plan_load[l];
        p.flows = std::max(p.flows, load.flows);
        p.rate = std::max(p.rate, load.rate);
      }
    }
    for (const auto& [l, load] : plan_load) {
      Load& t = total[l];
      t.flows += load.flows;
      t.rate += load.rate;
    }
  }
  constexpr double kMargin = 1e-9;
  for (const auto& [l, load] : total) {
    if (load.flows > 1 && !(load.rate < capacity[l] * (1.0 - kMargin))) return false;
  }
  return true;
}

}  // namespace foresight::sim
