#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "common/large_vector.hpp"

using foresight::sim::DepList;

namespace {

std::vector<std::uint32_t> ids(std::uint32_t n, std::uint32_t from) {
  std::vector<std::uint32_t> v;
  for (std::uint32_t i = 0; i < n; ++i) v.push_back(from + i * 7);
  return v;
}

}  // namespace

TEST_CASE("a dependency list keeps its ids through growth, copies and moves, inline or on the heap", "[deplist]") {
  // Every length from empty past several heap growths (3 inline, then 4, 8, 16, 32, 64).
  for (std::uint32_t n = 0; n <= 70; ++n) {
    const std::vector<std::uint32_t> want = ids(n, 1000 + n);
    DepList pushed;
    for (const std::uint32_t id : want) pushed.push_back(id);
    REQUIRE(pushed.size() == n);
    REQUIRE(pushed.to_vector() == want);
    const DepList assigned(want);
    REQUIRE(assigned == pushed);
    if (n > 0) REQUIRE(assigned.back() == want.back());

    DepList copy = pushed;
    copy.push_back(1);  // the copy grows on its own
    REQUIRE(pushed.to_vector() == want);
    REQUIRE(copy.size() == n + 1);
    REQUIRE(copy[n] == 1);

    DepList moved = std::move(copy);
    REQUIRE(moved.size() == n + 1);
    REQUIRE(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from list is empty
    copy = moved;           // and usable again
    REQUIRE(copy == moved);

    // Assigning a list of another length over it, either way across the inline limit.
    DepList over = ids(5, 1);
    over = pushed;
    REQUIRE(over.to_vector() == want);
    over = DepList{9, 8};
    REQUIRE(over.to_vector() == std::vector<std::uint32_t>{9, 8});
    for (std::uint32_t& id : moved) id += 1;  // written through the iterators
    REQUIRE(moved[0] == (n == 0 ? 2u : want[0] + 1));
    moved.clear();
    REQUIRE(moved.empty());
    moved.push_back(4);
    REQUIRE(moved.to_vector() == std::vector<std::uint32_t>{4});
  }
  REQUIRE(sizeof(DepList) == 16);
}
