#include "strategies/moe.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.hpp"
#include "common/splitmix.hpp"
#include "strategies/plan.hpp"

namespace foresight::strategy {
namespace {

/// A seeded generator of SplitMix64 draws (common/splitmix.hpp).
class SplitMix {
 public:
  explicit SplitMix(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    const std::uint64_t out = splitmix64(state_);
    state_ += 0x9e3779b97f4a7c15ULL;
    return out;
  }
  /// Uniform in [0, 1).
  double uniform() { return unit_interval(next()); }
  /// Standard normal (Box-Muller).
  double normal() {
    const double u = std::max(uniform(), 1e-300);
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * 3.141592653589793 * uniform());
  }

 private:
  std::uint64_t state_;
};

std::uint64_t mix(std::uint64_t a, std::uint64_t b) { return SplitMix(a * 0x9e3779b97f4a7c15ULL ^ b).next(); }

/// Binomial(n, q): exact by trials for small n, else the normal approximation, clamped.
double binomial(SplitMix& rng, double n, double q) {
  if (n <= 0.0 || q <= 0.0) return 0.0;
  if (q >= 1.0) return n;
  if (n < 64.0) {
    double k = 0.0;
    for (int i = 0; i < static_cast<int>(n); ++i) k += rng.uniform() < q ? 1.0 : 0.0;
    return k;
  }
  const double k = std::round(n * q + std::sqrt(n * q * (1.0 - q)) * rng.normal());
  return std::clamp(k, 0.0, n);
}

/// `total` split over `shares` (summing to 1) by largest remainders: integers summing to total.
std::vector<double> rounded(double total, const std::vector<double>& shares) {
  std::vector<double> out(shares.size());
  std::vector<std::pair<double, std::size_t>> rest;
  double used = 0.0;
  for (std::size_t i = 0; i < shares.size(); ++i) {
    out[i] = std::floor(total * shares[i]);
    used += out[i];
    rest.emplace_back(total * shares[i] - out[i], i);
  }
  std::stable_sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t k = 0; used < total && k < rest.size(); ++k, used += 1.0) out[rest[k].second] += 1.0;
  return out;
}

/// The MoE layers of `model` in order (indices into Model::layers).
std::vector<std::size_t> moe_layers(const Model& model) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    if (model.layers[i].experts > 0) out.push_back(i);
  }
  return out;
}

}  // namespace

std::string_view to_string(RoutingSpec::Kind k) {
  switch (k) {
    case RoutingSpec::Kind::balanced:
      return "balanced";
    case RoutingSpec::Kind::zipf:
      return "zipf";
    case RoutingSpec::Kind::histogram:
      return "histogram";
  }
  return "?";
}

double RoutingTable::expert_tokens(int x) const {
  double sum = 0.0;
  for (const auto& row : count) sum += row[static_cast<std::size_t>(x)];
  return sum;
}

void check_routing(const RoutingSpec& spec, const Model& model) {
  if (spec.kind != RoutingSpec::Kind::histogram) return;
  const auto layers = moe_layers(model);
  if (layers.empty()) return;
  const int experts = model.layers[layers.front()].experts;
  const std::string where = spec.histogram_file.empty() ? "the routing histogram" : spec.histogram_file;
  if (spec.histogram.size() != 1 && spec.histogram.size() != layers.size()) {
    throw sim::ModelError(fmt::format("{}: expected 1 row or one per MoE layer ({}) of {}, found {} rows", where,
                                      layers.size(), model.name, spec.histogram.size()));
  }
  for (std::size_t r = 0; r < spec.histogram.size(); ++r) {
    const auto& row = spec.histogram[r];
    if (row.size() != static_cast<std::size_t>(experts)) {
      throw sim::ModelError(fmt::format("{}: row {} has {} shares, expected one per expert ({})", where, r, row.size(),
                                        experts));
    }
    double sum = 0.0;
    for (const double v : row) {
      if (!(v >= 0.0) || !std::isfinite(v)) {
        throw sim::ModelError(fmt::format("{}: row {} has a share {}, expected a count or fraction >= 0", where, r, v));
      }
      sum += v;
    }
    if (!(sum > 0.0)) throw sim::ModelError(fmt::format("{}: row {} is all zeros", where, r));
  }
}

MoeRouting::MoeRouting(const Model& model, RoutingSpec spec, int ep, double tokens)
    : model_(model), spec_(std::move(spec)), ep_(ep), tokens_(tokens) {
  check_routing(spec_, model);
  for (const std::size_t i : moe_layers(model)) {
    if (model.layers[i].experts % ep != 0) {
      throw sim::ConfigError(fmt::format("plan: ep = {} does not divide the {} experts of {}", ep,
                                         model.layers[i].experts, model.layers[i].name));
    }
  }
}

std::uint32_t MoeRouting::matrix(sim::ExecutionGraph& g, std::size_t layer, int micro, bool to_experts,
                                 std::vector<double> matrix) {
  const auto key = std::make_tuple(layer, micro, to_experts);
  if (const auto it = matrices_.find(key); it != matrices_.end()) return it->second;
  // Equal matrices (balanced routing: all of them) share an index, so that their all-to-alls
  // are one collective to the executor, costed once.
  auto [it, added] = by_content_.try_emplace(matrix, static_cast<std::uint32_t>(g.send_matrices.size()));
  if (added) g.send_matrices.push_back(std::move(matrix));
  matrices_.emplace(key, it->second);
  return it->second;
}

std::optional<MoeRouting> moe_routing(const Model& model, const Plan& plan) {
  if (moe_layers(model).empty()) return std::nullopt;
  // Under sequence parallelism each TP rank routes its own 1/tp of the sequence (Megatron-Core
  // requires it with TP); without it every TP rank routes the whole sequence.
  const int share = plan.tp > 1 && plan.sequence_parallel ? plan.tp : 1;
  return std::optional<MoeRouting>(std::in_place, model, plan.routing, std::max(1, plan.ep),
                                   static_cast<double>(plan.micro_batch) * std::max(1, model.seq_len) / share);
}

int MoeRouting::experts_per_rank(std::size_t layer) const { return model_.layers[layer].experts / ep_; }

bool MoeRouting::ranks_alike() {
  // Random draws differ per micro-batch and rank; deterministic counts are the same for all.
  if (!(spec_.expected || spec_.kind == RoutingSpec::Kind::balanced)) return false;
  for (const std::size_t layer : moe_layers(model_)) {
    const RoutingTable& t = table(layer, 0);
    const int local = experts_per_rank(layer);
    double sent0 = 0.0;
    for (const double c : t.count[0]) sent0 += c;
    for (int r = 1; r < ep_; ++r) {
      double sent = 0.0;
      for (const double c : t.count[static_cast<std::size_t>(r)]) sent += c;
      if (sent != sent0) return false;
      for (int k = 0; k < local; ++k) {
        if (t.expert_tokens(r * local + k) != t.expert_tokens(k)) return false;
      }
    }
  }
  return true;
}

const RoutingTable& MoeRouting::table(std::size_t layer, int micro) {
  const auto key = std::make_pair(layer, micro);
  if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
  const Layer& l = model_.layers[layer];
  const int e = l.experts;
  const auto moe = moe_layers(model_);
  const auto moe_index = static_cast<std::size_t>(std::find(moe.begin(), moe.end(), layer) - moe.begin());
  // The experts' shares of the assignments.
  std::vector<double> p(static_cast<std::size_t>(e), 1.0 / e);
  if (spec_.kind == RoutingSpec::Kind::zipf) {
    // Popularity by rank over a permutation drawn per layer: which experts are hot differs
    // between layers, as measured in Mixtral (Jiang et al. 2024, §5).
    std::vector<int> order(static_cast<std::size_t>(e));
    std::iota(order.begin(), order.end(), 0);
    SplitMix perm(mix(spec_.seed, 0x5eed0000ULL + moe_index));
    for (int i = e - 1; i > 0; --i) std::swap(order[static_cast<std::size_t>(i)], order[perm.next() % static_cast<std::uint64_t>(i + 1)]);
    double sum = 0.0;
    for (int r = 0; r < e; ++r) sum += std::pow(r + 1.0, -spec_.zipf_s);
    for (int r = 0; r < e; ++r) p[static_cast<std::size_t>(order[static_cast<std::size_t>(r)])] = std::pow(r + 1.0, -spec_.zipf_s) / sum;
  } else if (spec_.kind == RoutingSpec::Kind::histogram) {
    const auto& row = spec_.histogram.size() == 1 ? spec_.histogram.front() : spec_.histogram[moe_index];
    const double sum = std::accumulate(row.begin(), row.end(), 0.0);
    for (int x = 0; x < e; ++x) p[static_cast<std::size_t>(x)] = row[static_cast<std::size_t>(x)] / sum;
  }
  RoutingTable t;
  const double assignments = tokens_ * l.top_k;
  for (int r = 0; r < ep_; ++r) {
    if (spec_.expected || spec_.kind == RoutingSpec::Kind::balanced) {
      t.count.push_back(rounded(assignments, p));
      continue;
    }
    // Multinomial by conditional binomials, seeded by (seed, layer, micro-batch, EP rank).
    SplitMix rng(mix(mix(mix(spec_.seed, moe_index), static_cast<std::uint64_t>(micro)), static_cast<std::uint64_t>(r)));
    std::vector<double> row(static_cast<std::size_t>(e), 0.0);
    double left = assignments, mass = 1.0;
    for (int x = 0; x < e; ++x) {
      const double q = x + 1 == e ? 1.0 : p[static_cast<std::size_t>(x)] / std::max(mass, 1e-300);
      row[static_cast<std::size_t>(x)] = binomial(rng, left, std::min(q, 1.0));
      left -= row[static_cast<std::size_t>(x)];
      mass -= p[static_cast<std::size_t>(x)];
    }
    t.count.push_back(std::move(row));
  }
  const double capacity_factor = model_.transformer ? model_.transformer->moe.capacity_factor : 0.0;
  if (capacity_factor > 0.0) {
    // Each expert takes at most cf x (its fair share of the EP group's assignments).
    const double capacity = std::ceil(capacity_factor * assignments * ep_ / e);
    for (int x = 0; x < e; ++x) {
      const double total = t.expert_tokens(x);
      if (total <= capacity) continue;
      double kept = 0.0;
      for (auto& row : t.count) {
        auto& c = row[static_cast<std::size_t>(x)];
        c = std::floor(c * capacity / total);
        kept += c;
      }
      t.dropped += total - kept;
    }
  }
  return cache_.emplace(key, std::move(t)).first->second;
}

}  // namespace foresight::strategy
