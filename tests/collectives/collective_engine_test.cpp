// Collective algorithms on real topologies: the textbook ring, the calibrated closed form,
// contention between collectives, all-to-all through PXN, and bad requests.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "collectives/collective_engine.hpp"
#include "collectives/collective_run.hpp"
#include "common/error.hpp"
#include "sim/simulator.hpp"
#include "tests/test_paths.hpp"
#include "topologies/cluster_builders.hpp"
#include "topologies/topology_json.hpp"

using namespace foresight;
using sim::Algorithm;
using sim::CollectiveOp;

namespace {

/// n GPUs in a ring of direct links, `bw` and `alpha` per link, in one node.
topo::Cluster ideal_ring(int n, sim::Bandwidth bw, sim::Time alpha) {
  topo::ClusterBuilder b("ideal-ring");
  const auto& model = topo::find_gpu_spec("A100-SXM4-40GB");
  std::vector<topo::DeviceId> gpus;
  for (int i = 0; i < n; ++i) gpus.push_back(b.add_gpu(fmt::format("g{}", i), 0, i, model));
  for (int i = 0; i < n; ++i) b.add_duplex(gpus[i], gpus[(i + 1) % n], topo::LinkSpec{bw, alpha, sim::LinkClass::nvlink});
  return b.build();
}

sim::CollectiveConfig textbook() {
  sim::CollectiveConfig c;
  c.timing = sim::CollectiveTiming::link_level;
  c.links.by_class.fill(1.0);  // the links' full line rate
  return c;
}

sim::CollectiveRequest request(CollectiveOp op, int n, double bytes) {
  sim::CollectiveRequest r;
  r.op = op;
  r.bytes = bytes;
  for (int i = 0; i < n; ++i) r.ranks.push_back(static_cast<sim::GpuId>(i));
  return r;
}

/// A calibration with every term active, to exercise the closed form.
sim::CollectiveConfig calibrated() {
  sim::CollectiveConfig c;
  sim::CollectiveCalibration cal;
  cal.launch_us = 20.0;
  cal.latency_scale = 0.3;
  cal.efficiency = {1.2, 0.8, 0.97};
  cal.pipelined = true;
  c.by_arch[80] = cal;
  c.by_arch[90] = cal;
  return c;
}

/// When the last of `requests`, all started at time 0 on one network, ends.
sim::Time last_end_together(const topo::Cluster& cluster, const sim::CollectiveConfig& cfg, sim::NetworkKind kind,
                            const std::vector<sim::CollectiveRequest>& requests) {
  sim::Simulator s;
  const auto net = sim::make_network(kind, s, cluster, cfg.links);
  sim::CollectiveEngine engine(s, *net);
  struct Done : sim::EventHandler {
    std::vector<sim::Time> at;
    void handle(sim::Simulator& sim, const sim::Event&) override { at.push_back(sim.now()); }
  } done;
  const auto id = s.add_handler(done, "done");
  for (std::size_t k = 0; k < requests.size(); ++k) {
    engine.start(sim::plan_collective(cluster, cfg, requests[k]), {id, 0, static_cast<std::uint64_t>(k)});
  }
  s.run();
  REQUIRE(done.at.size() == requests.size());
  return done.at.back();
}

}  // namespace

TEST_CASE("a ring all-reduce on an idealized ring takes 2(n-1) alpha + 2(n-1)/n S/B", "[collectives]") {
  const sim::Bandwidth bw = sim::Bandwidth::gigabytes_per_second(100);
  const sim::Time alpha = sim::Time::from_ps(1'000'000);  // 1 us
  for (const int n : {2, 4, 8, 16}) {
    const auto ring = ideal_ring(n, bw, alpha);
    for (const double s : {1e3, 1e6, 64e6, 1e9}) {
      auto r = request(CollectiveOp::all_reduce, n, s);
      r.algorithm = Algorithm::ring;
      const auto m = sim::measure_collective(ring, textbook(), sim::NetworkKind::flow, r);
      // Each of 2(n-1) steps moves S/n to the neighbour: alpha + (S/n)/B.
      const double expect = 2.0 * (n - 1) * alpha.seconds() + 2.0 * (n - 1) / n * s / bw.bytes_per_second();
      INFO("n=" << n << " S=" << s);
      REQUIRE(m.time.seconds() == Approx(expect).epsilon(0.001));
    }
  }
}

TEST_CASE("ring all-gather and reduce-scatter take (n-1) alpha + (n-1)/n S/B", "[collectives]") {
  const sim::Bandwidth bw = sim::Bandwidth::gigabytes_per_second(50);
  const sim::Time alpha = sim::Time::from_ps(2'000'000);
  const auto ring = topo::load_topology_file(test::data_path("topologies/ring4.json"));  // 100 GB/s, 1 us
  for (const auto op : {CollectiveOp::all_gather, CollectiveOp::reduce_scatter}) {
    const auto m = sim::measure_collective(ring, textbook(), sim::NetworkKind::analytical, request(op, 4, 256e6));
    REQUIRE(m.time.seconds() == Approx(3 * 1e-6 + 0.75 * 256e6 / 100e9).epsilon(0.001));
  }
  const auto ring8 = ideal_ring(8, bw, alpha);
  const auto m = sim::measure_collective(ring8, textbook(), sim::NetworkKind::flow, request(CollectiveOp::all_gather, 8, 8e6));
  REQUIRE(m.time.seconds() == Approx(7 * 2e-6 + 7.0 / 8 * 8e6 / 50e9).epsilon(0.001));
}

TEST_CASE("an uncontended collective takes exactly the calibrated closed form", "[collectives]") {
  // T = launch + (sqrt(T_bw) + sqrt(k alpha))^2 for Simple, launch + k alpha + T_bw otherwise;
  // plan.predicted_us evaluates it; both network models must reproduce it (to 0.01%: steps
  // round to picoseconds).
  const auto cfg = calibrated();
  struct Case {
    const char* cluster;
    int gpus;
    CollectiveOp op;
  };
  for (const Case c : {Case{"dgx-a100", 8, CollectiveOp::all_reduce}, Case{"dgx-h100", 8, CollectiveOp::all_reduce},
                       Case{"dgx-h100", 8, CollectiveOp::all_gather}, Case{"thetagpu", 16, CollectiveOp::all_reduce},
                       Case{"thetagpu", 32, CollectiveOp::reduce_scatter}, Case{"dgx-h100", 16, CollectiveOp::all_reduce},
                       Case{"dgx-a100", 8, CollectiveOp::broadcast}}) {
    const auto cluster = topo::resolve_cluster(c.cluster, c.gpus);
    std::set<std::string> algorithms;
    for (double s = 4096; s <= 4e9; s *= 8) {
      for (const auto net : {sim::NetworkKind::analytical, sim::NetworkKind::flow}) {
        const auto m = sim::measure_collective(cluster, cfg, net, request(c.op, c.gpus, s));
        INFO(c.cluster << " " << c.gpus << " " << sim::to_string(c.op) << " S=" << s << " "
                       << sim::to_string(m.plan.algorithm) << "/" << sim::to_string(m.plan.protocol));
        REQUIRE(m.plan.predicted_us > 0.0);
        if (net == sim::NetworkKind::analytical || m.plan.nodes <= 2) {
          REQUIRE(m.time.microseconds() == Approx(m.plan.predicted_us).epsilon(1e-4));
        } else {
          // Across more leaves, two rings' hops may hash onto one leaf-spine uplink (ECMP
          // collisions): the flow model can only be slower, and by little.
          REQUIRE(m.time.microseconds() >= m.plan.predicted_us * (1 - 1e-4));
          REQUIRE(m.time.microseconds() <= m.plan.predicted_us * 1.02);
        }
        algorithms.insert(std::string(sim::to_string(m.plan.algorithm)));
      }
    }
    REQUIRE(!algorithms.empty());
  }
}

TEST_CASE("concurrent collectives on the same links share them under the flow model", "[collectives]") {
  // Two 1 GiB all-reduces on the same 8 GPUs at once: under the flow model their flows share
  // every NVSwitch port, so the bandwidth part takes twice as long; the analytical model ignores
  // the other collective.
  const auto cluster = topo::resolve_cluster("dgx-a100", 8);
  const auto cfg = calibrated();
  const auto req = request(CollectiveOp::all_reduce, 8, 1 << 30);
  const auto alone = sim::measure_collective(cluster, cfg, sim::NetworkKind::flow, req);
  auto both = [&](sim::NetworkKind kind) { return last_end_together(cluster, cfg, kind, {req, req}); };
  REQUIRE(both(sim::NetworkKind::analytical) == alone.time);
  // Flow: the ring flows of the two collectives share each port; the fixed part (launch,
  // latency, fill) stays. Alone, a ring flow runs at the calibrated Simple rate, 240 GB/s x 0.97
  // (the port allows 300 x 0.8 = 240); together, two flows share a 240 GB/s port.
  const double s_bus = 2.0 * 7 / 8 * (1 << 30);
  const double fixed_s = alone.time.seconds() - s_bus / (240e9 * 0.97);
  REQUIRE(both(sim::NetworkKind::flow).seconds() == Approx(fixed_s + 2 * s_bus / 240e9).epsilon(0.001));
}

TEST_CASE("a ring leaving a node from a GPU off the channel's NIC goes over NVLink (PXN), not the CPUs", "[collectives]") {
  // A data-parallel group of a TP-4 layout on DGX H100s: GPUs k, k+4, k+8, ... (two per node, on
  // rails k and k+4). Each channel enters a node at its rail's GPU and leaves from the other,
  // whose own PCIe switch holds another NIC: the direct way to the channel's NIC crosses both
  // CPU sockets. NCCL sends it through the channel's GPU over NVLink (PXN), and so must the plan:
  // no hop crosses a CPU link, and the four groups of the same nodes share no link, so four at
  // once take as long as one alone on the flow network (issue 20's 2x gap between the network
  // models came from the four rings sharing the sockets' link).
  const auto cluster = topo::resolve_cluster("dgx-h100", 32);
  const auto cfg = calibrated();
  const auto group = [&](int k) {
    auto r = request(CollectiveOp::all_reduce, 0, 64e6);
    for (int g = k; g < 32; g += 4) r.ranks.push_back(sim::GpuId(g));
    r.algorithm = Algorithm::ring;
    r.protocol = sim::Protocol::simple;
    return r;
  };
  const auto plan = sim::plan_collective(cluster, cfg, group(0));
  REQUIRE(plan.nodes == 4);
  REQUIRE(plan.channels == 2);  // the group's two rails
  for (const auto& phase : plan.phases) {
    for (const auto& ring : phase.rings) {
      for (const auto& hop : ring.hops) {
        for (const sim::LinkId l : hop) REQUIRE(cluster.link(l).cls != sim::LinkClass::cpu_interconnect);
      }
    }
  }
  const auto alone = sim::measure_collective(cluster, cfg, sim::NetworkKind::flow, group(0));
  REQUIRE(sim::measure_collective(cluster, cfg, sim::NetworkKind::analytical, group(0)).time == alone.time);
  REQUIRE(last_end_together(cluster, cfg, sim::NetworkKind::flow, {group(0), group(1), group(2), group(3)}) ==
          alone.time);
  // And it takes what a group of two GPUs per node on one PCIe switch takes (GPUs 0 and 1, 8 and
  // 9, ...: rails 0 and 1, each GPU beside its NIC): two rails either way. Through the sockets
  // it took 2.4x as long.
  auto beside = group(0);
  beside.ranks.clear();
  for (int g = 0; g < 32; g += 8) {
    beside.ranks.push_back(sim::GpuId(g));
    beside.ranks.push_back(sim::GpuId(g + 1));
  }
  const auto near = sim::measure_collective(cluster, cfg, sim::NetworkKind::flow, beside);
  REQUIRE(near.plan.channels == 2);
  REQUIRE(alone.time.seconds() == Approx(near.time.seconds()).epsilon(0.01));
}

TEST_CASE("rings across GB200 racks are as many as NCCL's search finds, not one per NIC", "[collectives]") {
  // Two NVL72 racks: 72 NICs each, but NCCL's ring search stops once channels x 48 GB/s reach a
  // GPU's NVLink total (18 x 40.1 GB/s: 16 channels) and never passes MAXCHANNELS / 2 = 32
  // (nccl-model.md sec. 5). Sixteen rings, each crossing between the racks on NICs of its own;
  // their flows fit the GPUs' NVLink ports, so both networks give the same time.
  const auto cluster = topo::resolve_cluster("gb200-nvl72", 144);
  const auto cfg = calibrated();
  auto r = request(CollectiveOp::reduce_scatter, 144, 64e6);
  r.algorithm = Algorithm::ring;
  r.protocol = sim::Protocol::simple;
  const auto plan = sim::plan_collective(cluster, cfg, r);
  REQUIRE(plan.nodes == 2);
  REQUIRE(plan.channels == 16);
  std::set<sim::LinkId> nic_links;
  int crossings = 0;
  for (const auto& phase : plan.phases) {
    REQUIRE(phase.rings.size() == 16);
    for (const auto& ring : phase.rings) {
      REQUIRE(ring.order.size() == 144);
      for (const auto& hop : ring.hops) {
        const auto ib = std::find_if(hop.begin(), hop.end(), [&](sim::LinkId l) {
          return cluster.link(l).cls == sim::LinkClass::infiniband;
        });
        if (ib == hop.end()) continue;
        ++crossings;
        nic_links.insert(*ib);
      }
    }
  }
  REQUIRE(crossings == 32);
  REQUIRE(nic_links.size() == 32);
  const auto flow = sim::measure_collective(cluster, cfg, sim::NetworkKind::flow, r);
  REQUIRE(sim::measure_collective(cluster, cfg, sim::NetworkKind::analytical, r).time == flow.time);
}

TEST_CASE("all-to-all across two DGX nodes reaches about twice a NIC's bandwidth", "[collectives]") {
  // NVIDIA maintainers (nccl-tests#130, #267): all-to-all cannot aggregate NICs; on N nodes busbw
  // is about N/(N-1) x the per-GPU network bandwidth. With PXN, NIC k carries what the node's 8
  // GPUs send to remote GPUs of local index k: 8 x S/16 = S/2, at 25 GB/s x 0.96 = 24 GB/s, so
  // algbw = S / (S/2 / 24) = 48 GB/s and busbw = 48 x 15/16 = 45 GB/s. The same on both network
  // models: alone, an all-to-all's flows share each GPU's links on the analytical one too.
  for (const auto net : {sim::NetworkKind::flow, sim::NetworkKind::analytical}) {
    CAPTURE(sim::to_string(net));
    const auto cluster = topo::resolve_cluster("thetagpu", 16);
    const auto m = sim::measure_collective(cluster, calibrated(), net, request(CollectiveOp::all_to_all, 16, 4e9));
    REQUIRE(m.plan.algorithm == Algorithm::direct);
    REQUIRE(m.busbw_GBps == Approx(45.0).epsilon(0.03));
    // Inside one node each GPU sends 7/8 S through its 240 GB/s NVSwitch port: busbw -> 240.
    const auto node = topo::resolve_cluster("dgx-a100", 8);
    const auto one = sim::measure_collective(node, calibrated(), net, request(CollectiveOp::all_to_all, 8, 8e9));
    REQUIRE(one.busbw_GBps == Approx(240.0).epsilon(0.02));
    // An H100's port: 450 GB/s x 0.80 = 360 GB/s (the analytical model ran each of the seven
    // flows at all of it, 6.3x too fast at 512 MiB).
    const auto h100 = topo::resolve_cluster("dgx-h100", 8);
    const auto big = sim::measure_collective(h100, calibrated(), net, request(CollectiveOp::all_to_all, 8, 8e9));
    REQUIRE(big.busbw_GBps == Approx(360.0).epsilon(0.02));
  }
}

TEST_CASE("all-to-all across N nodes tends to one NIC's bandwidth as N/(N-1) of it", "[collectives]") {
  // nccl_busbw.json's alltoall point (NVIDIA/nccl-tests#130, #267): busbw ~ N/(N-1) x the
  // per-GPU network bandwidth, 2x on 2 nodes, tending to 1x. Per GPU: one HDR NIC, 25 GB/s at
  // the calibrated 0.96. Both network models.
  for (const auto net : {sim::NetworkKind::flow, sim::NetworkKind::analytical}) {
    for (const int nodes : {2, 4, 8, 16}) {
      CAPTURE(sim::to_string(net), nodes);
      const auto cluster = topo::resolve_cluster("selene", 8 * nodes);
      const auto m = sim::measure_collective(cluster, calibrated(), net, request(CollectiveOp::all_to_all, 8 * nodes, 1 << 30));
      REQUIRE(m.busbw_GBps == Approx(24.0 * nodes / (nodes - 1.0)).epsilon(0.07));
    }
  }
}

TEST_CASE("hierarchical all-reduce runs its three phases", "[collectives]") {
  const auto cluster = topo::resolve_cluster("thetagpu", 16);
  auto r = request(CollectiveOp::all_reduce, 16, 1e9);
  r.algorithm = Algorithm::hierarchical;
  const auto m = sim::measure_collective(cluster, calibrated(), sim::NetworkKind::analytical, r);
  REQUIRE(m.plan.phases.size() == 3);
  REQUIRE(m.time.microseconds() == Approx(m.plan.predicted_us).epsilon(1e-4));
  // Textbook check: RS and AG inside a node on 240 GB/s ports (7/8 S each), AR of S/8 across 2
  // nodes per local rank on its own 24 GB/s NIC (2 x 1/2 x S/8).
  const double expect = 2 * 7.0 / 8 * 1e9 / 240e9 + 2 * 0.5 * 1e9 / 8 / 24e9;
  const auto t = sim::measure_collective(cluster, [] {
    auto c = textbook();
    c.links = sim::LinkEfficiency::defaults();
    return c;
  }(), sim::NetworkKind::analytical, r);
  REQUIRE(t.time.seconds() == Approx(expect).epsilon(0.01));
}

TEST_CASE("double binary trees are trees, and each node is a leaf in one of them", "[collectives]") {
  for (int n = 2; n <= 40; ++n) {
    std::vector<int> interior(static_cast<std::size_t>(n), 0);
    for (int t = 0; t < 2; ++t) {
      int roots = 0;
      std::vector<int> children(static_cast<std::size_t>(n), 0);
      for (int r = 0; r < n; ++r) {
        const int p = sim::double_tree_parent(r, n, t);
        if (p < 0) {
          ++roots;
          continue;
        }
        REQUIRE(p < n);
        ++children[static_cast<std::size_t>(p)];
        int hops = 0;  // the path to the root ends: no cycle
        for (int x = r; x >= 0 && hops <= n; x = sim::double_tree_parent(x, n, t)) ++hops;
        REQUIRE(hops <= n);
      }
      REQUIRE(roots == 1);
      for (int r = 0; r < n; ++r) {
        REQUIRE(children[static_cast<std::size_t>(r)] <= 2);
        if (children[static_cast<std::size_t>(r)] > 0) ++interior[static_cast<std::size_t>(r)];
      }
    }
    if (n % 2 == 0) {  // mirrored trees: no node is interior in both
      for (int r = 0; r < n; ++r) REQUIRE(interior[static_cast<std::size_t>(r)] <= 1);
    }
  }
}

TEST_CASE("bad collective requests are clear errors", "[collectives]") {
  using Catch::Matchers::Contains;
  const auto a100 = topo::resolve_cluster("dgx-a100", 8);
  const sim::CollectiveConfig cfg;
  auto r = request(CollectiveOp::all_reduce, 8, 1e6);
  r.algorithm = Algorithm::nvls;
  REQUIRE_THROWS_WITH(sim::plan_collective(a100, cfg, r), Contains("nvls") && Contains("not available"));
  r = request(CollectiveOp::all_reduce, 8, 1e6);
  r.ranks.push_back(3);
  REQUIRE_THROWS_WITH(sim::plan_collective(a100, cfg, r), Contains("GPU 3 appears twice"));
  r = request(CollectiveOp::broadcast, 8, 1e6);
  r.root = 8;
  REQUIRE_THROWS_WITH(sim::plan_collective(a100, cfg, r), Contains("root rank 8"));
  r = request(CollectiveOp::all_reduce, 9, 1e6);
  REQUIRE_THROWS_WITH(sim::plan_collective(a100, cfg, r), Contains("GPU 8 does not exist"));
  r = request(CollectiveOp::all_reduce, 8, -5);
  REQUIRE_THROWS_AS(sim::plan_collective(a100, cfg, r), sim::ConfigError);
  r = request(CollectiveOp::all_to_all, 8, 1e6);
  r.send_matrix.assign(10, 1.0);
  REQUIRE_THROWS_WITH(sim::plan_collective(a100, cfg, r), Contains("expected 8 x 8 = 64"));
  r = request(CollectiveOp::all_reduce, 8, 1e6);
  r.protocol = sim::Protocol::ll128;
  REQUIRE_NOTHROW(sim::plan_collective(a100, cfg, r));
  const auto pcie = topo::resolve_cluster("pcie-8gpu", 8);
  REQUIRE_THROWS_WITH(sim::plan_collective(pcie, cfg, r), Contains("LL128"));
}

TEST_CASE("collective runs are deterministic", "[collectives]") {
  const auto cluster = topo::resolve_cluster("thetagpu", 32);
  const auto a = sim::measure_collective(cluster, calibrated(), sim::NetworkKind::flow, request(CollectiveOp::all_reduce, 32, 3e8));
  const auto b = sim::measure_collective(cluster, calibrated(), sim::NetworkKind::flow, request(CollectiveOp::all_reduce, 32, 3e8));
  REQUIRE(a.fingerprint == b.fingerprint);
  REQUIRE(a.time == b.time);
  REQUIRE(a.events > 1000);
}

namespace {
void require_same_plan(const sim::CollectivePlan& a, const sim::CollectivePlan& b) {
  REQUIRE(a.algorithm == b.algorithm);
  REQUIRE(a.protocol == b.protocol);
  REQUIRE(a.phases.size() == b.phases.size());
  for (std::size_t p = 0; p < a.phases.size(); ++p) {
    const auto& x = a.phases[p];
    const auto& y = b.phases[p];
    REQUIRE(x.start_delay == y.start_delay);
    REQUIRE(x.steps == y.steps);
    REQUIRE(x.step_bytes == y.step_bytes);
    REQUIRE(x.rings.size() == y.rings.size());
    for (std::size_t r = 0; r < x.rings.size(); ++r) {
      REQUIRE(x.rings[r].order == y.rings[r].order);
      REQUIRE(x.rings[r].hops == y.rings[r].hops);
      REQUIRE(x.rings[r].hop_latency == y.rings[r].hop_latency);
      REQUIRE(x.rings[r].weight == y.rings[r].weight);
    }
    REQUIRE(x.flows.size() == y.flows.size());
    for (std::size_t f = 0; f < x.flows.size(); ++f) {
      REQUIRE(x.flows[f].path == y.flows[f].path);
      REQUIRE(x.flows[f].bytes == y.flows[f].bytes);
      REQUIRE(x.flows[f].cap == y.flows[f].cap);
      REQUIRE(x.flows[f].latency == y.flows[f].latency);
    }
  }
}
}  // namespace

TEST_CASE("a communicator's rings and trees are routed once and plan alike at every size", "[collectives]") {
  // 64 H100s on 8 nodes: rings over 8 rails, double binary trees, NVLS trees.
  const auto h100 = topo::resolve_cluster("dgx-h100", 64);
  const sim::CollectiveConfig cfg;
  sim::PlanShapes shapes;
  int planned = 0;
  for (const auto algo : {Algorithm::ring, Algorithm::tree, Algorithm::nvls_tree}) {
    for (const double bytes : {1e5, 3e7, 2e9}) {
      auto r = request(CollectiveOp::all_reduce, 64, bytes);
      r.algorithm = algo;
      const auto fresh = sim::plan_collective(h100, cfg, r);
      const auto kept = sim::plan_collective(h100, cfg, r, &shapes);
      REQUIRE(kept.algorithm == algo);
      require_same_plan(fresh, kept);
      ++planned;
    }
  }
  REQUIRE(planned == 9);
  // The same members over the same channels are made once; other members or channels anew.
  int made = 0;
  const auto make = [&] {
    ++made;
    return std::vector<sim::PlannedRing>(1);
  };
  const std::vector<sim::GpuId> a{0, 8, 16}, b{0, 8, 24};
  shapes.rings(a, 2, make);
  shapes.rings(a, 2, make);
  REQUIRE(made == 1);
  shapes.rings(a, 4, make);
  shapes.rings(b, 2, make);
  REQUIRE(made == 3);
}
