#pragma once
/// The summary `foresight topology PRESET|FILE` prints: what a cluster holds and its bisection
/// bandwidth.
///
/// Bisection bandwidth here is the maximum flow, on line rates, from the GPUs of the first
/// floor(N/2) servers to the GPUs of the other servers (a one-server cluster: from its first
/// floor(g/2) GPUs to the rest), through every link of the cluster, in one direction. It is the
/// most data per second that half of the machine can push to the other half, however routed; it
/// ignores protocol efficiency and routing (ECMP may achieve less).

#include <array>
#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/units.hpp"
#include "topologies/cluster.hpp"

namespace foresight::topo {

/// The links of one class.
struct LinkClassSummary {
  sim::LinkClass cls = sim::LinkClass::pcie;
  std::size_t count = 0;                   ///< directed links (a duplex link counts twice)
  std::vector<sim::Bandwidth> line_rates;  ///< the distinct line rates, ascending
  sim::Bandwidth total;                    ///< sum of the line rates of all its links
};

/// Everything the topology command shows.
struct TopologyReport {
  std::string name;
  std::string routing;  ///< the fabric's FabricRouting
  std::size_t gpus = 0;
  std::size_t nodes = 0;
  std::vector<std::pair<std::string, std::size_t>> gpu_models;   ///< (model, GPUs), by model name
  std::array<std::size_t, kDeviceKindCount> devices_per_kind{};  ///< indexed by DeviceKind
  std::vector<LinkClassSummary> link_classes;  ///< classes present, in LinkClass order
  sim::Bandwidth bisection;                    ///< see the file comment; zero with a single GPU
  std::string bisection_cut;                   ///< which GPUs are on each side, in words
};

/// Max flow from `from` GPUs to `to` GPUs over line rates (Boost push-relabel), one direction.
sim::Bandwidth max_flow(const Cluster& cluster, const std::vector<sim::GpuId>& from,
                        const std::vector<sim::GpuId>& to);

/// Bisection bandwidth as the file comment defines it, and the cut in words.
std::pair<sim::Bandwidth, std::string> bisection_bandwidth(const Cluster& cluster);

TopologyReport make_topology_report(const Cluster& cluster);

/// For people: a few aligned lines, rates in GB/s.
std::string to_text(const TopologyReport& report);

/// For programs: {"name", "gpus", "nodes", "gpu_models": {model: count}, "devices": {kind:
/// count}, "links": [{"class", "count", "line_rates_GBps": [...], "total_GBps"}],
/// "bisection_GBps", "bisection_cut"}.
nlohmann::json to_json(const TopologyReport& report);

}  // namespace foresight::topo
