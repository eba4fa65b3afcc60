#pragma once
/// Input data for micro-benchmarks, independent of CUDA: pseudo-random numbers that are finite in
/// every floating-point format of their width. Zeros would understate a kernel's time (tensor
/// cores draw less power on them, so clocks stay higher) and random bits include NaNs and
/// infinities.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace foresight::prof {

/// `bytes` bytes of elements `element_bytes` wide (1, 2 or 4; little-endian), each random bits
/// with the exponent's top bit cleared: a finite number of magnitude below 2 read as fp32 (width
/// 4), fp16 or bf16 (2), fp8 E4M3 or E5M2 (1). In all five formats the exponent's top bit is the
/// bit below the sign, so one mask (0xBF on the most significant byte) serves. Deterministic in
/// `seed`; bytes after the last whole element are plain random bits. ConfigError for another
/// width.
std::vector<std::uint8_t> finite_random_bytes(std::size_t bytes, int element_bytes, std::uint64_t seed);

}  // namespace foresight::prof
