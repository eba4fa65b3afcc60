#include "collectives/collective_engine.hpp"

#include <fmt/core.h>

#include <algorithm>

#include "collectives/plan_timing.hpp"
#include "common/error.hpp"

namespace foresight::sim {

struct CollectiveEngine::Instance {
  std::shared_ptr<const CollectivePlan> owned;
  const CollectivePlan& plan;
  explicit Instance(std::shared_ptr<const CollectivePlan> p) : owned(std::move(p)), plan(*owned) {}
  FlowNotify done;
  std::size_t phase = 0;
  // Ring phase state, per ring r and position p at [r * n + p].
  std::uint32_t n = 0;
  std::vector<std::uint32_t> sent;
  std::vector<std::uint32_t> received;
  std::vector<std::uint8_t> busy;
  std::vector<Time> last_done;  ///< ring: when each position's latest finished send left
  std::vector<Time> flow_done;  ///< flows: when each left, Time::max() while in flight
  std::vector<FlowId> flow;     ///< the flow of each position (ring) or of each flow in flight
  std::uint64_t arrivals = 0;
  std::uint64_t expected = 0;
  bool waiting = false;  ///< for `phase` to start at phase_start
  Time phase_start;
};

CollectiveEngine::CollectiveEngine(Simulator& sim, NetworkModel& network)
    : sim_(sim), network_(network), self_(sim.add_handler(*this, "collective-engine")) {}

CollectiveEngine::~CollectiveEngine() = default;

std::uint32_t CollectiveEngine::start(CollectivePlan plan, FlowNotify done) {
  return start(std::make_shared<const CollectivePlan>(std::move(plan)), done);
}

std::uint32_t CollectiveEngine::new_instance(std::shared_ptr<const CollectivePlan> plan, FlowNotify done) {
  std::uint32_t id = 0;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<std::uint32_t>(instances_.size());
    instances_.emplace_back();
    abandoned_.push_back(0);
  }
  instances_[id] = std::make_unique<Instance>(std::move(plan));
  instances_[id]->done = done;
  ++running_;
  return id;
}

CollectiveEngine::Progress CollectiveEngine::progress(std::uint32_t id) const {
  const Instance& in = *instances_.at(id);
  return Progress{id,           in.done,      in.phase,    in.n,        in.sent,       in.received, in.busy,
                  in.last_done, in.flow_done, in.arrivals, in.expected, in.waiting, in.phase_start};
}

void CollectiveEngine::Progress::shift(Time by) {
  phase_start += by;
  for (Time& t : last_done) t += by;
  for (Time& t : flow_done) {
    if (t != Time::max()) t += by;
  }
}

bool CollectiveEngine::Progress::same_place(const Progress& o) const {
  return phase == o.phase && n == o.n && sent == o.sent && received == o.received && busy == o.busy &&
         last_done == o.last_done && flow_done == o.flow_done && arrivals == o.arrivals && expected == o.expected &&
         waiting == o.waiting && phase_start == o.phase_start;
}

std::vector<CollectiveEngine::Progress> CollectiveEngine::running_progress() const {
  std::vector<Progress> out;
  for (std::uint32_t id = 0; id < instances_.size(); ++id) {
    if (instances_[id]) out.push_back(progress(id));
  }
  return out;
}

std::uint32_t CollectiveEngine::resume(std::shared_ptr<const CollectivePlan> plan, const Progress& progress) {
  const std::uint32_t id = new_instance(std::move(plan), progress.done);
  Instance& in = *instances_[id];
  in.phase = progress.phase;
  in.n = progress.n;
  in.sent = progress.sent;
  in.received = progress.received;
  in.busy = progress.busy;
  in.last_done = progress.last_done;
  in.flow_done = progress.flow_done;
  in.flow.assign(std::max(in.busy.size(), in.flow_done.size()), static_cast<FlowId>(-1));
  in.arrivals = progress.arrivals;
  in.expected = progress.expected;
  in.waiting = progress.waiting;
  in.phase_start = progress.phase_start;
  return id;
}

std::vector<CollectiveEngine::PendingEvent> CollectiveEngine::pending_events(std::uint32_t id) const {
  const Instance& in = *instances_.at(id);
  std::vector<PendingEvent> out;
  if (in.waiting) {
    out.push_back(PendingEvent{in.phase_start, kPhaseStart, 0});
    return out;
  }
  const PlannedPhase& ph = in.plan.phases[in.phase];
  if (ph.kind == PlannedPhase::Kind::flows) {
    for (std::size_t f = 0; f < in.flow_done.size(); ++f) {
      if (in.flow_done[f] == Time::max()) continue;
      const Time at = in.flow_done[f] + ph.flows[f].latency;
      if (at > sim_.now()) out.push_back(PendingEvent{at, kFlowArrived, static_cast<std::uint32_t>(f)});
    }
    return out;
  }
  if (!progress_tells_pending(id)) throw InternalError("collective engine: more than one step on its way on a hop");
  for (std::size_t k = 0; k < in.sent.size(); ++k) {
    const std::size_t ring = k / in.n;
    const std::size_t pos = k % in.n;
    const std::size_t next = ring * in.n + (pos + 1) % in.n;
    const std::uint32_t finished = in.sent[k] - in.busy[k];
    if (finished > in.received[next]) {
      out.push_back(PendingEvent{in.last_done[k] + ph.rings[ring].hop_latency[pos], kRingArrived,
                                 static_cast<std::uint32_t>(k)});
    }
  }
  return out;
}

bool CollectiveEngine::progress_tells_pending(std::uint32_t id) const {
  const Instance& in = *instances_.at(id);
  if (in.waiting || in.plan.phases[in.phase].kind == PlannedPhase::Kind::flows) return true;
  for (std::size_t k = 0; k < in.sent.size(); ++k) {
    const std::size_t next = (k / in.n) * in.n + (k % in.n + 1) % in.n;
    if (in.sent[k] - in.busy[k] > in.received[next] + 1) return false;
  }
  return true;
}

void CollectiveEngine::schedule_pending(std::uint32_t id, const std::vector<PendingEvent>& events, Time shift) {
  for (const PendingEvent& e : events) sim_.schedule_at(e.time - shift, self_, e.kind, pack(id, e.local));
}

std::vector<std::pair<std::uint32_t, FlowId>> CollectiveEngine::in_flight(std::uint32_t id) const {
  const Instance& in = *instances_.at(id);
  std::vector<std::pair<std::uint32_t, FlowId>> out;
  if (in.waiting) return out;
  if (in.plan.phases[in.phase].kind == PlannedPhase::Kind::flows) {
    for (std::size_t f = 0; f < in.flow_done.size(); ++f) {
      if (in.flow_done[f] == Time::max()) out.emplace_back(static_cast<std::uint32_t>(f), in.flow[f]);
    }
    return out;
  }
  for (std::size_t k = 0; k < in.busy.size(); ++k) {
    if (in.busy[k] != 0) out.emplace_back(static_cast<std::uint32_t>(k), in.flow[k]);
  }
  return out;
}

void CollectiveEngine::set_flow(std::uint32_t id, std::uint32_t local, FlowId flow) {
  instances_.at(id)->flow.at(local) = flow;
}

std::optional<Time> CollectiveEngine::end_alone(std::uint32_t id, const std::vector<double>& capacity,
                                                const std::function<std::optional<Time>(FlowId)>& leaves) const {
  const Instance& in = *instances_.at(id);
  const CollectivePlan& plan = in.plan;
  if (in.waiting) return in.phase_start + standalone_rest(plan, in.phase, capacity, true) - plan.phases[in.phase].start_delay;
  const PlannedPhase& ph = plan.phases[in.phase];
  std::optional<Time> end;
  const auto later = [&end](Time t) { end = end ? std::max(*end, t) : t; };
  if (ph.kind == PlannedPhase::Kind::flows) {
    for (std::size_t f = 0; f < in.flow_done.size(); ++f) {
      Time left = in.flow_done[f];
      if (left == Time::max()) {
        const auto at = leaves(in.flow[f]);
        if (!at) return std::nullopt;
        left = *at;
      }
      const Time arrival = left + ph.flows[f].latency;
      if (arrival > sim_.now()) later(arrival);
    }
  } else {
    RingState state;
    for (std::size_t ring = 0; ring < ph.rings.size(); ++ring) {
      const std::size_t from = ring * in.n;
      const std::size_t to = from + in.n;
      state.sent.assign(in.sent.begin() + from, in.sent.begin() + to);
      state.received.assign(in.received.begin() + from, in.received.begin() + to);
      state.busy.assign(in.busy.begin() + from, in.busy.begin() + to);
      state.last_done.assign(in.last_done.begin() + from, in.last_done.begin() + to);
      state.in_flight_done.assign(in.n, Time::zero());
      for (std::size_t p = 0; p < in.n; ++p) {
        if (state.busy[p] == 0) continue;
        const auto at = leaves(in.flow[from + p]);
        if (!at) return std::nullopt;
        state.in_flight_done[p] = *at;
      }
      const auto ring_end = ring_end_from(ph, ph.rings[ring], state, capacity, true);
      if (!ring_end) {
        // Every step of this ring has arrived (others have not), or the state tells too little.
        if (std::all_of(state.received.begin(), state.received.end(),
                        [&](std::uint32_t r) { return r == static_cast<std::uint32_t>(ph.steps); })) {
          continue;
        }
        return std::nullopt;
      }
      later(*ring_end);
    }
  }
  if (!end) return std::nullopt;  // every arrival is in: the phase ends now, by an event under way
  return *end + standalone_rest(plan, in.phase + 1, capacity, true);
}

void CollectiveEngine::abandon(std::uint32_t id) {
  instances_.at(id).reset();
  abandoned_.at(id) = 1;
  --running_;
}

std::uint32_t CollectiveEngine::start(std::shared_ptr<const CollectivePlan> plan, FlowNotify done) {
  const std::uint32_t id = new_instance(std::move(plan), done);
  Instance& in = *instances_[id];
  if (in.plan.phases.empty()) {
    end_phase(id);
    return id;
  }
  in.waiting = true;
  in.phase_start = sim_.now() + in.plan.phases.front().start_delay;
  sim_.schedule_at(in.phase_start, self_, kPhaseStart, pack(id, 0));
  return id;
}

void CollectiveEngine::begin_phase(std::uint32_t id) {
  Instance& in = *instances_[id];
  in.waiting = false;
  const PlannedPhase& ph = in.plan.phases[in.phase];
  if (ph.kind == PlannedPhase::Kind::flows) {
    in.arrivals = 0;
    in.expected = ph.flows.size();
    in.flow_done.assign(ph.flows.size(), Time::max());
    in.flow.assign(ph.flows.size(), static_cast<FlowId>(-1));
    in.sent.clear();
    in.received.clear();
    in.busy.clear();
    in.last_done.clear();
    if (ph.flows.empty()) {
      end_phase(id);
      return;
    }
    for (std::size_t f = 0; f < ph.flows.size(); ++f) {
      const PlannedFlow& pf = ph.flows[f];
      FlowRequest r;
      r.path = pf.path;
      r.bytes = pf.bytes;
      r.max_rate = pf.cap;
      r.weight = pf.weight;
      r.notify = FlowNotify{self_, kFlowSent, pack(id, static_cast<std::uint32_t>(f))};
      instances_[id]->flow[f] = network_.start_flow(r);
      ++flows_started_;
    }
    return;
  }
  const std::size_t rings = ph.rings.size();
  in.n = static_cast<std::uint32_t>(ph.rings.front().order.size());
  in.sent.assign(rings * in.n, 0);
  in.received.assign(rings * in.n, 0);
  in.busy.assign(rings * in.n, 0);
  in.last_done.assign(rings * in.n, Time::zero());
  in.flow.assign(rings * in.n, static_cast<FlowId>(-1));
  in.flow_done.clear();
  in.arrivals = 0;
  in.expected = static_cast<std::uint64_t>(rings) * in.n * static_cast<std::uint64_t>(ph.steps);
  if (in.expected == 0) {
    end_phase(id);
    return;
  }
  for (std::uint32_t r = 0; r < rings; ++r) {
    for (std::uint32_t p = 0; p < in.n; ++p) try_send(id, r, p);
  }
}

void CollectiveEngine::try_send(std::uint32_t id, std::uint32_t ring, std::uint32_t pos) {
  Instance& in = *instances_[id];
  const PlannedPhase& ph = in.plan.phases[in.phase];
  const std::size_t k = static_cast<std::size_t>(ring) * in.n + pos;
  if (in.busy[k] != 0 || in.sent[k] >= static_cast<std::uint32_t>(ph.steps) || in.received[k] < in.sent[k]) {
    return;
  }
  in.busy[k] = 1;
  ++in.sent[k];
  FlowRequest r;
  r.path = ph.rings[ring].hops[pos];
  r.bytes = ph.step_bytes;
  r.max_rate = ph.step_cap;
  r.weight = ph.rings[ring].weight;
  r.notify = FlowNotify{self_, kRingSent, pack(id, static_cast<std::uint32_t>(k))};
  in.flow[k] = network_.start_flow(r);
  ++flows_started_;
}

void CollectiveEngine::end_phase(std::uint32_t id) {
  Instance& in = *instances_[id];
  ++in.phase;
  if (in.phase < in.plan.phases.size()) {
    in.waiting = true;
    in.phase_start = sim_.now() + in.plan.phases[in.phase].start_delay;
    sim_.schedule_at(in.phase_start, self_, kPhaseStart, pack(id, 0));
    return;
  }
  const FlowNotify done = in.done;
  instances_[id].reset();
  free_.push_back(id);
  --running_;
  sim_.schedule_at(sim_.now(), done.target, done.kind, done.data);
}

void CollectiveEngine::handle(Simulator& /*sim*/, const Event& event) {
  const auto id = static_cast<std::uint32_t>(event.data >> 32);
  const auto local = static_cast<std::uint32_t>(event.data & 0xffffffffULL);
  if (id < abandoned_.size() && abandoned_[id] != 0) return;  // continued elsewhere
  if (id >= instances_.size() || !instances_[id]) {
    throw InternalError(fmt::format("collective engine: event for unknown instance {}", id));
  }
  Instance& in = *instances_[id];
  switch (event.kind) {
    case kPhaseStart:
      begin_phase(id);
      return;
    case kFlowSent: {
      in.flow_done[local] = sim_.now();
      const PlannedFlow& f = in.plan.phases[in.phase].flows[local];
      sim_.schedule_after(f.latency, self_, kFlowArrived, event.data);
      return;
    }
    case kFlowArrived:
      if (++in.arrivals == in.expected) end_phase(id);
      return;
    case kRingSent: {
      const std::uint32_t ring = local / in.n;
      const std::uint32_t pos = local % in.n;
      in.busy[local] = 0;
      in.last_done[local] = sim_.now();
      sim_.schedule_after(in.plan.phases[in.phase].rings[ring].hop_latency[pos], self_, kRingArrived,
                          event.data);
      try_send(id, ring, pos);
      return;
    }
    case kRingArrived: {
      const std::uint32_t ring = local / in.n;
      const std::uint32_t next = (local % in.n + 1) % in.n;
      ++in.received[static_cast<std::size_t>(ring) * in.n + next];
      if (++in.arrivals == in.expected) {
        end_phase(id);
        return;
      }
      try_send(id, ring, next);
      return;
    }
    default:
      throw InternalError(fmt::format("collective engine: unknown event kind {}", event.kind));
  }
}

}  // namespace foresight::sim
