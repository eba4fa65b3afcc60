#include "exec/profile_db.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace foresight::sim {

void ProfileDb::add(const OpSignature& sig, double seconds) {
  if (!(seconds > 0.0) || !std::isfinite(seconds)) {
    throw ConfigError(fmt::format("profile of {}: duration must be positive, found {} s", sig.key(), seconds));
  }
  auto [entry, added] = by_key_.try_emplace(sig.key());
  if (added) entry->second.signature = sig;
  auto& points = entry->second.points;
  const std::int64_t b = sig.batch();
  const auto it = std::lower_bound(points.begin(), points.end(), b,
                                   [](const auto& p, std::int64_t v) { return p.first < v; });
  if (it != points.end() && it->first == b) {
    it->second = seconds;
  } else {
    points.insert(it, {b, seconds});
  }
}

std::optional<double> ProfileDb::lookup(const OpSignature& sig) const {
  const auto found = by_key_.find(sig.key());
  if (found == by_key_.end() || found->second.points.empty()) return std::nullopt;
  const auto& points = found->second.points;
  const auto b = static_cast<double>(sig.batch());
  if (b <= static_cast<double>(points.front().first)) return points.front().second;
  if (b >= static_cast<double>(points.back().first)) {
    return points.back().second * b / static_cast<double>(points.back().first);
  }
  const auto hi = std::lower_bound(points.begin(), points.end(), sig.batch(),
                                   [](const auto& p, std::int64_t v) { return p.first < v; });
  if (hi->first == sig.batch()) return hi->second;
  const auto lo = hi - 1;
  const double f = (b - static_cast<double>(lo->first)) / static_cast<double>(hi->first - lo->first);
  return lo->second + f * (hi->second - lo->second);
}

std::size_t ProfileDb::size() const {
  std::size_t n = 0;
  for (const auto& [key, m] : by_key_) n += m.points.size();
  return n;
}

std::vector<std::pair<OpSignature, double>> ProfileDb::entries() const {
  std::vector<std::pair<OpSignature, double>> out;
  for (const auto& [key, m] : by_key_) {
    for (const auto& [b, s] : m.points) {
      OpSignature sig = m.signature;
      if (sig.batch_axis < sig.shape.size()) sig.shape[sig.batch_axis] = b;
      out.emplace_back(std::move(sig), s);
    }
  }
  return out;
}

}  // namespace foresight::sim
