#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "common/error.hpp"
#include "net/flow_network.hpp"
#include "net/link_pools.hpp"
#include "net/network_model.hpp"
#include "sim/simulator.hpp"

using namespace foresight::sim;
using namespace foresight::sim::literals;

namespace {

constexpr double kGB = 1e9;

/// Starts flows at given times and records when each is done.
struct Driver : EventHandler {
  struct Planned {
    Time start;
    std::vector<LinkId> path;
    double bytes;
    double cap;
  };
  NetworkModel* net = nullptr;
  HandlerId self = 0;
  std::vector<Planned> plan;
  std::map<std::uint64_t, Time> done;  // flow index -> completion time
  std::map<std::uint64_t, FlowId> ids;
  bool probe = false;  // compare rates with a from-scratch max-min solve after every change
  std::vector<double> capacities;
  double worst_rel_error = 0.0;
  std::size_t probes = 0;

  enum : std::uint32_t { kStart = 1, kDone = 2, kProbe = 3 };

  void arm(Simulator& sim) {
    for (std::size_t i = 0; i < plan.size(); ++i) sim.schedule_at(plan[i].start, self, kStart, i);
  }
  void handle(Simulator& sim, const Event& e) override {
    if (e.kind == kStart) {
      const auto& p = plan[e.data];
      FlowRequest r;
      r.path = p.path;
      r.bytes = p.bytes;
      r.max_rate = p.cap;
      r.notify = FlowNotify{self, kDone, e.data};
      ids[e.data] = net->start_flow(r);
    } else if (e.kind == kDone) {
      done[e.data] = sim.now();
      ids.erase(e.data);
    } else if (e.kind == kProbe) {
      check_rates();
      return;
    }
    if (probe) sim.schedule_at(sim.now(), self, kProbe, 0, priority::settle + 1);
  }
  void check_rates() {
    auto* flow_net = dynamic_cast<FlowNetwork*>(net);
    std::vector<std::vector<LinkId>> paths;
    std::vector<double> caps;
    std::vector<double> got;
    for (const auto& [index, id] : ids) {
      paths.push_back(plan[index].path);
      caps.push_back(plan[index].cap);
      got.push_back(flow_net->rate(id));
    }
    const auto want = max_min_rates(capacities, paths, caps);
    for (std::size_t i = 0; i < want.size(); ++i) {
      worst_rel_error = std::max(worst_rel_error, std::abs(got[i] - want[i]) / want[i]);
    }
    ++probes;
  }
};

struct Run {
  std::map<std::uint64_t, Time> done;
  std::uint64_t fingerprint;
  double worst_rel_error;
  std::size_t probes;
};

Run run(NetworkKind kind, const std::vector<double>& caps, const std::vector<Driver::Planned>& plan,
        bool probe = false) {
  Simulator sim;
  auto net = make_network(kind, sim, caps);
  Driver d;
  d.net = net.get();
  d.plan = plan;
  d.probe = probe;
  d.capacities = caps;
  d.self = sim.add_handler(d, "driver");
  d.arm(sim);
  sim.run();
  REQUIRE(net->active_flows() == 0);
  return Run{d.done, sim.fingerprint(), d.worst_rel_error, d.probes};
}

const double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("two flows on one link each get half the bandwidth", "[sim]") {
  // One 10 GB/s link; two 10 GB flows from t=0 share it at 5 GB/s each: both end at 2 s.
  const auto r = run(NetworkKind::flow, {10 * kGB}, {{0_s, {0}, 10 * kGB, kInf}, {0_s, {0}, 10 * kGB, kInf}});
  REQUIRE(r.done.at(0) == 2_s);
  REQUIRE(r.done.at(1) == 2_s);
}

TEST_CASE("a finished flow's share goes to the flows left", "[sim]") {
  // 10 GB/s link, a 10 GB and a 5 GB flow from t=0: 5 GB/s each until the small one ends at 1 s;
  // the big one has 5 GB left and now runs at 10 GB/s: it ends at 1.5 s.
  const auto r = run(NetworkKind::flow, {10 * kGB}, {{0_s, {0}, 10 * kGB, kInf}, {0_s, {0}, 5 * kGB, kInf}});
  REQUIRE(r.done.at(1) == 1_s);
  REQUIRE(r.done.at(0) == 1500_ms);
}

TEST_CASE("max-min fairness on a parking lot with a rate cap", "[sim]") {
  // Links 0 (1 GB/s) and 1 (2 GB/s). Long flow on both, flow A on link 0, flow B on link 1.
  // Link 0 is the tighter: long and A get 0.5 GB/s each; B gets 2 - 0.5 = 1.5 GB/s.
  // With 1 GB each: A and long end at 2 s; B at 1/1.5 s = 666.67 ms, after which nothing changes
  // for the others (link 0 still binds).
  const auto r = run(NetworkKind::flow, {1 * kGB, 2 * kGB},
                     {{0_s, {0, 1}, 1 * kGB, kInf}, {0_s, {0}, 1 * kGB, kInf}, {0_s, {1}, 1 * kGB, kInf}});
  REQUIRE(r.done.at(0) == 2_s);
  REQUIRE(r.done.at(1) == 2_s);
  REQUIRE(std::abs(r.done.at(2).seconds() - 1.0 / 1.5) < 1e-11);
  // A cap of 0.2 GB/s on flow A leaves 0.8 GB/s of link 0 to the long flow, and B gets 1.2 GB/s.
  const auto c = run(NetworkKind::flow, {1 * kGB, 2 * kGB},
                     {{0_s, {0, 1}, 0.8 * kGB, kInf}, {0_s, {0}, 0.2 * kGB, 0.2 * kGB}, {0_s, {1}, 1.2 * kGB, kInf}});
  REQUIRE(c.done.at(0) == 1_s);
  REQUIRE(c.done.at(1) == 1_s);
  REQUIRE(c.done.at(2) == 1_s);
}

TEST_CASE("flow-level equals analytical without contention", "[sim]") {
  // Flows on disjoint paths, or sharing a link at different times, never contend; both models
  // must then give identical completion times (bytes / bottleneck), to the picosecond.
  std::mt19937_64 rng(7);
  std::vector<double> caps;
  for (int i = 0; i < 12; ++i) caps.push_back((1 + static_cast<double>(rng() % 40)) * kGB);
  std::vector<Driver::Planned> plan;
  for (int f = 0; f < 4; ++f) {  // disjoint 3-link paths, concurrent, some capped
    const double cap = (f % 2 == 0) ? kInf : 3.3 * kGB;
    plan.push_back({Time::from_ps(static_cast<std::int64_t>(rng() % 1000)),
                    {static_cast<LinkId>(3 * f), static_cast<LinkId>(3 * f + 1), static_cast<LinkId>(3 * f + 2)},
                    static_cast<double>(1 + rng() % 1000) * 1e6, cap});
  }
  plan.push_back({10_s, {0, 4, 8}, 7e8, kInf});  // later, alone on links shared with earlier flows
  const auto a = run(NetworkKind::analytical, caps, plan);
  const auto f = run(NetworkKind::flow, caps, plan);
  REQUIRE(a.done == f.done);
  // And each equals bytes / min(cap, links) rounded up to a picosecond.
  for (std::size_t i = 0; i < plan.size(); ++i) {
    double rate = plan[i].cap;
    for (const LinkId l : plan[i].path) rate = std::min(rate, caps[l]);
    const Time expect = plan[i].start + transfer_time(plan[i].bytes, Bandwidth::bytes_per_second(rate));
    REQUIRE(f.done.at(i) == expect);
  }
}

TEST_CASE("incremental re-solve equals a global max-min solve on random instances", "[sim]") {
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    std::mt19937_64 rng(seed);
    const std::size_t links = 3 + rng() % 12;
    std::vector<double> caps;
    for (std::size_t i = 0; i < links; ++i) caps.push_back((1 + static_cast<double>(rng() % 50)) * kGB);
    std::vector<Driver::Planned> plan;
    const std::size_t flows = 5 + rng() % 80;
    for (std::size_t f = 0; f < flows; ++f) {
      std::vector<LinkId> path;
      const std::size_t len = 1 + rng() % std::min<std::size_t>(4, links);
      while (path.size() < len) {
        const auto l = static_cast<LinkId>(rng() % links);
        if (std::find(path.begin(), path.end(), l) == path.end()) path.push_back(l);
      }
      const double cap = (rng() % 4 == 0) ? (0.5 + static_cast<double>(rng() % 10)) * kGB : kInf;
      // Start times on a coarse grid so that many flows start and end at the same instant.
      plan.push_back({Time::from_ps(static_cast<std::int64_t>(rng() % 8) * 100'000'000),
                      std::move(path), static_cast<double>(1 + rng() % 200) * 1e7, cap});
    }
    const auto r = run(NetworkKind::flow, caps, plan, true);
    INFO("seed " << seed);
    REQUIRE(r.probes > 0);
    REQUIRE(r.worst_rel_error < 1e-6);
    REQUIRE(r.done.size() == flows);
  }
}

TEST_CASE("flow-level runs are deterministic", "[sim]") {
  std::vector<Driver::Planned> plan;
  for (int i = 0; i < 50; ++i) {
    plan.push_back({Time::from_ps(i * 1000), {static_cast<LinkId>(i % 3), 3}, 1e6 * (1 + i % 7), kInf});
  }
  const std::vector<double> caps{5 * kGB, 7 * kGB, 9 * kGB, 12 * kGB};
  const auto a = run(NetworkKind::flow, caps, plan);
  const auto b = run(NetworkKind::flow, caps, plan);
  REQUIRE(a.fingerprint == b.fingerprint);
  REQUIRE(a.done == b.done);
}

TEST_CASE("LinkPools: a path's pools in order, each once, in place as in a copy", "[network]") {
  LinkPools pools;
  pools.pool_of = {0, 0, 1, 2, 1, 3};  // links 0 and 1 pool, and links 2 and 4
  pools.capacity = {2e9, 2e9, 1e9, 1e9};
  const std::vector<std::vector<LinkId>> paths{{0, 1, 2}, {4, 2, 3, 0, 1, 5}, {}, {5}, {3, 4, 1}};
  const std::vector<std::vector<LinkId>> expected{{0, 1}, {1, 2, 0, 3}, {}, {3}, {2, 1, 0}};
  for (std::size_t i = 0; i < paths.size(); ++i) {
    INFO("path " << i);
    REQUIRE(pools.translate(paths[i]) == expected[i]);
    std::vector<LinkId> p = paths[i];
    pools.translate_in_place(p);
    REQUIRE(p == expected[i]);
  }
  std::vector<LinkId> bad{0, 6};
  REQUIRE_THROWS_AS(pools.translate_in_place(bad), InternalError);
}
