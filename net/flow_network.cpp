#include "net/flow_network.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "common/error.hpp"

namespace foresight::sim {
namespace {

/// Relative change of a rate below which it is treated as unchanged when deciding whether the
/// re-solve must widen. Far below any effect on reported times (picosecond resolution).
constexpr double kChangeTolerance = 1e-9;

bool changed(double a, double b) {
  return std::abs(a - b) > kChangeTolerance * std::max({std::abs(a), std::abs(b), 1.0});
}

/// Relative difference within which a re-solved rate is the flow's current rate computed in
/// another order: floating-point sums of the same rates differ in their last bits depending on
/// which flows a re-solve holds and in what order it freezes them. Such a flow keeps its rate
/// (and its scheduled completion), so that flows elsewhere, or a re-solve that moves nothing,
/// never shift a completion by a rounding error.
constexpr double kRoundingTolerance = 1e-12;

bool rounding(double a, double b) { return std::abs(a - b) <= kRoundingTolerance * std::max(std::abs(a), std::abs(b)); }

/// Heap order (std::push_heap keeps the greatest first): the lowest value, then the lowest id;
/// a link's entries of one value differ in version, and at most one is current.
struct LevelAfter {
  template <typename Level>
  bool operator()(const Level& a, const Level& b) const {
    if (a.value != b.value) return a.value > b.value;
    if (a.id != b.id) return a.id > b.id;
    return a.version > b.version;
  }
};

/// How long `remaining` bytes take at `rate` (> 0): rounded up to a picosecond, none for none.
Time drain_time(double remaining, double rate) {
  return remaining > 0.0 ? transfer_time(remaining, Bandwidth::bytes_per_second(rate)) : Time::zero();
}

/// Whether a flow at its completion time still has more than float noise left (the completion
/// was rounded up to a picosecond, so normally it has not).
bool left_over(double remaining, double rate) { return remaining > rate * 2e-12; }

void check_capacities(const std::vector<double>& capacities) {
  for (std::size_t i = 0; i < capacities.size(); ++i) {
    if (!(capacities[i] > 0.0) || !std::isfinite(capacities[i])) {
      throw InternalError(
          fmt::format("network: link {} has capacity {} B/s; it must be positive", i, capacities[i]));
    }
  }
}

void check_request(const FlowRequest& r, std::size_t links) {
  if (!(r.bytes >= 0.0) || !std::isfinite(r.bytes)) {
    throw InternalError(fmt::format("network: flow of {} bytes", r.bytes));
  }
  if (!(r.max_rate > 0.0)) {
    throw InternalError(fmt::format("network: flow rate cap {} B/s must be positive", r.max_rate));
  }
  if (r.weight < 1) throw InternalError("network: a flow stands for at least one");
  for (std::size_t i = 0; i < r.path.size(); ++i) {
    if (r.path[i] >= links) {
      throw InternalError(fmt::format("network: path names link {} of {}", r.path[i], links));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (r.path[j] == r.path[i]) {
        throw InternalError(fmt::format("network: path crosses link {} twice", r.path[i]));
      }
    }
  }
}

}  // namespace

FlowNetwork::FlowNetwork(Simulator& sim, std::vector<double> capacities)
    : sim_(sim), self_(sim.add_handler(*this, "flow-network")) {
  check_capacities(capacities);
  links_.resize(capacities.size());
  for (std::size_t i = 0; i < capacities.size(); ++i) links_[i].capacity = capacities[i];
}

FlowId FlowNetwork::start_flow(const FlowRequest& request) {
  check_request(request, links_.size());
  const Time now = sim_.now();
  if (request.bytes == 0.0 || request.path.empty()) {
    // Nothing crosses a link: done after its own cap allows (at once without one).
    const Time t = std::isfinite(request.max_rate)
                       ? transfer_time(request.bytes, Bandwidth::bytes_per_second(request.max_rate))
                       : Time::zero();
    sim_.schedule_at(now + t, request.notify.target, request.notify.kind, request.notify.data);
    return static_cast<FlowId>(-1);
  }
  const std::uint32_t slot = new_slot();
  Flow& f = flows_[slot];
  f.path.assign(request.path.begin(), request.path.end());
  f.remaining = request.bytes;
  f.rate = 0.0;
  f.max_rate = request.max_rate;
  f.weight = static_cast<double>(request.weight);
  f.bound = standalone_bound(f);
  f.updated = now;
  f.notify = request.notify;
  f.bottleneck = kUnsolved;
  f.active = true;
  ++f.generation;
  ++active_;
  attach(slot);
  return (static_cast<FlowId>(f.generation) << 32) | slot;
}

std::uint32_t FlowNetwork::slot_of(FlowId id) const {
  const auto slot = static_cast<std::uint32_t>(id & 0xffffffffULL);
  if (slot >= flows_.size() || !flows_[slot].active) {
    throw InternalError(fmt::format("FlowNetwork: flow {} is not active", id));
  }
  return slot;
}

FlowNetwork::FlowState FlowNetwork::state_of(const Flow& f) {
  return FlowState{f.path, f.remaining, f.rate, f.max_rate, f.updated, f.notify, static_cast<std::uint32_t>(f.weight)};
}

FlowNetwork::FlowState FlowNetwork::flow_state(FlowId id) const { return state_of(flows_[slot_of(id)]); }

std::optional<Time> FlowNetwork::leaves_alone(FlowId id) const {
  const auto slot = static_cast<std::uint32_t>(id & 0xffffffffULL);
  if (id == static_cast<FlowId>(-1) || slot >= flows_.size() || !flows_[slot].active) return std::nullopt;
  const Flow& f = flows_[slot];
  if (!(f.rate > 0.0) || f.rate != f.bound) return std::nullopt;
  // What schedule_done and the completion event do: leave `remaining` / rate after `updated`,
  // and go on for what float noise leaves (advance, then the test in handle).
  Time updated = f.updated;
  double remaining = f.remaining;
  for (;;) {
    const Time at = updated + drain_time(remaining, f.rate);
    const double moved = f.rate * (at - updated).seconds();
    if (moved > 0.0) remaining -= moved;
    if (!left_over(remaining, f.rate)) return at;
    updated = at;
  }
}

void FlowNetwork::withdraw(FlowId id) {
  const std::uint32_t slot = slot_of(id);
  advance(flows_[slot]);
  release(slot);
}

double FlowNetwork::standalone_bound(const Flow& f) const {
  double rate = f.max_rate;
  for (const LinkId l : f.path) rate = std::min(rate, f.weight > 1.0 ? links_[l].capacity / f.weight : links_[l].capacity);
  return rate;
}

std::uint32_t FlowNetwork::new_slot() {
  if (!free_slots_.empty()) {
    const std::uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  flows_.emplace_back();
  return static_cast<std::uint32_t>(flows_.size() - 1);
}

std::vector<FlowNetwork::FlowState> FlowNetwork::active_flow_states() const {
  std::vector<FlowState> out;
  for (const Flow& f : flows_) {
    if (f.active) out.push_back(state_of(f));
  }
  return out;
}

FlowId FlowNetwork::adopt(const FlowState& state) {
  check_request(FlowRequest{state.path, state.remaining, state.max_rate, state.notify, state.weight}, links_.size());
  if (state.path.empty() || state.updated > sim_.now()) {
    throw InternalError("FlowNetwork::adopt: a flow needs links and a past update time");
  }
  const std::uint32_t slot = new_slot();
  Flow& f = flows_[slot];
  f.path = state.path;
  f.remaining = state.remaining;
  f.rate = state.rate;
  f.max_rate = state.max_rate;
  f.weight = static_cast<double>(state.weight);
  f.bound = standalone_bound(f);
  f.updated = state.updated;
  f.notify = state.notify;
  f.bottleneck = kUnsolved;  // solved on another network: any change of its links re-solves it
  f.active = true;
  ++f.generation;
  ++active_;
  attach(slot, false);
  // Its completion where its own network had it: `updated` plus the rest at its rate.
  if (f.rate > 0.0) {
    ++f.generation;
    const Time at = f.updated + drain_time(f.remaining, f.rate);
    sim_.schedule_at(at, self_, kFlowDone, (static_cast<std::uint64_t>(f.generation) << 32) | slot);
  }
  return (static_cast<FlowId>(f.generation) << 32) | slot;
}

double FlowNetwork::rate(FlowId id) const {
  const auto slot = static_cast<std::uint32_t>(id & 0xffffffffULL);
  if (slot >= flows_.size() || !flows_[slot].active) {
    throw InternalError(fmt::format("FlowNetwork::rate: flow {} is not active", id));
  }
  return flows_[slot].rate;
}

double FlowNetwork::link_bytes(LinkId id) const {
  const Link& l = links_.at(id);
  double bytes = l.carried;
  for (const std::uint32_t s : l.flows) {
    bytes += flows_[s].rate * flows_[s].weight * (sim_.now() - flows_[s].updated).seconds();
  }
  return bytes;
}

void FlowNetwork::attach(std::uint32_t slot, bool dirty) {
  Flow& f = flows_[slot];
  f.slot_in_link.resize(f.path.size());
  for (std::size_t i = 0; i < f.path.size(); ++i) {
    Link& l = links_[f.path[i]];
    f.slot_in_link[i] = static_cast<std::uint32_t>(l.flows.size());
    l.flows.push_back(slot);
    if (dirty) mark_dirty(f.path[i]);
  }
}

void FlowNetwork::detach(std::uint32_t slot) {
  Flow& f = flows_[slot];
  for (std::size_t i = 0; i < f.path.size(); ++i) {
    const LinkId lid = f.path[i];
    Link& l = links_[lid];
    const std::uint32_t pos = f.slot_in_link[i];
    const std::uint32_t moved = l.flows.back();
    l.flows[pos] = moved;
    l.flows.pop_back();
    if (moved != slot) {
      Flow& m = flows_[moved];
      const auto it = std::find(m.path.begin(), m.path.end(), lid);
      m.slot_in_link[static_cast<std::size_t>(it - m.path.begin())] = pos;
    }
    mark_dirty(lid);
  }
}

void FlowNetwork::mark_dirty(LinkId l) {
  if (links_[l].dirty_mark != settle_) {
    links_[l].dirty_mark = settle_;
    dirty_.push_back(l);
  }
  request_settle();
}

void FlowNetwork::request_settle() {
  if (!settle_pending_) {
    settle_pending_ = true;
    sim_.schedule_at(sim_.now(), self_, kSettle, 0, priority::settle);
  }
}

void FlowNetwork::handle(Simulator& /*sim*/, const Event& event) {
  if (event.kind == kSettle) {
    settle();
    return;
  }
  const auto slot = static_cast<std::uint32_t>(event.data & 0xffffffffULL);
  const auto generation = static_cast<std::uint32_t>(event.data >> 32);
  Flow& f = flows_[slot];
  if (!f.active || f.generation != generation) return;  // superseded by a rate change
  advance(f);
  if (left_over(f.remaining, f.rate)) {
    schedule_done(slot);
    return;
  }
  finish(slot);
}

void FlowNetwork::advance(Flow& f) {
  const double moved = f.rate * (sim_.now() - f.updated).seconds();
  if (moved > 0.0) {
    f.remaining -= moved;
    for (const LinkId l : f.path) links_[l].carried += moved * f.weight;
  }
  f.updated = sim_.now();
}

void FlowNetwork::schedule_done(std::uint32_t slot) {
  Flow& f = flows_[slot];
  ++f.generation;
  if (!(f.rate > 0.0)) return;  // stalled until the next re-solve gives it bandwidth
  sim_.schedule_after(drain_time(f.remaining, f.rate), self_, kFlowDone, (static_cast<std::uint64_t>(f.generation) << 32) | slot);
}

void FlowNetwork::release(std::uint32_t slot) {
  Flow& f = flows_[slot];
  detach(slot);
  f.active = false;
  ++f.generation;
  --active_;
  free_slots_.push_back(slot);
}

void FlowNetwork::finish(std::uint32_t slot) {
  release(slot);
  const FlowNotify& n = flows_[slot].notify;
  sim_.schedule_at(sim_.now(), n.target, n.kind, n.data);
}

void FlowNetwork::settle() {
  settle_pending_ = false;
  if (dirty_.empty()) return;
  std::vector<std::uint32_t> set;
  std::vector<LinkId> full;  // links whose every flow is re-solved
  std::size_t expanded = 0;
  std::size_t expanded_full = 0;
  const auto include = [&](std::uint32_t s) {
    Flow& g = flows_[s];
    if (g.mark == settle_) return;
    g.mark = settle_;
    if (g.old_mark != settle_) {
      g.old_mark = settle_;
      g.old_rate = g.rate;
    }
    set.push_back(s);
  };
  for (;;) {
    // A changed link can only move the flows it holds back (their bottleneck) and flows not
    // solved yet; the others keep their rates unless rule (2) below finds one too fast.
    for (; expanded < dirty_.size(); ++expanded) {
      const auto l = static_cast<std::int64_t>(dirty_[expanded]);
      for (const std::uint32_t s : links_[dirty_[expanded]].flows) {
        const std::int64_t b = flows_[s].bottleneck;
        if (b == l || b == kUnsolved) include(s);
      }
    }
    for (; expanded_full < full.size(); ++expanded_full) {
      for (const std::uint32_t s : links_[full[expanded_full]].flows) include(s);
    }
    solve(set);
    bool grew = false;
    auto add = [&](LinkId l) {
      if (links_[l].dirty_mark != settle_) {
        links_[l].dirty_mark = settle_;
        dirty_.push_back(l);
        grew = true;
      }
    };
    for (const std::uint32_t s : set) {
      const Flow& f = flows_[s];
      if (changed(f.new_rate, f.old_rate)) {
        for (const LinkId l : f.path) add(l);  // (1)
      }
      if (f.bottleneck < 0) continue;
      // (2) A flow held at its rate runs faster than a re-solved flow on the latter's
      // bottleneck: every flow of that link is re-solved.
      // Some held flow is faster, by more than the tolerance, exactly when the fastest is.
      const auto b = static_cast<LinkId>(f.bottleneck);
      Link& bl = links_[b];
      if (bl.full_mark == settle_) continue;
      if (bl.fastest_mark != epoch_) {
        bl.fastest_mark = epoch_;
        bl.fastest_held = -1.0;
        for (const std::uint32_t g : bl.flows) {
          if (flows_[g].mark != settle_) bl.fastest_held = std::max(bl.fastest_held, flows_[g].rate);
        }
      }
      if (bl.fastest_held > f.new_rate && changed(bl.fastest_held, f.new_rate)) {
        bl.full_mark = settle_;
        full.push_back(b);
        grew = true;
      }
    }
    if (!grew) break;
  }
  ++solves_;
  flows_resolved_ += set.size();
  for (const std::uint32_t s : set) {
    Flow& f = flows_[s];
    if (f.new_rate == f.rate || (f.rate > 0.0 && rounding(f.new_rate, f.rate))) continue;
    advance(f);
    f.rate = f.new_rate;
    schedule_done(s);
  }
  dirty_.clear();
  ++settle_;
}

void FlowNetwork::solve(const std::vector<std::uint32_t>& set) {
  ++epoch_;
  std::vector<LinkId>& touched = touched_;
  touched.clear();
  for (const std::uint32_t s : set) {
    Flow& f = flows_[s];
    f.frozen = false;
    f.bottleneck = -1;
    for (const LinkId lid : f.path) {
      Link& l = links_[lid];
      if (l.mark != epoch_) {
        l.mark = epoch_;
        l.residual = l.capacity;
        l.count = 0.0;
        for (const std::uint32_t g : l.flows) {
          if (flows_[g].mark != settle_) l.residual -= flows_[g].rate * flows_[g].weight;  // held at its rate
        }
        touched.push_back(lid);
      }
      l.count += f.weight;
    }
  }
  // Candidate levels: every touched link's fair share among its unfrozen re-solved flows, in a
  // heap where a link's older entries are stale (its version moved on), and every re-solved
  // flow's own cap, sorted once. The lowest goes first; at equal values a link before a cap,
  // then the lower id.
  //
  // Freezing flows at the lowest level can only raise a link's share (each leaves at most the
  // share), so a link whose share rose keeps its entry, now stale, as a lower bound: the entry
  // is brought up to date only once it reaches the top (lazy). A share that fell (a flow frozen
  // at its standalone bound, a rounding above the level) is pushed at once. The heap then yields
  // the current entries in the same order as one that re-pushed every moved link at every batch
  // of freezes, so the rates are the same to the last bit.
  std::vector<Level>& heap = heap_;
  heap.clear();
  const auto share = [&](const Link& l) { return std::max(0.0, l.residual) / l.count; };
  const auto push = [&](LinkId lid) {
    Link& l = links_[lid];
    l.queued = share(l);
    l.queued_version = l.version;
    heap.push_back(Level{l.queued, lid, l.version});
    std::push_heap(heap.begin(), heap.end(), LevelAfter{});
  };
  for (const LinkId lid : touched) push(lid);
  // The caps in a min-heap, taken in increasing (cap, slot) order as a sort would give them:
  // where links freeze every flow below its cap (a crowd), most are never taken.
  std::vector<std::pair<double, std::uint32_t>>& caps = caps_;  // (cap, slot)
  caps.clear();
  for (const std::uint32_t s : set) {
    if (std::isfinite(flows_[s].max_rate)) caps.emplace_back(flows_[s].max_rate, s);
  }
  const auto cap_after = std::greater<std::pair<double, std::uint32_t>>{};
  std::make_heap(caps.begin(), caps.end(), cap_after);
  const auto pop_cap = [&] {
    std::pop_heap(caps.begin(), caps.end(), cap_after);
    const auto c = caps.back();
    caps.pop_back();
    return c;
  };
  std::size_t unfrozen = set.size();
  std::vector<LinkId>& changed = changed_;
  changed.clear();
  std::uint64_t batch = ++batches_;
  auto freeze = [&](Flow& f, double rate, std::int64_t bottleneck) {
    if (bottleneck >= 0 && rate < f.bound && f.bound - rate <= kRoundingTolerance * f.bound) rate = f.bound;
    f.frozen = true;
    f.new_rate = rate;
    f.bottleneck = bottleneck;
    --unfrozen;
    for (const LinkId lid : f.path) {
      Link& l = links_[lid];
      l.residual -= rate * f.weight;
      l.count -= f.weight;
      if (l.batch != batch) {
        l.batch = batch;
        changed.push_back(lid);
      }
    }
  };
  // A link's level moves once per batch of freezes (nothing is taken from the heap meanwhile).
  auto requeue = [&] {
    for (const LinkId lid : changed) {
      Link& l = links_[lid];
      ++l.version;
      if (l.count > 0.0 && share(l) < l.queued) push(lid);  // fell below its entry: at once
    }
    changed.clear();
    batch = ++batches_;
  };
  // Takes stale entries off the top: an emptied link's for good, a moved link's brought up to
  // date (once: its other stale entries, if any, then go).
  const auto clear_stale = [&] {
    while (!heap.empty()) {
      const Level top = heap.front();
      const Link& l = links_[top.id];
      if (top.version == l.version && l.count != 0.0) return;
      std::pop_heap(heap.begin(), heap.end(), LevelAfter{});
      heap.pop_back();
      if (l.count > 0.0 && l.queued_version != l.version) push(top.id);
    }
  };
  while (unfrozen > 0) {
    while (!caps.empty() && flows_[caps.front().second].frozen) pop_cap();
    clear_stale();
    const bool cap_left = !caps.empty();
    if (heap.empty() && !cap_left) break;
    if (heap.empty() || (cap_left && caps.front().first < heap.front().value)) {
      const auto [value, slot] = pop_cap();
      freeze(flows_[slot], value, -1);
      requeue();
      continue;
    }
    const Level top = heap.front();
    std::pop_heap(heap.begin(), heap.end(), LevelAfter{});
    heap.pop_back();
    // Freeze every unfrozen re-solved flow on this link at its fair share.
    for (const std::uint32_t s : links_[top.id].flows) {
      Flow& f = flows_[s];
      if (f.mark == settle_ && !f.frozen) freeze(f, top.value, top.id);
    }
    requeue();
  }
  if (unfrozen != 0) throw InternalError("FlowNetwork: progressive filling left flows unfrozen");
}

std::vector<double> max_min_rates(const std::vector<double>& capacities,
                                  const std::vector<std::vector<LinkId>>& paths,
                                  const std::vector<double>& caps) {
  const std::size_t n = paths.size();
  std::vector<double> rate(n, 0.0);
  std::vector<bool> frozen(n, false);
  std::vector<double> residual = capacities;
  std::size_t left = n;
  while (left > 0) {
    // The lowest of: every link's equal share among its unfrozen flows, every unfrozen cap.
    double best = std::numeric_limits<double>::infinity();
    std::vector<std::size_t> count(capacities.size(), 0);
    for (std::size_t f = 0; f < n; ++f) {
      if (!frozen[f]) {
        for (const LinkId l : paths[f]) ++count[l];
        best = std::min(best, caps[f]);
      }
    }
    for (std::size_t l = 0; l < capacities.size(); ++l) {
      if (count[l] > 0) best = std::min(best, std::max(0.0, residual[l]) / static_cast<double>(count[l]));
    }
    // Freeze flows limited at `best`: capped there, or crossing a link whose share is `best`.
    std::vector<std::size_t> now;
    for (std::size_t f = 0; f < n; ++f) {
      if (frozen[f]) continue;
      bool limited = caps[f] <= best;
      for (const LinkId l : paths[f]) {
        limited = limited || std::max(0.0, residual[l]) / static_cast<double>(count[l]) <= best;
      }
      if (limited) now.push_back(f);
    }
    for (const std::size_t f : now) {
      frozen[f] = true;
      rate[f] = best;
      --left;
      for (const LinkId l : paths[f]) residual[l] -= best;
    }
  }
  return rate;
}

}  // namespace foresight::sim
