#include "collectives/collective_engine.hpp"

#include <fmt/core.h>

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
  std::uint64_t arrivals = 0;
  std::uint64_t expected = 0;
};

CollectiveEngine::CollectiveEngine(Simulator& sim, NetworkModel& network)
    : sim_(sim), network_(network), self_(sim.add_handler(*this, "collective-engine")) {}

CollectiveEngine::~CollectiveEngine() = default;

void CollectiveEngine::start(CollectivePlan plan, FlowNotify done) {
  start(std::make_shared<const CollectivePlan>(std::move(plan)), done);
}

std::uint32_t CollectiveEngine::new_instance(std::shared_ptr<const CollectivePlan> plan, FlowNotify done) {
  std::uint32_t id = 0;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    id = static_cast<std::uint32_t>(instances_.size());
    instances_.emplace_back();
  }
  instances_[id] = std::make_unique<Instance>(std::move(plan));
  instances_[id]->done = done;
  ++running_;
  return id;
}

std::vector<CollectiveEngine::Progress> CollectiveEngine::running_progress() const {
  std::vector<Progress> out;
  for (std::uint32_t id = 0; id < instances_.size(); ++id) {
    if (!instances_[id]) continue;
    const Instance& in = *instances_[id];
    out.push_back(Progress{id, in.done, in.phase, in.n, in.sent, in.received, in.busy, in.arrivals, in.expected});
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
  in.arrivals = progress.arrivals;
  in.expected = progress.expected;
  return id;
}

void CollectiveEngine::start(std::shared_ptr<const CollectivePlan> plan, FlowNotify done) {
  const std::uint32_t id = new_instance(std::move(plan), done);
  if (instances_[id]->plan.phases.empty()) {
    end_phase(id);
    return;
  }
  sim_.schedule_after(instances_[id]->plan.phases.front().start_delay, self_, kPhaseStart, pack(id, 0));
}

void CollectiveEngine::begin_phase(std::uint32_t id) {
  Instance& in = *instances_[id];
  const PlannedPhase& ph = in.plan.phases[in.phase];
  if (ph.kind == PlannedPhase::Kind::flows) {
    in.arrivals = 0;
    in.expected = ph.flows.size();
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
      network_.start_flow(r);
      ++flows_started_;
    }
    return;
  }
  const std::size_t rings = ph.rings.size();
  in.n = static_cast<std::uint32_t>(ph.rings.front().order.size());
  in.sent.assign(rings * in.n, 0);
  in.received.assign(rings * in.n, 0);
  in.busy.assign(rings * in.n, 0);
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
  network_.start_flow(r);
  ++flows_started_;
}

void CollectiveEngine::end_phase(std::uint32_t id) {
  Instance& in = *instances_[id];
  ++in.phase;
  if (in.phase < in.plan.phases.size()) {
    sim_.schedule_after(in.plan.phases[in.phase].start_delay, self_, kPhaseStart, pack(id, 0));
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
  if (id >= instances_.size() || !instances_[id]) {
    throw InternalError(fmt::format("collective engine: event for unknown instance {}", id));
  }
  Instance& in = *instances_[id];
  switch (event.kind) {
    case kPhaseStart:
      begin_phase(id);
      return;
    case kFlowSent: {
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
