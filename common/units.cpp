#include "common/units.hpp"

#include <fmt/core.h>

#include <cmath>

#include "common/error.hpp"

namespace foresight::sim {
namespace {

constexpr double kMaxPs = 9.2e18;  // just below INT64_MAX picoseconds

Time ceil_ps(double ps, const char* what) {
  if (!(ps >= 0.0) || ps >= kMaxPs) {
    throw InternalError(fmt::format("{}: {} ps is not a representable duration", what, ps));
  }
  return Time::from_ps(static_cast<std::int64_t>(std::ceil(ps)));
}

}  // namespace

Time Time::from_seconds(double s) {
  const double ps = s * 1e12;
  if (!std::isfinite(ps) || std::abs(ps) >= kMaxPs) {
    throw InternalError(fmt::format("Time::from_seconds: {} s is outside sim::Time's range", s));
  }
  return Time(std::llround(ps));
}

Time transfer_time(double bytes, Bandwidth rate) {
  if (!(rate.bytes_per_second() > 0.0)) {
    throw InternalError(
        fmt::format("transfer_time: rate must be positive, found {} B/s", rate.bytes_per_second()));
  }
  return ceil_ps(bytes / rate.bytes_per_second() * 1e12, "transfer_time");
}

Time compute_time(Flops work, FlopRate rate) {
  if (!(rate.per_second() > 0.0)) {
    throw InternalError(
        fmt::format("compute_time: rate must be positive, found {} FLOP/s", rate.per_second()));
  }
  return ceil_ps(work.count() / rate.per_second() * 1e12, "compute_time");
}

std::string to_string(Time t) {
  const double ps = static_cast<double>(t.ps());
  const double a = std::abs(ps);
  if (a >= 1e12) return fmt::format("{:.4g} s", ps * 1e-12);
  if (a >= 1e9) return fmt::format("{:.4g} ms", ps * 1e-9);
  if (a >= 1e6) return fmt::format("{:.4g} us", ps * 1e-6);
  if (a >= 1e3) return fmt::format("{:.4g} ns", ps * 1e-3);
  return fmt::format("{} ps", t.ps());
}

std::string to_string(Bytes b) {
  const double v = b.as_double();
  const double a = std::abs(v);
  if (a >= 1099511627776.0) return fmt::format("{:.4g} TiB", v / 1099511627776.0);
  if (a >= 1073741824.0) return fmt::format("{:.4g} GiB", v / 1073741824.0);
  if (a >= 1048576.0) return fmt::format("{:.4g} MiB", v / 1048576.0);
  if (a >= 1024.0) return fmt::format("{:.4g} KiB", v / 1024.0);
  return fmt::format("{} B", b.count());
}

std::string to_string(Bandwidth b) {
  const double v = b.bytes_per_second();
  if (v >= 1e12) return fmt::format("{:.4g} TB/s", v * 1e-12);
  if (v >= 1e9) return fmt::format("{:.4g} GB/s", v * 1e-9);
  if (v >= 1e6) return fmt::format("{:.4g} MB/s", v * 1e-6);
  return fmt::format("{:.4g} B/s", v);
}

}  // namespace foresight::sim
