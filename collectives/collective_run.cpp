#include "collectives/collective_run.hpp"

#include "collectives/collective_engine.hpp"
#include "collectives/detail/comm_jobs_own_run.hpp"
#include "collectives/plan_timing.hpp"
#include "common/error.hpp"
#include "net/link_pools.hpp"
#include "sim/simulator.hpp"

namespace foresight::sim {
namespace {

/// Notes the time at which the collective reports completion.
struct Stopwatch final : EventHandler {
  Time done = Time::max();
  void handle(Simulator& sim, const Event& /*event*/) override { done = sim.now(); }
};

}  // namespace

CollectiveMeasurement measure_collective(const Fabric& fabric, const CollectiveConfig& config,
                                         NetworkKind network, const CollectiveRequest& request) {
  CollectiveMeasurement m;
  m.plan = plan_collective(fabric, config, request);
  Simulator sim;
  // The analytical model runs a collective whose own flows crowd a link (an all-to-all's) as it
  // runs alone on the flow-level model, as a simulation's communication jobs do (CommJobs).
  if (network == NetworkKind::analytical) {
    const LinkPools pools = LinkPools::of(fabric, config.links);
    const CollectivePlan pooled =
        comm_jobs_detail::remap(m.plan, [&](const std::vector<LinkId>& path) { return pools.translate(path); });
    if (!keeps_standalone_rates({&pooled}, pools.capacity)) network = NetworkKind::flow;
  }
  const auto net = make_network(network, sim, fabric, config.links);
  CollectiveEngine engine(sim, *net);
  Stopwatch watch;
  const HandlerId id = sim.add_handler(watch, "stopwatch");
  engine.start(m.plan, FlowNotify{id, 0, 0});
  sim.run();
  if (watch.done == Time::max()) throw InternalError("collective did not complete");
  m.time = watch.done;
  m.events = sim.events_processed();
  m.fingerprint = sim.fingerprint();
  if (m.time > Time::zero()) {
    m.algbw_GBps = request.bytes / m.time.seconds() * 1e-9;
    m.busbw_GBps = m.algbw_GBps * bus_bandwidth_factor(request.op, static_cast<int>(request.ranks.size()));
  }
  return m;
}

}  // namespace foresight::sim
