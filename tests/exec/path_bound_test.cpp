// The longest chain of ops that must run in order (exec/path_bound.hpp), on graphs small enough
// to derive by hand: dependencies, a transfer and a collective's rendezvous, the host's dispatch,
// measuring from a node's end, and the cut around each server.
#include <catch2/catch.hpp>

#include "exec/path_bound.hpp"
#include "tests/collectives/fixture.hpp"
#include "tests/exec/graph_fixture.hpp"

using namespace foresight;
using namespace foresight::sim::literals;
using sim::Node;
using sim::OpKind;

namespace {

using test::op;

/// Two GPUs that send at 100 GB/s and receive at 50 GB/s, on one server (or two, each with
/// 10 GB/s to the outside).
sim::GpuLineRates rates(bool two_servers) {
  sim::GpuLineRates r;
  r.egress.assign(2, sim::Bandwidth::gigabytes_per_second(100));
  r.ingress.assign(2, sim::Bandwidth::gigabytes_per_second(50));
  r.node = two_servers ? std::vector<int>{0, 1} : std::vector<int>{0, 0};
  r.node_egress.assign(2, sim::Bandwidth::gigabytes_per_second(10));
  r.node_ingress.assign(2, sim::Bandwidth::gigabytes_per_second(10));
  return r;
}

struct Chain {
  sim::ExecutionGraph g;
  sim::NodeId a = 0, b = 0, reduce0 = 0, reduce1 = 0;
};

/// Rank 0 computes A (10 us) and sends 1 MB to rank 1, which computes B (5 us) on it; then both
/// all-reduce 8 MB, rank 0 after its send (same stream), rank 1 after B.
Chain chain() {
  Chain c;
  c.g.add_rank(0, 0);
  c.g.add_rank(1, 1);
  const auto comm = c.g.add_communicator({0, 1});
  Node a = op(OpKind::compute, 0, 1);
  a.duration = 10_us;
  c.a = c.g.add(a);
  Node send = op(OpKind::send, 0, 2, {c.a});
  send.peer = 1;
  send.bytes = 1e6;
  c.g.add(send);
  Node recv = op(OpKind::recv, 1, 2);
  recv.peer = 0;
  recv.bytes = 1e6;
  const auto r = c.g.add(recv);
  Node b = op(OpKind::compute, 1, 1, {r});
  b.duration = 5_us;
  c.b = c.g.add(b);
  Node reduce = op(OpKind::collective, 0, 2);
  reduce.communicator = comm;
  reduce.bytes = 8e6;
  c.reduce0 = c.g.add(reduce);
  reduce.rank = 1;
  reduce.deps = {c.b};
  c.reduce1 = c.g.add(reduce);
  return c;
}

std::optional<sim::Time> bound(const sim::ExecutionGraph& g, const sim::GpuLineRates& r, sim::NodeId from,
                               sim::NodeId to) {
  const sim::GraphIndex index = sim::check_graph(g, test::dgx());
  const std::pair<sim::NodeId, sim::NodeId> pair{from, to};
  return sim::path_lower_bounds(g, index, r, {&pair, 1}).front();
}

}  // namespace

TEST_CASE("the chain runs through dependencies, a transfer and a collective's rendezvous", "[exec]") {
  const Chain c = chain();
  // The send starts after A (10 us) and moves 1 MB at the receiver's 50 GB/s: 20 us; B ends at
  // 35 us. The all-reduce starts when rank 1 arrives (35 us; rank 0 arrived at 30 us) and each
  // GPU must send and receive half of the 8 MB, 4 MB at min(100, 50) GB/s: 80 us.
  REQUIRE(bound(c.g, rates(false), sim::kRunStart, c.b) == 35_us);
  REQUIRE(bound(c.g, rates(false), sim::kRunStart, c.reduce0) == 115_us);
  REQUIRE(bound(c.g, rates(false), sim::kRunStart, c.reduce1) == 115_us);
  // Measured from A's end, B is 25 us later; A does not wait for B at all.
  REQUIRE(bound(c.g, rates(false), c.a, c.b) == 25_us);
  REQUIRE_FALSE(bound(c.g, rates(false), c.b, c.a).has_value());
}

TEST_CASE("over two servers the all-reduce moves its whole payload through each server's links out", "[exec]") {
  const Chain c = chain();
  // 8 MB out of each server at 10 GB/s: 800 us, more than the 80 us of a GPU's own links.
  REQUIRE(bound(c.g, rates(true), sim::kRunStart, c.reduce0) == 835_us);
  // A measured collective lasts its measured time, whatever the links.
  Chain measured = chain();
  measured.g.nodes[measured.reduce0].duration = 7_us;
  measured.g.nodes[measured.reduce1].duration = 7_us;
  REQUIRE(bound(measured.g, rates(true), sim::kRunStart, measured.reduce0) == 42_us);
}

TEST_CASE("kernels wait for the host that dispatches them", "[exec]") {
  // Three 1 us kernels, each 10 us of host dispatch: the last is issued at 30 us and ends at 31.
  sim::ExecutionGraph g;
  g.add_rank(0, 0);
  sim::NodeId last = 0;
  for (int k = 0; k < 3; ++k) {
    Node n = op(OpKind::compute, 0, 1);
    n.duration = 1_us;
    n.dispatch = 10_us;
    last = g.add(n);
  }
  REQUIRE(bound(g, rates(false), sim::kRunStart, last) == 31_us);
  // A host op holds the host: a kernel dispatched after a 50 us host op ends at 50 + 10 + 1.
  Node host = op(OpKind::host, 0, sim::kHostStream);
  host.duration = 50_us;
  g.add(host);
  Node k = op(OpKind::compute, 0, 1);
  k.duration = 1_us;
  k.dispatch = 10_us;
  const auto after_host = g.add(k);
  REQUIRE(bound(g, rates(false), sim::kRunStart, after_host) == 91_us);
}
