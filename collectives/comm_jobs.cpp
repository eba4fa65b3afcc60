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

/// Place of pool `l` in a job's sorted `footprint` (the link's id on the job's own network).
LinkId local_link(const std::vector<LinkId>& footprint, LinkId l) {
  return static_cast<LinkId>(std::lower_bound(footprint.begin(), footprint.end(), l) - footprint.begin());
}

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

std::unique_ptr<CommJobs::OwnRun> CommJobs::empty_run(Job& job) {
  const std::vector<LinkId>& fp = footprints_[job.footprint];
  std::vector<double> capacity;
  capacity.reserve(fp.size());
  for (const LinkId l : fp) capacity.push_back(pools_.capacity[l]);
  auto run = std::make_unique<OwnRun>(std::move(capacity));
  run->finished.plans.assign(job.plans.size(), 0);
  if (job.local_plans.empty()) {
    const auto local = [&](const std::vector<LinkId>& path) {
      std::vector<LinkId> out;
      out.reserve(path.size());
      for (const LinkId l : path) out.push_back(local_link(fp, l));
      return out;
    };
    for (const auto& plan : job.plans) job.local_plans.push_back(std::make_shared<const CollectivePlan>(remap(*plan, local)));
  }
  ++stats_.own_runs;
  return run;
}

std::unique_ptr<CommJobs::OwnRun> CommJobs::own_run(Job& job) {
  auto run = empty_run(job);
  for (std::size_t i = 0; i < job.local_plans.size(); ++i) {
    run->engine.start(job.local_plans[i], FlowNotify{run->finished_id, 0, i});
  }
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

std::vector<std::uint32_t> CommJobs::contended(const Job& job, bool& crowded, std::uint32_t self) {
  const auto load_at = [](const Job& j, LinkId l) {
    const auto it = std::lower_bound(j.load.begin(), j.load.end(), l,
                                     [](const LinkLoad& x, LinkId v) { return x.link < v; });
    return *it;  // every shared pool is in both loads
  };
  // Per pool shared with running jobs: the flows and standalone rates of all of them (in
  // total_, valid where total_mark_ is this call's mark).
  if (total_.size() != pools_.capacity.size()) {
    total_.assign(pools_.capacity.size(), LinkLoad{});
    total_mark_.assign(pools_.capacity.size(), 0);
  }
  const std::uint64_t mark = ++contended_calls_;
  std::vector<std::pair<std::uint32_t, const std::vector<LinkId>*>> sharers;
  for (const std::uint32_t other : running_) {
    if (other == self) continue;
    const Active& o = actives_[other];
    if (o.closed && o.end <= sim_.now()) continue;  // its last flow has drained
    const Job& oj = jobs_[o.job];
    const std::vector<LinkId>& both = shared(job.footprint, oj.footprint);
    if (both.empty()) continue;
    sharers.emplace_back(other, &both);
    for (const LinkId l : both) {
      if (total_mark_[l] != mark) {
        total_mark_[l] = mark;
        total_[l] = load_at(job, l);
      }
      const LinkLoad add = load_at(oj, l);
      total_[l].flows += add.flows;
      total_[l].peak += add.peak;
    }
  }
  std::vector<std::uint32_t> out;
  crowded = false;
  for (const auto& [other, both] : sharers) {
    const bool tight = std::any_of(both->begin(), both->end(), [&](LinkId l) {
      const LinkLoad& t = total_[l];
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
  a.instances.clear();
  a.resume.reset();
  a.may_return = true;
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
  a.instances.assign(j.plans.size(), kNone);
  if (a.pending == 0) {
    finish(slot);
    return;
  }
  for (std::size_t i = 0; i < j.plans.size(); ++i) {
    a.instances[i] = engine_.start(j.plans[i], FlowNotify{self_, kPlanDone, plan_done_data(slot, i)});
  }
}

void CommJobs::rebuild(std::uint32_t slot) {
  Active& a = actives_[slot];
  ++a.generation;  // its closed-form end no longer holds
  ++stats_.rebuilt;
  if (!a.resume && a.start == sim_.now()) {  // nothing has happened yet: start its plans here
    run_flow_by_flow(slot);
    return;
  }
  Job& j = jobs_[a.job];
  const std::vector<LinkId>& fp = footprints_[j.footprint];
  // Its plans on their own network, from its start or from where it went back to closed form,
  // up to now: nothing crowded its links meanwhile, so that run is what happened.
  const Time base = a.resume ? a.resume->at : a.start;
  auto run = a.resume ? resumed_run(j, *a.resume) : own_run(j);
  run->sim.run_before(sim_.now() - base, priority::settle);
  if (a.resume) {
    // Going back and forth copies its state each way (positions, flows in flight); when the
    // stretch in closed form saved less than one event per eight of them (a job crowded again
    // at once, as a ring of thousands of GPUs among frequent tensor-parallel collectives is),
    // it stays flow by flow from now on. The answer is the same either way.
    std::uint64_t state = 0;
    for (const Resume::Plan& p : a.resume->plans) state += p.progress.sent.size() + p.progress.flow_done.size() + p.flows.size();
    if (run->sim.events_processed() * 8 < state) a.may_return = false;
    a.resume.reset();
  }
  // Its plans' progress, flows and pending events move here, shifted by `base`.
  std::map<std::uint32_t, std::uint32_t> instance;
  a.closed = false;
  a.pending = 0;
  a.instances.assign(j.plans.size(), kNone);
  for (CollectiveEngine::Progress p : run->engine.running_progress()) {
    const std::uint32_t own_id = p.id;
    const auto plan = static_cast<std::uint32_t>(p.done.data);
    p.done = FlowNotify{self_, kPlanDone, plan_done_data(slot, plan)};
    p.shift(base);
    instance[own_id] = a.instances.at(plan) = engine_.resume(j.plans.at(plan), p);
    ++a.pending;
  }
  const auto moved = [&](std::uint64_t data) {
    const auto it = instance.find(CollectiveEngine::event_instance(data));
    if (it == instance.end()) throw InternalError("comm jobs: a rebuilt flow or event names no running plan");
    return CollectiveEngine::event_data(it->second, static_cast<std::uint32_t>(data & 0xffffffffULL));
  };
  for (FlowNetwork::FlowState f : run->net.active_flow_states()) {
    for (LinkId& l : f.path) l = fp[l];
    f.updated += base;
    f.notify = FlowNotify{engine_.handler(), f.notify.kind, moved(f.notify.data)};
    const FlowId id = flow_->adopt(f);
    engine_.set_flow(CollectiveEngine::event_instance(f.notify.data), static_cast<std::uint32_t>(f.notify.data & 0xffffffffULL), id);
  }
  for (const LinkId l : run->net.pending_links()) flow_->touch(fp[l]);
  for (const Event& e : run->sim.drain()) {
    if (e.target != run->engine.handler()) continue;  // the network's own, re-created above
    sim_.schedule_at(e.time + base, engine_.handler(), e.kind, moved(e.data), e.priority);
  }
  if (a.pending == 0) finish(slot);  // every plan ended at this instant
}

std::unique_ptr<CommJobs::OwnRun> CommJobs::resumed_run(Job& job, const Resume& resume) {
  const std::vector<LinkId>& fp = footprints_[job.footprint];
  auto run = empty_run(job);
  for (const Resume::Plan& p : resume.plans) {
    CollectiveEngine::Progress progress = p.progress;
    progress.done = FlowNotify{run->finished_id, 0, p.plan};
    progress.shift(Time::zero() - resume.at);
    const std::uint32_t id = run->engine.resume(job.local_plans.at(p.plan), progress);
    run->engine.schedule_pending(id, p.events, resume.at);
    for (FlowNetwork::FlowState f : p.flows) {
      for (LinkId& l : f.path) l = local_link(fp, l);
      f.updated -= resume.at;
      const auto index = static_cast<std::uint32_t>(f.notify.data);
      f.notify = FlowNotify{run->engine.handler(), f.notify.kind, CollectiveEngine::event_data(id, index)};
      run->engine.set_flow(id, index, run->net.adopt(f));
    }
  }
  return run;
}

void CommJobs::check_returns() {
  return_check_pending_ = false;
  std::vector<std::uint32_t> ended;
  ended.swap(ended_now_);
  const std::vector<std::uint32_t> slots = running_;
  for (const std::uint32_t slot : slots) {
    const Active& a = actives_[slot];
    if (a.closed || a.pending == 0) continue;
    const std::uint32_t fp = jobs_[a.job].footprint;
    if (std::any_of(ended.begin(), ended.end(), [&](std::uint32_t e) { return !shared(fp, e).empty(); })) {
      return_to_closed_form(slot);
    }
  }
}

void CommJobs::return_to_closed_form(std::uint32_t slot) {
  Active& a = actives_[slot];
  if (!a.may_return) return;
  Job& j = jobs_[a.job];
  if (!j.keeps_alone) j.keeps_alone = keeps_standalone_rates(j.load, pools_.capacity);
  if (!*j.keeps_alone) return;  // its own flows crowd each other: no closed form from a state
  bool crowded = false;
  contended(j, crowded, slot);
  if (crowded) return;
  // Alone on its links from now on, unless a later job crowds it (then rebuilt from here).
  const auto leaves = [this](FlowId id) { return flow_->leaves_alone(id); };
  Time end = sim_.now();
  for (const std::uint32_t id : a.instances) {
    if (id == kNone) continue;
    const auto e = engine_.end_alone(id, pools_.capacity, leaves);
    if (!e) return;
    end = std::max(end, *e);
  }
  auto resume = std::make_unique<Resume>();
  resume->at = sim_.now();
  for (std::uint32_t plan = 0; plan < a.instances.size(); ++plan) {
    const std::uint32_t id = a.instances[plan];
    if (id == kNone) continue;
    Resume::Plan p{plan, engine_.progress(id), engine_.pending_events(id), {}};
    for (const auto& [local, flow] : engine_.in_flight(id)) {
      FlowNetwork::FlowState f = flow_->flow_state(flow);
      f.notify.data = local;
      p.flows.push_back(std::move(f));
      flow_->withdraw(flow);
    }
    engine_.abandon(id);
    resume->plans.push_back(std::move(p));
  }
  ++stats_.returned;
  a.instances.clear();
  a.pending = 0;
  a.closed = true;
  a.end = end;
  a.resume = std::move(resume);
  ++a.generation;
  sim_.schedule_at(a.end, self_, kClosedDone, (static_cast<std::uint64_t>(a.generation) << 32) | slot);
}

void CommJobs::finish(std::uint32_t slot) {
  Active& a = actives_[slot];
  ++a.generation;
  a.resume.reset();
  a.instances.clear();
  const std::uint32_t fp = jobs_[a.job].footprint;
  const auto may_return = [&](std::uint32_t other) {
    const Active& o = actives_[other];
    return other != slot && !o.closed && o.pending > 0 && !shared(fp, jobs_[o.job].footprint).empty();
  };
  if (kind_ == NetworkKind::flow && closed_form_ && std::any_of(running_.begin(), running_.end(), may_return)) {
    // Jobs running flow by flow on its links may be alone again once this instant's re-solve
    // has run.
    ended_now_.push_back(fp);
    if (!return_check_pending_) {
      return_check_pending_ = true;
      sim_.schedule_at(sim_.now(), self_, kReturn, 0, priority::after_settle);
    }
  }
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
      const auto slot = static_cast<std::uint32_t>(event.data & 0xffffffffULL);
      Active& a = actives_.at(slot);
      if (a.closed || a.pending == 0) throw InternalError("comm jobs: a plan ended for a job not running flow by flow");
      a.instances.at(event.data >> 32) = kNone;
      if (--a.pending == 0) finish(slot);
      return;
    }
    case kReturn:
      check_returns();
      return;
    default:
      throw InternalError(fmt::format("comm jobs: unknown event kind {}", event.kind));
  }
}

}  // namespace foresight::sim
