#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <tuple>
#include <vector>

#include "common/error.hpp"
#include "sim/simulator.hpp"

using namespace foresight::sim;
using namespace foresight::sim::literals;

namespace {

/// Records the order in which its events arrive, as (time, data).
struct Recorder : EventHandler {
  std::vector<std::pair<std::int64_t, std::uint64_t>> seen;
  void handle(Simulator& sim, const Event& e) override { seen.emplace_back(sim.now().ps(), e.data); }
};

/// Each event schedules `fanout` children at pseudo-random future times: a busy, branching run.
struct Spawner : EventHandler {
  HandlerId self = 0;
  std::mt19937_64 rng;
  int budget;
  explicit Spawner(std::uint64_t seed, int events) : rng(seed), budget(events) {}
  void handle(Simulator& sim, const Event&) override {
    for (int k = 0; k < 2 && budget > 0; ++k, --budget) {
      const auto delay = Time::from_ps(static_cast<std::int64_t>(rng() % 1000));  // ties are common
      sim.schedule_after(delay, self, static_cast<std::uint32_t>(rng() % 4), 0,
                         static_cast<std::int32_t>(rng() % 3));
    }
  }
};

std::uint64_t run_spawner(std::uint64_t seed) {
  Simulator sim;
  Spawner s(seed, 20000);
  s.self = sim.add_handler(s, "spawner");
  sim.schedule_at(Time::zero(), s.self, 0);
  sim.run();
  REQUIRE(sim.events_processed() == 20001);
  return sim.fingerprint();
}

}  // namespace

TEST_CASE("events run in (time, priority, insertion) order", "[sim]") {
  Simulator sim;
  Recorder r;
  const HandlerId id = sim.add_handler(r, "recorder");
  sim.schedule_at(5_ns, id, 0, 1);
  sim.schedule_at(2_ns, id, 0, 2);
  sim.schedule_at(5_ns, id, 0, 3, priority::settle);  // same time, later priority
  sim.schedule_at(5_ns, id, 0, 4);                     // same time and priority: after data 1
  sim.schedule_at(5_ns, id, 0, 5, -1);                 // earlier priority runs first
  sim.run();
  const std::vector<std::pair<std::int64_t, std::uint64_t>> expected{
      {2000, 2}, {5000, 5}, {5000, 1}, {5000, 4}, {5000, 3}};
  REQUIRE(r.seen == expected);
  REQUIRE(sim.now() == 5_ns);
}

TEST_CASE("ties are broken by insertion order across many events", "[sim]") {
  Simulator sim;
  Recorder r;
  const HandlerId id = sim.add_handler(r, "recorder");
  for (std::uint64_t i = 0; i < 1000; ++i) sim.schedule_at(1_us, id, 0, i);
  sim.run();
  REQUIRE(r.seen.size() == 1000);
  for (std::uint64_t i = 0; i < 1000; ++i) REQUIRE(r.seen[i].second == i);
}

TEST_CASE("same input gives the same fingerprint; different input a different one", "[sim]") {
  const auto a = run_spawner(42);
  const auto b = run_spawner(42);
  const auto c = run_spawner(43);
  REQUIRE(a == b);
  REQUIRE(a != c);
}

TEST_CASE("scheduling in the past is an internal error", "[sim]") {
  Simulator sim;
  Recorder r;
  const HandlerId id = sim.add_handler(r, "recorder");
  sim.schedule_at(10_ns, id, 0);
  sim.run();
  REQUIRE_THROWS_AS(sim.schedule_at(5_ns, id, 0), InternalError);
  REQUIRE_THROWS_AS(sim.schedule_at(20_ns, id + 7, 0), InternalError);
}

TEST_CASE("run_until stops at the limit and resumes", "[sim]") {
  Simulator sim;
  Recorder r;
  const HandlerId id = sim.add_handler(r, "recorder");
  for (int i = 1; i <= 10; ++i) sim.schedule_at(Time::from_ps(i * 100), id, 0, static_cast<std::uint64_t>(i));
  REQUIRE(sim.run_until(Time::from_ps(500)));
  REQUIRE(r.seen.size() == 5);
  REQUIRE_FALSE(sim.run_until(Time::max()));
  REQUIRE(r.seen.size() == 10);
}

TEST_CASE("the queue pops in (time, priority, sequence) order under interleaved pushes and pops", "[sim]") {
  // A reference: every event pushed so far, popped as the smallest (time, priority, seq) left.
  EventQueue q;
  std::vector<Event> reference;
  std::mt19937_64 rng(7);
  Time now = Time::zero();
  std::size_t popped = 0;
  for (int round = 0; round < 20000; ++round) {
    const int pushes = static_cast<int>(rng() % 3);
    for (int k = 0; k < pushes; ++k) {
      // Times near now (ties), a little later, and far later (high bits differ).
      const std::int64_t span = (rng() % 4 == 0) ? (std::int64_t{1} << 40) : static_cast<std::int64_t>(rng() % 64);
      const Time t = now + Time::from_ps(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(span + 1)));
      const auto prio = static_cast<std::int32_t>(rng() % 3) - 1;
      const std::uint64_t seq = q.push(t, prio, 0, 0, 0);
      reference.push_back(Event{t, prio, 0, 0, seq, 0});
    }
    if (q.empty() || rng() % 2 == 0) continue;
    const auto least = std::min_element(reference.begin(), reference.end(), [](const Event& a, const Event& b) {
      return std::tie(a.time, a.priority, a.seq) < std::tie(b.time, b.priority, b.seq);
    });
    REQUIRE(q.top().seq == least->seq);
    const Event e = q.pop();
    REQUIRE(e.seq == least->seq);
    REQUIRE(e.time == least->time);
    now = e.time;
    reference.erase(least);
    ++popped;
  }
  REQUIRE(popped > 5000);
  REQUIRE(q.size() == reference.size());
  // Time never goes back: an event before the last popped one is refused.
  if (now > Time::zero()) {
    REQUIRE_THROWS_AS(q.push(now - Time::from_ps(1), 0, 0, 0, 0), InternalError);
  }
}
