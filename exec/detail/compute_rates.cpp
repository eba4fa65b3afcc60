#include "exec/detail/compute_rates.hpp"

#include <algorithm>
#include <cmath>

namespace foresight::sim::detail {

ComputeRates::End ComputeRates::start(NodeId n, RankId r, Time duration, double slowdown, Time now) {
  Op& op = ops_[n];
  op.generation = next_generation_++;
  op.remaining_ps = static_cast<double>(duration.ps());
  op.slowdown = slowdown;
  any_slowdown_ = any_slowdown_ || slowdown > 0.0;
  op.rate = comm_active_[r] > 0 ? 1.0 / (1.0 + slowdown) : 1.0;
  op.updated = now;
  running_[r].push_back(n);
  return next_end(op);
}

bool ComputeRates::current(NodeId n, std::uint32_t generation) const {
  const auto it = ops_.find(n);
  return it != ops_.end() && it->second.generation == generation;
}

void ComputeRates::finish(NodeId n, RankId r) {
  ops_.erase(n);
  auto& running = running_[r];
  running.erase(std::find(running.begin(), running.end(), n));
}

ComputeRates::End ComputeRates::respeed(NodeId n, Time now, double rate) {
  Op& op = ops_.at(n);
  op.remaining_ps = std::max(0.0, op.remaining_ps - op.rate * static_cast<double>((now - op.updated).ps()));
  op.updated = now;
  op.rate = rate;
  return next_end(op);
}

ComputeRates::End ComputeRates::next_end(Op& op) {
  op.generation = next_generation_++;
  const auto ps = static_cast<std::int64_t>(std::ceil(op.remaining_ps / op.rate - 1e-6));
  return End{Time::from_ps(std::max<std::int64_t>(ps, 0)), op.generation};
}

}  // namespace foresight::sim::detail
