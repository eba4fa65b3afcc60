#include "collectives/comm_jobs.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <iterator>

#include "common/error.hpp"
#include "net/flow_network.hpp"
#include "collectives/plan_timing.hpp"

namespace foresight::sim {
namespace comm_jobs_detail {

/// Notes which of a job's plans finished, and when. (A member of CommJobs::OwnRun, so not in an
/// anonymous namespace: a unity build would see a type of external linkage use it.)
struct Finished final : EventHandler {
  std::vector<std::uint8_t> plans;
  Time last;
  void handle(Simulator& sim, const Event& event) override {
    plans.at(event.data) = 1;
    last = sim.now();
  }
};

}  // namespace comm_jobs_detail
namespace {

/// `plan` with every path mapped by `map`.
template <typename Map>
CollectivePlan remap(const CollectivePlan& plan, const Map& map) {
  CollectivePlan out = plan;
  for (PlannedPhase& ph : out.phases) {
    for (PlannedFlow& f : ph.flows) f.path = map(f.path);
    for (PlannedRing& r : ph.rings) {
      for (auto& hop : r.hops) hop = map(hop);
    }
  }
  return out;
}

/// Rings of a phase over the same links with the same latencies (the channels of a communicator
/// with one GPU per node all use its NIC; under adaptive routing their spine links pool) move in
/// lock step: one ring standing for all of them runs them with a fraction of the flows.
void merge_identical_rings(CollectivePlan& plan) {
  for (PlannedPhase& ph : plan.phases) {
    std::vector<PlannedRing> merged;
    for (PlannedRing& r : ph.rings) {
      const auto same = std::find_if(merged.begin(), merged.end(), [&](const PlannedRing& m) {
        return m.hops == r.hops && m.hop_latency == r.hop_latency;
      });
      if (same != merged.end()) {
        same->weight += r.weight;
      } else {
        merged.push_back(std::move(r));
      }
    }
    ph.rings = std::move(merged);
  }
}

}  // namespace

/// A job's plans on a network of their own: its links only, numbered by their place in the
/// job's footprint.
struct CommJobs::OwnRun {
  Simulator sim;
  FlowNetwork net;
  CollectiveEngine engine;
  comm_jobs_detail::Finished finished;
  HandlerId finished_id;
  OwnRun(std::vector<double> capacity) : net(sim, std::move(capacity)), engine(sim, net) {
    finished_id = sim.add_handler(finished, "finished");
  }
};

CommJobs::CommJobs(Simulator& sim, NetworkKind kind, const Fabric& fabric, const LinkEfficiency& efficiency,
                   bool closed_form)
    : sim_(sim),
      kind_(kind),
      closed_form_(closed_form),
      pools_(LinkPools::of(fabric, efficiency)),
      network_(make_network(kind, sim, pools_.capacity)),
      flow_(kind == NetworkKind::flow ? static_cast<FlowNetwork*>(network_.get()) : nullptr),
      engine_(sim, *network_),
      self_(sim.add_handler(*this, "comm-jobs")) {}

CommJobs::~CommJobs() = default;

double CommJobs::link_bytes(LinkId link) const { return network_->link_bytes(pools_.pool_of.at(link)); }

CommJobs::Job& CommJobs::build(std::uint32_t job, const PlanSource& plans) {
  if (job >= jobs_.size()) jobs_.resize(job + 1);
  Job& j = jobs_[job];
  if (j.built) return j;
  std::vector<LinkId> footprint;
  for (const CollectivePlan& p : plans()) {
    CollectivePlan pooled = remap(p, [&](const std::vector<LinkId>& path) {
      auto out = pools_.translate(path);
      footprint.insert(footprint.end(), out.begin(), out.end());
      return out;
    });
    merge_identical_rings(pooled);
    j.plans.push_back(std::make_shared<const CollectivePlan>(std::move(pooled)));
  }
  std::sort(footprint.begin(), footprint.end());
  footprint.erase(std::unique(footprint.begin(), footprint.end()), footprint.end());
  if (kind_ == NetworkKind::flow) {
    std::vector<const CollectivePlan*> raw;
    for (const auto& p : j.plans) raw.push_back(p.get());
    j.load = standalone_load(raw, pools_.capacity);
  }
  const auto [it, added] = footprint_ids_.emplace(footprint, static_cast<std::uint32_t>(footprints_.size()));
  if (added) footprints_.push_back(std::move(footprint));
  j.footprint = it->second;
  j.built = true;
  return j;
}

std::unique_ptr<CommJobs::OwnRun> CommJobs::own_run(const Job& job) {
  const std::vector<LinkId>& fp = footprints_[job.footprint];
  std::vector<double> capacity;
  capacity.reserve(fp.size());
  for (const LinkId l : fp) capacity.push_back(pools_.capacity[l]);
  auto run = std::make_unique<OwnRun>(std::move(capacity));
  run->finished.plans.assign(job.plans.size(), 0);
  const auto local = [&](const std::vector<LinkId>& path) {
    std::vector<LinkId> out;
    out.reserve(path.size());
    for (const LinkId l : path) out.push_back(static_cast<LinkId>(std::lower_bound(fp.begin(), fp.end(), l) - fp.begin()));
    return out;
  };
  for (std::size_t i = 0; i < job.plans.size(); ++i) {
    run->engine.start(remap(*job.plans[i], local), FlowNotify{run->finished_id, 0, i});
  }
  ++stats_.own_runs;
  return run;
}

Time CommJobs::alone(std::uint32_t job) {
  Job& j = jobs_[job];
  if (j.alone) return *j.alone;
  std::vector<const CollectivePlan*> plans;
  for (const auto& p : j.plans) plans.push_back(p.get());
  if (kind_ == NetworkKind::analytical || keeps_standalone_rates(j.load, pools_.capacity)) {
    Time longest;
    for (const CollectivePlan* p : plans) {
      longest = std::max(longest, standalone_duration(*p, pools_.capacity, kind_ == NetworkKind::flow));
    }
    j.alone = longest;
  } else {
    auto run = own_run(j);
    run->sim.run();
    if (std::find(run->finished.plans.begin(), run->finished.plans.end(), 0) != run->finished.plans.end()) {
      throw InternalError(fmt::format("comm jobs: job {} did not finish on a network of its own", job));
    }
    j.alone = run->finished.last;
  }
  return *j.alone;
}

const std::vector<LinkId>& CommJobs::shared(std::uint32_t a, std::uint32_t b) {
  if (a > b) std::swap(a, b);
  const std::uint64_t key = (static_cast<std::uint64_t>(a) << 32) | b;
  const auto it = shared_.find(key);
  if (it != shared_.end()) return it->second;
  std::vector<LinkId> both;
  std::set_intersection(footprints_[a].begin(), footprints_[a].end(), footprints_[b].begin(), footprints_[b].end(),
                        std::back_inserter(both));
  return shared_.emplace(key, std::move(both)).first->second;
}

std::vector<std::uint32_t> CommJobs::contended(const Job& job, bool& crowded) {
  const auto load_at = [](const Job& j, LinkId l) {
    const auto it = std::lower_bound(j.load.begin(), j.load.end(), l,
                                     [](const LinkLoad& x, LinkId v) { return x.link < v; });
    return *it;  // every shared pool is in both loads
  };
  // Per pool shared with running jobs: the flows and standalone rates of all of them.
  std::map<LinkId, LinkLoad> total;
  std::vector<std::pair<std::uint32_t, const std::vector<LinkId>*>> sharers;
  for (const std::uint32_t other : running_) {
    const Active& o = actives_[other];
    if (o.closed && o.end <= sim_.now()) continue;  // its last flow has drained
    const Job& oj = jobs_[o.job];
    const std::vector<LinkId>& both = shared(job.footprint, oj.footprint);
    if (both.empty()) continue;
    sharers.emplace_back(other, &both);
    for (const LinkId l : both) {
      auto [it, added] = total.try_emplace(l, load_at(job, l));
      const LinkLoad add = load_at(oj, l);
      it->second.flows += add.flows;
      it->second.peak += add.peak;
    }
  }
  std::vector<std::uint32_t> out;
  crowded = false;
  for (const auto& [other, both] : sharers) {
    const bool tight = std::any_of(both->begin(), both->end(), [&](LinkId l) {
      const LinkLoad& t = total.at(l);
      return !leaves_room(t.flows, t.peak, pools_.capacity[l]);
    });
    if (!tight) continue;
    crowded = true;
    out.push_back(other);
  }
  return out;
}

void CommJobs::start(std::uint32_t job, const PlanSource& plans, FlowNotify done) {
  const Job& j = build(job, plans);
  std::uint32_t slot = 0;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(actives_.size());
    actives_.emplace_back();
  }
  Active& a = actives_[slot];
  a.job = job;
  a.start = sim_.now();
  a.done = done;
  a.closed = false;
  a.pending = 0;
  ++a.generation;
  bool crowded = !closed_form_;
  if (kind_ == NetworkKind::flow && closed_form_) {
    // Jobs in closed form whose links this one crowds continue flow by flow from now on; it
    // runs flow by flow if it crowds any running job's links.
    for (const std::uint32_t other : contended(j, crowded)) {
      if (actives_[other].closed) rebuild(other);
    }
  }
  running_.push_back(slot);
  if (crowded) {
    ++stats_.flow_by_flow;
    run_flow_by_flow(slot);
    return;
  }
  ++stats_.closed_form;
  const Time duration = alone(job);
  Active& b = actives_[slot];
  b.closed = true;
  b.end = sim_.now() + duration;
  sim_.schedule_at(b.end, self_, kClosedDone, (static_cast<std::uint64_t>(b.generation) << 32) | slot);
}

void CommJobs::run_flow_by_flow(std::uint32_t slot) {
  Active& a = actives_[slot];
  const Job& j = jobs_[a.job];
  a.closed = false;
  a.pending = static_cast<std::uint32_t>(j.plans.size());
  if (a.pending == 0) {
    finish(slot);
    return;
  }
  for (const auto& plan : j.plans) engine_.start(plan, FlowNotify{self_, kPlanDone, slot});
}

void CommJobs::rebuild(std::uint32_t slot) {
  Active& a = actives_[slot];
  ++a.generation;  // its closed-form end no longer holds
  ++stats_.rebuilt;
  if (a.start == sim_.now()) {  // nothing has happened yet: start its plans here
    run_flow_by_flow(slot);
    return;
  }
  const Job& j = jobs_[a.job];
  const std::vector<LinkId>& fp = footprints_[j.footprint];
  auto run = own_run(j);
  run->sim.run_before(sim_.now() - a.start, priority::settle);
  // Its plans' progress, flows and pending events move here, shifted by its start.
  std::map<std::uint32_t, std::uint32_t> instance;
  a.closed = false;
  a.pending = 0;
  for (CollectiveEngine::Progress p : run->engine.running_progress()) {
    const std::uint32_t own_id = p.id;
    const auto plan = j.plans.at(p.done.data);
    p.done = FlowNotify{self_, kPlanDone, slot};
    instance[own_id] = engine_.resume(plan, p);
    ++a.pending;
  }
  const auto moved = [&](std::uint64_t data) {
    const auto it = instance.find(CollectiveEngine::event_instance(data));
    if (it == instance.end()) throw InternalError("comm jobs: a rebuilt flow or event names no running plan");
    return CollectiveEngine::event_data(it->second, static_cast<std::uint32_t>(data & 0xffffffffULL));
  };
  for (FlowNetwork::FlowState f : run->net.active_flow_states()) {
    for (LinkId& l : f.path) l = fp[l];
    f.updated += a.start;
    f.notify = FlowNotify{engine_.handler(), f.notify.kind, moved(f.notify.data)};
    flow_->adopt(f);
  }
  for (const LinkId l : run->net.pending_links()) flow_->touch(fp[l]);
  for (const Event& e : run->sim.drain()) {
    if (e.target != run->engine.handler()) continue;  // the network's own, re-created above
    sim_.schedule_at(e.time + a.start, engine_.handler(), e.kind, moved(e.data), e.priority);
  }
  if (a.pending == 0) finish(slot);  // every plan ended at this instant
}

void CommJobs::finish(std::uint32_t slot) {
  Active& a = actives_[slot];
  ++a.generation;
  sim_.schedule_at(sim_.now(), a.done.target, a.done.kind, a.done.data);
  running_.erase(std::find(running_.begin(), running_.end(), slot));
  free_slots_.push_back(slot);
}

void CommJobs::handle(Simulator& /*sim*/, const Event& event) {
  switch (event.kind) {
    case kClosedDone: {
      const auto slot = static_cast<std::uint32_t>(event.data & 0xffffffffULL);
      const auto generation = static_cast<std::uint32_t>(event.data >> 32);
      if (slot < actives_.size() && actives_[slot].closed && actives_[slot].generation == generation) finish(slot);
      return;
    }
    case kPlanDone: {
      Active& a = actives_.at(event.data);
      if (a.closed || a.pending == 0) throw InternalError("comm jobs: a plan ended for a job not running flow by flow");
      if (--a.pending == 0) finish(static_cast<std::uint32_t>(event.data));
      return;
    }
    default:
      throw InternalError(fmt::format("comm jobs: unknown event kind {}", event.kind));
  }
}

}  // namespace foresight::sim
