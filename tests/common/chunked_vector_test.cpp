// ChunkedVector: a sequence in chunks of at least 2^15 elements, each a whole number of 2 MiB
// blocks; appending never moves an element.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <numeric>
#include <string>

#include "common/chunked_vector.hpp"

using foresight::sim::ChunkedVector;

TEST_CASE("ChunkedVector: indexing, iteration and growth across chunks", "[chunked_vector]") {
  ChunkedVector<std::uint64_t> v;
  CHECK(v.empty());
  constexpr std::size_t chunk = ChunkedVector<std::uint64_t>::chunk_elements;
  // The smallest power of two from 2^15 whose bytes are whole 2 MiB blocks: 2^18 of 8 bytes.
  STATIC_REQUIRE(chunk == (std::size_t{1} << 18));
  STATIC_REQUIRE(ChunkedVector<std::array<char, 104>>::chunk_elements == (std::size_t{1} << 18));  // a graph node's size
  STATIC_REQUIRE(ChunkedVector<std::array<char, 96>>::chunk_elements == (std::size_t{1} << 16));
  constexpr std::size_t n = 3 * chunk + 7;  // three full chunks and a part
  const std::uint64_t* first = nullptr;
  const std::uint64_t* last_of_first_chunk = nullptr;
  for (std::size_t i = 0; i < n; ++i) {
    v.push_back(i * i);
    if (i == 0) first = &v[0];
    if (i == chunk - 1) last_of_first_chunk = &v[i];
  }
  REQUIRE(v.size() == n);
  // Elements never move as it grows.
  CHECK(&v[0] == first);
  CHECK(&v[chunk - 1] == last_of_first_chunk);
  for (const std::size_t i : {std::size_t{0}, chunk - 1, chunk, 2 * chunk, n - 1}) {
    CHECK(v[i] == i * i);
  }
  CHECK(v.front() == 0);
  CHECK(v.back() == (n - 1) * (n - 1));
  // Iterators: range-for, random access, distance, std algorithms.
  std::size_t i = 0;
  bool in_order = true;
  for (const std::uint64_t x : v) {
    in_order = in_order && x == i * i;
    ++i;
  }
  CHECK(in_order);
  CHECK(i == n);
  CHECK(static_cast<std::size_t>(std::distance(v.begin(), v.end())) == n);
  CHECK(*(v.begin() + 40000) == 40000ULL * 40000ULL);
  CHECK(*(v.begin() + static_cast<std::ptrdiff_t>(chunk + 1)) == (chunk + 1) * (chunk + 1));
  CHECK(std::is_sorted(v.begin(), v.end()));
  CHECK(std::find(v.begin(), v.end(), 65536ULL * 65536ULL) - v.begin() == 65536);
  const ChunkedVector<std::uint64_t>& c = v;
  CHECK(std::accumulate(c.begin(), c.end(), std::uint64_t{0}) ==
        [&] {
          std::uint64_t s = 0;
          for (std::size_t k = 0; k < n; ++k) s += k * k;
          return s;
        }());
}

TEST_CASE("ChunkedVector: copies are deep, moves take the chunks, pop_back and clear destroy", "[chunked_vector]") {
  ChunkedVector<std::string> a;
  for (int i = 0; i < 40000; ++i) a.emplace_back("node " + std::to_string(i));
  ChunkedVector<std::string> b = a;
  b[39999] = "changed";
  CHECK(a[39999] == "node 39999");
  CHECK(b.size() == a.size());
  const std::string* kept = &a[100];
  ChunkedVector<std::string> moved = std::move(a);
  CHECK(&moved[100] == kept);  // the chunks changed hands; nothing was copied
  CHECK(a.empty());            // NOLINT(bugprone-use-after-move): a moved-from vector is empty
  moved.pop_back();
  CHECK(moved.size() == 39999);
  CHECK(moved.back() == "node 39998");
  moved.emplace_back("again");
  CHECK(moved[39999] == "again");
  b = moved;
  CHECK(b[39999] == "again");
  b.clear();
  CHECK(b.empty());
  b.push_back("fresh");
  CHECK(b.size() == 1);
  CHECK(b[0] == "fresh");
}
