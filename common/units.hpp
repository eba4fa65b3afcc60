#pragma once
/// Strong unit types of the simulator: Time (integer picoseconds), Bytes (integer bytes),
/// Bandwidth (bytes per second), Flops (operation count) and FlopRate (operations per second).
/// No `double` time crosses an interface; `transfer_time` and `compute_time` are the only places
/// that turn a quantity over a rate into Time.

#include <compare>
#include <cstdint>
#include <limits>
#include <string>

namespace foresight::sim {

/// A point in or span of simulated time, an integer count of picoseconds. Range: about +-106 days.
class Time {
 public:
  constexpr Time() noexcept = default;
  static constexpr Time from_ps(std::int64_t ps) noexcept { return Time(ps); }
  /// Rounds to the nearest picosecond; throws InternalError when `s` is NaN or out of range.
  static Time from_seconds(double s);
  static constexpr Time zero() noexcept { return Time(0); }
  static constexpr Time max() noexcept { return Time(std::numeric_limits<std::int64_t>::max()); }

  constexpr std::int64_t ps() const noexcept { return ps_; }
  constexpr double seconds() const noexcept { return static_cast<double>(ps_) * 1e-12; }
  constexpr double microseconds() const noexcept { return static_cast<double>(ps_) * 1e-6; }

  constexpr auto operator<=>(const Time&) const noexcept = default;
  constexpr Time operator+(Time o) const noexcept { return Time(ps_ + o.ps_); }
  constexpr Time operator-(Time o) const noexcept { return Time(ps_ - o.ps_); }
  constexpr Time& operator+=(Time o) noexcept {
    ps_ += o.ps_;
    return *this;
  }
  constexpr Time& operator-=(Time o) noexcept {
    ps_ -= o.ps_;
    return *this;
  }
  constexpr Time operator*(std::int64_t k) const noexcept { return Time(ps_ * k); }
  constexpr Time operator/(std::int64_t k) const noexcept { return Time(ps_ / k); }

 private:
  constexpr explicit Time(std::int64_t ps) noexcept : ps_(ps) {}
  std::int64_t ps_ = 0;
};

/// A size in bytes (non-negative in every well-formed input).
class Bytes {
 public:
  constexpr Bytes() noexcept = default;
  constexpr explicit Bytes(std::int64_t n) noexcept : n_(n) {}
  constexpr std::int64_t count() const noexcept { return n_; }
  constexpr double as_double() const noexcept { return static_cast<double>(n_); }

  constexpr auto operator<=>(const Bytes&) const noexcept = default;
  constexpr Bytes operator+(Bytes o) const noexcept { return Bytes(n_ + o.n_); }
  constexpr Bytes operator-(Bytes o) const noexcept { return Bytes(n_ - o.n_); }
  constexpr Bytes& operator+=(Bytes o) noexcept {
    n_ += o.n_;
    return *this;
  }
  constexpr Bytes operator*(std::int64_t k) const noexcept { return Bytes(n_ * k); }
  constexpr Bytes operator/(std::int64_t k) const noexcept { return Bytes(n_ / k); }

 private:
  std::int64_t n_ = 0;
};

/// A data rate in bytes per second. Link classes, protocols and NICs are all expressed in it.
class Bandwidth {
 public:
  constexpr Bandwidth() noexcept = default;
  static constexpr Bandwidth bytes_per_second(double v) noexcept { return Bandwidth(v); }
  /// Decimal gigabytes per second (1e9 B/s), the unit of nccl-tests and datasheets.
  static constexpr Bandwidth gigabytes_per_second(double v) noexcept { return Bandwidth(v * 1e9); }
  /// Decimal gigabits per second (1e9 b/s), the unit of network line rates (HDR = 200 Gb/s).
  static constexpr Bandwidth gigabits_per_second(double v) noexcept {
    return Bandwidth(v * 1e9 / 8.0);
  }
  constexpr double bytes_per_second() const noexcept { return v_; }
  constexpr double gigabytes_per_second() const noexcept { return v_ * 1e-9; }

  constexpr auto operator<=>(const Bandwidth&) const noexcept = default;
  constexpr Bandwidth operator*(double k) const noexcept { return Bandwidth(v_ * k); }
  constexpr Bandwidth operator+(Bandwidth o) const noexcept { return Bandwidth(v_ + o.v_); }

 private:
  constexpr explicit Bandwidth(double v) noexcept : v_(v) {}
  double v_ = 0.0;
};

/// A count of floating-point operations (a multiply-add counts as two).
class Flops {
 public:
  constexpr Flops() noexcept = default;
  constexpr explicit Flops(double n) noexcept : n_(n) {}
  constexpr double count() const noexcept { return n_; }
  constexpr auto operator<=>(const Flops&) const noexcept = default;
  constexpr Flops operator+(Flops o) const noexcept { return Flops(n_ + o.n_); }

 private:
  double n_ = 0.0;
};

/// A compute throughput in floating-point operations per second.
class FlopRate {
 public:
  constexpr FlopRate() noexcept = default;
  static constexpr FlopRate per_second(double v) noexcept { return FlopRate(v); }
  static constexpr FlopRate tera(double v) noexcept { return FlopRate(v * 1e12); }
  constexpr double per_second() const noexcept { return v_; }
  constexpr auto operator<=>(const FlopRate&) const noexcept = default;
  constexpr FlopRate operator*(double k) const noexcept { return FlopRate(v_ * k); }

 private:
  constexpr explicit FlopRate(double v) noexcept : v_(v) {}
  double v_ = 0.0;
};

/// Time to move `bytes` at `rate`, rounded up to the next picosecond. `rate` must be positive
/// (InternalError otherwise: rates are validated where they are read).
Time transfer_time(double bytes, Bandwidth rate);
inline Time transfer_time(Bytes bytes, Bandwidth rate) {
  return transfer_time(bytes.as_double(), rate);
}
/// Time to execute `work` at `rate`, rounded up to the next picosecond; `rate` must be positive.
Time compute_time(Flops work, FlopRate rate);

/// Human-readable forms used by reports: "12.5 us", "1.5 GiB", "25 GB/s".
std::string to_string(Time t);
std::string to_string(Bytes b);
std::string to_string(Bandwidth b);

namespace literals {
constexpr Time operator""_ps(unsigned long long v) { return Time::from_ps(static_cast<std::int64_t>(v)); }
constexpr Time operator""_ns(unsigned long long v) {
  return Time::from_ps(static_cast<std::int64_t>(v) * 1'000);
}
constexpr Time operator""_us(unsigned long long v) {
  return Time::from_ps(static_cast<std::int64_t>(v) * 1'000'000);
}
constexpr Time operator""_ms(unsigned long long v) {
  return Time::from_ps(static_cast<std::int64_t>(v) * 1'000'000'000);
}
constexpr Time operator""_s(unsigned long long v) {
  return Time::from_ps(static_cast<std::int64_t>(v) * 1'000'000'000'000);
}
constexpr Bytes operator""_B(unsigned long long v) { return Bytes(static_cast<std::int64_t>(v)); }
constexpr Bytes operator""_KiB(unsigned long long v) {
  return Bytes(static_cast<std::int64_t>(v) << 10);
}
constexpr Bytes operator""_MiB(unsigned long long v) {
  return Bytes(static_cast<std::int64_t>(v) << 20);
}
constexpr Bytes operator""_GiB(unsigned long long v) {
  return Bytes(static_cast<std::int64_t>(v) << 30);
}
constexpr Bytes operator""_KB(unsigned long long v) {
  return Bytes(static_cast<std::int64_t>(v) * 1'000);
}
constexpr Bytes operator""_MB(unsigned long long v) {
  return Bytes(static_cast<std::int64_t>(v) * 1'000'000);
}
constexpr Bytes operator""_GB(unsigned long long v) {
  return Bytes(static_cast<std::int64_t>(v) * 1'000'000'000);
}
constexpr Bandwidth operator""_GBps(long double v) {
  return Bandwidth::gigabytes_per_second(static_cast<double>(v));
}
constexpr Bandwidth operator""_GBps(unsigned long long v) {
  return Bandwidth::gigabytes_per_second(static_cast<double>(v));
}
constexpr Bandwidth operator""_Gbps(unsigned long long v) {
  return Bandwidth::gigabits_per_second(static_cast<double>(v));
}
}  // namespace literals

}  // namespace foresight::sim
