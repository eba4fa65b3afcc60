#include "topologies/topology_json.hpp"

#include <fmt/core.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "common/unit_parser.hpp"
#include "common/json_reader.hpp"

namespace foresight::topo {
namespace {

using nlohmann::json;

using Where = JsonPath;

/// The shared reader with the topology format's rules: indices from 0 to 10^6 and positive
/// bandwidths; errors are sim::TopologyError.
class Loader : public JsonReader {
 public:
  explicit Loader(std::string_view origin) : JsonReader(std::string(origin), sim::ErrorKind::topology) {}

  void check_keys(const json& obj, std::initializer_list<std::string_view> allowed, const Where& w,
                  std::string_view what) const {
    check_object(obj, allowed, w, what);
  }
  int index_at(const json& obj, std::string_view key, const Where& w, std::string_view what) const {
    return static_cast<int>(integer_at(obj, key, w, what, 0, kMaxIndex));
  }
  bool bool_at(const json& obj, std::string_view key, const Where& w) const {
    return JsonReader::bool_at(obj, key, w, "a flag");
  }
  sim::Bandwidth bandwidth_at(const json& obj, std::string_view key, const Where& w,
                              std::string_view what) const {
    const sim::Bandwidth bw = JsonReader::bandwidth_at(obj, key, w, what);
    if (!(bw.bytes_per_second() > 0.0)) {
      fail(w.at(key), fmt::format("expected a positive bandwidth, found \"{}\"",
                                  obj.at(std::string(key)).get<std::string>()));
    }
    return bw;
  }

 private:
  static constexpr long long kMaxIndex = 1'000'000;
};

constexpr std::string_view kDeviceKinds = "gpu, cpu, nvswitch, pcie_switch, nic, ib_leaf, ib_spine";

void add_device(const Loader& loader, ClusterBuilder& b, const json& d, const Where& base) {
  if (!d.is_object())
    loader.fail(base, fmt::format("expected a device object, found {}", shown(d)));
  Where w = base;
  if (const auto it = d.find("id"); it != d.end() && it->is_string()) {
    w.element = it->get<std::string>();
  }
  const std::string id = loader.string_at(d, "id", w, "a device");
  const std::string kind_text = loader.string_at(d, "kind", w, "a device");
  const auto kind = parse_device_kind(kind_text);
  if (!kind) {
    loader.fail(w.at("kind"),
                fmt::format("expected a device kind ({}), found \"{}\"", kDeviceKinds, kind_text));
  }
  if (const auto other = b.find_device(id)) {
    loader.fail(w.at("id"), fmt::format("duplicate device id \"{}\" (already used by /devices/{})",
                                        id, *other));
  }
  DeviceInfo info;
  info.name = id;
  info.kind = *kind;
  const std::string what = fmt::format("a {} device", kind_text);
  switch (*kind) {
    case DeviceKind::gpu: {
      loader.check_keys(d, {"id", "kind", "node", "local_index", "model"}, w, what);
      info.node = loader.index_at(d, "node", w, what);
      info.local_index = loader.index_at(d, "local_index", w, what);
      const std::string model = loader.string_at(d, "model", w, what);
      info.model = try_find_gpu_spec(model);
      if (info.model == nullptr) {
        loader.fail(w.at("model"), fmt::format("expected a GPU model ({}), found \"{}\"",
                                               known_gpu_models(), model));
      }
      break;
    }
    case DeviceKind::cpu: {
      loader.check_keys(d, {"id", "kind", "node", "vendor"}, w, what);
      info.node = loader.index_at(d, "node", w, what);
      const std::string vendor = loader.string_at(d, "vendor", w, what);
      const auto v = parse_cpu_vendor(vendor);
      if (!v)
        loader.fail(w.at("vendor"),
                    fmt::format("expected amd, intel or other, found \"{}\"", vendor));
      info.vendor = *v;
      break;
    }
    case DeviceKind::nvswitch:
      loader.check_keys(d, {"id", "kind", "node", "nvls"}, w, what);
      info.node = loader.index_at(d, "node", w, what);
      info.nvls = d.contains("nvls") && loader.bool_at(d, "nvls", w);
      break;
    case DeviceKind::pcie_switch:
      loader.check_keys(d, {"id", "kind", "node"}, w, what);
      info.node = loader.index_at(d, "node", w, what);
      break;
    case DeviceKind::nic:
      loader.check_keys(d, {"id", "kind", "node", "rail", "port_rate"}, w, what);
      info.node = loader.index_at(d, "node", w, what);
      info.rail = loader.index_at(d, "rail", w, what);
      if (d.contains("port_rate")) info.port_rate = loader.bandwidth_at(d, "port_rate", w, what);
      break;
    case DeviceKind::ib_leaf:
    case DeviceKind::ib_spine:
      loader.check_keys(d, {"id", "kind"}, w, what);
      break;
  }
  try {
    b.add_device(std::move(info));
  } catch (const sim::TopologyError& e) {
    loader.fail(w, e.what());
  }
}

void add_link(const Loader& loader, ClusterBuilder& b, const json& l, const Where& base) {
  if (!l.is_object()) loader.fail(base, fmt::format("expected a link object, found {}", shown(l)));
  Where w = base;
  const auto from_it = l.find("from");
  const auto to_it = l.find("to");
  if (from_it != l.end() && to_it != l.end() && from_it->is_string() && to_it->is_string()) {
    w.element = fmt::format("{} -> {}", from_it->get<std::string>(), to_it->get<std::string>());
  }
  constexpr std::string_view what = "a link";
  loader.check_keys(l, {"from", "to", "bandwidth", "latency", "class", "duplex"}, w, what);
  DeviceId ends[2] = {0, 0};
  int i = 0;
  for (std::string_view key : {"from", "to"}) {
    const std::string id = loader.string_at(l, key, w, what);
    const auto dev = b.find_device(id);
    if (!dev) loader.fail(w.at(key), fmt::format("no device has id \"{}\" (dangling link)", id));
    ends[i++] = *dev;
  }
  LinkSpec spec;
  spec.bandwidth = loader.bandwidth_at(l, "bandwidth", w, what);
  spec.latency = loader.time_at(l, "latency", w, what);
  const std::string cls = loader.string_at(l, "class", w, what);
  const auto parsed = parse_link_class(cls);
  if (!parsed) {
    loader.fail(w.at("class"),
                fmt::format("expected a link class (nvlink, pcie, infiniband, ethernet, "
                            "cpu-interconnect), found \"{}\"",
                            cls));
  }
  spec.cls = *parsed;
  loader.require(l, "duplex", w, what);
  const bool duplex = loader.bool_at(l, "duplex", w);
  try {
    if (duplex) {
      b.add_duplex(ends[0], ends[1], spec);
    } else {
      b.add_link(ends[0], ends[1], spec);
    }
  } catch (const sim::TopologyError& e) {
    loader.fail(w, e.what());
  }
}

// ---------------------------------------------------------------------------------------------
// Export

/// Bandwidth as text that parses back to exactly `bw`.
std::string bandwidth_text(sim::Bandwidth bw) {
  const double bps = bw.bytes_per_second();
  const double gbps = bps / 1e9;
  if (gbps * 1e9 == bps) return fmt::format("{} GB/s", gbps);
  return fmt::format("{} B/s", bps);
}

std::string time_text(sim::Time t) {
  const std::int64_t ps = t.ps();
  if (ps != 0 && ps % 1'000'000 == 0) return fmt::format("{} us", ps / 1'000'000);
  if (ps != 0 && ps % 1'000 == 0) return fmt::format("{} ns", ps / 1'000);
  return fmt::format("{} ps", ps);
}

using Fields = std::vector<std::pair<std::string_view, json>>;

Fields device_fields(const DeviceInfo& d) {
  Fields f{{"id", d.name}, {"kind", std::string(to_string(d.kind))}};
  switch (d.kind) {
    case DeviceKind::gpu:
      f.emplace_back("node", d.node);
      f.emplace_back("local_index", d.local_index);
      f.emplace_back("model", std::string(d.model->name));
      break;
    case DeviceKind::cpu:
      f.emplace_back("node", d.node);
      f.emplace_back("vendor", std::string(to_string(d.vendor)));
      break;
    case DeviceKind::nvswitch:
      f.emplace_back("node", d.node);
      f.emplace_back("nvls", d.nvls);
      break;
    case DeviceKind::pcie_switch:
      f.emplace_back("node", d.node);
      break;
    case DeviceKind::nic:
      f.emplace_back("node", d.node);
      f.emplace_back("rail", d.rail);
      if (d.port_rate.bytes_per_second() > 0.0)
        f.emplace_back("port_rate", bandwidth_text(d.port_rate));
      break;
    case DeviceKind::ib_leaf:
    case DeviceKind::ib_spine:
      break;
  }
  return f;
}

/// Links in export order: each duplex pair once (at its lower id), each lone link.
std::vector<Fields> link_fields(const Cluster& c) {
  std::vector<Fields> out;
  for (sim::LinkId l = 0; l < c.link_count(); ++l) {
    const auto reverse = c.reverse_link(l);
    if (reverse && *reverse < l) continue;
    const auto& info = c.link(l);
    const auto ends = c.link_ends(l);
    out.push_back({{"from", c.device(ends.from).name},
                   {"to", c.device(ends.to).name},
                   {"bandwidth", bandwidth_text(info.capacity)},
                   {"latency", time_text(info.latency)},
                   {"class", std::string(sim::to_string(info.cls))},
                   {"duplex", reverse.has_value()}});
  }
  return out;
}

std::string one_line(const Fields& fields) {
  std::string out = "{";
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) out += ", ";
    out += json(std::string(fields[i].first)).dump();
    out += ": ";
    out += fields[i].second.dump();
  }
  return out + "}";
}

json to_object(const Fields& fields) {
  json obj = json::object();
  for (const auto& [key, value] : fields) obj[std::string(key)] = value;
  return obj;
}

}  // namespace

Cluster load_topology(const json& doc, std::string_view origin, std::string_view default_name) {
  const Loader loader(origin);
  const Where root{"", ""};
  if (!doc.is_object())
    loader.fail(root, fmt::format("expected a topology object, found {}", shown(doc)));
  loader.check_keys(doc, {"name", "description", "routing", "devices", "links"}, root, "a topology");
  std::string name(default_name);
  if (doc.contains("name")) name = loader.string_at(doc, "name", root, "a topology");
  if (doc.contains("description") && !doc.at("description").is_string()) {
    loader.fail(root.at("description"),
                fmt::format("expected a string, found {}", shown(doc.at("description"))));
  }
  const json& devices = loader.require(doc, "devices", root, "a topology");
  const json& links = loader.require(doc, "links", root, "a topology");
  if (!devices.is_array())
    loader.fail(root.at("devices"), fmt::format("expected an array, found {}", shown(devices)));
  if (!links.is_array())
    loader.fail(root.at("links"), fmt::format("expected an array, found {}", shown(links)));

  ClusterBuilder builder(name);
  if (doc.contains("routing")) {
    const std::string text = loader.string_at(doc, "routing", root, "a topology");
    const auto routing = parse_fabric_routing(text);
    if (!routing) {
      loader.fail(root.at("routing"), fmt::format("expected ecmp, destination or adaptive, found \"{}\"", text));
    }
    builder.set_fabric_routing(*routing);
  }
  for (std::size_t i = 0; i < devices.size(); ++i) {
    add_device(loader, builder, devices[i], {fmt::format("/devices/{}", i), ""});
  }
  for (std::size_t i = 0; i < links.size(); ++i) {
    add_link(loader, builder, links[i], {fmt::format("/links/{}", i), ""});
  }
  try {
    return builder.build();
  } catch (const sim::TopologyError& e) {
    throw sim::TopologyError(fmt::format("{}: {}", origin, e.what()));
  }
}

Cluster parse_topology(std::string_view text, std::string_view origin,
                       std::string_view default_name) {
  // The shared reader: syntax errors with their byte, nesting bounded (JsonReader::kMaxDepth).
  const json doc = JsonReader(std::string(origin), sim::ErrorKind::topology).parse(text);
  return load_topology(doc, origin, default_name);
}

Cluster load_topology_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw sim::TopologyError(fmt::format("{}: cannot open the topology file", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw sim::TopologyError(fmt::format("{}: cannot read the topology file", path));
  return parse_topology(text.str(), path, std::filesystem::path(path).stem().string());
}

json topology_to_json(const Cluster& cluster) {
  json doc = json::object();
  doc["name"] = cluster.name();
  doc["routing"] = std::string(to_string(cluster.fabric_routing()));
  json devices = json::array();
  for (DeviceId d = 0; d < cluster.device_count(); ++d) {
    devices.push_back(to_object(device_fields(cluster.device(d))));
  }
  json links = json::array();
  for (const auto& f : link_fields(cluster)) links.push_back(to_object(f));
  doc["devices"] = std::move(devices);
  doc["links"] = std::move(links);
  return doc;
}

std::string topology_to_string(const Cluster& cluster) {
  std::string out = fmt::format("{{\n  \"name\": {},\n  \"routing\": \"{}\",\n  \"devices\": [\n",
                                json(cluster.name()).dump(), to_string(cluster.fabric_routing()));
  for (DeviceId d = 0; d < cluster.device_count(); ++d) {
    out += "    " + one_line(device_fields(cluster.device(d)));
    out += d + 1 < cluster.device_count() ? ",\n" : "\n";
  }
  out += "  ],\n  \"links\": [\n";
  const auto links = link_fields(cluster);
  for (std::size_t i = 0; i < links.size(); ++i) {
    out += "    " + one_line(links[i]);
    out += i + 1 < links.size() ? ",\n" : "\n";
  }
  out += "  ]\n}\n";
  return out;
}

}  // namespace foresight::topo
