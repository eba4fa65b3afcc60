// Folded graphs (one simulated rank standing for identical ones) and collectives in closed form give
// the same times as the full runs they stand for.
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "exec/executor.hpp"
#include "tests/collectives/fixture.hpp"
#include "tests/exec/graph_fixture.hpp"
#include "topologies/cluster_builders.hpp"

using namespace foresight;
using namespace foresight::sim::literals;
using sim::Node;
using sim::OpKind;

namespace {

const topo::Cluster& two_nodes() {
  static const topo::Cluster c = topo::resolve_cluster("dgx-a100", 16);
  return c;
}

using test::op;

/// Data-parallel groups {j, j + 4, j + 8, j + 12} of a 16-GPU job: every rank computes for
/// `work`, then all-reduces `bytes` over its group, twice. Full: 16 ranks. Folded: rank 0 alone,
/// its communicator standing for the four groups.
sim::ExecutionGraph dp_job(bool folded, double bytes, sim::Time work) {
  sim::ExecutionGraph g;
  const int ranks = folded ? 1 : 16;
  for (int r = 0; r < ranks; ++r) g.add_rank(static_cast<sim::GpuId>(r), static_cast<std::uint32_t>(r));
  std::vector<std::vector<sim::GpuId>> groups(4);
  for (int j = 0; j < 4; ++j) {
    for (int d = 0; d < 4; ++d) groups[static_cast<std::size_t>(j)].push_back(static_cast<sim::GpuId>(d * 4 + j));
  }
  std::vector<std::uint32_t> comm_of(16);
  if (folded) {
    comm_of[0] = g.add_communicator({0}, groups);
  } else {
    for (const auto& group : groups) {
      const auto c = g.add_communicator(std::vector<sim::RankId>(group.begin(), group.end()));
      for (const sim::GpuId gpu : group) comm_of[gpu] = c;
    }
  }
  for (int r = 0; r < ranks; ++r) {
    sim::NodeId last = 0;
    for (int step = 0; step < 2; ++step) {
      Node c = op(OpKind::compute, static_cast<sim::RankId>(r), 1, step > 0 ? std::vector<sim::NodeId>{last} : std::vector<sim::NodeId>{});
      c.duration = work;
      const auto ci = g.add(c);
      Node ar = op(OpKind::collective, static_cast<sim::RankId>(r), 2, {ci});
      ar.communicator = comm_of[static_cast<std::size_t>(r)];
      ar.bytes = bytes;
      last = g.add(ar);
    }
  }
  return g;
}

sim::Time last_end(const sim::ExecutionResult& r) { return r.makespan; }

/// Eight pairs (g, g + 8) send `bytes` across two nodes at once. Full: 16 ranks. Folded: one
/// pair, the other seven as its mirrors.
sim::ExecutionGraph cross_node_p2p(bool folded, double bytes) {
  sim::ExecutionGraph g;
  const int pairs = folded ? 1 : 8;
  for (int p = 0; p < pairs; ++p) g.add_rank(static_cast<sim::GpuId>(p), static_cast<std::uint32_t>(2 * p));
  for (int p = 0; p < pairs; ++p) g.add_rank(static_cast<sim::GpuId>(p + 8), static_cast<std::uint32_t>(2 * p + 1));
  if (folded) {
    g.rank_mirrors.resize(2);
    for (sim::GpuId k = 1; k < 8; ++k) {
      g.rank_mirrors[0].push_back(k);
      g.rank_mirrors[1].push_back(k + 8);
    }
  }
  for (int p = 0; p < pairs; ++p) {
    Node s = op(OpKind::send, static_cast<sim::RankId>(p), 3);
    s.peer = static_cast<sim::RankId>(p + pairs);
    s.bytes = bytes;
    g.add(s);
    Node v = op(OpKind::recv, static_cast<sim::RankId>(p + pairs), 4);
    v.peer = static_cast<sim::RankId>(p);
    v.bytes = bytes;
    g.add(v);
  }
  return g;
}

}  // namespace

TEST_CASE("a folded collective takes as long as the groups it stands for", "[collectives]") {
  for (const auto network : {sim::NetworkKind::flow, sim::NetworkKind::analytical}) {
    for (const double bytes : {64e3, 256e6}) {
      CAPTURE(sim::to_string(network), bytes);
      const auto full = sim::execute(dp_job(false, bytes, 100_us), two_nodes(), test::executor_config(), network);
      const auto folded = sim::execute(dp_job(true, bytes, 100_us), two_nodes(), test::executor_config(), network);
      // Same answer: bit for bit, as every group starts and ends together in the full run.
      REQUIRE(last_end(folded) == last_end(full));
      // Rank 0's collectives end when they did in the full run (nodes 1 and 3 of each graph).
      REQUIRE(folded.end[1] == full.end[1]);
      REQUIRE(folded.end[3] == full.end[3]);
      REQUIRE(folded.ranks.size() == 1);
    }
  }
}

TEST_CASE("a folded transfer's mirrors contend as the full run's transfers do", "[collectives]") {
  const double bytes = 64e6;
  // PCIe servers: 4 NICs for 8 GPUs, so the eight pairs share NICs.
  const topo::Cluster pcie = topo::resolve_cluster("pcie-8gpu", 16);
  const auto full = sim::execute(cross_node_p2p(false, bytes), pcie, test::executor_config(), sim::NetworkKind::flow);
  const auto folded = sim::execute(cross_node_p2p(true, bytes), pcie, test::executor_config(), sim::NetworkKind::flow);
  REQUIRE(folded.makespan == full.makespan);
  // And the mirrors matter: one pair alone has a NIC to itself and is faster.
  sim::ExecutionGraph alone = cross_node_p2p(true, bytes);
  alone.rank_mirrors.clear();
  const auto single = sim::execute(alone, pcie, test::executor_config(), sim::NetworkKind::flow);
  REQUIRE(single.makespan < folded.makespan);
}

namespace {

/// One all-reduce of `bytes` by rank 0 (GPU 0), its communicator standing for `groups`.
sim::ExecutionGraph one_all_reduce(const std::vector<std::vector<sim::GpuId>>& groups, double bytes) {
  sim::ExecutionGraph g;
  g.add_rank(0, 0);
  Node ar = op(OpKind::collective, 0, 2);
  ar.communicator = g.add_communicator({0}, groups);
  ar.bytes = bytes;
  g.add(ar);
  return g;
}

/// The same all-reduce run by `group`'s own ranks, unfolded.
sim::Time alone(const std::vector<sim::GpuId>& group, double bytes, sim::NetworkKind network) {
  sim::ExecutionGraph g;
  for (std::size_t r = 0; r < group.size(); ++r) g.add_rank(group[r], static_cast<std::uint32_t>(r));
  std::vector<sim::RankId> ranks;
  for (std::size_t r = 0; r < group.size(); ++r) ranks.push_back(static_cast<sim::RankId>(r));
  const auto c = g.add_communicator(ranks);
  for (const sim::RankId r : ranks) {
    Node ar = op(OpKind::collective, r, 2);
    ar.communicator = c;
    ar.bytes = bytes;
    g.add(ar);
  }
  return sim::execute(g, two_nodes(), test::executor_config(), network).makespan;
}

}  // namespace

TEST_CASE("a folded collective whose groups end apart is reported as not exact", "[collectives][fold]") {
  const double bytes = 64e6;
  sim::ExecutorOptions flow_by_flow;  // every job flow by flow: the ends come from each group's last flow
  flow_by_flow.closed_form = false;
  for (const auto network : {sim::NetworkKind::flow, sim::NetworkKind::analytical}) {
   for (const bool closed : {true, false}) {
    CAPTURE(sim::to_string(network), closed);
    const sim::ExecutorOptions options = closed ? sim::ExecutorOptions{} : flow_by_flow;
    // Two pairs over NVLink inside node 0: they end together, so the folded run is exact.
    const auto even =
        sim::execute(one_all_reduce({{0, 1}, {2, 3}}, bytes), two_nodes(), test::executor_config(), network, options);
    REQUIRE(even.folded_uneven == 0);
    REQUIRE(even.folded_spread == sim::Time::zero());
    // A pair inside node 0 and one across the nodes (InfiniBand): the folded collective ends
    // with the slower group, and the faster one's replica would have gone on that much earlier.
    const std::vector<sim::GpuId> inside{0, 1};
    const std::vector<sim::GpuId> across{2, 10};
    const auto uneven =
        sim::execute(one_all_reduce({inside, across}, bytes), two_nodes(), test::executor_config(), network, options);
    const sim::Time fast = alone(inside, bytes, network);
    const sim::Time slow = alone(across, bytes, network);
    REQUIRE(fast < slow);
    REQUIRE(uneven.makespan == slow);
    REQUIRE(uneven.folded_uneven == 1);
    REQUIRE(uneven.folded_spread == slow - fast);
   }
  }
}

TEST_CASE("collectives in closed form reproduce the flow-by-flow run with fewer events", "[collectives]") {
  sim::ExecutorOptions off;
  off.closed_form = false;
  for (const auto network : {sim::NetworkKind::analytical, sim::NetworkKind::flow}) {
    for (const bool folded : {false, true}) {
      CAPTURE(sim::to_string(network), folded);
      const auto g = dp_job(folded, 8e6, 50_us);
      const auto plain = sim::execute(g, two_nodes(), test::executor_config(), network, off);
      const auto fast = sim::execute(g, two_nodes(), test::executor_config(), network);
      REQUIRE(fast.makespan == plain.makespan);
      for (std::size_t n = 0; n < g.nodes.size(); ++n) {
        CAPTURE(n);
        REQUIRE(fast.start[n] == plain.start[n]);
        REQUIRE(fast.end[n] == plain.end[n]);
      }
      if (network == sim::NetworkKind::analytical) {
        // Jobs never meet there: closed form with links sampled too.
        REQUIRE(plain.jobs_closed_form == fast.jobs_closed_form);
        REQUIRE(plain.events == fast.events);
        continue;
      }
      REQUIRE(plain.jobs_closed_form == 0);
      // Each all-reduce (with the four groups it stands for) starts alone: none of its flows is
      // simulated. Unfolded on the flow network too: the four groups' rings leave each node
      // through their own NICs (GPU j + 4 relays to its group's entry GPU over NVLink, as NCCL's
      // PXN does, instead of crossing the CPU sockets to GPU j's NIC), so they share no link.
      // (A shared link's rebuild is tests/collectives/comm_jobs_test.cpp's.)
      REQUIRE(fast.jobs_flow_by_flow == 0);
      REQUIRE(fast.jobs_rebuilt == 0);
      REQUIRE(fast.events * 10 < plain.events);
    }
  }
}

TEST_CASE("inconsistent folding is a clear graph error", "[collectives]") {
  SECTION("groups of different sizes") {
    auto g = dp_job(true, 1e6, 1_us);
    g.communicators[0].groups[2].pop_back();
    REQUIRE_THROWS_WITH(sim::execute(g, two_nodes(), test::executor_config(), sim::NetworkKind::flow),
                        Catch::Contains("group 2 has 3 GPUs, group 0 has 4"));
  }
  SECTION("a member outside its first group") {
    auto g = dp_job(true, 1e6, 1_us);
    g.communicators[0].groups[0][0] = 5;
    g.communicators[0].groups[1][1] = 0;
    REQUIRE_THROWS_WITH(sim::execute(g, two_nodes(), test::executor_config(), sim::NetworkKind::flow),
                        Catch::Contains("runs on GPU 0, which is not in its first group"));
  }
  SECTION("a group naming a GPU the cluster lacks") {
    auto g = dp_job(true, 1e6, 1_us);
    g.communicators[0].groups[3][3] = 99;
    REQUIRE_THROWS_WITH(sim::execute(g, two_nodes(), test::executor_config(), sim::NetworkKind::flow),
                        Catch::Contains("names GPU 99, but the cluster has 16 GPUs"));
  }
  SECTION("a transfer between ranks with different mirror counts") {
    auto g = cross_node_p2p(true, 1e6);
    g.rank_mirrors[1].pop_back();
    REQUIRE_THROWS_WITH(sim::execute(g, two_nodes(), test::executor_config(), sim::NetworkKind::flow),
                        Catch::Contains("stands for 8 GPUs but its receiver"));
  }
}
