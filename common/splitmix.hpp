#pragma once
/// SplitMix64 (Steele, Lea and Flood 2014): a portable mixing function for seeded, reproducible
/// draws. std:: distributions differ between standard libraries, so every random choice in
/// Foresight (MoE routing, ECMP picks, straggler jitter) is made from this by hand.

#include <cstdint>

namespace foresight {

/// One SplitMix64 step from state `x`: the output for the state x + golden gamma.
constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// The top 53 bits of `bits` as a double uniform in [0, 1).
constexpr double unit_interval(std::uint64_t bits) noexcept { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

}  // namespace foresight
