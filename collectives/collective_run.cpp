#include "collectives/collective_run.hpp"

#include "collectives/collective_engine.hpp"
#include "common/error.hpp"
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
