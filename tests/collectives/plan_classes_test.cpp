// Alike plans of one job (collectives/plan_classes.hpp): which plans a rebuild may replay once
// for all, and how their links correspond.
#include <catch2/catch.hpp>

#include "collectives/plan_classes.hpp"
#include "collectives/plan_timing.hpp"
#include "net/network_model.hpp"

using namespace foresight;
using namespace foresight::sim::literals;

namespace {

/// A ring of three positions whose hop p crosses link first + p, then `shared` when given.
sim::CollectivePlan ring_on(sim::LinkId first, std::optional<sim::LinkId> shared = std::nullopt,
                            sim::Time latency = 2_us) {
  sim::PlannedPhase ph;
  ph.kind = sim::PlannedPhase::Kind::ring;
  ph.steps = 4;
  ph.step_bytes = 1e6;
  ph.step_cap = 20e9;
  sim::PlannedRing ring;
  for (sim::LinkId p = 0; p < 3; ++p) {
    ring.order.push_back(p);
    ring.hops.push_back({first + p});
    if (shared) ring.hops.back().push_back(*shared);
    ring.hop_latency.push_back(latency);
  }
  ph.rings.push_back(ring);
  sim::CollectivePlan plan;
  plan.phases.push_back(ph);
  return plan;
}

}  // namespace

TEST_CASE("plans alike on links of their own form a class, link for link", "[collectives]") {
  const std::vector<double> capacity(20, 50e9);
  const std::vector<sim::LinkId> room{19};  // a spine pool with room for every flow
  const auto a = ring_on(0, 19), b = ring_on(3, 19), c = ring_on(6, 19, 3_us), d = ring_on(9, 19);
  const auto classes = sim::plan_classes({&a, &b, &c, &d}, capacity, room);
  REQUIRE(classes);
  // c's hops wait longer: a class of its own; b and d stand in a's.
  REQUIRE(classes->copies == std::vector<std::vector<std::uint32_t>>{{0, 1, 3}, {}, {2}, {}});
  // Place i of a's walk is place i of b's: its own links in ring order, the shared pool after the
  // first hop's.
  REQUIRE(classes->links[0] == std::vector<sim::LinkId>{0, 19, 1, 2});
  REQUIRE(classes->links[1] == std::vector<sim::LinkId>{3, 19, 4, 5});
  REQUIRE(classes->links[3] == std::vector<sim::LinkId>{9, 19, 10, 11});
}

TEST_CASE("plans are not replayed for each other where they could crowd or tie differently", "[collectives]") {
  std::vector<double> capacity(20, 50e9);
  const auto a = ring_on(0, 19), b = ring_on(3, 19);
  SECTION("a shared link without room couples them") {
    REQUIRE_FALSE(sim::plan_classes({&a, &b}, capacity, {}));
    REQUIRE(sim::plan_classes({&a, &b}, capacity, std::vector<sim::LinkId>{19}));
  }
  SECTION("a link of another capacity") {
    capacity[4] = 40e9;
    REQUIRE_FALSE(sim::plan_classes({&a, &b}, capacity, std::vector<sim::LinkId>{19}));
  }
  SECTION("their own links in another order of ids (ties between equal levels break by id)") {
    auto c = ring_on(3, 19);
    std::swap(c.phases[0].rings[0].hops[0], c.phases[0].rings[0].hops[2]);  // 5, 4, 3 instead of 3, 4, 5
    REQUIRE_FALSE(sim::plan_classes({&a, &c}, capacity, std::vector<sim::LinkId>{19}));
  }
  SECTION("no two alike: nothing to gain") {
    const auto c = ring_on(3, 19, 3_us);
    REQUIRE_FALSE(sim::plan_classes({&a, &c}, capacity, std::vector<sim::LinkId>{19}));
  }
}

TEST_CASE("standalone_load: each link's flows, rates and bound; a reused scratch gives the same answer",
          "[collectives]") {
  const std::vector<double> capacity(20, 50e9);
  const auto a = ring_on(0, 19), b = ring_on(3, 19), c = ring_on(6, std::nullopt);
  // Each hop runs at its standalone rate r; a ring's three hops all cross link 19.
  const std::vector<sim::LinkId> path{0, 19};
  const double r = sim::standalone_rate(path, 20e9, capacity, 1);
  REQUIRE(r == 20e9);
  const auto ab = sim::standalone_load({&a, &b}, capacity);
  REQUIRE(ab.size() == 7);  // links 0-5 and 19, by link
  for (std::size_t i = 0; i < 6; ++i) {
    REQUIRE(ab[i].link == i);
    REQUIRE(ab[i].flows == 1);
    REQUIRE(ab[i].rate == r);
    REQUIRE(ab[i].peak == r);
  }
  // Link 19: three flows of each plan, at r each; their first links differ, so each bounds its
  // own flow at the 50 GB/s of its path's slowest link: 6 r in all.
  REQUIRE(ab[6].link == 19);
  REQUIRE(ab[6].flows == 6);
  REQUIRE(ab[6].rate == Approx(6 * r));
  REQUIRE(ab[6].peak == Approx(6 * r));
  REQUIRE_FALSE(sim::keeps_standalone_rates(ab, capacity));  // 120 GB/s through a 50 GB/s link
  // A scratch reused across calls of other plans answers as a fresh call does, field for field.
  sim::StandaloneLoadScratch scratch;
  for (const auto& plans : std::vector<std::vector<const sim::CollectivePlan*>>{{&a, &b}, {&a}, {&b, &c}, {&c}, {&a, &b}}) {
    const auto fresh = sim::standalone_load(plans, capacity);
    const auto reused = sim::standalone_load(plans, capacity, &scratch);
    REQUIRE(reused.size() == fresh.size());
    for (std::size_t i = 0; i < fresh.size(); ++i) {
      REQUIRE(reused[i].link == fresh[i].link);
      REQUIRE(reused[i].flows == fresh[i].flows);
      REQUIRE(reused[i].rate == fresh[i].rate);
      REQUIRE(reused[i].peak == fresh[i].peak);
    }
  }
  REQUIRE(sim::keeps_standalone_rates({&c}, capacity, &scratch));  // links of its own, one flow each
}

TEST_CASE("keeps_standalone_rates from plans answers as the check over their standalone_load", "[collectives]") {
  // Capacity 50 GB/s everywhere but link 18 (60 GB/s, exactly three 20 GB/s hops' worth).
  std::vector<double> capacity(20, 50e9);
  capacity[18] = 60e9;
  const auto crowded = ring_on(0, 19);  // three 20 GB/s hops through link 19: 60 > 50 GB/s
  const auto full = ring_on(3, 18);     // three through link 18: 60 GB/s, exactly its capacity
  const auto own = ring_on(6);          // links of its own
  // Two flow phases over link 10: two flows of 20 GB/s, then one of weight 2 (twice its rate).
  // A plan counts the busier phase, so it takes 40 of link 10's 50 GB/s and leaves room alone;
  // two such plans together put 80 GB/s through it.
  sim::CollectivePlan phased;
  for (const std::vector<std::uint32_t>& weights : {std::vector<std::uint32_t>{1, 1}, std::vector<std::uint32_t>{2}}) {
    sim::PlannedPhase ph;
    ph.kind = sim::PlannedPhase::Kind::flows;
    for (const std::uint32_t w : weights) {
      sim::PlannedFlow f;
      f.path = {10, static_cast<sim::LinkId>(11 + ph.flows.size())};
      f.bytes = 1e6;
      f.cap = 20e9;
      f.weight = w;
      ph.flows.push_back(f);
    }
    phased.phases.push_back(ph);
  }
  const auto phased_twin = phased;
  struct Case {
    std::vector<const sim::CollectivePlan*> plans;
    bool keeps;
  };
  const std::vector<Case> cases{{{&crowded}, false},         {{&full}, true},  {{&own}, true},
                                {{&phased}, true},           {{&phased, &phased_twin}, false},
                                {{&own, &full, &phased}, true}, {{&own, &crowded}, false}};
  sim::StandaloneLoadScratch scratch;
  for (const Case& c : cases) {
    const bool from_load = sim::keeps_standalone_rates(sim::standalone_load(c.plans, capacity), capacity);
    REQUIRE(from_load == c.keeps);
    REQUIRE(sim::keeps_standalone_rates(c.plans, capacity) == c.keeps);
    REQUIRE(sim::keeps_standalone_rates(c.plans, capacity, &scratch) == c.keeps);  // reused, as the jobs do
  }
}
