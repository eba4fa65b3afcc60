#pragma once
/// CommJobs' runs of a job's plans on a network of their own (collectives/comm_jobs.hpp): what
/// comm_jobs.cpp and comm_jobs_own_run.cpp share.

#include <algorithm>
#include <optional>
#include <vector>

#include "collectives/collective_engine.hpp"
#include "collectives/comm_jobs.hpp"
#include "net/flow_network.hpp"
#include "sim/simulator.hpp"

namespace foresight::sim {
namespace comm_jobs_detail {

/// Notes which of a job's plans finished, and when. (A member of CommJobs::OwnRun, so not in an
/// anonymous namespace: a unity build would see a type of external linkage use it.)
struct Finished final : EventHandler {
  std::vector<std::uint8_t> plans;
  Time last;
  std::optional<Time> first;
  void handle(Simulator& sim, const Event& event) override {
    plans.at(event.data) = 1;
    last = sim.now();
    if (!first) first = sim.now();
  }
};

/// Place of pool `l` in a job's sorted `footprint` (the link's id on the job's own network).
inline LinkId local_link(const std::vector<LinkId>& footprint, LinkId l) {
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

}  // namespace comm_jobs_detail

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


}  // namespace foresight::sim
