#pragma once
/// Network models behind one interface. A model moves flows (bytes along a path of directed
/// links) and reports when each flow's last byte has left its bottleneck. Path latency is not
/// the model's business: callers add it (see CollectiveEngine), so both models agree on it.
///
/// - AnalyticalNetwork: each flow runs at its bottleneck rate, ignoring every other flow.
/// - FlowNetwork: concurrent flows share links max-min fairly (net/flow_network.hpp).

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "sim/event_queue.hpp"
#include "net/fabric.hpp"
#include "net/link_efficiency.hpp"
#include "common/units.hpp"

namespace foresight::sim {

class Simulator;

/// Identifies a flow within one network model run.
using FlowId = std::uint64_t;

/// The event a model schedules for the requester when a flow is done.
struct FlowNotify {
  HandlerId target = 0;
  std::uint32_t kind = 0;
  std::uint64_t data = 0;
};

struct FlowRequest {
  /// Directed links, in order; may be empty (local copy). A view: the links must outlive the
  /// start_flow call, which keeps its own copy.
  std::span<const LinkId> path;
  double bytes = 0.0;        ///< bytes to move, >= 0
  /// Cap on this flow's rate in bytes/s (a protocol or per-channel limit); +inf for none.
  double max_rate = std::numeric_limits<double>::infinity();
  FlowNotify notify;
  /// How many identical flows this one stands for (channels with the same links, moving in lock
  /// step): each moves `bytes` at the rate the model gives this one, and every link counts them
  /// all. >= 1.
  std::uint32_t weight = 1;
};

class NetworkModel {
 public:
  virtual ~NetworkModel() = default;
  virtual std::string_view name() const = 0;
  /// Starts a flow now. A zero-byte flow, or one on an empty path without a rate cap, is done
  /// at once (its notification is still an event, at the current time).
  virtual FlowId start_flow(const FlowRequest& request) = 0;
  /// Flows started and not yet done.
  virtual std::size_t active_flows() const = 0;
  /// Bytes carried so far by link `id` (for utilization reports).
  virtual double link_bytes(LinkId id) const = 0;
};

/// Network model names as written in scenarios and on the command line.
enum class NetworkKind : std::uint8_t { analytical, flow };
std::string_view to_string(NetworkKind k);
/// Parses "analytical" or "flow"; ConfigError naming `where` otherwise.
NetworkKind parse_network_kind(std::string_view text, std::string_view where);

/// Builds the model of `kind` on links of the given capacities (bytes/s, all > 0).
std::unique_ptr<NetworkModel> make_network(NetworkKind kind, Simulator& sim,
                                           std::vector<double> capacities);

/// Builds the model of `kind` on `fabric`'s links, each at line rate x class efficiency; links
/// of one capacity pool (Fabric::link_pool, adaptive routing) share their summed capacity.
std::unique_ptr<NetworkModel> make_network(NetworkKind kind, Simulator& sim, const Fabric& fabric,
                                           const LinkEfficiency& efficiency);

/// The rate of a flow alone on `path` (links indexing `capacity`, bytes/s) with a cap of
/// `max_rate`: the smaller of the cap and the slowest link. The analytical model runs every flow
/// at it; the flow-level model does whenever the flow's links have room for it.
double standalone_rate(std::span<const LinkId> path, double max_rate, const std::vector<double>& capacity);
/// The same on the flow-level model for a flow of `weight` > 1: alone on its links with the
/// identical flows it stands for, each gets the smaller of its cap and the slowest link's
/// capacity / weight.
double standalone_rate(std::span<const LinkId> path, double max_rate, const std::vector<double>& capacity,
                       std::uint32_t weight);
/// How long `bytes` take at `rate` in both models: zero for no bytes or an unlimited rate, else
/// transfer_time.
Time standalone_time(double bytes, double rate);

/// AnalyticalNetwork: latency-free flow time = bytes / min(max_rate, min over path of capacity).
class AnalyticalNetwork final : public NetworkModel {
 public:
  AnalyticalNetwork(Simulator& sim, std::vector<double> capacities);
  std::string_view name() const override { return "analytical"; }
  FlowId start_flow(const FlowRequest& request) override;
  std::size_t active_flows() const override { return 0; }
  double link_bytes(LinkId id) const override { return carried_.at(id); }

 private:
  Simulator& sim_;
  std::vector<double> capacity_;
  std::vector<double> carried_;
  FlowId next_id_ = 0;
};

}  // namespace foresight::sim
