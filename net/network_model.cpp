#include "net/network_model.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "net/flow_network.hpp"
#include "net/link_pools.hpp"
#include "sim/simulator.hpp"

namespace foresight::sim {

std::string_view to_string(NetworkKind k) {
  return k == NetworkKind::analytical ? "analytical" : "flow";
}

NetworkKind parse_network_kind(std::string_view text, std::string_view where) {
  if (text == "analytical") return NetworkKind::analytical;
  if (text == "flow") return NetworkKind::flow;
  throw ConfigError(fmt::format("{}: expected a network model (analytical, flow), found \"{}\"",
                                where, text));
}

std::unique_ptr<NetworkModel> make_network(NetworkKind kind, Simulator& sim,
                                           std::vector<double> capacities) {
  if (kind == NetworkKind::analytical) {
    return std::make_unique<AnalyticalNetwork>(sim, std::move(capacities));
  }
  return std::make_unique<FlowNetwork>(sim, std::move(capacities));
}

namespace {

/// A model over capacity pools: translates each flow's links into their pools.
class PooledNetwork final : public NetworkModel {
 public:
  PooledNetwork(std::unique_ptr<NetworkModel> inner, LinkPools pools)
      : inner_(std::move(inner)), pools_(std::move(pools)) {}
  std::string_view name() const override { return inner_->name(); }
  FlowId start_flow(const FlowRequest& request) override {
    const std::vector<LinkId> path = pools_.translate(request.path);
    FlowRequest r = request;
    r.path = path;
    return inner_->start_flow(r);
  }
  std::size_t active_flows() const override { return inner_->active_flows(); }
  double link_bytes(LinkId id) const override { return inner_->link_bytes(pools_.pool_of.at(id)); }

 private:
  std::unique_ptr<NetworkModel> inner_;
  LinkPools pools_;
};

}  // namespace

std::unique_ptr<NetworkModel> make_network(NetworkKind kind, Simulator& sim, const Fabric& fabric,
                                           const LinkEfficiency& efficiency) {
  LinkPools pools = LinkPools::of(fabric, efficiency);
  if (pools.trivial()) return make_network(kind, sim, std::move(pools.capacity));
  std::vector<double> caps = pools.capacity;
  return std::make_unique<PooledNetwork>(make_network(kind, sim, std::move(caps)), std::move(pools));
}

double standalone_rate(std::span<const LinkId> path, double max_rate, const std::vector<double>& capacity) {
  double rate = max_rate;
  for (const LinkId l : path) {
    if (l >= capacity.size()) {
      throw InternalError(fmt::format("network: path names link {} of {}", l, capacity.size()));
    }
    rate = std::min(rate, capacity[l]);
  }
  return rate;
}

double standalone_rate(std::span<const LinkId> path, double max_rate, const std::vector<double>& capacity,
                       std::uint32_t weight) {
  if (weight <= 1) return standalone_rate(path, max_rate, capacity);
  double rate = max_rate;
  for (const LinkId l : path) {
    if (l >= capacity.size()) {
      throw InternalError(fmt::format("network: path names link {} of {}", l, capacity.size()));
    }
    rate = std::min(rate, capacity[l] / static_cast<double>(weight));
  }
  return rate;
}

Time standalone_time(double bytes, double rate) {
  return (bytes == 0.0 || !std::isfinite(rate)) ? Time::zero()
                                                 : transfer_time(bytes, Bandwidth::bytes_per_second(rate));
}

AnalyticalNetwork::AnalyticalNetwork(Simulator& sim, std::vector<double> capacities)
    : sim_(sim), capacity_(std::move(capacities)), carried_(capacity_.size(), 0.0) {
  for (std::size_t i = 0; i < capacity_.size(); ++i) {
    if (!(capacity_[i] > 0.0) || !std::isfinite(capacity_[i])) {
      throw InternalError(fmt::format("network: link {} has capacity {} B/s; it must be positive",
                                      i, capacity_[i]));
    }
  }
}

FlowId AnalyticalNetwork::start_flow(const FlowRequest& request) {
  if (!(request.bytes >= 0.0) || !(request.max_rate > 0.0)) {
    throw InternalError(fmt::format("network: flow of {} bytes capped at {} B/s", request.bytes,
                                    request.max_rate));
  }
  const double rate = standalone_rate(request.path, request.max_rate, capacity_);
  for (const LinkId l : request.path) carried_[l] += request.bytes * request.weight;
  const Time t = standalone_time(request.bytes, rate);
  sim_.schedule_after(t, request.notify.target, request.notify.kind, request.notify.data);
  return next_id_++;
}

}  // namespace foresight::sim
