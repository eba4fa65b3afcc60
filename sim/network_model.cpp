#include "sim/network_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "sim/error.hpp"
#include "sim/flow_network.hpp"
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
  PooledNetwork(std::unique_ptr<NetworkModel> inner, std::vector<std::uint32_t> pool_of)
      : inner_(std::move(inner)), pool_of_(std::move(pool_of)) {}
  std::string_view name() const override { return inner_->name(); }
  FlowId start_flow(const FlowRequest& request) override {
    FlowRequest r = request;
    r.path.clear();
    for (const LinkId l : request.path) {
      if (l >= pool_of_.size()) throw InternalError(fmt::format("network: path names link {} of {}", l, pool_of_.size()));
      const LinkId p = pool_of_[l];
      if (std::find(r.path.begin(), r.path.end(), p) == r.path.end()) r.path.push_back(p);
    }
    return inner_->start_flow(r);
  }
  std::size_t active_flows() const override { return inner_->active_flows(); }
  double link_bytes(LinkId id) const override { return inner_->link_bytes(pool_of_.at(id)); }

 private:
  std::unique_ptr<NetworkModel> inner_;
  std::vector<std::uint32_t> pool_of_;
};

}  // namespace

std::unique_ptr<NetworkModel> make_network(NetworkKind kind, Simulator& sim, const Fabric& fabric,
                                           const LinkEfficiency& efficiency) {
  const std::vector<double> link_caps = effective_capacities(fabric, efficiency);
  std::vector<std::uint32_t> pool_of(link_caps.size());
  std::map<std::uint32_t, std::uint32_t> dense;  // fabric pool id -> index
  std::vector<double> pool_caps;
  for (std::size_t l = 0; l < link_caps.size(); ++l) {
    const auto [it, added] = dense.emplace(fabric.link_pool(static_cast<LinkId>(l)), static_cast<std::uint32_t>(pool_caps.size()));
    if (added) pool_caps.push_back(0.0);
    pool_of[l] = it->second;
    pool_caps[it->second] += link_caps[l];
  }
  if (pool_caps.size() == link_caps.size()) return make_network(kind, sim, link_caps);
  return std::make_unique<PooledNetwork>(make_network(kind, sim, std::move(pool_caps)), std::move(pool_of));
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
  double rate = request.max_rate;
  for (const LinkId l : request.path) {
    if (l >= capacity_.size()) {
      throw InternalError(fmt::format("network: path names link {} of {}", l, capacity_.size()));
    }
    rate = std::min(rate, capacity_[l]);
    carried_[l] += request.bytes;
  }
  const Time t = (request.bytes == 0.0 || !std::isfinite(rate))
                     ? Time::zero()
                     : transfer_time(request.bytes, Bandwidth::bytes_per_second(rate));
  sim_.schedule_after(t, request.notify.target, request.notify.kind, request.notify.data);
  return next_id_++;
}

}  // namespace foresight::sim
