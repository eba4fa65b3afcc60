#pragma once
/// The one parser for quantities written with units ("25 GB/s", "200 Gb/s", "2 us", "1.5 GiB",
/// "312 TFLOP/s"). Every file and flag that carries a quantity goes through it. Errors are
/// ConfigError naming `where` (a file and JSON pointer, or a flag), what was expected and what
/// was found. Negative, NaN and infinite values are rejected.

#include <string_view>

#include "common/units.hpp"

namespace foresight::sim {

/// "2 us", "1.5ms", "300 ns", "10 s", "1 ps" (also "µs"). A unit is required.
Time parse_time(std::string_view text, std::string_view where);

/// "1.5 GiB", "25 MB", "4096", "1K" (K, M, G, T alone are binary, as in nccl-tests' -b/-e).
/// Decimal prefixes KB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/TiB powers of 1024. A bare
/// number is a byte count. The value must be a whole number of bytes.
Bytes parse_bytes(std::string_view text, std::string_view where);

/// "25 GB/s" (bytes, decimal), "200 Gb/s" or "200 Gbit/s" (bits, decimal), "1.5 TB/s",
/// "10 GiB/s". A unit is required: a bare number is ambiguous between bits and bytes.
Bandwidth parse_bandwidth(std::string_view text, std::string_view where);

/// "312 TFLOP/s", "19.5 TFLOPS", "1 PFLOP/s", "900 GFLOP/s".
FlopRate parse_flop_rate(std::string_view text, std::string_view where);

}  // namespace foresight::sim
