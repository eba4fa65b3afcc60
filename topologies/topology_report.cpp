#include "topologies/topology_report.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace foresight::topo {
namespace {

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using FlowGraph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS, boost::no_property,
    boost::property<
        boost::edge_capacity_t, std::int64_t,
        boost::property<boost::edge_residual_capacity_t, std::int64_t,
                        boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;

/// Adds u -> v with capacity `cap` and its zero-capacity reverse, as push_relabel requires.
void add_arc(FlowGraph& g, std::size_t u, std::size_t v, std::int64_t cap) {
  auto capacity = boost::get(boost::edge_capacity, g);
  auto reverse = boost::get(boost::edge_reverse, g);
  const auto e = boost::add_edge(u, v, g).first;
  const auto r = boost::add_edge(v, u, g).first;
  capacity[e] = cap;
  capacity[r] = 0;
  reverse[e] = r;
  reverse[r] = e;
}

std::string node_range(std::size_t first, std::size_t last) {
  return first == last ? fmt::format("node {}", first) : fmt::format("nodes {}-{}", first, last);
}

double gbps(sim::Bandwidth b) { return b.gigabytes_per_second(); }

}  // namespace

sim::Bandwidth max_flow(const Cluster& cluster, const std::vector<sim::GpuId>& from,
                        const std::vector<sim::GpuId>& to) {
  if (from.empty() || to.empty()) return {};
  const std::size_t n = cluster.device_count();
  const std::size_t source = n;
  const std::size_t sink = n + 1;
  FlowGraph g(n + 2);
  std::int64_t total = 1;
  for (sim::LinkId l = 0; l < cluster.link_count(); ++l) {
    // Line rates in whole bytes per second keep the flow exact.
    const auto cap =
        static_cast<std::int64_t>(std::llround(cluster.link(l).capacity.bytes_per_second()));
    const auto ends = cluster.link_ends(l);
    add_arc(g, ends.from, ends.to, cap);
    total += cap;
  }
  for (sim::GpuId gpu : from) add_arc(g, source, cluster.gpu_device(gpu), total);
  for (sim::GpuId gpu : to) add_arc(g, cluster.gpu_device(gpu), sink, total);
  const std::int64_t flow = boost::push_relabel_max_flow(g, source, sink);
  return sim::Bandwidth::bytes_per_second(static_cast<double>(flow));
}

std::pair<sim::Bandwidth, std::string> bisection_bandwidth(const Cluster& cluster) {
  std::vector<sim::GpuId> first;
  std::vector<sim::GpuId> second;
  std::string cut;
  const std::size_t nodes = cluster.node_count();
  if (cluster.gpu_count() < 2) return {sim::Bandwidth{}, "a single GPU has no bisection"};
  if (nodes >= 2) {
    const std::size_t half = nodes / 2;
    for (sim::GpuId g = 0; g < cluster.gpu_count(); ++g) {
      (static_cast<std::size_t>(cluster.gpu(g).node) < half ? first : second).push_back(g);
    }
    cut = fmt::format("GPUs of {} -> GPUs of {}", node_range(0, half - 1),
                      node_range(half, nodes - 1));
  } else {
    const std::size_t half = cluster.gpu_count() / 2;
    for (sim::GpuId g = 0; g < cluster.gpu_count(); ++g) (g < half ? first : second).push_back(g);
    cut = fmt::format("GPUs 0-{} -> GPUs {}-{} of the single node", half - 1, half,
                      cluster.gpu_count() - 1);
  }
  return {max_flow(cluster, first, second), cut};
}

TopologyReport make_topology_report(const Cluster& cluster) {
  TopologyReport r;
  r.name = cluster.name();
  r.routing = std::string(to_string(cluster.fabric_routing()));
  r.gpus = cluster.gpu_count();
  r.nodes = cluster.node_count();
  std::map<std::string, std::size_t> models;
  for (sim::GpuId g = 0; g < cluster.gpu_count(); ++g)
    ++models[std::string(cluster.gpu_model(g).name)];
  r.gpu_models.assign(models.begin(), models.end());
  for (DeviceId d = 0; d < cluster.device_count(); ++d) {
    ++r.devices_per_kind[static_cast<std::size_t>(cluster.device(d).kind)];
  }
  std::array<LinkClassSummary, sim::kLinkClassCount> classes{};
  for (int k = 0; k < sim::kLinkClassCount; ++k)
    classes[static_cast<std::size_t>(k)].cls = static_cast<sim::LinkClass>(k);
  for (sim::LinkId l = 0; l < cluster.link_count(); ++l) {
    const auto& info = cluster.link(l);
    auto& s = classes[static_cast<std::size_t>(info.cls)];
    ++s.count;
    s.total = s.total + info.capacity;
    s.line_rates.push_back(info.capacity);
  }
  for (auto& s : classes) {
    if (s.count == 0) continue;
    std::sort(s.line_rates.begin(), s.line_rates.end());
    s.line_rates.erase(std::unique(s.line_rates.begin(), s.line_rates.end()), s.line_rates.end());
    r.link_classes.push_back(std::move(s));
  }
  std::tie(r.bisection, r.bisection_cut) = bisection_bandwidth(cluster);
  return r;
}

std::string to_text(const TopologyReport& r) {
  std::string out = fmt::format("cluster    {}\n", r.name);
  std::string models;
  for (const auto& [model, count] : r.gpu_models) {
    if (!models.empty()) models += ", ";
    models += fmt::format("{} x {}", count, model);
  }
  out += fmt::format("GPUs       {} ({})\n", r.gpus, models);
  out += fmt::format("nodes      {}\n", r.nodes);
  out += fmt::format("routing    {} (among equal-cost fabric links)\n", r.routing);
  std::string devices;
  for (int k = 0; k < kDeviceKindCount; ++k) {
    const std::size_t count = r.devices_per_kind[static_cast<std::size_t>(k)];
    if (count == 0) continue;
    if (!devices.empty()) devices += ", ";
    devices += fmt::format("{} {}", count, to_string(static_cast<DeviceKind>(k)));
  }
  out += fmt::format("devices    {}\n", devices);
  out += "links      class             count  line rates (GB/s, each way)   total (GB/s)\n";
  for (const auto& s : r.link_classes) {
    std::string rates;
    for (const auto& rate : s.line_rates) {
      if (!rates.empty()) rates += ", ";
      rates += fmt::format("{:g}", gbps(rate));
    }
    out += fmt::format("           {:<16} {:>6}  {:<28}  {:.6g}\n", sim::to_string(s.cls), s.count,
                       rates, gbps(s.total));
  }
  out += fmt::format("bisection  {:.6g} GB/s per direction ({}; max flow on line rates)\n",
                     gbps(r.bisection), r.bisection_cut);
  return out;
}

nlohmann::json to_json(const TopologyReport& r) {
  nlohmann::json j;
  j["name"] = r.name;
  j["gpus"] = r.gpus;
  j["nodes"] = r.nodes;
  j["routing"] = r.routing;
  j["gpu_models"] = nlohmann::json::object();
  for (const auto& [model, count] : r.gpu_models) j["gpu_models"][model] = count;
  j["devices"] = nlohmann::json::object();
  for (int k = 0; k < kDeviceKindCount; ++k) {
    j["devices"][std::string(to_string(static_cast<DeviceKind>(k)))] =
        r.devices_per_kind[static_cast<std::size_t>(k)];
  }
  j["links"] = nlohmann::json::array();
  for (const auto& s : r.link_classes) {
    nlohmann::json rates = nlohmann::json::array();
    for (const auto& rate : s.line_rates) rates.push_back(gbps(rate));
    j["links"].push_back({{"class", std::string(sim::to_string(s.cls))},
                          {"count", s.count},
                          {"line_rates_GBps", std::move(rates)},
                          {"total_GBps", gbps(s.total)}});
  }
  j["bisection_GBps"] = gbps(r.bisection);
  j["bisection_cut"] = r.bisection_cut;
  return j;
}

}  // namespace foresight::topo
