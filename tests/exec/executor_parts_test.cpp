// The executor's parts with a job of their own (exec/detail/): interpreter locks and compute
// speed under communication, each against what it must do by hand-derived numbers.
#include <catch2/catch.hpp>

#include <vector>

#include "exec/detail/compute_rates.hpp"
#include "exec/detail/interpreter_locks.hpp"

using namespace foresight;
using sim::Time;

TEST_CASE("an interpreter lock serves waiting threads first come, first served, each queued once", "[exec]") {
  sim::detail::InterpreterLocks locks(2, 4);
  REQUIRE(locks.try_take(0, 0));
  REQUIRE_FALSE(locks.try_take(0, 2));
  REQUIRE_FALSE(locks.try_take(0, 1));
  REQUIRE_FALSE(locks.try_take(0, 2));  // asks again while queued: still one place in the queue
  REQUIRE(locks.try_take(1, 3));        // another process's lock is free
  REQUIRE(locks.release(0) == 2u);      // the longest waiter's turn
  REQUIRE(locks.try_take(0, 2));
  REQUIRE(locks.release(0) == 1u);
  REQUIRE(locks.try_take(0, 1));
  REQUIRE_FALSE(locks.release(0).has_value());  // nobody waits
  REQUIRE(locks.try_take(0, 0));
}

TEST_CASE("compute slows by 1 + slowdown while its rank communicates and keeps the work done", "[exec]") {
  constexpr double slowdown = 0.25;
  sim::detail::ComputeRates rates(2);
  // 100 us of work from t = 0 at full speed.
  const auto first = rates.start(7, 0, Time::from_ps(100'000'000), slowdown, Time::zero());
  REQUIRE(first.after == Time::from_ps(100'000'000));
  REQUIRE(rates.current(7, first.generation));
  // At 40 us the rank starts communicating: 60 us of work left at 1 / 1.25 speed takes 75 us.
  std::vector<std::pair<sim::NodeId, sim::detail::ComputeRates::End>> moved;
  rates.comm_changed(0, +1, Time::from_ps(40'000'000), [&](sim::NodeId n, auto end) { moved.emplace_back(n, end); });
  REQUIRE(moved.size() == 1);
  REQUIRE(moved[0].first == 7u);
  REQUIRE(moved[0].second.after == Time::from_ps(75'000'000));
  REQUIRE_FALSE(rates.current(7, first.generation));  // the old end event is stale
  REQUIRE(rates.current(7, moved[0].second.generation));
  // A second communication on the same rank changes nothing; another rank's op starts slow only
  // when its own rank communicates.
  moved.clear();
  rates.comm_changed(0, +1, Time::from_ps(50'000'000), [&](sim::NodeId n, auto end) { moved.emplace_back(n, end); });
  REQUIRE(moved.empty());
  REQUIRE(rates.start(9, 1, Time::from_ps(10'000'000), slowdown, Time::from_ps(50'000'000)).after == Time::from_ps(10'000'000));
  // At 80 us both communications end: 60 - 40 / 1.25 = 28 us of work left, at full speed.
  rates.comm_changed(0, -1, Time::from_ps(80'000'000), [&](sim::NodeId n, auto end) { moved.emplace_back(n, end); });
  REQUIRE(moved.empty());
  rates.comm_changed(0, -1, Time::from_ps(80'000'000), [&](sim::NodeId n, auto end) { moved.emplace_back(n, end); });
  REQUIRE(moved.size() == 1);
  REQUIRE(moved[0].second.after == Time::from_ps(28'000'000));
  rates.finish(7, 0);
  REQUIRE_FALSE(rates.current(7, moved[0].second.generation));
}

TEST_CASE("each compute op slows by its own factor while its rank communicates", "[exec]") {
  sim::detail::ComputeRates rates(1);
  // A matrix kernel (0.5) and a memory kernel (0.2) run from t = 0 with 60 us of work each; a
  // third op with no slowdown runs beside them.
  rates.start(1, 0, Time::from_ps(60'000'000), 0.5, Time::zero());
  rates.start(2, 0, Time::from_ps(60'000'000), 0.2, Time::zero());
  const auto free_end = rates.start(3, 0, Time::from_ps(60'000'000), 0.0, Time::zero());
  std::vector<std::pair<sim::NodeId, sim::detail::ComputeRates::End>> moved;
  // At 30 us the rank communicates: 30 us left take 30 x 1.5 = 45 us and 30 x 1.2 = 36 us; the
  // third op is not rescheduled (its end event stays current).
  rates.comm_changed(0, +1, Time::from_ps(30'000'000), [&](sim::NodeId n, auto end) { moved.emplace_back(n, end); });
  REQUIRE(moved.size() == 2);
  REQUIRE(moved[0].first == 1u);
  REQUIRE(moved[0].second.after == Time::from_ps(45'000'000));
  REQUIRE(moved[1].first == 2u);
  REQUIRE(moved[1].second.after == Time::from_ps(36'000'000));
  REQUIRE(rates.current(3, free_end.generation));
  // An op that starts while the rank communicates starts slow.
  REQUIRE(rates.start(4, 0, Time::from_ps(10'000'000), 0.5, Time::from_ps(30'000'000)).after ==
          Time::from_ps(15'000'000));
}
