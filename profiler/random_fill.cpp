#include "profiler/random_fill.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.hpp"

namespace foresight::prof {

std::vector<std::uint8_t> finite_random_bytes(std::size_t bytes, int element_bytes, std::uint64_t seed) {
  if (element_bytes != 1 && element_bytes != 2 && element_bytes != 4) {
    throw sim::ConfigError("element width: expected 1, 2 or 4 bytes, found " + std::to_string(element_bytes));
  }
  std::vector<std::uint8_t> out(bytes);
  // SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014).
  std::uint64_t state = seed;
  for (std::size_t at = 0; at < bytes; at += 8) {
    state += 0x9E3779B97F4A7C15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    std::uint8_t word[8];
    for (int b = 0; b < 8; ++b) word[b] = static_cast<std::uint8_t>(z >> (8 * b));
    std::memcpy(out.data() + at, word, std::min<std::size_t>(8, bytes - at));
  }
  const auto width = static_cast<std::size_t>(element_bytes);
  for (std::size_t top = width - 1; top < bytes; top += width) out[top] &= 0xBF;
  return out;
}

}  // namespace foresight::prof
