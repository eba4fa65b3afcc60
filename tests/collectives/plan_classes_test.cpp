// Alike plans of one job (collectives/plan_classes.hpp): which plans a rebuild may replay once
// for all, and how their links correspond.
#include <catch2/catch.hpp>

#include "collectives/plan_classes.hpp"

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
