// The executor: hosts, streams, dependencies, dispatch, rendezvous, transfers, slowdown, errors.
#include <catch2/catch.hpp>

#include "collectives/collective_run.hpp"
#include "common/error.hpp"
#include "exec/executor.hpp"
#include "tests/collectives/fixture.hpp"
#include "topologies/cluster_builders.hpp"

using namespace foresight;
using namespace foresight::sim::literals;
using sim::Node;
using sim::OpKind;

namespace {

Node compute(sim::RankId rank, sim::Time duration, sim::StreamId stream = 1, sim::Time dispatch = {},
             std::vector<sim::NodeId> deps = {}) {
  Node n;
  n.kind = OpKind::compute;
  n.rank = rank;
  n.stream = stream;
  n.duration = duration;
  n.dispatch = dispatch;
  n.deps = std::move(deps);
  return n;
}

Node collective(sim::RankId rank, std::uint32_t comm, double bytes, sim::StreamId stream = 2,
                std::vector<sim::NodeId> deps = {}) {
  Node n;
  n.kind = OpKind::collective;
  n.rank = rank;
  n.stream = stream;
  n.communicator = comm;
  n.bytes = bytes;
  n.deps = std::move(deps);
  return n;
}

/// A GEMM's and a memory-bound kernel's signatures: kernel families for the contention tests.
sim::OpSignature gemm_signature() {
  sim::OpSignature s;
  s.type = sim::OpType::gemm;
  s.kernel = "linear_fwd";
  s.shape = {1024, 1024, 1024, 1};
  return s;
}

sim::OpSignature memory_signature() {
  sim::OpSignature s;
  s.kernel = "add";
  s.shape = {1 << 20};
  return s;
}

/// A compute node of `g` running a kernel of `sig`'s family.
Node typed_compute(sim::ExecutionGraph& g, sim::RankId rank, sim::Time duration, sim::StreamId stream,
                   const sim::OpSignature& sig) {
  Node n = compute(rank, duration, stream);
  n.signature = g.add_signature(sig);
  return n;
}

sim::ExecutionGraph ranks(int n, bool shared_host = false) {
  sim::ExecutionGraph g;
  for (int r = 0; r < n; ++r) g.add_rank(static_cast<sim::GpuId>(r), shared_host ? 0 : static_cast<std::uint32_t>(r));
  return g;
}

sim::ExecutionResult run(const sim::ExecutionGraph& g, sim::ExecutorOptions o = {}) {
  return sim::execute(g, test::dgx(), test::executor_config(), sim::NetworkKind::flow, o);
}

/// Time of a 2-rank collective alone on GPUs 0 and 1.
sim::Time alone(sim::CollectiveOp op, double bytes) {
  sim::CollectiveRequest r;
  r.op = op;
  r.bytes = bytes;
  r.ranks = {0, 1};
  return sim::measure_collective(test::dgx(), test::executor_config(), sim::NetworkKind::flow, r).time;
}

}  // namespace

TEST_CASE("a stream runs its ops in issue order; two streams run side by side", "[collectives]") {
  auto g = ranks(1);
  for (int i = 0; i < 3; ++i) g.add(compute(0, 5_us));
  g.add(compute(0, 7_us, 2));
  const auto r = run(g);
  REQUIRE(r.start[0] == 0_us);
  REQUIRE(r.start[1] == 5_us);
  REQUIRE(r.start[2] == 10_us);
  REQUIRE(r.end[2] == 15_us);
  REQUIRE(r.start[3] == 0_us);  // stream 2 does not wait for stream 1
  REQUIRE(r.makespan == 15_us);
  REQUIRE(r.ranks[0].compute == 22_us);
}

TEST_CASE("dispatch cost makes a run host-bound", "[collectives]") {
  // 3 kernels of 1 us, each 10 us to launch: kernel k is issued at 10(k+1) us; the last ends at 31.
  auto g = ranks(1);
  for (int i = 0; i < 3; ++i) g.add(compute(0, 1_us, 1, 10_us));
  const auto r = run(g);
  REQUIRE(r.start[0] == 10_us);
  REQUIRE(r.start[1] == 20_us);
  REQUIRE(r.start[2] == 30_us);
  REQUIRE(r.makespan == 31_us);
  REQUIRE(r.ranks[0].host == 30_us);
}

TEST_CASE("a full launch queue holds the host until the stream has room", "[collectives]") {
  // 6 kernels of 100 us, each 1 us to launch, a queue of 2 per stream. Launches 1 and 2 return
  // at 1 and 2 us; launch 3 finishes dispatching at 3 us but the queue holds kernels 1 and 2
  // until kernel 1 ends (101 us). From then on launch k + 2 returns when kernel k ends, and the
  // host's marker after the last launch is reached when kernel 4 ends: 401 us. Kernels still
  // run back to back: the last ends at 601 us.
  auto g = ranks(1);
  for (int i = 0; i < 6; ++i) g.add(compute(0, 100_us, 1, 1_us));
  Node mark;
  mark.kind = OpKind::sync;
  mark.stream = sim::kHostStream;
  const sim::NodeId m = g.add(mark);
  sim::ExecutorOptions o;
  o.launch_queue_depth = 2;
  const auto r = run(g, o);
  for (int k = 0; k < 6; ++k) REQUIRE(r.start[static_cast<std::size_t>(k)] == sim::Time::from_seconds(1e-6 + 100e-6 * k));
  REQUIRE(r.end[m] == 401_us);
  REQUIRE(r.makespan == 601_us);
  // A second stream has its own queue: a launch there does not wait for stream 1's.
  g.nodes.pop_back();
  g.add(compute(0, 10_us, 2, 1_us));
  const auto r2 = run(g, o);
  REQUIRE(r2.start[6] == 402_us);  // launched right after launch 6 returned (401 us)
  // Unbounded (0), the host launches all six by 6 us.
  o.launch_queue_depth = 0;
  g.nodes.pop_back();
  g.add(mark);
  REQUIRE(run(g, o).end[m] == 6_us);
}

TEST_CASE("dependencies across streams and host synchronization", "[collectives]") {
  auto g = ranks(1);
  const auto a = g.add(compute(0, 20_us, 1, 1_us));  // issued at 1, runs 1..21
  const auto b = g.add(compute(0, 2_us, 2, {}, {a}));  // issued at 1, waits for a: 21..23
  Node sync;
  sync.kind = OpKind::sync;
  sync.stream = sim::kHostStream;
  sync.deps = {a};  // the host blocks until a is done: 21
  const auto s = g.add(sync);
  Node host;
  host.kind = OpKind::host;
  host.stream = sim::kHostStream;
  host.duration = 3_us;  // CPU work 21..24
  const auto h = g.add(host);
  const auto c = g.add(compute(0, 4_us, 1, 1_us));  // launched 24..25, runs 25..29
  const auto r = run(g);
  REQUIRE(r.start[b] == 21_us);
  REQUIRE(r.end[b] == 23_us);
  REQUIRE(r.end[s] == 21_us);
  REQUIRE(r.start[h] == 21_us);
  REQUIRE(r.end[h] == 24_us);
  REQUIRE(r.start[c] == 25_us);
  REQUIRE(r.makespan == 29_us);
}

TEST_CASE("a data-loader thread feeds the host without blocking it", "[collectives]") {
  // Worker stream 100 loads batches of 10 us back to back; each iteration's host waits for its
  // batch (a sync on the host stream), then launches a 2 us kernel (1 us dispatch).
  auto g = ranks(1);
  std::vector<sim::NodeId> kernels;
  std::vector<sim::NodeId> loads;
  for (int i = 0; i < 3; ++i) {
    Node load;
    load.kind = OpKind::host;
    load.stream = 100;
    load.duration = 10_us;
    loads.push_back(g.add(load));
  }
  for (int i = 0; i < 3; ++i) {
    Node wait;
    wait.kind = OpKind::sync;
    wait.stream = sim::kHostStream;
    wait.deps = {loads[static_cast<std::size_t>(i)]};
    g.add(wait);
    kernels.push_back(g.add(compute(0, 2_us, 1, 1_us)));
  }
  const auto r = run(g);
  REQUIRE(r.end[loads[2]] == 30_us);  // the loader ran ahead on its own thread
  REQUIRE(r.start[kernels[0]] == 11_us);
  REQUIRE(r.start[kernels[1]] == 21_us);
  REQUIRE(r.start[kernels[2]] == 31_us);
  REQUIRE(r.makespan == 33_us);
}

TEST_CASE("a collective starts when its last member arrives", "[collectives]") {
  auto g = ranks(2);
  const auto comm = g.add_communicator({0, 1});
  const auto c0 = g.add(collective(0, comm, 64e6));
  const auto k1 = g.add(compute(1, 50_us));
  const auto c1 = g.add(collective(1, comm, 64e6, 2, {k1}));
  const auto r = run(g);
  REQUIRE(r.ready[c0] == 0_us);
  REQUIRE(r.start[c0] == 50_us);
  REQUIRE(r.start[c1] == 50_us);
  const sim::Time t = alone(sim::CollectiveOp::all_reduce, 64e6);
  REQUIRE(r.end[c0] == 50_us + t);
  REQUIRE(r.end[c1] == 50_us + t);
  REQUIRE(r.ranks[0].comm == t);
}

TEST_CASE("ranks sharing a host have their dispatch serialized", "[collectives]") {
  // One Python process driving two GPUs (torchgpipe-style): launches alternate, 10 us each.
  auto g = ranks(2, true);
  std::vector<sim::NodeId> k;
  for (int i = 0; i < 2; ++i) {
    k.push_back(g.add(compute(0, 1_us, 1, 10_us)));
    k.push_back(g.add(compute(1, 1_us, 1, 10_us)));
  }
  const auto r = run(g);
  REQUIRE(r.start[k[0]] == 10_us);
  REQUIRE(r.start[k[1]] == 20_us);
  REQUIRE(r.start[k[2]] == 30_us);
  REQUIRE(r.start[k[3]] == 40_us);
  // With one host each, both ranks launch in parallel.
  auto own = ranks(2);
  for (int i = 0; i < 2; ++i) {
    own.add(compute(0, 1_us, 1, 10_us));
    own.add(compute(1, 1_us, 1, 10_us));
  }
  REQUIRE(run(own).makespan == 21_us);
}

TEST_CASE("a send meets its receive and moves as one transfer", "[collectives]") {
  auto g = ranks(2);
  const auto k = g.add(compute(0, 10_us));
  Node send;
  send.kind = OpKind::send;
  send.rank = 0;
  send.stream = 2;
  send.peer = 1;
  send.bytes = 100e6;
  send.deps = {k};
  const auto s = g.add(send);
  Node recv = send;
  recv.kind = OpKind::recv;
  recv.rank = 1;
  recv.peer = 0;
  recv.deps = {};
  const auto v = g.add(recv);
  const auto r = run(g);
  REQUIRE(r.ready[v] == 0_us);
  REQUIRE(r.start[v] == 10_us);
  const sim::Time t = alone(sim::CollectiveOp::send_recv, 100e6);
  REQUIRE(r.end[s] == 10_us + t);
  REQUIRE(r.end[v] == 10_us + t);
  // Without every node's ready time, the receive's is still known, and nothing else changes.
  sim::ExecutorOptions lean;
  lean.ready_times = false;
  const auto l = run(g, lean);
  REQUIRE(l.ready.empty());
  REQUIRE(l.ready_at(v) == r.ready_at(v));
  REQUIRE(l.start == r.start);
  REQUIRE(l.end == r.end);
  // A receive that waits: posted at 0, its send ready at 10 us.
  REQUIRE(l.start[v] - l.ready_at(v) == 10_us);
}

TEST_CASE("compute slows down while its rank communicates", "[collectives]") {
  // A 400 us kernel beside a collective of duration T (< 400 us) on the same rank, slowdown 1.0:
  // during T the kernel runs at half speed, so it ends at T + (400 - T/2) = 400 + T/2.
  auto g = ranks(2);
  const auto comm = g.add_communicator({0, 1});
  const auto k = g.add(compute(0, 400_us));
  g.add(collective(0, comm, 32e6));
  g.add(collective(1, comm, 32e6));
  const sim::Time t = alone(sim::CollectiveOp::all_reduce, 32e6);
  REQUIRE(t < 400_us);
  sim::ExecutorOptions o;
  o.comm_compute_slowdown = 1.0;
  const auto r = run(g, o);
  REQUIRE(std::abs((r.end[k] - (400_us + t / 2)).ps()) <= 2);
  REQUIRE(run(g).end[k] == 400_us);  // no slowdown by default
}

TEST_CASE("each kernel family slows by its own factor; a uniform factor replaces them", "[collectives]") {
  // Rank 0 runs a 400 us GEMM on stream 1 and a 400 us memory-bound kernel on stream 3 beside a
  // collective of duration T: with factor s a kernel does T / (1 + s) of work during T and ends
  // at T + 400 - T / (1 + s) = 400 + T s / (1 + s): factors 0.5 and 0.25 give T / 3 and T / 5.
  auto g = ranks(2);
  const auto comm = g.add_communicator({0, 1});
  const auto ka = g.add(typed_compute(g, 0, 400_us, 1, gemm_signature()));
  const auto kb = g.add(typed_compute(g, 0, 400_us, 3, memory_signature()));
  const auto untyped = g.add(compute(0, 400_us, 4));
  g.add(collective(0, comm, 32e6));
  g.add(collective(1, comm, 32e6));
  const sim::Time t = alone(sim::CollectiveOp::all_reduce, 32e6);
  REQUIRE(t < 400_us);
  sim::ExecutorOptions o;
  o.comm_compute_slowdown_by_type[static_cast<std::size_t>(sim::OpType::gemm)] = 0.5;
  o.comm_compute_slowdown_by_type[static_cast<std::size_t>(sim::OpType::memory)] = 0.25;
  const auto r = run(g, o);
  REQUIRE(std::abs((r.end[ka] - (400_us + t / 3)).ps()) <= 2);
  REQUIRE(std::abs((r.end[kb] - (400_us + t / 5)).ps()) <= 2);
  REQUIRE(r.end[untyped] == 400_us);  // no signature (a replayed kernel): no family, no slowdown
  // A uniform factor applies to every op, typed or not.
  o.comm_compute_slowdown = 1.0;
  const auto u = run(g, o);
  for (const auto n : {ka, kb, untyped}) REQUIRE(std::abs((u.end[n] - (400_us + t / 2)).ps()) <= 2);
  // A bad family factor is a clear error.
  o.comm_compute_slowdown_by_type[static_cast<std::size_t>(sim::OpType::memory)] = -1.0;
  REQUIRE_THROWS_WITH(run(g, o), Catch::Matchers::Contains("comm_compute_slowdown of memory kernels"));
}

TEST_CASE("per-rank factors: each rank slows as its own GPU model does (a mixed cluster)", "[collectives]") {
  // Both ranks run a 400 us GEMM beside their all-reduce of duration T. Rank 0's model slows
  // GEMMs by 0.5 (ends at 400 + T/3), rank 1's not at all (ends at 400); the uniform per-type
  // factors are ignored where per-rank ones are given.
  auto g = ranks(2);
  const auto comm = g.add_communicator({0, 1});
  const auto k0 = g.add(typed_compute(g, 0, 400_us, 1, gemm_signature()));
  const auto k1 = g.add(typed_compute(g, 1, 400_us, 1, gemm_signature()));
  g.add(collective(0, comm, 32e6));
  g.add(collective(1, comm, 32e6));
  const sim::Time t = alone(sim::CollectiveOp::all_reduce, 32e6);
  sim::ExecutorOptions o;
  o.comm_compute_slowdown_by_type[static_cast<std::size_t>(sim::OpType::gemm)] = 2.0;
  o.comm_compute_slowdown_by_rank.resize(2);
  o.comm_compute_slowdown_by_rank[0][static_cast<std::size_t>(sim::OpType::gemm)] = 0.5;
  const auto r = run(g, o);
  REQUIRE(std::abs((r.end[k0] - (400_us + t / 3)).ps()) <= 2);
  REQUIRE(r.end[k1] == 400_us);
  // One array per rank, or none.
  o.comm_compute_slowdown_by_rank.resize(3);
  REQUIRE_THROWS_WITH(run(g, o), Catch::Matchers::Contains("comm_compute_slowdown_by_rank for 3 ranks, but the graph has 2"));
}

TEST_CASE("a collective waits for the running kernels that hold every SM, not for those queued after", "[collectives]") {
  // Rank 0 runs two 400 us GEMMs back to back on stream 1 and a 300 us memory-bound kernel on
  // stream 3; its all-reduce is ready at 100 us on stream 2 (after a 100 us kernel of no family
  // there), rank 1's at 0. With GEMMs holding every SM, rank 0's collective arrives when the first
  // GEMM ends (400 us), before the second starts.
  auto g = ranks(2);
  const auto comm = g.add_communicator({0, 1});
  const Node gemm = typed_compute(g, 0, 400_us, 1, gemm_signature());
  const auto g1 = g.add(gemm);
  const auto g2 = g.add(gemm);
  g.add(compute(0, 100_us, 2));
  g.add(typed_compute(g, 0, 300_us, 3, memory_signature()));
  const auto c0 = g.add(collective(0, comm, 32e6));
  const auto c1 = g.add(collective(1, comm, 32e6));
  const sim::Time t = alone(sim::CollectiveOp::all_reduce, 32e6);
  sim::ExecutorOptions o;
  o.comm_waits_for[static_cast<std::size_t>(sim::OpType::gemm)] = true;
  const auto r = run(g, o);
  REQUIRE(r.ready[c0] == 100_us);
  REQUIRE(r.start[c0] == 400_us);  // the first GEMM's end
  REQUIRE(r.start[c1] == 400_us);
  REQUIRE(r.end[c0] == 400_us + t);
  REQUIRE(r.end[g1] == 400_us);
  REQUIRE(r.end[g2] == 800_us);  // no slowdown set: the second GEMM runs beside it at full speed
  // Without the wait, the collective starts when both members are ready.
  REQUIRE(run(g).start[c0] == 100_us);
  // The wait is per family: with only memory-bound kernels holding, it ends with that kernel.
  sim::ExecutorOptions mem;
  mem.comm_waits_for[static_cast<std::size_t>(sim::OpType::memory)] = true;
  REQUIRE(run(g, mem).start[c0] == 300_us);
}

TEST_CASE("malformed graphs are clear errors", "[collectives]") {
  using Catch::Matchers::Contains;
  auto g = ranks(2);
  g.add(compute(0, 1_us, 1, {}, {5}));
  REQUIRE_THROWS_WITH(run(g), Contains("node 0") && Contains("does not come before it"));

  g = ranks(2);
  const auto a = g.add(compute(0, 1_us));
  g.add(compute(1, 1_us, 1, {}, {a}));
  REQUIRE_THROWS_WITH(run(g), Contains("ranks order each other only by communication"));

  g = ranks(1);
  g.add(compute(0, 1_us, sim::kHostStream));
  REQUIRE_THROWS_WITH(run(g), Contains("GPU op cannot be on the host stream"));

  g = ranks(2);
  auto comm = g.add_communicator({0, 1});
  g.add(collective(0, comm, 1e6));
  REQUIRE_THROWS_WITH(run(g), Contains("rank 0 calls 1 collectives but rank 1 calls 0"));

  g = ranks(2);
  comm = g.add_communicator({0, 1});
  g.add(collective(0, comm, 1e6));
  g.add(collective(1, comm, 2e6));
  REQUIRE_THROWS_WITH(run(g), Contains("of 1000000 bytes but") && Contains("2000000 bytes"));

  g = ranks(2);
  Node send;
  send.kind = OpKind::send;
  send.stream = 2;
  send.peer = 1;
  send.tag = 7;
  g.add(send);
  REQUIRE_THROWS_WITH(run(g), Contains("tag 7") && Contains("which receives 0"));

  g = ranks(1);
  g.rank_gpu[0] = 99;
  REQUIRE_THROWS_WITH(run(g), Contains("GPU 99"));
}

TEST_CASE("a deadlock is reported with the operations left waiting", "[collectives]") {
  // Rank 0 calls A then B; rank 1 calls B then A, on one stream each: neither can proceed.
  auto g = ranks(2);
  const auto ca = g.add_communicator({0, 1});
  const auto cb = g.add_communicator({0, 1});
  g.add(collective(0, ca, 1e6));
  g.add(collective(0, cb, 1e6));
  g.add(collective(1, cb, 1e6));
  g.add(collective(1, ca, 1e6));
  REQUIRE_THROWS_WITH(run(g), Catch::Matchers::Contains("deadlock") && Catch::Matchers::Contains("1 of 2 members arrived"));
}

TEST_CASE("graph runs are deterministic", "[collectives]") {
  auto g = ranks(8);
  const auto comm = g.add_communicator({0, 1, 2, 3, 4, 5, 6, 7});
  for (sim::RankId r = 0; r < 8; ++r) {
    std::vector<sim::NodeId> prev;
    for (int layer = 0; layer < 6; ++layer) {
      const auto k = g.add(compute(r, sim::Time::from_ps((layer + 1) * 3'000'000 + r * 1000), 1, 2_us, prev));
      g.add(collective(r, comm, 1e6 * (layer + 1), 2, {k}));
      prev = {k};
    }
  }
  sim::ExecutorOptions o;
  o.comm_compute_slowdown = 0.2;
  const auto a = run(g, o);
  const auto b = run(g, o);
  REQUIRE(a.fingerprint == b.fingerprint);
  REQUIRE(a.end == b.end);
  REQUIRE(a.makespan > 20_us);
}

TEST_CASE("link samples stay bounded on a long run: thinned, evenly spaced, and exact", "[sampling]") {
  // A 64 MB all-reduce at the start, then 1000 s of compute: at one sample per 10 us that would be
  // 10^8 samples per link (issue 25: a 1000 s step overhead grew a trace to 8.9 GB).
  auto g = ranks(2);
  const auto comm = g.add_communicator({0, 1});
  g.add(collective(0, comm, 64e6));
  g.add(collective(1, comm, 64e6));
  g.add(compute(0, sim::Time::from_seconds(1000.0)));
  std::vector<sim::LinkId> links;
  for (std::size_t l = 0; l < test::dgx().link_count(); ++l) links.push_back(static_cast<sim::LinkId>(l));
  const auto sampled = [&](sim::Time interval) {
    sim::ExecutorOptions o;
    o.sample_links = links;
    o.sample_interval = interval;
    return run(g, o);
  };
  const auto fine = sampled(10_us);
  const auto coarse = sampled(sim::Time::from_seconds(1.0));  // 1001 samples: never thinned
  constexpr std::size_t cap = sim::ExecutorOptions::kMaxLinkSamples;
  REQUIRE(fine.makespan == sim::Time::from_seconds(1000.0));
  REQUIRE(coarse.link_bytes.front().size() == 1001);
  // The interval doubled k times: the first that lets cap samples cover 1000 s (thinning happens
  // when a series reaches cap).
  int doublings = 0;
  while (10e-6 * std::ldexp(1.0, doublings) * cap < 1000.0) ++doublings;
  double carried = 0.0;
  for (std::size_t i = 0; i < links.size(); ++i) {
    const auto& s = fine.link_bytes[i];
    INFO("link " << i);
    REQUIRE(s.size() <= cap);
    REQUIRE(s.size() > cap / 2);
    REQUIRE(s.back().first >= fine.makespan);
    // Evenly spaced at 10 us x 2^doublings.
    const sim::Time step = 10_us * (std::int64_t{1} << doublings);
    std::size_t uneven = 1;
    while (uneven < s.size() && s[uneven].first - s[uneven - 1].first == step) ++uneven;
    INFO("gap before sample " << uneven << " of " << s.size() << ", step " << step.ps() << " ps");
    REQUIRE(uneven == s.size());
    // The same bytes in the end as the coarse series: thinning drops samples, never bytes.
    REQUIRE(s.back().second == coarse.link_bytes[i].back().second);
    carried += s.back().second;
  }
  REQUIRE(carried > 64e6);  // the all-reduce crossed the sampled links
  // Events: the graph's few, plus cap samples and cap/2 after each doubling.
  REQUIRE(fine.events < coarse.events + cap + (doublings + 1) * (cap / 2));
  REQUIRE(fine.events > cap);
}
