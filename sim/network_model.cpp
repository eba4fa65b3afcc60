#include "sim/network_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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
