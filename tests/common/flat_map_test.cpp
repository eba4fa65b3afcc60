#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

#include "common/flat_map.hpp"

namespace {

struct IdentityHash {
  std::size_t operator()(std::uint64_t k) const noexcept { return static_cast<std::size_t>(k); }
};
/// Every key in one of four homes: lookups must probe past the others.
struct ClashingHash {
  std::size_t operator()(std::uint64_t k) const noexcept { return static_cast<std::size_t>(k % 4); }
};

template <typename Hash>
void check_against_map() {
  foresight::FlatMap<std::uint64_t, std::string, Hash> flat;
  std::map<std::uint64_t, std::string> want;
  int made = 0;
  // Keys spread over high and low bits, each looked up twice: the first makes it, the second finds it.
  for (std::uint64_t i = 0; i < 3000; ++i) {
    const std::uint64_t key = (i * 0x10001ull) ^ (i << 40);
    for (int round = 0; round < 2; ++round) {
      const std::string& got = flat.get_or_make(key, [&] {
        ++made;
        return std::to_string(key);
      });
      want.emplace(key, std::to_string(key));
      REQUIRE(got == want.at(key));
    }
    REQUIRE(flat.size() == want.size());
  }
  REQUIRE(made == 3000);
  // After every growth, each key still finds its own value.
  for (const auto& [key, value] : want) {
    REQUIRE(flat.get_or_make(key, [] { return std::string("new"); }) == value);
  }
  REQUIRE(flat.size() == 3000);
}

}  // namespace

TEST_CASE("a flat map makes each key's value once and finds it again through growth", "[flatmap]") {
  check_against_map<IdentityHash>();
  check_against_map<ClashingHash>();
}

TEST_CASE("a flat map whose maker throws is left as it was", "[flatmap]") {
  foresight::FlatMap<std::uint64_t, int, IdentityHash> flat;
  REQUIRE(flat.get_or_make(7, [] { return 70; }) == 70);
  REQUIRE_THROWS_AS(flat.get_or_make(8, []() -> int { throw std::runtime_error("no"); }), std::runtime_error);
  REQUIRE(flat.size() == 1);
  REQUIRE(flat.get_or_make(8, [] { return 80; }) == 80);
  REQUIRE(flat.get_or_make(7, [] { return 0; }) == 70);
}
