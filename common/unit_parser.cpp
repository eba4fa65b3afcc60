#include "common/unit_parser.hpp"

#include <fmt/core.h>

#include <array>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "common/error.hpp"

namespace foresight::sim {
namespace {

struct UnitEntry {
  std::string_view name;
  double multiplier;  // to the base unit: ps, bytes, bytes/s or FLOP/s
};

constexpr std::array kTimeUnits{
    UnitEntry{"ps", 1.0},       UnitEntry{"ns", 1e3},   UnitEntry{"us", 1e6},
    UnitEntry{"\xC2\xB5s", 1e6} /* µs, micro sign */,   UnitEntry{"\xCE\xBCs", 1e6} /* μs, mu */,
    UnitEntry{"ms", 1e9},       UnitEntry{"s", 1e12},
};

constexpr std::array kByteUnits{
    UnitEntry{"B", 1.0},
    UnitEntry{"KB", 1e3},
    UnitEntry{"kB", 1e3},
    UnitEntry{"MB", 1e6},
    UnitEntry{"GB", 1e9},
    UnitEntry{"TB", 1e12},
    UnitEntry{"KiB", 1024.0},
    UnitEntry{"MiB", 1048576.0},
    UnitEntry{"GiB", 1073741824.0},
    UnitEntry{"TiB", 1099511627776.0},
    UnitEntry{"K", 1024.0},
    UnitEntry{"M", 1048576.0},
    UnitEntry{"G", 1073741824.0},
    UnitEntry{"T", 1099511627776.0},
};

constexpr std::array kBandwidthUnits{
    UnitEntry{"B/s", 1.0},          UnitEntry{"KB/s", 1e3},        UnitEntry{"kB/s", 1e3},
    UnitEntry{"MB/s", 1e6},         UnitEntry{"GB/s", 1e9},        UnitEntry{"TB/s", 1e12},
    UnitEntry{"KiB/s", 1024.0},     UnitEntry{"MiB/s", 1048576.0}, UnitEntry{"GiB/s", 1073741824.0},
    UnitEntry{"b/s", 1.0 / 8},      UnitEntry{"Kb/s", 1e3 / 8},    UnitEntry{"Mb/s", 1e6 / 8},
    UnitEntry{"Gb/s", 1e9 / 8},     UnitEntry{"Tb/s", 1e12 / 8},   UnitEntry{"Kbit/s", 1e3 / 8},
    UnitEntry{"Mbit/s", 1e6 / 8},   UnitEntry{"Gbit/s", 1e9 / 8},  UnitEntry{"Tbit/s", 1e12 / 8},
};

constexpr std::array kFlopRateUnits{
    UnitEntry{"FLOP/s", 1.0},   UnitEntry{"GFLOP/s", 1e9},  UnitEntry{"TFLOP/s", 1e12},
    UnitEntry{"PFLOP/s", 1e15}, UnitEntry{"FLOPS", 1.0},    UnitEntry{"GFLOPS", 1e9},
    UnitEntry{"TFLOPS", 1e12},  UnitEntry{"PFLOPS", 1e15},
};

template <std::size_t N>
std::string unit_list(const std::array<UnitEntry, N>& units) {
  std::string out;
  for (const auto& u : units) {
    if (!out.empty()) out += ", ";
    out += u.name;
  }
  return out;
}

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

/// Splits "  1.5 GiB " into the value 1.5 and the unit "GiB"; throws on a missing or bad number.
std::pair<double, std::string_view> split_quantity(std::string_view text, std::string_view where,
                                                   std::string_view kind,
                                                   std::string_view example) {
  const std::string_view s = trim(text);
  if (s.empty()) {
    throw ConfigError(
        fmt::format("{}: expected {} such as \"{}\", found an empty string", where, kind, example));
  }
  double value = 0.0;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  // from_chars does not accept a leading '+'; a leading '-' is parsed so it can be named.
  auto [ptr, ec] = std::from_chars(first, last, value, std::chars_format::general);
  if (ec == std::errc::result_out_of_range) {
    throw ConfigError(
        fmt::format("{}: expected {} such as \"{}\", found \"{}\" (number out of range)", where,
                    kind, example, s));
  }
  if (ec != std::errc() || ptr == first) {
    throw ConfigError(fmt::format("{}: expected {} such as \"{}\", found \"{}\" (no number)", where,
                                  kind, example, s));
  }
  if (!std::isfinite(value)) {
    throw ConfigError(fmt::format("{}: expected {} such as \"{}\", found \"{}\" (not finite)",
                                  where, kind, example, s));
  }
  if (value < 0.0 || (value == 0.0 && std::signbit(value))) {
    throw ConfigError(fmt::format("{}: expected a non-negative {}, found \"{}\"", where,
                                  kind.substr(kind.find(' ') + 1), s));
  }
  return {value, trim(std::string_view(ptr, static_cast<std::size_t>(last - ptr)))};
}

template <std::size_t N>
std::optional<double> lookup(const std::array<UnitEntry, N>& units, std::string_view unit) {
  for (const auto& u : units) {
    if (u.name == unit) return u.multiplier;
  }
  return std::nullopt;
}

template <std::size_t N>
double parse_with_units(std::string_view text, std::string_view where, std::string_view kind,
                        std::string_view example, const std::array<UnitEntry, N>& units,
                        bool unit_optional) {
  auto [value, unit] = split_quantity(text, where, kind, example);
  if (unit.empty()) {
    if (unit_optional) return value;
    throw ConfigError(fmt::format("{}: expected {} with a unit ({}), found \"{}\" (no unit)", where,
                                  kind, unit_list(units), trim(text)));
  }
  const auto multiplier = lookup(units, unit);
  if (!multiplier) {
    throw ConfigError(fmt::format("{}: expected {} such as \"{}\", found \"{}\" (unknown unit "
                                  "\"{}\"; known units: {})",
                                  where, kind, example, trim(text), unit, unit_list(units)));
  }
  // A finite number can overflow with its unit: "1e300 GB/s" was an infinite bandwidth, which a
  // topology export then wrote as "inf GB/s" (fuzz_topology's read-back check).
  const double scaled = value * *multiplier;
  if (!std::isfinite(scaled)) {
    throw ConfigError(fmt::format("{}: expected {} such as \"{}\", found \"{}\" (beyond a double's range with its unit)",
                                  where, kind, example, trim(text)));
  }
  return scaled;
}

}  // namespace

Time parse_time(std::string_view text, std::string_view where) {
  const double ps = parse_with_units(text, where, "a duration", "2 us", kTimeUnits, false);
  if (ps >= 9.2e18) {
    throw ConfigError(fmt::format(
        "{}: expected a duration below 106 days, found \"{}\" (beyond sim::Time's range)", where,
        trim(text)));
  }
  return Time::from_ps(std::llround(ps));
}

Bytes parse_bytes(std::string_view text, std::string_view where) {
  const double b = parse_with_units(text, where, "a size", "1.5 GiB", kByteUnits, true);
  if (b >= 9.2e18) {
    throw ConfigError(
        fmt::format("{}: expected a size below 8 EiB, found \"{}\"", where, trim(text)));
  }
  const double rounded = std::round(b);
  if (std::abs(b - rounded) > 1e-6 * std::max(1.0, b)) {
    throw ConfigError(fmt::format("{}: expected a whole number of bytes, found \"{}\" (= {} B)",
                                  where, trim(text), b));
  }
  return Bytes(static_cast<std::int64_t>(rounded));
}

Bandwidth parse_bandwidth(std::string_view text, std::string_view where) {
  return Bandwidth::bytes_per_second(
      parse_with_units(text, where, "a bandwidth", "25 GB/s", kBandwidthUnits, false));
}

FlopRate parse_flop_rate(std::string_view text, std::string_view where) {
  return FlopRate::per_second(
      parse_with_units(text, where, "a compute rate", "312 TFLOP/s", kFlopRateUnits, false));
}

}  // namespace foresight::sim
