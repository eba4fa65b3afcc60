#include "topologies/topology_json.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "path_checks.hpp"
#include "common/error.hpp"
#include "tests/test_paths.hpp"
#include "topologies/cluster_builders.hpp"
#include "topologies/topology_report.hpp"

using namespace foresight;
using Catch::Contains;
using topo::DeviceKind;
using topo::NodePreset;

namespace {

/// Both clusters have the same devices and the same links, bit for bit.
void require_same(const topo::Cluster& a, const topo::Cluster& b) {
  REQUIRE(a.name() == b.name());
  REQUIRE(a.device_count() == b.device_count());
  REQUIRE(a.gpu_count() == b.gpu_count());
  REQUIRE(a.node_count() == b.node_count());
  for (topo::DeviceId d = 0; d < a.device_count(); ++d) {
    const auto& x = a.device(d);
    const auto& y = b.device(d);
    REQUIRE(x.name == y.name);
    REQUIRE(x.kind == y.kind);
    REQUIRE(x.node == y.node);
    REQUIRE(x.local_index == y.local_index);
    REQUIRE(x.rail == y.rail);
    REQUIRE(x.model == y.model);
    REQUIRE(x.vendor == y.vendor);
    REQUIRE(x.nvls == y.nvls);
    REQUIRE(x.port_rate == y.port_rate);
  }
  REQUIRE(a.link_count() == b.link_count());
  for (sim::LinkId l = 0; l < a.link_count(); ++l) {
    REQUIRE(a.link_ends(l).from == b.link_ends(l).from);
    REQUIRE(a.link_ends(l).to == b.link_ends(l).to);
    REQUIRE(a.link(l).capacity == b.link(l).capacity);  // exact, not approximate
    REQUIRE(a.link(l).latency == b.link(l).latency);
    REQUIRE(a.link(l).cls == b.link(l).cls);
    REQUIRE(a.link_name(l) == b.link_name(l));
    REQUIRE(a.reverse_link(l) == b.reverse_link(l));
  }
  for (sim::GpuId g = 0; g < a.gpu_count(); ++g) {
    REQUIRE(a.gpu(g).nvlink_lanes == b.gpu(g).nvlink_lanes);
    REQUIRE(a.primary_rail(g) == b.primary_rail(g));
  }
  for (int n = 0; n < static_cast<int>(a.node_count()); ++n) {
    REQUIRE(a.node(n).nic == b.node(n).nic);
    REQUIRE(a.node(n).nvls == b.node(n).nvls);
    REQUIRE(a.node(n).cpu == b.node(n).cpu);
  }
}

}  // namespace

TEST_CASE("exported presets load back to the same cluster", "[topologies]") {
  std::vector<topo::Cluster> clusters{
      topo::build_single_node(NodePreset::dgx_a100), topo::build_single_node(NodePreset::dgx_h100),
      topo::build_single_node(NodePreset::pcie_8gpu), topo::build_thetagpu(),
      topo::build_rail_optimized("ro", 3, NodePreset::dgx_h100)};
  for (const auto& original : clusters) {
    INFO(original.name());
    const auto from_text = topo::parse_topology(topo::topology_to_string(original), "<export>");
    require_same(original, from_text);
    const auto from_value = topo::load_topology(topo::topology_to_json(original), "<export>");
    require_same(original, from_value);
    // Same routes too (routing depends only on the graph).
    std::vector<sim::LinkId> p;
    std::vector<sim::LinkId> q;
    original.route(0, static_cast<sim::GpuId>(original.gpu_count() - 1), -1, -1, 3, p);
    from_text.route(0, static_cast<sim::GpuId>(original.gpu_count() - 1), -1, -1, 3, q);
    REQUIRE(p == q);
  }
  // ... and the same bisection (thetagpu: 12 nodes x 8 NICs x 25 GB/s).
  const auto theta = topo::build_thetagpu();
  const auto back = topo::parse_topology(topo::topology_to_string(theta), "<export>");
  REQUIRE(topo::bisection_bandwidth(back).first.gigabytes_per_second() == Approx(2400));
}

TEST_CASE("the export is readable: one element per line, duplex pairs once", "[topologies]") {
  const auto c = topo::build_single_node(NodePreset::dgx_a100);
  const std::string text = topo::topology_to_string(c);
  REQUIRE_THAT(text, Contains(R"({"id": "n0.gpu0", "kind": "gpu", "node": 0, "local_index": 0, )"
                              R"("model": "A100-SXM4-40GB"})"));
  REQUIRE_THAT(text,
               Contains(R"({"from": "n0.gpu0", "to": "n0.nvswitch", "bandwidth": "300 GB/s", )"
                        R"("latency": "100 ns", "class": "nvlink", "duplex": true})"));
  REQUIRE_THAT(text, Contains(R"("port_rate": "25 GB/s")"));
  const auto doc = nlohmann::json::parse(text);
  REQUIRE(doc.at("devices").size() == c.device_count());
  REQUIRE(doc.at("links").size() == c.link_count() / 2);  // every preset link is duplex
  REQUIRE(doc == topo::topology_to_json(c));
}

TEST_CASE("the example topologies load", "[topologies]") {
  const auto ring = topo::load_topology_file(test::data_path("topologies/ring4.json"));
  REQUIRE(ring.name() == "ring4");
  REQUIRE(ring.gpu_count() == 4);
  REQUIRE(ring.link_count() == 8);
  REQUIRE(ring.gpu(0).nvlink_lanes == 8);  // 2 x 100 GB/s / 25 GB/s
  REQUIRE(ring.link(0).latency == sim::Time::from_ps(1'000'000));

  const auto two = topo::load_topology_file(test::data_path("topologies/two_node.json"));
  REQUIRE(two.name() == "two-node-hgx4");
  REQUIRE(two.node_count() == 2);
  REQUIRE(two.gpu_count() == 8);
  REQUIRE(two.gpu(5).nvlink_lanes == 12);  // 3 peers x 100 GB/s / 25 GB/s
  REQUIRE(two.node(1).nics == 2);
  REQUIRE(two.node(1).nic.gigabytes_per_second() == Approx(25));
  REQUIRE(two.node(0).cpu == sim::CpuVendor::amd);
  // Inside a node: one direct NVLink hop. Across: gpu -> pcie -> nic -> leaf -> nic -> pcie -> gpu.
  REQUIRE(foresight::test::checked_route(two, 0, 3).size() == 1);
  const auto across = foresight::test::checked_route(two, 0, 7);
  REQUIRE(foresight::test::path_devices(two, across) ==
          std::vector<std::string>{"n0.gpu0", "n0.pcie0", "n0.nic0", "leaf0", "n1.nic1", "n1.pcie1",
                                   "n1.gpu3"});
}

TEST_CASE("a document without a name takes the default; descriptions are allowed", "[topologies]") {
  const char* text = R"({"description": "two GPUs",
    "devices": [{"id": "a", "kind": "gpu", "node": 0, "local_index": 0, "model": "h100-sxm5-80gb"},
                {"id": "b", "kind": "gpu", "node": 0, "local_index": 1, "model": "H100-SXM5-80GB"}],
    "links": [{"from": "a", "to": "b", "bandwidth": "200 Gb/s", "latency": "2 us",
               "class": "cpu_interconnect", "duplex": true}]})";
  const auto c = topo::parse_topology(text, "<string>", "fallback");
  REQUIRE(c.name() == "fallback");
  REQUIRE(c.gpu_model(0).name == "H100-SXM5-80GB");
  REQUIRE(c.link(0).capacity.gigabytes_per_second() == Approx(25));
  REQUIRE(c.link(0).cls == sim::LinkClass::cpu_interconnect);
}

TEST_CASE("every bad topology file is a TopologyError naming file and element", "[topologies]") {
  struct Case {
    const char* file;
    std::vector<const char*> expected;  // substrings of the message
  };
  const std::vector<Case> cases{
      {"unknown_key", {"/devices/1/colour", "n0.gpu1", "unknown key"}},
      {"unknown_top_key", {"/topology", "unknown key"}},
      {"dangling_link", {"/links/0/to", "n0.gpu9", "dangling"}},
      {"zero_bandwidth", {"/links/0/bandwidth", "n0.gpu0 -> n0.gpu1", "positive", "0 GB/s"}},
      {"negative_bandwidth", {"/links/0/bandwidth", "-25 GB/s", "non-negative"}},
      {"negative_latency", {"/links/1/latency", "n0.nic0 -> n0.cpu0", "-1 us"}},
      {"bad_unit", {"/links/0/bandwidth", "GBps", "unknown unit"}},
      {"bandwidth_not_string", {"/links/0/bandwidth", "string", "number 100"}},
      {"disconnected_gpu", {"n0.gpu2", "disconnected"}},
      {"one_way_gpu", {"n0.gpu1", "cannot reach"}},
      {"unknown_gpu_model", {"/devices/0/model", "B300-SXM", "A100-SXM4-40GB"}},
      {"duplicate_id", {"/devices/1/id", "n0.gpu0", "duplicate", "/devices/0"}},
      {"missing_field", {"/links/0", "latency", "missing"}},
      {"missing_devices", {"devices", "missing"}},
      {"wrong_type", {"/devices/1/node", "integer", "string \"0\""}},
      {"negative_index", {"/devices/1/local_index", "-1"}},
      {"unknown_kind", {"/devices/2/kind", "dpu", "pcie_switch"}},
      {"unknown_class", {"/links/0/class", "nvlink5", "infiniband"}},
      {"unknown_vendor", {"/devices/2/vendor", "arm", "intel"}},
      {"duplicate_local_index", {"n0.gpu0", "n0.gpu1", "local_index 0"}},
      {"duplicate_rail", {"n0.nic0", "n0.nic1", "rail 0"}},
      {"leaf_with_node", {"/devices/4/node", "leaf0", "unknown key"}},
      {"not_an_object", {"expected a topology object", "array"}},
      {"self_loop", {"/links/1", "n0.nic0", "loop"}},
      {"malformed", {"malformed JSON at byte", "parse error"}},
  };
  for (const auto& c : cases) {
    const std::string path = test::data_path(std::string("bad/topologies/") + c.file + ".json");
    INFO(path);
    try {
      (void)topo::load_topology_file(path);
      FAIL("no error for " << c.file);
    } catch (const sim::TopologyError& e) {
      const std::string what = e.what();
      INFO(what);
      REQUIRE_THAT(what, Contains(std::string(c.file) + ".json"));
      for (const char* s : c.expected) REQUIRE_THAT(what, Contains(s));
    }
  }
  REQUIRE_THROWS_WITH(topo::load_topology_file(test::data_path("bad/topologies/absent.json")),
                      Contains("absent.json") && Contains("cannot open"));
}
