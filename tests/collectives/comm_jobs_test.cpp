// Collectives and transfers in closed form (collectives/plan_timing.hpp, collectives/comm_jobs.hpp): the closed
// form is the engine's own run, event for event; jobs that meet contention are rebuilt and run
// flow by flow to the same answer as a run that never took the shortcut; and a job's cost does
// not grow with the groups it stands for.
#include <catch2/catch.hpp>

#include <random>

#include "collectives/collective_engine.hpp"
#include "collectives/comm_jobs.hpp"
#include "exec/executor.hpp"
#include "net/flow_network.hpp"
#include "collectives/plan_timing.hpp"
#include "tests/collectives/fixture.hpp"
#include "tests/exec/graph_fixture.hpp"
#include "topologies/cluster_builders.hpp"

using namespace foresight;
using namespace foresight::sim::literals;
using sim::Node;
using sim::OpKind;

namespace {

/// When a plan started at 0 on a network of `kind` over `capacity` reports completion.
sim::Time engine_time(const sim::CollectivePlan& plan, const std::vector<double>& capacity, sim::NetworkKind kind,
                      std::uint64_t* events = nullptr) {
  sim::Simulator s;
  const auto net = sim::make_network(kind, s, capacity);
  sim::CollectiveEngine engine(s, *net);
  struct Done final : sim::EventHandler {
    sim::Time at = sim::Time::max();
    void handle(sim::Simulator& sim, const sim::Event&) override { at = sim.now(); }
  } done;
  engine.start(plan, {s.add_handler(done, "done"), 0, 0});
  s.run();
  if (events != nullptr) *events = s.events_processed();
  return done.at;
}

/// A ring phase over `n` positions, hop p on its own link p (plus, with `shared`, a link every
/// hop crosses), with per-hop capacities and latencies drawn from `rng` (or repeating with
/// period `period` when it is > 0).
sim::PlannedPhase random_ring(std::mt19937_64& rng, int n, int steps, int period, std::vector<double>& capacity,
                              sim::LinkId shared = 0xffffffffu) {
  std::uniform_real_distribution<double> gbps(10.0, 300.0);
  std::uniform_int_distribution<int> latency_ns(0, 20'000);
  sim::PlannedPhase ph;
  ph.kind = sim::PlannedPhase::Kind::ring;
  ph.steps = steps;
  ph.step_bytes = std::uniform_real_distribution<double>(1e3, 4e6)(rng);
  ph.step_cap = std::bernoulli_distribution(0.5)(rng) ? std::numeric_limits<double>::infinity() : gbps(rng) * 1e9;
  ph.start_delay = sim::Time::from_ps(latency_ns(rng) * 1000);
  sim::PlannedRing ring;
  std::vector<double> caps;
  std::vector<sim::Time> lats;
  const int distinct = period > 0 ? period : n;
  for (int p = 0; p < distinct; ++p) {
    caps.push_back(gbps(rng) * 1e9);
    lats.push_back(sim::Time::from_ps(latency_ns(rng) * 1000));
  }
  for (int p = 0; p < n; ++p) {
    ring.order.push_back(static_cast<sim::GpuId>(p));
    const auto link = static_cast<sim::LinkId>(capacity.size());
    capacity.push_back(caps[static_cast<std::size_t>(p % distinct)]);
    ring.hops.push_back({link});
    if (shared != 0xffffffffu) ring.hops.back().push_back(shared);
    ring.hop_latency.push_back(lats[static_cast<std::size_t>(p % distinct)]);
  }
  ph.rings.push_back(std::move(ring));
  return ph;
}

/// Heterogeneous rings, two rings in one phase (rings of a phase have the same positions), then
/// a flow phase with per-flow latencies; every hop and flow on links of its own.
sim::CollectivePlan random_plan(std::mt19937_64& rng, std::vector<double>& capacity) {
  sim::CollectivePlan plan;
  const int n = std::uniform_int_distribution<int>(2, 24)(rng);
  const int steps = std::uniform_int_distribution<int>(1, 2 * n)(rng);
  plan.phases.push_back(random_ring(rng, n, steps, 0, capacity));
  auto second = random_ring(rng, n, steps, 0, capacity);
  plan.phases.back().rings.push_back(second.rings.front());
  sim::PlannedPhase flows;
  flows.start_delay = 3_us;
  for (int f = 0; f < 5; ++f) {
    const auto link = static_cast<sim::LinkId>(capacity.size());
    capacity.push_back(std::uniform_real_distribution<double>(5e9, 50e9)(rng));
    flows.flows.push_back(sim::PlannedFlow{{link}, std::uniform_real_distribution<double>(0.0, 1e7)(rng),
                                           f == 2 ? 8e9 : std::numeric_limits<double>::infinity(),
                                           sim::Time::from_ps(f * 1'234'567)});
  }
  plan.phases.push_back(flows);
  return plan;
}

}  // namespace

TEST_CASE("the closed form of ring and flow phases is the engine's own run", "[collectives]") {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 200; ++trial) {
    CAPTURE(trial);
    std::vector<double> capacity;
    const sim::CollectivePlan plan = random_plan(rng, capacity);
    const sim::Time closed = sim::standalone_duration(plan, capacity);
    REQUIRE(closed == engine_time(plan, capacity, sim::NetworkKind::analytical));
    // Every hop on a link of its own: the flow-level model runs each flow at its standalone
    // rate too.
    REQUIRE(sim::keeps_standalone_rates({&plan}, capacity));
    REQUIRE(closed == engine_time(plan, capacity, sim::NetworkKind::flow));
  }
}

TEST_CASE("a plan's end from any instant of its run is the engine's own end", "[collectives]") {
  // The engine stopped once every event up to an instant has run (the flow network's re-solve
  // included): its state, the flows in flight and the closed form from there give the end the
  // run reaches, to the picosecond (CollectiveEngine::end_alone, ring_end_from).
  std::mt19937_64 rng(29);
  int computed = 0;
  int tried = 0;
  for (int trial = 0; trial < 60; ++trial) {
    CAPTURE(trial);
    std::vector<double> capacity;
    const sim::CollectivePlan plan = random_plan(rng, capacity);
    const sim::Time end = engine_time(plan, capacity, sim::NetworkKind::flow);
    for (int cut = 0; cut < 8; ++cut) {
      const sim::Time at = sim::Time::from_ps(std::uniform_int_distribution<std::int64_t>(0, end.ps() - 1)(rng));
      CAPTURE(at.ps());
      sim::Simulator s;
      sim::FlowNetwork net(s, capacity);
      sim::CollectiveEngine engine(s, net);
      struct Ignore final : sim::EventHandler {
        void handle(sim::Simulator&, const sim::Event&) override {}
      } ignore;
      const auto id = engine.start(plan, {s.add_handler(ignore, "done"), 0, 0});
      s.run_before(at, sim::priority::settle + 1);
      const auto leaves = [&net](sim::FlowId f) { return net.leaves_alone(f); };
      const auto from_here = engine.end_alone(id, capacity, leaves);
      ++tried;
      if (!from_here) continue;  // a hop with two steps on their way: the state tells too little
      ++computed;
      REQUIRE(*from_here == end);
    }
  }
  // Most instants can be continued (latencies here reach 20 us against steps of nanoseconds to
  // hundreds of microseconds, so some hops hold several steps at once).
  REQUIRE(computed * 2 > tried);
}

TEST_CASE("long periodic rings are computed on one period and extrapolated, exactly", "[collectives]") {
  std::mt19937_64 rng(5);
  for (const int period : {1, 3, 8}) {
    for (const int n : {period * 40, period * 64 + 0}) {
      CAPTURE(period, n);
      std::vector<double> capacity;
      sim::CollectivePlan plan;
      plan.phases.push_back(random_ring(rng, n, 2 * (n - 1), period, capacity));
      std::uint64_t events = 0;
      REQUIRE(sim::standalone_duration(plan, capacity) ==
              engine_time(plan, capacity, sim::NetworkKind::analytical, &events));
      // The engine ran every step of every position.
      REQUIRE(events >= static_cast<std::uint64_t>(n) * 2 * (n - 1));
    }
  }
}

TEST_CASE("flows that crowd a link do not keep their standalone rates", "[collectives]") {
  std::mt19937_64 rng(3);
  std::vector<double> capacity{40e9};  // link 0: every hop also crosses it
  sim::CollectivePlan plan;
  plan.phases.push_back(random_ring(rng, 6, 10, 0, capacity, 0));
  plan.phases.front().step_cap = std::numeric_limits<double>::infinity();
  REQUIRE_FALSE(sim::keeps_standalone_rates({&plan}, capacity));
  // The flow-level model shares link 0 among the hops sending at once: slower than alone.
  REQUIRE(engine_time(plan, capacity, sim::NetworkKind::flow) > sim::standalone_duration(plan, capacity));
  // Capped well below a sixth of link 0, they keep their rates after all.
  plan.phases.front().step_cap = 40e9 / 6 * 0.99;
  REQUIRE(sim::keeps_standalone_rates({&plan}, capacity));
  REQUIRE(engine_time(plan, capacity, sim::NetworkKind::flow) == sim::standalone_duration(plan, capacity));
}

namespace {

const topo::Cluster& two_nodes() {
  static const topo::Cluster c = topo::resolve_cluster("dgx-a100", 16);
  return c;
}

using test::op;

/// Ranks on GPUs 0 and 8 (one per node): an all-reduce of `a_bytes` on stream 2 at once, and,
/// after `delay` of compute, an all-reduce of `b_bytes` on stream 3 over `b_gpus` (the same two
/// GPUs, or others).
sim::ExecutionGraph two_collectives(double a_bytes, double b_bytes, sim::Time delay, std::vector<sim::GpuId> b_gpus) {
  sim::ExecutionGraph g;
  g.add_rank(0, 0);
  g.add_rank(8, 1);
  const bool same = b_gpus == std::vector<sim::GpuId>{0, 8};
  if (!same) {
    g.add_rank(b_gpus[0], 2);
    g.add_rank(b_gpus[1], 3);
  }
  const auto a = g.add_communicator({0, 1});
  const auto b = same ? g.add_communicator({0, 1}) : g.add_communicator({2, 3});
  for (sim::RankId r = 0; r < 2; ++r) {
    Node ar = op(OpKind::collective, r, 2);
    ar.communicator = a;
    ar.bytes = a_bytes;
    g.add(ar);
  }
  for (sim::RankId r = 0; r < 2; ++r) {
    const sim::RankId rank = same ? r : r + 2;
    Node work = op(OpKind::compute, rank, 1);
    work.duration = delay;
    const auto w = g.add(work);
    Node ar = op(OpKind::collective, rank, 3, {w});
    ar.communicator = b;
    ar.bytes = b_bytes;
    g.add(ar);
  }
  return g;
}

const topo::Cluster& four_nodes() {
  static const topo::Cluster c = topo::resolve_cluster("dgx-a100", 32);
  return c;
}

/// Ranks on GPUs 0, 8, 16 and 24 (one per node of four_nodes): all-reduces of `bytes[i]` on
/// stream 2 + i, each after `delay[i]` of compute (in order on one stream, so the i-th starts
/// after the sum of the delays up to it), all over the same four GPUs.
sim::ExecutionGraph staggered_collectives(const std::vector<double>& bytes, const std::vector<sim::Time>& delay) {
  sim::ExecutionGraph g;
  for (sim::RankId r = 0; r < 4; ++r) g.add_rank(static_cast<sim::GpuId>(8 * r), r);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const auto comm = g.add_communicator({0, 1, 2, 3});
    for (sim::RankId r = 0; r < 4; ++r) {
      Node work = op(OpKind::compute, r, 1);
      work.duration = delay[i];
      const auto w = g.add(work);
      Node ar = op(OpKind::collective, r, static_cast<sim::StreamId>(2 + i), {w});
      ar.communicator = comm;
      ar.bytes = bytes[i];
      g.add(ar);
    }
  }
  return g;
}

void same_times(const sim::ExecutionGraph& g, const sim::ExecutionResult& a, const sim::ExecutionResult& b) {
  REQUIRE(a.makespan == b.makespan);
  for (std::size_t n = 0; n < g.nodes.size(); ++n) {
    CAPTURE(n);
    REQUIRE(a.start[n] == b.start[n]);
    REQUIRE(a.end[n] == b.end[n]);
  }
}

}  // namespace

TEST_CASE("a job alone runs in closed form and is rebuilt flow by flow when another needs its links", "[collectives]") {
  const auto config = test::executor_config();
  sim::ExecutorOptions off;
  off.closed_form = false;
  // 256 MB over two nodes takes milliseconds; the second all-reduce starts 300 us in, mid-ring.
  for (const sim::Time delay : {0_us, 300_us, 1234567_ps}) {
    CAPTURE(delay.ps());
    const auto g = two_collectives(256e6, 64e6, delay, {0, 8});
    const auto plain = sim::execute(g, two_nodes(), config, sim::NetworkKind::flow, off);
    const auto fast = sim::execute(g, two_nodes(), config, sim::NetworkKind::flow);
    same_times(g, plain, fast);
    REQUIRE(fast.jobs_closed_form == 1);
    REQUIRE(fast.jobs_rebuilt == 1);
    REQUIRE(fast.jobs_flow_by_flow == 1);
    // They did contend: the first all-reduce ends later than it would alone.
    const auto alone = sim::execute(two_collectives(256e6, 64e6, delay, {1, 9}), two_nodes(), config,
                                    sim::NetworkKind::flow);
    REQUIRE(fast.end[0] > alone.end[0]);
  }
  SECTION("jobs on other links never leave closed form") {
    const auto g = two_collectives(256e6, 64e6, 300_us, {1, 9});
    const auto plain = sim::execute(g, two_nodes(), config, sim::NetworkKind::flow, off);
    const auto fast = sim::execute(g, two_nodes(), config, sim::NetworkKind::flow);
    same_times(g, plain, fast);
    REQUIRE(fast.jobs_closed_form == 2);
    REQUIRE(fast.jobs_rebuilt == 0);
    REQUIRE(fast.events * 2 < plain.events);
  }
  SECTION("the analytical network never rebuilds: its flows never interact") {
    const auto g = two_collectives(256e6, 64e6, 300_us, {0, 8});
    const auto plain = sim::execute(g, two_nodes(), config, sim::NetworkKind::analytical, off);
    const auto fast = sim::execute(g, two_nodes(), config, sim::NetworkKind::analytical);
    same_times(g, plain, fast);
    REQUIRE(fast.jobs_closed_form == 2);
    REQUIRE(fast.jobs_rebuilt == 0);
  }
}

TEST_CASE("a job goes back to closed form once nothing crowds it, and is rebuilt from there", "[collectives]") {
  const auto config = test::executor_config();
  sim::ExecutorOptions off;
  off.closed_form = false;
  // A 1 GB all-reduce over four nodes from 0 (its ring of 4 positions and 6 steps starts 5.7 ms
  // in and ends near 68 ms); a 32 MB one on its links from 3 ms crowds it (A is rebuilt, both
  // run flow by flow). B ends at 6.6 ms, mid-ring for A, which runs alone again and goes back
  // to closed form from its state; C crowds it later still (from 3 ms + c_delay, once A has
  // moved on by a step or more), so A is rebuilt from there, and goes back again after C.
  const sim::NodeId a = 1, b = 9, c = 17;  // rank 0's all-reduces (after its compute)
  for (const sim::Time c_delay : {20456789123_ps, 40_ms}) {
    CAPTURE(c_delay.ps());
    const auto g = staggered_collectives({1e9, 32e6, 32e6}, {0_us, 3_ms, c_delay});
    const auto plain = sim::execute(g, four_nodes(), config, sim::NetworkKind::flow, off);
    const auto fast = sim::execute(g, four_nodes(), config, sim::NetworkKind::flow);
    same_times(g, plain, fast);
    REQUIRE(plain.jobs_returned == 0);
    REQUIRE(fast.jobs_returned == 2);
    REQUIRE(fast.jobs_rebuilt == 2);
    REQUIRE(fast.events < plain.events);
    REQUIRE(fast.start[c] > fast.end[b]);  // C started while A ran, after B had ended
    REQUIRE(fast.start[c] < fast.end[a]);
  }
  SECTION("a return that a rebuild follows at once is not tried again") {
    // C starts 1 us after B has ended: A's stretch in closed form saved fewer events than going
    // back and forth costs, so after C it stays flow by flow (same answer either way).
    const auto first = sim::execute(staggered_collectives({1e9, 32e6}, {0_us, 3_ms}), four_nodes(), config,
                                    sim::NetworkKind::flow);
    const auto g = staggered_collectives({1e9, 32e6, 32e6}, {0_us, 3_ms, first.end[b] + 1_us - 3_ms});
    const auto plain = sim::execute(g, four_nodes(), config, sim::NetworkKind::flow, off);
    const auto fast = sim::execute(g, four_nodes(), config, sim::NetworkKind::flow);
    same_times(g, plain, fast);
    REQUIRE(fast.start[c] == first.end[b] + 1_us);
    REQUIRE(fast.jobs_returned == 1);
    REQUIRE(fast.jobs_rebuilt == 2);
  }
}

TEST_CASE("a folded collective costs the same events whatever the groups it stands for", "[collectives]") {
  const auto config = test::executor_config();
  // One simulated rank per node-local slot: the data-parallel all-reduce of replica groups
  // {j, j + 8, j + 16, ...} over `nodes` DGX nodes, standing for all 8 groups.
  auto events = [&](int nodes) {
    const topo::Cluster c = topo::resolve_cluster("dgx-a100", 8 * nodes);
    sim::ExecutionGraph g;
    g.add_rank(0, 0);
    std::vector<std::vector<sim::GpuId>> groups(8);
    for (int j = 0; j < 8; ++j) {
      for (int d = 0; d < nodes; ++d) groups[static_cast<std::size_t>(j)].push_back(static_cast<sim::GpuId>(d * 8 + j));
    }
    const auto comm = g.add_communicator({0}, groups);
    for (int step = 0; step < 4; ++step) {
      Node ar = op(OpKind::collective, 0, 2);
      ar.communicator = comm;
      ar.bytes = 100e6;
      g.add(ar);
    }
    std::vector<std::uint64_t> out;
    for (const auto network : {sim::NetworkKind::analytical, sim::NetworkKind::flow}) {
      out.push_back(sim::execute(g, c, config, network).events);
    }
    return out;
  };
  REQUIRE(events(2) == events(16));
  REQUIRE(events(2) == events(64));
}

namespace {

/// Rank 0 (GPU 0) runs a 1 GB collective `big` whose communicator stands for `groups` (GPU 0's
/// first); ranks on the GPUs of `crowded` (one of the groups) run 32 MB all-reduces, the i-th
/// after `delay[i]` more of compute, on its links.
sim::ExecutionGraph groups_and_crowd(sim::CollectiveOp big, const std::vector<std::vector<sim::GpuId>>& groups,
                                     const std::vector<sim::GpuId>& crowded, const std::vector<sim::Time>& delay) {
  sim::ExecutionGraph g;
  g.add_rank(0, 0);
  const auto folded = g.add_communicator({0}, groups);
  Node ar = op(OpKind::collective, 0, 2);
  ar.communicator = folded;
  ar.op = big;
  ar.bytes = 1e9;
  g.add(ar);
  std::vector<sim::RankId> crowd;
  sim::RankId next = 1;
  for (const sim::GpuId gpu : crowded) {
    if (gpu == 0) {
      crowd.push_back(0);
    } else {
      crowd.push_back(next++);
      g.add_rank(gpu, crowd.back());
    }
  }
  for (const sim::Time d : delay) {
    const auto comm = g.add_communicator(crowd);
    for (const sim::RankId r : crowd) {
      Node work = op(OpKind::compute, r, 1);
      work.duration = d;
      const auto w = g.add(work);
      Node b = op(OpKind::collective, r, 3, {w});
      b.communicator = comm;
      b.bytes = 32e6;
      g.add(b);
    }
  }
  return g;
}

}  // namespace

namespace {

/// The 8 rail groups {j, j + 8, j + 16, j + 24} of four_nodes, and rail `rail`'s GPUs.
std::vector<std::vector<sim::GpuId>> rails() {
  std::vector<std::vector<sim::GpuId>> groups(8);
  for (sim::GpuId j = 0; j < 8; ++j) {
    for (sim::GpuId d = 0; d < 4; ++d) groups[j].push_back(d * 8 + j);
  }
  return groups;
}

}  // namespace

TEST_CASE("a rebuilt job replays one of its alike plans for all of them", "[collectives]") {
  const auto config = test::executor_config();
  sim::ExecutorOptions off;
  off.closed_form = false;
  // A 1 GB all-reduce standing for the eight rail groups (alike rings, on links of their own but
  // for spine pools with room for all); 32 MB all-reduces on one rail crowd it. The first starts
  // 3 ms in and rebuilds it: its plans fall in two classes of four rails (rails 0-3 and 4-7
  // order their rings so that the spine is crossed at another hop), so two plans are replayed
  // and six copied onto their own links. The crowd ends, the big one goes back to closed form,
  // and the second crowd rebuilds it from there: the crowded rail's plan is behind the others of
  // its class (the first crowd slowed it), so it is replayed apart and five are copied. Crowding
  // a representative's rail or another one must give the run that never takes a shortcut, node
  // for node: a copy on the wrong links, or from a plan in another state, would crowd or spare
  // the wrong rail.
  const auto all_reduce = sim::CollectiveOp::all_reduce;
  for (const int rail : {0, 5}) {
    CAPTURE(rail);
    const auto crowded = rails()[static_cast<std::size_t>(rail)];
    const auto g = groups_and_crowd(all_reduce, rails(), crowded, {3_ms, 20_ms});
    const auto plain = sim::execute(g, four_nodes(), config, sim::NetworkKind::flow, off);
    const auto fast = sim::execute(g, four_nodes(), config, sim::NetworkKind::flow);
    same_times(g, plain, fast);
    REQUIRE(fast.jobs_rebuilt == 2);
    REQUIRE(fast.jobs_returned >= 1);
    REQUIRE(fast.plans_copied == 6 + 5);
    // The crowd did slow the big all-reduce (one rail's plan, so the job).
    const auto alone = sim::execute(groups_and_crowd(all_reduce, rails(), crowded, {}), four_nodes(), config,
                                    sim::NetworkKind::flow);
    REQUIRE(fast.end[0] > alone.end[0]);
  }
}

TEST_CASE("a rebuilt all-to-all, whose own flows crowd its links, replays one of its alike plans too", "[collectives]") {
  const auto config = test::executor_config();
  sim::ExecutorOptions off;
  off.closed_form = false;
  // An all-to-all standing for the eight groups of four GPUs of four_nodes (two per node), over
  // NVLink: each GPU's three flows share its NVLink port, so its own flows crowd links, but each
  // group's ports are its own. An all-reduce on one group's GPUs crowds it 300 us in; the rebuild
  // replays fewer plans than it has. When the all-reduce ends, the all-to-all goes back to closed
  // form: its end is a run of its plans on links of their own from where they stand (its own
  // flows crowd each other: no closed form from a state), the crowded group's plan apart from the
  // others (a crowd slowed it). A second crowd, later, rebuilds it from there. Each must give
  // the run that never takes a shortcut, node for node.
  std::vector<std::vector<sim::GpuId>> quads(8);
  for (sim::GpuId q = 0; q < 8; ++q) {
    for (sim::GpuId i = 0; i < 4; ++i) quads[q].push_back(4 * q + i);
  }
  for (const int crowded : {0, 5}) {
    CAPTURE(crowded);
    const auto& gpus = quads[static_cast<std::size_t>(crowded)];
    const auto g = groups_and_crowd(sim::CollectiveOp::all_to_all, quads, gpus, {300_us});
    const auto plain = sim::execute(g, four_nodes(), config, sim::NetworkKind::flow, off);
    const auto fast = sim::execute(g, four_nodes(), config, sim::NetworkKind::flow);
    same_times(g, plain, fast);
    REQUIRE(fast.jobs_rebuilt == 1);
    REQUIRE(fast.jobs_returned == 1);
    REQUIRE(fast.plans_copied >= 4);
    const auto twice = groups_and_crowd(sim::CollectiveOp::all_to_all, quads, gpus, {300_us, 1_ms});
    const auto plain2 = sim::execute(twice, four_nodes(), config, sim::NetworkKind::flow, off);
    const auto fast2 = sim::execute(twice, four_nodes(), config, sim::NetworkKind::flow);
    same_times(twice, plain2, fast2);
    REQUIRE(fast2.jobs_rebuilt == 2);
    REQUIRE(fast2.jobs_returned >= 1);
    REQUIRE(fast2.end[0] > fast.end[0]);
    const auto alone = sim::execute(groups_and_crowd(sim::CollectiveOp::all_to_all, quads, gpus, {}), four_nodes(),
                                    config, sim::NetworkKind::flow);
    REQUIRE(fast.end[0] > alone.end[0]);
  }
}

TEST_CASE("on the analytical network an all-to-all takes its time alone on the flow network", "[collectives]") {
  // The eight groups of four GPUs of four_nodes, each an all-to-all over NVLink whose three flows
  // per GPU share its port. Alone, both models give the same end, node for node: the analytical
  // one runs each group's plan on a network of its own, its flows sharing links max-min. Before
  // (2026-11-28) it ran every flow at its port's full rate, three times too fast. A crowd slows
  // it on the flow network only: jobs never meet on the analytical one, links sampled or not.
  const auto config = test::executor_config();
  std::vector<std::vector<sim::GpuId>> quads(8);
  for (sim::GpuId q = 0; q < 8; ++q) {
    for (sim::GpuId i = 0; i < 4; ++i) quads[q].push_back(4 * q + i);
  }
  const auto lone = groups_and_crowd(sim::CollectiveOp::all_to_all, quads, quads[0], {});
  const auto flow = sim::execute(lone, four_nodes(), config, sim::NetworkKind::flow);
  const auto analytical = sim::execute(lone, four_nodes(), config, sim::NetworkKind::analytical);
  same_times(lone, flow, analytical);
  const auto crowded = groups_and_crowd(sim::CollectiveOp::all_to_all, quads, quads[0], {300_us});
  const auto slowed = sim::execute(crowded, four_nodes(), config, sim::NetworkKind::flow);
  REQUIRE(slowed.end[0] > flow.end[0]);
  sim::ExecutorOptions sampled;
  sampled.closed_form = false;
  for (const auto& options : {sim::ExecutorOptions{}, sampled}) {
    const auto kept = sim::execute(crowded, four_nodes(), config, sim::NetworkKind::analytical, options);
    REQUIRE(kept.end[0] == analytical.end[0]);
  }
}

TEST_CASE("on the analytical network alike all-to-alls run once alone, others each", "[collectives]") {
  // Three all-to-alls of 64 MB on two DGX A100 nodes, at once (no rank is in two of them): A
  // inside node 0 (GPUs 0-3), B across both nodes (GPUs 6-9), C inside node 1 (GPUs 10-13),
  // alike A link for link. Each crowds its own NVSwitch ports, so each runs on a network of its own;
  // C reuses A's time, and B, whose flows cross the NICs, takes its own, longer one. Each ends
  // when it would in a graph holding it alone.
  const auto config = test::executor_config();
  const std::vector<std::vector<sim::GpuId>> groups{{0, 1, 2, 3}, {6, 7, 8, 9}, {10, 11, 12, 13}};
  const auto graph = [](const std::vector<std::vector<sim::GpuId>>& gs) {
    sim::ExecutionGraph g;
    for (sim::RankId r = 0; r < 16; ++r) g.add_rank(r, r);
    std::vector<sim::NodeId> last(16, 0xffffffffu);
    std::vector<sim::NodeId> ends;
    for (const auto& group : gs) {
      const auto comm = g.add_communicator(std::vector<sim::RankId>(group.begin(), group.end()));
      for (const sim::GpuId r : group) {
        Node a = op(OpKind::collective, r, 2);
        if (last[r] != 0xffffffffu) a.deps = {last[r]};
        a.op = sim::CollectiveOp::all_to_all;
        a.communicator = comm;
        a.bytes = 64e6;
        last[r] = g.add(a);
      }
      ends.push_back(last[group.front()]);
    }
    return std::pair{g, ends};
  };
  const auto [all, ends] = graph(groups);
  const auto together = sim::execute(all, two_nodes(), config, sim::NetworkKind::analytical);
  REQUIRE(together.plans_alone_reused == 1);
  std::vector<sim::Time> took;
  for (std::size_t k = 0; k < groups.size(); ++k) {
    const auto [one, one_end] = graph({groups[k]});
    const auto alone = sim::execute(one, two_nodes(), config, sim::NetworkKind::analytical);
    REQUIRE(alone.plans_alone_reused == 0);
    took.push_back(alone.end[one_end.front()]);
    REQUIRE(together.end[ends[k]] - together.start[ends[k]] == took.back());
  }
  REQUIRE(took[2] == took[0]);
  REQUIRE(took[1] > took[0]);
}

TEST_CASE("jobs meet on the links their footprints share, however many footprints there are", "[collectives]") {
  // shared() keeps the pairs of the first footprints in a dense table and the rest in a hash
  // table: 600 jobs, each one flow alone on a link of its own, run in closed form together; then
  // a job on the link of job 599 and one on the link of job 1 (footprints 600 and 601 against 599
  // and 1) crowd them, and each pair ends as two equal flows sharing a link do.
  const topo::Cluster& fabric = topo::resolve_cluster("dgx-a100", 256);
  const auto efficiency = sim::LinkEfficiency::defaults();
  const std::vector<double> capacity = sim::effective_capacities(fabric, efficiency);
  constexpr std::uint32_t kAlone = 600;
  REQUIRE(fabric.link_count() > kAlone);
  constexpr double kBytes = 1e8;
  const auto one_flow = [&](sim::LinkId link) {
    sim::PlannedPhase ph;
    ph.kind = sim::PlannedPhase::Kind::flows;
    sim::PlannedFlow f;
    f.path = {link};
    f.bytes = kBytes;
    f.cap = std::numeric_limits<double>::infinity();
    ph.flows.push_back(f);
    sim::CollectivePlan plan;
    plan.phases.push_back(ph);
    return std::vector<sim::CollectivePlan>{plan};
  };
  // Links of distinct pools (adaptive routing pools a switch's uplinks), so each job is alone.
  std::vector<sim::LinkId> links;
  std::vector<std::uint8_t> pool_taken(fabric.link_count(), 0);
  for (sim::LinkId l = 0; l < fabric.link_count() && links.size() < kAlone; ++l) {
    if (std::exchange(pool_taken[fabric.link_pool(l)], 1) == 0) links.push_back(l);
  }
  REQUIRE(links.size() == kAlone);
  sim::Simulator sim;
  sim::CommJobs jobs(sim, sim::NetworkKind::flow, fabric, efficiency, true);
  struct Ends final : sim::EventHandler {
    std::vector<sim::Time> at = std::vector<sim::Time>(kAlone + 2, sim::Time::max());
    void handle(sim::Simulator& s, const sim::Event& e) override { at[e.data] = s.now(); }
  } ends;
  const sim::HandlerId h = sim.add_handler(ends, "ends");
  for (std::uint32_t k = 0; k < kAlone; ++k) jobs.start(k, [&, k] { return one_flow(links[k]); }, {h, 0, k});
  jobs.start(kAlone, [&] { return one_flow(links[kAlone - 1]); }, {h, 0, kAlone});
  jobs.start(kAlone + 1, [&] { return one_flow(links[1]); }, {h, 0, kAlone + 1});
  sim.run();
  REQUIRE(jobs.stats().closed_form == kAlone);
  REQUIRE(jobs.stats().flow_by_flow == 2);
  REQUIRE(jobs.stats().rebuilt == 2);
  const auto alone = [&](sim::LinkId l) { return sim::Time::from_seconds(kBytes / capacity[l]); };
  // Two flows of one size on one link, started together: each moves at half its rate.
  const auto shared = [&](sim::LinkId l) { return sim::Time::from_seconds(2 * kBytes / capacity[l]); };
  for (const std::uint32_t k : {0u, 2u, kAlone - 2}) {
    CAPTURE(k);
    REQUIRE(std::abs((ends.at[k] - alone(links[k])).ps()) <= 1);  // to the picosecond it rounds to
  }
  for (const std::uint32_t k : {1u, kAlone - 1, kAlone, kAlone + 1}) {
    CAPTURE(k);
    const sim::LinkId l = k < kAlone ? links[k] : links[k == kAlone ? kAlone - 1 : 1];
    REQUIRE(std::abs((ends.at[k] - shared(l)).ps()) <= 1);
  }
}
