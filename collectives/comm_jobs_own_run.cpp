// CommJobs' runs of a job's plans on a network of their own: from its start, or from a state it
// kept in closed form, replaying one plan of each class of alike plans (collectives/comm_jobs.hpp).
#include <fmt/core.h>

#include <algorithm>

#include "collectives/comm_jobs.hpp"
#include "collectives/detail/comm_jobs_own_run.hpp"
#include "collectives/plan_classes.hpp"
#include "common/error.hpp"

namespace foresight::sim {

using comm_jobs_detail::local_link;
using comm_jobs_detail::remap;

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

std::unique_ptr<CommJobs::OwnRun> CommJobs::own_run(Job& job, const Replays* replays) {
  auto run = empty_run(job);
  for (std::size_t i = 0; i < job.local_plans.size(); ++i) {
    if (replays != nullptr && (*replays)[i].empty()) continue;
    run->engine.start(job.local_plans[i], FlowNotify{run->finished_id, 0, i});
  }
  return run;
}

void CommJobs::classify(Job& job) {
  if (job.classified) return;
  job.classified = true;
  std::vector<const CollectivePlan*> plans;
  for (const auto& p : job.plans) plans.push_back(p.get());
  // Links its plans may share. When its flows all keep their standalone rates, every link
  // crossed by several of them: each flow moves at exactly its standalone rate (the network
  // snaps a fair share within rounding of it to it), whatever shares its links. Otherwise links
  // whose flows can never fill them (their peak, the most they can carry at once, is below the
  // capacity by a margin no rounding reaches): such a link is never saturated, so it never
  // limits a flow nor ties with a crowded flow's own bottleneck.
  if (!job.keeps_alone) job.keeps_alone = keeps_standalone_rates(job.load, pools_.capacity);
  constexpr double kMargin = 1e-9;
  std::vector<LinkId> room;
  for (const LinkLoad& l : job.load) {
    if (l.flows > 1 && (*job.keeps_alone || l.peak <= pools_.capacity[l.link] * (1.0 - kMargin))) {
      room.push_back(l.link);
    }
  }
  job.classes = plan_classes(plans, pools_.capacity, room);
}

CommJobs::Replays CommJobs::replays(const Job& job, const Active& a) const {
  Replays out(job.plans.size());
  if (!job.classes) {
    for (std::uint32_t p = 0; p < out.size(); ++p) out[p] = {p};
    return out;
  }
  if (!a.resume) {  // from its start: alike plans run alike
    out = job.classes->copies;
    return out;
  }
  std::vector<const Resume::Plan*> state(job.plans.size(), nullptr);
  for (const Resume::Plan& p : a.resume->plans) state.at(p.plan) = &p;
  // Alike plans at the same place: progress, pending events and flows in flight equal (flows by
  // their place in the plan, so their links correspond).
  const auto same = [](const Resume::Plan& x, const Resume::Plan& y) {
    if (!x.progress.same_place(y.progress) || x.events.size() != y.events.size() || x.flows.size() != y.flows.size()) {
      return false;
    }
    for (std::size_t i = 0; i < x.events.size(); ++i) {
      const auto& e = x.events[i];
      const auto& f = y.events[i];
      if (e.time != f.time || e.kind != f.kind || e.local != f.local) return false;
    }
    for (std::size_t i = 0; i < x.flows.size(); ++i) {
      const auto& e = x.flows[i];
      const auto& f = y.flows[i];
      if (e.path.size() != f.path.size() || e.remaining != f.remaining || e.rate != f.rate || e.max_rate != f.max_rate ||
          e.updated != f.updated || e.weight != f.weight || e.notify.kind != f.notify.kind ||
          e.notify.data != f.notify.data) {
        return false;
      }
    }
    return true;
  };
  // Within each class, a plan joins the first of (up to four) replayed plans in its state.
  constexpr std::size_t kLeaders = 4;
  for (const auto& members : job.classes->copies) {
    std::vector<std::uint32_t> leaders;
    for (const std::uint32_t m : members) {
      if (state[m] == nullptr) continue;  // ended: nothing to replay
      const auto it = std::find_if(leaders.begin(), leaders.end(), [&](std::uint32_t l) { return same(*state[l], *state[m]); });
      if (it != leaders.end()) {
        out[*it].push_back(m);
      } else {
        out[m] = {m};
        if (leaders.size() < kLeaders) leaders.push_back(m);
      }
    }
  }
  return out;
}

std::unique_ptr<CommJobs::OwnRun> CommJobs::resumed_run(Job& job, const Resume& resume, const Replays& replays) {
  const std::vector<LinkId>& fp = footprints_[job.footprint];
  auto run = empty_run(job);
  for (const Resume::Plan& p : resume.plans) {
    if (replays[p.plan].empty()) continue;
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

}  // namespace foresight::sim
