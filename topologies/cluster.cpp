#include "topologies/cluster.hpp"

#include <fmt/core.h>

#include <utility>

#include "common/error.hpp"
#include "topologies/detail/cluster_impl.hpp"

namespace foresight::topo {
namespace {

[[noreturn]] void out_of_range(std::string_view what, std::size_t index, std::size_t size) {
  throw sim::InternalError(
      fmt::format("topo::Cluster: {} {} out of range (the cluster has {})", what, index, size));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Names of enumerations

std::string_view to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::gpu:
      return "gpu";
    case DeviceKind::cpu:
      return "cpu";
    case DeviceKind::nvswitch:
      return "nvswitch";
    case DeviceKind::pcie_switch:
      return "pcie_switch";
    case DeviceKind::nic:
      return "nic";
    case DeviceKind::ib_leaf:
      return "ib_leaf";
    case DeviceKind::ib_spine:
      return "ib_spine";
  }
  return "unknown";
}

std::optional<DeviceKind> parse_device_kind(std::string_view text) {
  for (int k = 0; k < kDeviceKindCount; ++k) {
    const auto kind = static_cast<DeviceKind>(k);
    if (to_string(kind) == text) return kind;
  }
  return std::nullopt;
}

std::string_view to_string(sim::CpuVendor vendor) {
  switch (vendor) {
    case sim::CpuVendor::amd:
      return "amd";
    case sim::CpuVendor::intel:
      return "intel";
    case sim::CpuVendor::other:
      return "other";
  }
  return "other";
}

std::optional<sim::CpuVendor> parse_cpu_vendor(std::string_view text) {
  for (auto v : {sim::CpuVendor::amd, sim::CpuVendor::intel, sim::CpuVendor::other}) {
    if (to_string(v) == text) return v;
  }
  return std::nullopt;
}

std::optional<sim::LinkClass> parse_link_class(std::string_view text) {
  if (text == "cpu_interconnect") return sim::LinkClass::cpu_interconnect;
  for (int k = 0; k < sim::kLinkClassCount; ++k) {
    const auto cls = static_cast<sim::LinkClass>(k);
    if (sim::to_string(cls) == text) return cls;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Cluster

Cluster::Cluster(std::shared_ptr<const detail::ClusterImpl> impl) : impl_(std::move(impl)) {}
Cluster::~Cluster() = default;
Cluster::Cluster(const Cluster&) = default;
Cluster::Cluster(Cluster&&) noexcept = default;
Cluster& Cluster::operator=(const Cluster&) = default;
Cluster& Cluster::operator=(Cluster&&) noexcept = default;

std::size_t Cluster::gpu_count() const { return impl_->gpu_devices.size(); }
std::size_t Cluster::node_count() const { return impl_->node_facts.size(); }
std::size_t Cluster::link_count() const { return impl_->links.size(); }

const sim::LinkInfo& Cluster::link(sim::LinkId id) const {
  if (id >= impl_->links.size()) out_of_range("link", id, impl_->links.size());
  return impl_->links[id];
}

const sim::GpuFacts& Cluster::gpu(sim::GpuId id) const {
  if (id >= impl_->gpu_facts.size()) out_of_range("GPU", id, impl_->gpu_facts.size());
  return impl_->gpu_facts[id];
}

const sim::NodeFacts& Cluster::node(int index) const {
  if (index < 0 || static_cast<std::size_t>(index) >= impl_->node_facts.size()) {
    out_of_range("node", static_cast<std::size_t>(index), impl_->node_facts.size());
  }
  return impl_->node_facts[static_cast<std::size_t>(index)];
}

int Cluster::primary_rail(sim::GpuId gpu) const {
  if (gpu >= impl_->primary_rails.size()) out_of_range("GPU", gpu, impl_->primary_rails.size());
  return impl_->primary_rails[gpu];
}

void Cluster::route(sim::GpuId src, sim::GpuId dst, int src_rail, int dst_rail, std::uint64_t salt,
                    std::vector<sim::LinkId>& out) const {
  const std::size_t gpus = impl_->gpu_devices.size();
  if (src >= gpus) out_of_range("GPU", src, gpus);
  if (dst >= gpus) out_of_range("GPU", dst, gpus);
  if (src == dst)
    throw sim::InternalError(fmt::format("route: source and destination are both GPU {}", src));
  const auto check_rail = [&](sim::GpuId g, int rail) {
    const auto node = static_cast<std::size_t>(impl_->gpu_facts[g].node);
    const int nics = static_cast<int>(impl_->node_nics[node].size());
    if (rail < -1 || rail >= nics) {
      throw sim::InternalError(
          fmt::format("route: rail {} requested for GPU {} ({}), whose node "
                      "has {} NICs",
                      rail, g, impl_->devices[impl_->gpu_devices[g]].name, nics));
    }
  };
  check_rail(src, src_rail);
  check_rail(dst, dst_rail);
  detail::compute_route(*impl_, src, dst, src_rail, dst_rail, salt, out);
}

std::optional<std::pair<sim::LinkId, sim::LinkId>> Cluster::nvswitch_links(sim::GpuId gpu) const {
  if (gpu >= impl_->nvswitch_links.size()) out_of_range("GPU", gpu, impl_->nvswitch_links.size());
  return impl_->nvswitch_links[gpu];
}

FabricRouting Cluster::fabric_routing() const { return impl_->routing; }

std::uint32_t Cluster::link_pool(sim::LinkId id) const {
  if (id >= impl_->pools.size()) {
    throw sim::InternalError(fmt::format("Cluster::link_pool: link {} of {}", id, impl_->pools.size()));
  }
  return impl_->pools[id];
}

const std::string& Cluster::name() const { return impl_->name; }
std::size_t Cluster::device_count() const { return impl_->devices.size(); }

const DeviceInfo& Cluster::device(DeviceId id) const {
  if (id >= impl_->devices.size()) out_of_range("device", id, impl_->devices.size());
  return impl_->devices[id];
}

std::optional<DeviceId> Cluster::find_device(std::string_view name) const {
  const auto it = impl_->by_name.find(name);
  if (it == impl_->by_name.end()) return std::nullopt;
  return it->second;
}

DeviceId Cluster::gpu_device(sim::GpuId gpu) const {
  if (gpu >= impl_->gpu_devices.size()) out_of_range("GPU", gpu, impl_->gpu_devices.size());
  return impl_->gpu_devices[gpu];
}

std::optional<sim::GpuId> Cluster::gpu_id(DeviceId device) const {
  if (device >= impl_->devices.size()) out_of_range("device", device, impl_->devices.size());
  const std::uint32_t g = impl_->gpu_of_device[device];
  if (g == detail::kNone) return std::nullopt;
  return g;
}

const GpuSpec& Cluster::gpu_model(sim::GpuId gpu) const {
  return *impl_->devices[gpu_device(gpu)].model;
}

bool Cluster::uniform_gpus(int gpus) const {
  const GpuSpec& first = gpu_model(0);
  for (int g = 1; g < gpus; ++g) {
    const GpuSpec& other = gpu_model(static_cast<sim::GpuId>(g));
    if (&other != &first && (other.name != first.name || other.memory != first.memory)) return false;
  }
  return true;
}

std::optional<DeviceId> Cluster::nic(int node, int rail) const {
  if (node < 0 || static_cast<std::size_t>(node) >= impl_->node_nics.size()) return std::nullopt;
  const auto& nics = impl_->node_nics[static_cast<std::size_t>(node)];
  if (rail < 0 || static_cast<std::size_t>(rail) >= nics.size()) return std::nullopt;
  return nics[static_cast<std::size_t>(rail)];
}

std::string Cluster::link_name(sim::LinkId id) const {
  if (id >= impl_->links.size()) out_of_range("link", id, impl_->links.size());
  const LinkEnds e = impl_->ends[id];
  std::string name = impl_->devices[e.from].name + "->" + impl_->devices[e.to].name;
  int parallel = 1;  // this link's place among the links from -> to, by id
  for (const sim::LinkId l : impl_->out.of(e.from)) {
    if (l < id && impl_->ends[l].to == e.to) ++parallel;
  }
  if (parallel > 1) name += fmt::format("#{}", parallel);
  return name;
}

LinkEnds Cluster::link_ends(sim::LinkId id) const {
  if (id >= impl_->links.size()) out_of_range("link", id, impl_->links.size());
  return impl_->ends[id];
}

std::optional<sim::LinkId> Cluster::reverse_link(sim::LinkId id) const {
  if (id >= impl_->links.size()) out_of_range("link", id, impl_->links.size());
  const std::uint32_t r = impl_->reverse[id];
  if (r == detail::kNone) return std::nullopt;
  return r;
}

std::span<const sim::LinkId> Cluster::out_links(DeviceId id) const {
  if (id >= impl_->devices.size()) out_of_range("device", id, impl_->devices.size());
  return impl_->out.of(id);
}

std::span<const sim::LinkId> Cluster::in_links(DeviceId id) const {
  if (id >= impl_->devices.size()) out_of_range("device", id, impl_->devices.size());
  return impl_->in.of(id);
}

// ---------------------------------------------------------------------------------------------
// ClusterBuilder: adding devices and links (build() is in detail/assemble.cpp)

ClusterBuilder::ClusterBuilder(std::string name) : name_(std::move(name)) {}

DeviceId ClusterBuilder::add_device(DeviceInfo info) {
  if (info.name.empty()) {
    throw sim::TopologyError(fmt::format("a {} device has an empty name", to_string(info.kind)));
  }
  if (auto it = by_name_.find(info.name); it != by_name_.end()) {
    throw sim::TopologyError(fmt::format("duplicate device id \"{}\" (device #{} already has it)",
                                         info.name, it->second));
  }
  const bool in_server = info.kind != DeviceKind::ib_leaf && info.kind != DeviceKind::ib_spine;
  if (in_server && info.node < 0) {
    throw sim::TopologyError(fmt::format("{} device \"{}\": expected a node index >= 0, found {}",
                                         to_string(info.kind), info.name, info.node));
  }
  if (!in_server && info.node != -1) {
    throw sim::TopologyError(
        fmt::format("{} \"{}\": InfiniBand switches belong to no node, found node {}",
                    to_string(info.kind), info.name, info.node));
  }
  if (info.kind == DeviceKind::gpu) {
    if (info.local_index < 0) {
      throw sim::TopologyError(fmt::format("gpu \"{}\": expected a local_index >= 0, found {}",
                                           info.name, info.local_index));
    }
    if (info.model == nullptr) {
      throw sim::TopologyError(fmt::format("gpu \"{}\" has no GPU model", info.name));
    }
  }
  if (info.kind == DeviceKind::nic && info.rail < 0) {
    throw sim::TopologyError(
        fmt::format("nic \"{}\": expected a rail >= 0, found {}", info.name, info.rail));
  }
  if (info.port_rate.bytes_per_second() < 0.0) {
    throw sim::TopologyError(fmt::format("nic \"{}\": negative port rate", info.name));
  }
  const auto id = static_cast<DeviceId>(devices_.size());
  by_name_.emplace(info.name, id);
  devices_.push_back(std::move(info));
  return id;
}

namespace {

DeviceInfo make_info(std::string name, DeviceKind kind, int node) {
  DeviceInfo info;
  info.name = std::move(name);
  info.kind = kind;
  info.node = node;
  return info;
}

}  // namespace

DeviceId ClusterBuilder::add_gpu(std::string name, int node, int local_index,
                                 const GpuSpec& model) {
  DeviceInfo info = make_info(std::move(name), DeviceKind::gpu, node);
  info.local_index = local_index;
  info.model = &model;
  return add_device(std::move(info));
}

DeviceId ClusterBuilder::add_cpu(std::string name, int node, sim::CpuVendor vendor) {
  DeviceInfo info = make_info(std::move(name), DeviceKind::cpu, node);
  info.vendor = vendor;
  return add_device(std::move(info));
}

DeviceId ClusterBuilder::add_nvswitch(std::string name, int node, bool nvls) {
  DeviceInfo info = make_info(std::move(name), DeviceKind::nvswitch, node);
  info.nvls = nvls;
  return add_device(std::move(info));
}

DeviceId ClusterBuilder::add_pcie_switch(std::string name, int node) {
  return add_device(make_info(std::move(name), DeviceKind::pcie_switch, node));
}

DeviceId ClusterBuilder::add_nic(std::string name, int node, int rail, sim::Bandwidth port_rate) {
  DeviceInfo info = make_info(std::move(name), DeviceKind::nic, node);
  info.rail = rail;
  info.port_rate = port_rate;
  return add_device(std::move(info));
}

DeviceId ClusterBuilder::add_ib_leaf(std::string name) {
  return add_device(make_info(std::move(name), DeviceKind::ib_leaf, -1));
}

DeviceId ClusterBuilder::add_ib_spine(std::string name) {
  return add_device(make_info(std::move(name), DeviceKind::ib_spine, -1));
}

std::optional<DeviceId> ClusterBuilder::find_device(std::string_view name) const {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

const DeviceInfo& ClusterBuilder::device(DeviceId id) const {
  if (id >= devices_.size()) out_of_range("device", id, devices_.size());
  return devices_[id];
}

sim::LinkId ClusterBuilder::add_link(DeviceId from, DeviceId to, const LinkSpec& spec) {
  for (DeviceId end : {from, to}) {
    if (end >= devices_.size()) {
      throw sim::TopologyError(fmt::format("link endpoint #{} does not exist ({} devices so far)",
                                           end, devices_.size()));
    }
  }
  const auto where = [&] {
    return fmt::format("link {} -> {}", devices_[from].name, devices_[to].name);
  };
  if (from == to) throw sim::TopologyError(fmt::format("{}: a link cannot loop back", where()));
  if (!(spec.bandwidth.bytes_per_second() > 0.0)) {
    throw sim::TopologyError(fmt::format("{}: expected a positive bandwidth, found {} B/s", where(),
                                         spec.bandwidth.bytes_per_second()));
  }
  if (spec.latency < sim::Time::zero()) {
    throw sim::TopologyError(fmt::format("{}: expected a non-negative latency, found {} ps",
                                         where(), spec.latency.ps()));
  }
  if (links_.size() >= detail::kNone - 1) throw sim::TopologyError("too many links");
  const auto id = static_cast<sim::LinkId>(links_.size());
  links_.push_back({from, to, {spec.bandwidth, spec.latency, spec.cls}, std::nullopt});
  return id;
}

std::pair<sim::LinkId, sim::LinkId> ClusterBuilder::add_duplex(DeviceId a, DeviceId b,
                                                               const LinkSpec& spec) {
  const sim::LinkId forward = add_link(a, b, spec);
  const sim::LinkId backward = add_link(b, a, spec);
  links_[forward].reverse = backward;
  links_[backward].reverse = forward;
  return {forward, backward};
}

std::string_view to_string(FabricRouting routing) {
  switch (routing) {
    case FabricRouting::ecmp:
      return "ecmp";
    case FabricRouting::adaptive:
      return "adaptive";
    case FabricRouting::destination:
      return "destination";
  }
  return "?";
}

std::optional<FabricRouting> parse_fabric_routing(std::string_view text) {
  if (text == "ecmp") return FabricRouting::ecmp;
  if (text == "destination") return FabricRouting::destination;
  if (text == "adaptive") return FabricRouting::adaptive;
  return std::nullopt;
}

}  // namespace foresight::topo
