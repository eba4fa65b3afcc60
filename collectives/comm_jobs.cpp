#include "collectives/comm_jobs.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <iterator>
#include <unordered_map>

#include "common/error.hpp"
#include "net/flow_network.hpp"
#include "collectives/plan_classes.hpp"
#include "collectives/plan_timing.hpp"
#include "collectives/detail/comm_jobs_own_run.hpp"

namespace foresight::sim {
namespace {

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

double CommJobs::link_bytes(LinkId link) const {
  const LinkId pool = pools_.pool_of.at(link);
  return network_->link_bytes(pool) + (pool < credited_.size() ? credited_[pool] : 0.0);
}

CommJobs::Job& CommJobs::build(std::uint32_t job, const PlanSource& plans) {
  if (job >= jobs_.size()) jobs_.resize(job + 1);
  Job& j = jobs_[job];
  if (j.built) return j;
  // Each pool once (marked while gathering: a large job names its links many times over), then
  // sorted.
  std::vector<LinkId> footprint;
  in_footprint_.resize(pools_.capacity.size());
  const auto unmark = [&] {
    for (const LinkId l : footprint) in_footprint_[l] = 0;
  };
  try {
    // The plans are ours: their paths become pools where they are (a job of thousands of groups
    // would otherwise copy every path twice).
    std::vector<CollectivePlan> planned = plans();
    const auto pool = [&](std::vector<LinkId>& path) {
      pools_.translate_in_place(path);
      for (const LinkId l : path) {
        if (in_footprint_[l] == 0) {
          in_footprint_[l] = 1;
          footprint.push_back(l);
        }
      }
    };
    j.plans.reserve(planned.size());
    for (CollectivePlan& p : planned) {
      for (PlannedPhase& ph : p.phases) {
        for (PlannedFlow& f : ph.flows) pool(f.path);
        for (PlannedRing& r : ph.rings) {
          for (auto& hop : r.hops) pool(hop);
        }
      }
      merge_identical_rings(p);
      j.plans.push_back(std::make_shared<const CollectivePlan>(std::move(p)));
    }
  } catch (...) {
    unmark();
    throw;
  }
  unmark();
  std::sort(footprint.begin(), footprint.end());
  if (kind_ == NetworkKind::flow) {
    std::vector<const CollectivePlan*> raw;
    for (const auto& p : j.plans) raw.push_back(p.get());
    j.load = standalone_load(raw, pools_.capacity, &load_scratch_);
  }
  const auto [it, added] = footprint_ids_.emplace(footprint, static_cast<std::uint32_t>(footprints_.size()));
  if (added) footprints_.push_back(std::move(footprint));
  j.footprint = it->second;
  j.built = true;
  return j;
}

Time CommJobs::alone(std::uint32_t job) {
  Job& j = jobs_[job];
  if (j.alone) return *j.alone;
  std::vector<const CollectivePlan*> plans;
  for (const auto& p : j.plans) plans.push_back(p.get());
  // Its plans' durations alone: the longest is the job's, the shortest its first plan's end.
  std::optional<Time> longest;
  std::optional<Time> shortest;
  const auto note = [&](Time t) {
    longest = std::max(longest.value_or(t), t);
    shortest = std::min(shortest.value_or(t), t);
  };
  if (kind_ == NetworkKind::analytical) {
    // Each group's collective (plan) as if alone on the fabric: its closed form when its own
    // flows never crowd a link, else a run of it on a network of its own, where they share
    // links as on the flow-level network (an all-to-all's flows share each GPU's port). Groups
    // never meet, folded or not, so alike plans (collectives/plan_classes.hpp), each on links
    // of its own, take the same time: one of each shape runs, in this job or an earlier one
    // (the all-to-alls of every EP group and micro-batch that sit alike).
    for (std::size_t i = 0; i < plans.size(); ++i) {
      if (keeps_standalone_rates(std::vector<const CollectivePlan*>{plans[i]}, pools_.capacity, &load_scratch_)) {
        note(standalone_duration(*plans[i], pools_.capacity, false));
        continue;
      }
      std::vector<std::uint64_t> shape = plan_shape(*plans[i], pools_.capacity);
      auto it = alone_by_shape_.find(shape);
      if (it == alone_by_shape_.end()) {
        it = alone_by_shape_.emplace(std::move(shape), plan_alone(j, i)).first;
      } else {
        ++stats_.plans_alone_reused;
      }
      note(it->second);
    }
    j.alone = longest.value_or(Time{});
    j.alone_first = shortest.value_or(Time{});
  } else if (keeps_standalone_rates(j.load, pools_.capacity)) {
    for (const CollectivePlan* p : plans) note(standalone_duration(*p, pools_.capacity, true));
    j.alone = longest.value_or(Time{});
    j.alone_first = shortest.value_or(Time{});
  } else {
    auto run = own_run(j);
    run->sim.run();
    if (std::find(run->finished.plans.begin(), run->finished.plans.end(), 0) != run->finished.plans.end()) {
      throw InternalError(fmt::format("comm jobs: job {} did not finish on a network of its own", job));
    }
    j.alone = run->finished.last;
    j.alone_first = run->finished.first.value_or(run->finished.last);
  }
  return *j.alone;
}

Time CommJobs::plan_alone(Job& job, std::size_t plan) {
  Replays only(job.plans.size());
  only[plan] = {static_cast<std::uint32_t>(plan)};
  auto run = own_run(job, &only);
  run->sim.run();
  if (run->finished.plans.at(plan) == 0) {
    throw InternalError(fmt::format("comm jobs: plan {} did not finish on a network of its own", plan));
  }
  return run->finished.last;
}

const std::vector<LinkId>& CommJobs::shared(std::uint32_t a, std::uint32_t b) {
  if (a > b) std::swap(a, b);
  const auto intersect = [&] {
    std::vector<LinkId> both;
    std::set_intersection(footprints_[a].begin(), footprints_[a].end(), footprints_[b].begin(), footprints_[b].end(),
                          std::back_inserter(both));
    if (both.empty()) return std::uint32_t{0};  // most pairs: kept in no list
    shared_.push_back(std::move(both));
    return static_cast<std::uint32_t>(shared_.size() - 1);
  };
  if (b < kDenseFootprints) {
    if (shared_dense_.empty()) shared_dense_.assign(std::size_t{kDenseFootprints} * kDenseFootprints, 0);
    std::uint32_t& entry = shared_dense_[std::size_t{a} * kDenseFootprints + b];
    if (entry == 0) entry = intersect() + 1;
    return shared_[entry - 1];
  }
  const std::uint64_t key = (static_cast<std::uint64_t>(a) << 32) | b;
  return shared_[shared_index_.get_or_make(key, intersect)];
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
  a.first_end.reset();
  a.closed_first.reset();
  ++a.generation;
  bool crowded = !closed_form_;
  if (kind_ == NetworkKind::analytical) {
    // Jobs never meet on the analytical network: each takes its time alone, in closed form, also
    // when links are sampled; its bytes then go to its links when it starts.
    crowded = false;
    if (!closed_form_) credit(jobs_[job]);
  }
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
  b.closed_first = sim_.now() + jobs_[job].alone_first;
  sim_.schedule_at(b.end, self_, kClosedDone, (static_cast<std::uint64_t>(b.generation) << 32) | slot);
}

void CommJobs::credit(Job& job) {
  if (job.bytes_on_pools.empty()) {
    std::map<LinkId, double> on;
    for (const auto& plan : job.plans) {
      for (const PlannedPhase& ph : plan->phases) {
        for (const PlannedFlow& f : ph.flows) {
          for (const LinkId l : f.path) on[l] += f.bytes * f.weight;
        }
        for (const PlannedRing& r : ph.rings) {
          for (const auto& hop : r.hops) {
            for (const LinkId l : hop) on[l] += ph.step_bytes * ph.steps * r.weight;
          }
        }
      }
    }
    job.bytes_on_pools.assign(on.begin(), on.end());
  }
  credited_.resize(pools_.capacity.size(), 0.0);
  for (const auto& [l, bytes] : job.bytes_on_pools) credited_[l] += bytes;
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
  ++a.generation;  // its closed-form end no longer holds, nor its first plan's
  a.closed_first.reset();
  ++stats_.rebuilt;
  if (!a.resume && a.start == sim_.now()) {  // nothing has happened yet: start its plans here
    run_flow_by_flow(slot);
    return;
  }
  Job& j = jobs_[a.job];
  const std::vector<LinkId>& fp = footprints_[j.footprint];
  // Its plans on their own network, from its start or from where it went back to closed form,
  // up to now: nothing crowded its links meanwhile, so that run is what happened. Plans alike
  // and in the same state run alike: one of them runs for all.
  classify(j);
  const Replays replay = replays(j, a);
  const Time base = a.resume ? a.resume->at : a.start;
  auto run = a.resume ? resumed_run(j, *a.resume, replay) : own_run(j, &replay);
  run->sim.run_before(sim_.now() - base, priority::settle);
  // Plans that ended before now in that run ended then.
  if (run->finished.first) note_end(a, base + *run->finished.first);
  if (a.resume) {
    // Going back and forth copies its state each way (positions, flows in flight); when the
    // stretch in closed form saved less than one event per eight of them (a job crowded again
    // at once, as a ring of thousands of GPUs among frequent tensor-parallel collectives is),
    // it stays flow by flow from now on. The answer is the same either way. (A replay standing
    // for several plans counts its events once for each.)
    std::uint64_t state = 0;
    std::uint64_t replayed = 0;
    for (const Resume::Plan& p : a.resume->plans) {
      state += p.progress.sent.size() + p.progress.flow_done.size() + p.flows.size();
      if (!replay[p.plan].empty()) ++replayed;
    }
    if (run->sim.events_processed() * a.resume->plans.size() * 8 < state * replayed) a.may_return = false;
    a.resume.reset();
  }
  // Where a replayed plan's links are on the plans it stands for: the same place in the walk
  // of plan_classes.
  std::map<std::uint32_t, std::unordered_map<LinkId, std::uint32_t>> place;
  for (std::uint32_t p = 0; p < replay.size(); ++p) {
    if (replay[p].size() < 2) continue;
    auto& m = place[p];
    const auto& links = j.classes->links[p];
    for (std::uint32_t i = 0; i < links.size(); ++i) m.emplace(links[i], i);
  }
  const auto link_on = [&](std::uint32_t target, std::uint32_t plan, LinkId pool) {
    return target == plan ? pool : j.classes->links[target][place.at(plan).at(pool)];
  };
  // Its plans' progress, flows and pending events move here, shifted by `base`; a replayed
  // plan's stand for each plan it replays.
  std::map<std::uint32_t, std::uint32_t> plan_of;  // instance on its own network -> plan
  a.closed = false;
  a.pending = 0;
  a.instances.assign(j.plans.size(), kNone);
  for (CollectiveEngine::Progress p : run->engine.running_progress()) {
    const auto plan = static_cast<std::uint32_t>(p.done.data);
    plan_of[p.id] = plan;
    p.shift(base);
    for (const std::uint32_t t : replay[plan]) {
      p.done = FlowNotify{self_, kPlanDone, plan_done_data(slot, t)};
      a.instances.at(t) = engine_.resume(j.plans.at(t), p);
      ++a.pending;
      if (t != plan) ++stats_.plans_copied;
    }
  }
  const auto plan_named = [&](std::uint64_t data) {
    const auto it = plan_of.find(CollectiveEngine::event_instance(data));
    if (it == plan_of.end()) throw InternalError("comm jobs: a rebuilt flow or event names no running plan");
    return it->second;
  };
  for (FlowNetwork::FlowState f : run->net.active_flow_states()) {
    const std::uint32_t plan = plan_named(f.notify.data);
    const auto local = static_cast<std::uint32_t>(f.notify.data & 0xffffffffULL);
    for (LinkId& l : f.path) l = fp[l];
    f.updated += base;
    for (const std::uint32_t t : replay[plan]) {
      FlowNetwork::FlowState g = f;
      if (t != plan) {
        for (LinkId& l : g.path) l = link_on(t, plan, l);
      }
      g.notify = FlowNotify{engine_.handler(), f.notify.kind, CollectiveEngine::event_data(a.instances[t], local)};
      engine_.set_flow(a.instances[t], local, flow_->adopt(g));
    }
  }
  for (const LinkId l : run->net.pending_links()) flow_->touch(fp[l]);
  for (const auto& [plan, links] : place) {  // and the same links of the plans it stands for
    for (const LinkId l : run->net.pending_links()) {
      if (!links.contains(fp[l])) continue;
      for (const std::uint32_t t : replay[plan]) {
        if (t != plan) flow_->touch(link_on(t, plan, fp[l]));
      }
    }
  }
  for (const Event& e : run->sim.drain()) {
    if (e.target != run->engine.handler()) continue;  // the network's own, re-created above
    const std::uint32_t plan = plan_named(e.data);
    const auto local = static_cast<std::uint32_t>(e.data & 0xffffffffULL);
    for (const std::uint32_t t : replay[plan]) {
      sim_.schedule_at(e.time + base, engine_.handler(), e.kind, CollectiveEngine::event_data(a.instances[t], local),
                       e.priority);
    }
  }
  if (a.pending == 0) finish(slot);  // every plan ended at this instant
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
  bool crowded = false;
  contended(j, crowded, slot);
  if (crowded) return;
  // Alone on its links from now on, unless a later job crowds it (then rebuilt from here). When
  // its flows keep their standalone rates, its end follows from each plan's state; when its own
  // flows crowd each other (an all-to-all's), from a run of its plans on a network of their own
  // from that state, below (one replay per class of alike plans in equal states).
  const auto leaves = [this](FlowId id) { return flow_->leaves_alone(id); };
  Time end = sim_.now();
  std::optional<Time> first;  // its first running plan's end from here
  if (*j.keeps_alone) {
    for (const std::uint32_t id : a.instances) {
      if (id == kNone) continue;
      const auto e = engine_.end_alone(id, pools_.capacity, leaves);
      if (!e) return;
      end = std::max(end, *e);
      first = std::min(first.value_or(*e), *e);
    }
  }
  // A ring hop with several steps on their way (latency above the steps' transfer time): the
  // state would not tell their arrivals, so the job stays flow by flow (as end_alone says).
  for (const std::uint32_t id : a.instances) {
    if (id != kNone && !engine_.progress_tells_pending(id)) return;
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
    }
    resume->plans.push_back(std::move(p));
  }
  a.resume = std::move(resume);
  if (!*j.keeps_alone) {
    // The settle of this instant has run: the flows go with the rates the network gave them,
    // and on links of their own nothing else changes them (a rebuild's run, the other way). That
    // run simulates what the shared network would, but one plan for each class of alike plans in
    // equal states (a folded job's replicas, when a crowd slowed them alike). Going back and
    // forth costs its state's copies and that run: where it replays more than a quarter of its
    // running plans, the job stays flow by flow (a cost rule only: on the MoE benchmark cut to
    // one replica, whose all-to-all jobs are two alike plans, returning them cost 10% more time).
    classify(j);
    const Replays replay = replays(j, a);
    std::size_t replayed = 0;
    for (const Resume::Plan& p : a.resume->plans) replayed += replay[p.plan].empty() ? 0 : 1;
    if (4 * replayed > a.resume->plans.size()) {
      a.resume.reset();
      return;
    }
    auto run = resumed_run(j, *a.resume, replay);
    run->sim.run();
    for (const Resume::Plan& p : a.resume->plans) {
      if (!replay[p.plan].empty() && run->finished.plans.at(p.plan) == 0) {
        throw InternalError(fmt::format("comm jobs: job {} did not finish on a network of its own", a.job));
      }
    }
    end = std::max(end, a.resume->at + run->finished.last);
    if (run->finished.first) first = a.resume->at + *run->finished.first;
  }
  for (const std::uint32_t id : a.instances) {
    if (id == kNone) continue;
    for (const auto& [local, flow] : engine_.in_flight(id)) flow_->withdraw(flow);
    engine_.abandon(id);
  }
  ++stats_.returned;
  a.instances.clear();
  a.pending = 0;
  a.closed = true;
  a.end = end;
  a.closed_first = first;
  ++a.generation;
  sim_.schedule_at(a.end, self_, kClosedDone, (static_cast<std::uint64_t>(a.generation) << 32) | slot);
}

void CommJobs::note_end(Active& a, Time t) { a.first_end = std::min(a.first_end.value_or(t), t); }

void CommJobs::finish(std::uint32_t slot) {
  Active& a = actives_[slot];
  if (a.closed && a.closed_first) note_end(a, *a.closed_first);
  if (jobs_[a.job].plans.size() > 1 && a.first_end && *a.first_end < sim_.now()) {
    ++stats_.uneven_jobs;
    stats_.uneven_spread = std::max(stats_.uneven_spread, sim_.now() - *a.first_end);
  }
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
      note_end(a, sim_.now());
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
