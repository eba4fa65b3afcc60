// Coalesced kernels (ExecutionGraph::add_kernel): a run of kernels as one node must give the run
// the separate kernels give, bit for bit in time, whatever the host's pace and the launch queue.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "common/error.hpp"
#include "exec/executor.hpp"
#include "tests/collectives/fixture.hpp"
#include "topologies/cluster_builders.hpp"

using namespace foresight;
using namespace foresight::sim::literals;
using sim::Node;
using sim::NodeId;
using sim::OpKind;

namespace {

sim::ExecutionResult run(const sim::ExecutionGraph& g, std::uint32_t depth) {
  sim::ExecutorOptions o;
  o.launch_queue_depth = depth;
  return sim::execute(g, test::dgx(), test::executor_config(), sim::NetworkKind::flow, o);
}

Node kernel(sim::RankId rank, sim::Time duration, sim::Time dispatch, std::vector<NodeId> deps = {}) {
  Node n;
  n.kind = OpKind::compute;
  n.rank = rank;
  n.stream = 1;
  n.duration = duration;
  n.dispatch = dispatch;
  n.deps = std::move(deps);
  return n;
}

/// A deterministic pseudo-random sequence (xorshift), so that the program is the same each run.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  sim::Time us(int lo, int hi) { return sim::Time::from_ps((lo + static_cast<std::int64_t>(next() % (hi - lo + 1))) * 1'000'000); }
};

/// Two ranks, each a program of segments: a few kernels (some launched slower than the kernel
/// before them runs, which must not join it), an all-reduce of the segment's last kernel on
/// stream 2, then kernels that wait for it, now and then a host op or a host wait for the
/// all-reduce. The same calls build `g` with coalescing or without; `physical[i]` is the node the
/// i-th id ended up in.
void build(sim::ExecutionGraph& g, bool coalesce, std::uint64_t seed, std::vector<NodeId>& physical) {
  for (sim::RankId r = 0; r < 2; ++r) g.add_rank(r, r);
  const std::uint32_t comm = g.add_communicator({0, 1});
  if (coalesce) g.start_coalescing();
  Rng rng{seed};
  std::vector<NodeId> last(2, 0xffffffffu);
  const auto note = [&](NodeId id) {
    REQUIRE(id == physical.size());  // ids count the calls, coalescing or not
    physical.push_back(static_cast<NodeId>(g.nodes.size() - 1));
    return id;
  };
  for (int segment = 0; segment < 40; ++segment) {
    for (sim::RankId r = 0; r < 2; ++r) {
      const int kernels = 1 + static_cast<int>(rng.next() % 7);
      for (int k = 0; k < kernels; ++k) {
        std::vector<NodeId> deps;
        if (k == 0 && last[r] != 0xffffffffu) deps.push_back(last[r]);
        // Dispatches of 0-12 us against kernels of 1-40 us: most kernels join, a few do not.
        Node n = kernel(r, rng.us(1, 40), rng.us(0, 12), deps);
        last[r] = note(g.add_kernel(std::move(n)));
      }
      Node ar;
      ar.kind = OpKind::collective;
      ar.rank = r;
      ar.stream = 2;
      ar.communicator = comm;
      ar.bytes = 1 << 20;
      ar.dispatch = 3_us;
      ar.deps = {last[r]};
      const NodeId reduced = note(g.add(std::move(ar)));
      switch (rng.next() % 4) {
        case 0: {  // the next kernel waits for the all-reduce
          last[r] = reduced;
          break;
        }
        case 1: {  // a host op between kernels
          Node h;
          h.kind = OpKind::host;
          h.rank = r;
          h.stream = sim::kHostStream;
          h.duration = rng.us(1, 30);
          note(g.add(std::move(h)));
          break;
        }
        case 2: {  // the host waits for the all-reduce (a .item())
          Node w;
          w.kind = OpKind::sync;
          w.rank = r;
          w.stream = sim::kHostStream;
          w.deps = {reduced};
          note(g.add(std::move(w)));
          break;
        }
        default:
          break;
      }
    }
  }
  if (coalesce) {
    REQUIRE(g.coalescing_exact());
    g.finish_coalescing();
  }
}

}  // namespace

TEST_CASE("coalesced kernels run as the separate kernels do, at any launch queue depth", "[coalesce]") {
  for (const std::uint64_t seed : {1ULL, 7ULL, 99ULL, 2026ULL, 12345ULL, 31337ULL}) {
    std::vector<NodeId> apart_ids, coalesced_ids;
    sim::ExecutionGraph apart, coalesced;
    build(apart, false, seed, apart_ids);
    build(coalesced, true, seed, coalesced_ids);
    REQUIRE(apart_ids.size() == apart.nodes.size());
    REQUIRE_FALSE(coalesced.runs.empty());
    REQUIRE(coalesced.nodes.size() < apart.nodes.size() * 3 / 4);
    // The first and last id of each node.
    std::vector<NodeId> first(coalesced.nodes.size(), 0xffffffffu), final(coalesced.nodes.size(), 0);
    for (NodeId i = 0; i < coalesced_ids.size(); ++i) {
      const NodeId p = coalesced_ids[i];
      if (first[p] == 0xffffffffu) first[p] = i;
      final[p] = i;
    }
    // 0: unbounded; 1-3: the host waits on a full queue nearly all the time, inside runs too.
    for (const std::uint32_t depth : {0U, 1U, 2U, 3U, 5U, 1024U}) {
      INFO("seed " << seed << ", launch queue depth " << depth);
      const auto a = run(apart, depth);
      const auto c = run(coalesced, depth);
      REQUIRE(c.makespan == a.makespan);
      for (std::size_t r = 0; r < 2; ++r) {
        REQUIRE(c.ranks[r].compute == a.ranks[r].compute);
        REQUIRE(c.ranks[r].comm == a.ranks[r].comm);
        REQUIRE(c.ranks[r].host == a.ranks[r].host);
      }
      for (NodeId p = 0; p < coalesced.nodes.size(); ++p) {
        REQUIRE(c.start[p] == a.start[first[p]]);
        REQUIRE(c.end[p] == a.end[final[p]]);
        REQUIRE(c.ready[p] == a.ready[first[p]]);
      }
      // Fewer events where the queue leaves room (a full queue launches a run's kernels one by one).
      if (depth == 0 || depth == 1024) REQUIRE(c.events < a.events);
    }
  }
}

TEST_CASE("a kernel joins the one before it only where that keeps the answer", "[coalesce]") {
  sim::ExecutionGraph g;
  g.add_rank(0, 0);
  g.add_rank(1, 1);
  g.start_coalescing();
  const NodeId a = g.add_kernel(kernel(0, 10_us, 2_us));
  const NodeId b = g.add_kernel(kernel(0, 5_us, 10_us, {a}));  // launched within a's 10 us: joins
  REQUIRE(g.nodes.size() == 1);
  REQUIRE(g.nodes[0].duration == 15_us);
  REQUIRE(g.kernels(g.nodes[0]) == 2);
  g.add_kernel(kernel(0, 5_us, 6_us, {b}));  // launched for longer than b runs: its own node
  REQUIRE(g.nodes.size() == 2);
  g.add_kernel(kernel(1, 50_us, 1_us));  // another rank
  REQUIRE(g.nodes.size() == 3);
  Node other = kernel(1, 50_us, 1_us);
  other.stream = 2;  // another stream
  g.add_kernel(std::move(other));
  REQUIRE(g.nodes.size() == 4);
  Node phase = kernel(1, 50_us, 1_us);
  phase.phase = sim::Phase::backward;
  const NodeId c = g.add_kernel(std::move(phase));
  REQUIRE(g.nodes.size() == 5);
  Node gil = kernel(1, 50_us, 1_us);
  gil.gil = 1_us;  // takes an interpreter lock: never joins
  g.add_kernel(std::move(gil));
  REQUIRE(g.nodes.size() == 6);
  const NodeId d = g.add_kernel(kernel(1, 50_us, 1_us));
  Node waits = kernel(1, 50_us, 1_us, {c, d});  // waits for more than the kernel before it
  g.add_kernel(std::move(waits));
  REQUIRE(g.nodes.size() == 8);
  REQUIRE(g.coalescing_exact());
  // Reading a kernel that is not its node's last (here a, inside a's and b's node) is not exact:
  // the builder must build again without coalescing.
  REQUIRE(g.node_of(b, true) == 0);
  REQUIRE(g.coalescing_exact());
  REQUIRE(g.node_of(a, false) == 0);
  REQUIRE(g.coalescing_exact());
  Node late = kernel(0, 1_us, 0_us, {a});
  g.add(std::move(late));
  REQUIRE_FALSE(g.coalescing_exact());
}

TEST_CASE("the executor refuses coalesced kernels that would slow under communication", "[coalesce]") {
  sim::ExecutionGraph g;
  g.add_rank(0, 0);
  g.start_coalescing();
  g.add_kernel(kernel(0, 10_us, 1_us));
  g.add_kernel(kernel(0, 10_us, 1_us));
  g.finish_coalescing();
  REQUIRE(g.runs.size() == 1);
  sim::ExecutorOptions o;
  o.comm_compute_slowdown = 0.2;
  REQUIRE_THROWS_AS(sim::execute(g, test::dgx(), test::executor_config(), sim::NetworkKind::flow, o), sim::InternalError);
  o.comm_compute_slowdown = 0.0;
  REQUIRE(sim::execute(g, test::dgx(), test::executor_config(), sim::NetworkKind::flow, o).makespan == 21_us);
  // A run whose durations do not add up is caught by the graph check.
  g.part_duration[0] = 9_us;
  REQUIRE_THROWS_AS(sim::execute(g, test::dgx(), test::executor_config(), sim::NetworkKind::flow, o), sim::GraphError);
}

TEST_CASE("runs of identical kernels share their parts", "[coalesce]") {
  sim::ExecutionGraph g;
  g.add_rank(0, 0);
  g.start_coalescing();
  // Three runs of two kernels, apart because each waits on the host op before it; the first and
  // third are the same kernels, the second differs in its last kernel's duration.
  const auto run = [&](sim::Time last) {
    Node h;
    h.kind = OpKind::host;
    h.stream = sim::kHostStream;
    h.rank = 0;
    h.duration = 1_us;
    g.add(std::move(h));
    g.add_kernel(kernel(0, 10_us, 1_us));
    g.add_kernel(kernel(0, last, 1_us));
  };
  run(10_us);
  run(7_us);
  run(10_us);
  g.finish_coalescing();
  REQUIRE(g.nodes.size() == 6);
  REQUIRE(g.runs.size() == 2);
  REQUIRE(g.part_duration.size() == 4);
  REQUIRE(g.nodes[1].run == g.nodes[5].run);
  REQUIRE(g.nodes[1].run != g.nodes[3].run);
  REQUIRE(g.nodes[3].duration == 17_us);
  REQUIRE(g.nodes[5].duration == 20_us);
  // The shared run is simulated as its kernels: the host's 1 us, then 10 + 10 us, three times
  // less the 3 us of the middle run's shorter kernel, each run waiting for the host op before it.
  const sim::ExecutionResult res = sim::execute(g, test::dgx(), test::executor_config(), sim::NetworkKind::flow, {});
  REQUIRE(res.end[5] - res.start[5] == 20_us);
  REQUIRE(res.end[3] - res.start[3] == 17_us);
  // The graph check reads a shared run's kernels once; a later node of that run whose own
  // duration or dispatch disagrees with them is still refused.
  g.nodes[5].duration = 19_us;
  REQUIRE_THROWS_WITH(sim::execute(g, test::dgx(), test::executor_config(), sim::NetworkKind::flow, {}),
                      Catch::Contains("node 5") && Catch::Contains("not its kernels' sum"));
  g.nodes[5].duration = 20_us;
  g.nodes[5].dispatch = 2_us;
  REQUIRE_THROWS_WITH(sim::execute(g, test::dgx(), test::executor_config(), sim::NetworkKind::flow, {}),
                      Catch::Contains("node 5") && Catch::Contains("its dispatch not its first kernel's"));
}
