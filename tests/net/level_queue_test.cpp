#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <utility>

#include "net/level_queue.hpp"

using foresight::sim::LevelQueue;

namespace {

/// The queue's front as a sorted set of (value, id) has it: lowest value, then lowest id.
using Reference = std::set<std::pair<double, std::uint32_t>>;

void require_same_front(const LevelQueue& q, const Reference& ref) {
  REQUIRE(q.size() == ref.size());
  REQUIRE(q.empty() == ref.empty());
  if (ref.empty()) return;
  REQUIRE(q.top() == ref.begin()->second);
  REQUIRE(q.top_value() == ref.begin()->first);
}

}  // namespace

TEST_CASE("the level queue gives the lowest value first, ties to the lower id", "[sim]") {
  LevelQueue q;
  q.clear(8);
  q.set(5, 2.0);
  q.set(3, 2.0);
  q.set(7, 1.0);
  REQUIRE(q.top() == 7);
  q.set(7, 3.0);  // moved up past both
  REQUIRE(q.top() == 3);
  q.erase(3);
  REQUIRE(q.top() == 5);
  REQUIRE_FALSE(q.contains(3));
  q.erase(3);  // absent: nothing happens
  REQUIRE(q.size() == 2);
  q.set(5, 4.0);
  REQUIRE(q.top() == 7);
  REQUIRE(q.top_value() == 3.0);
  q.clear(8);
  REQUIRE(q.empty());
  REQUIRE_FALSE(q.contains(7));
}

TEST_CASE("the level queue matches a sorted set under random sets, moves and erases", "[sim]") {
  std::mt19937_64 rng(17);
  constexpr std::uint32_t kIds = 200;
  LevelQueue q;
  for (int round = 0; round < 5; ++round) {
    q.clear(kIds);
    Reference ref;
    std::vector<double> value(kIds, -1.0);  // -1: absent
    // Few distinct values, so that ties (broken by id) are common.
    std::uniform_int_distribution<int> pick_value(0, 15);
    std::uniform_int_distribution<std::uint32_t> pick_id(0, kIds - 1);
    std::uniform_int_distribution<int> pick_op(0, 9);
    for (int step = 0; step < 20000; ++step) {
      const int op = pick_op(rng);
      const std::uint32_t id = pick_id(rng);
      if (op < 6) {
        const double v = pick_value(rng) * 0.25;
        if (value[id] >= 0.0) ref.erase({value[id], id});
        value[id] = v;
        ref.insert({v, id});
        q.set(id, v);
      } else if (op < 8) {
        if (value[id] >= 0.0) ref.erase({value[id], id});
        value[id] = -1.0;
        q.erase(id);
      } else if (!ref.empty()) {
        // Take the front, as progressive filling does.
        const auto [v, front] = *ref.begin();
        REQUIRE(q.top() == front);
        q.erase(front);
        ref.erase(ref.begin());
        value[front] = -1.0;
      }
      REQUIRE(q.contains(id) == (value[id] >= 0.0));
      require_same_front(q, ref);
    }
    // Draining gives the whole order.
    while (!ref.empty()) {
      REQUIRE(q.top() == ref.begin()->second);
      q.erase(q.top());
      ref.erase(ref.begin());
    }
    REQUIRE(q.empty());
  }
}
