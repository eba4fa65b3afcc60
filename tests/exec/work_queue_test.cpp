#include <catch2/catch.hpp>

#include <deque>
#include <random>

#include "exec/detail/work_queue.hpp"

TEST_CASE("the executor's work queue keeps first-in first-out order, with pushes to the front", "[workqueue]") {
  // Against std::deque over a random mix of operations, draining now and then as the executor does.
  foresight::sim::detail::WorkQueue<int> q;
  std::deque<int> want;
  std::mt19937 rng(17);
  for (int step = 0; step < 20000; ++step) {
    const unsigned op = rng() % 10;
    if (op < 5) {
      q.push_back(step);
      want.push_back(step);
    } else if (op == 5) {
      q.push_front(step);
      want.push_front(step);
    } else if (!want.empty()) {
      REQUIRE(q.pop_front() == want.front());
      want.pop_front();
    }
    REQUIRE(q.empty() == want.empty());
    if (op == 9) {
      while (!want.empty()) {
        REQUIRE(q.pop_front() == want.front());
        want.pop_front();
      }
      REQUIRE(q.empty());
    }
  }
}
