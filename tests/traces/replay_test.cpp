// Replaying one iteration of a Kineto trace: host gaps, stream order, cross-stream waits,
// blocking synchronization, and the shared measured traces against their measured steps.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "collectives/collective_config.hpp"
#include "collectives/collective_run.hpp"
#include "common/error.hpp"
#include "exec/executor.hpp"
#include "tests/test_paths.hpp"
#include "tests/traces/made_trace.hpp"
#include "topologies/cluster_builders.hpp"
#include "traces/kineto.hpp"
#include "traces/replay.hpp"

using namespace foresight;
using trace::KinetoGpuOp;

using test::last_gpu_start;
using test::made;
using test::op;
using test::run;
using test::us;

TEST_CASE("a replayed step issues each GPU op after its measured host time, in stream order", "[traces]") {
  const auto t = trace::load_kineto(test::data_path("traces/mini_kineto.json"));
  const auto g = trace::replay_graph(t, -1);
  REQUIRE(g.step == 2);
  REQUIRE(g.gpu_ops == 3);
  REQUIRE(g.nccl_ops == 1);
  REQUIRE(g.unlaunched == 0);
  REQUIRE(g.warmup_steps == 1);  // step 1 ran back to back before it: replayed first
  const auto r = run(g);
  // Step 2 starts at 1000 us, where step 1's ops are long done. The GEMM's launch ends 25 us in
  // (20 us of host work, a 5 us call): it runs 25-425. The NCCL kernel's launch ends at 45
  // (15 + 5 more) on its own stream: 45-345. The copy, issued at 54, waits for the GEMM on
  // stream 7: 425-445.
  const double begin = us(r.end[g.begin]);
  REQUIRE(begin == Approx(1000.0));
  std::vector<std::pair<double, double>> gpu;
  for (sim::NodeId n = g.begin; n < g.graph.nodes.size(); ++n) {
    if (g.graph.nodes[n].kind == sim::OpKind::compute) gpu.emplace_back(us(r.start[n]) - begin, us(r.end[n]) - begin);
  }
  REQUIRE(gpu.size() == 3);
  REQUIRE(gpu[0].first == Approx(25.0));
  REQUIRE(gpu[0].second == Approx(425.0));
  REQUIRE(gpu[1].first == Approx(45.0));
  REQUIRE(gpu[1].second == Approx(345.0));
  REQUIRE(gpu[2].first == Approx(425.0));
  REQUIRE(gpu[2].second == Approx(445.0));
  // The host's remaining 946 us of work after its last call end the step where it was measured.
  REQUIRE(trace::replayed_seconds(g, r.end) * 1e6 == Approx(1000.0));
  REQUIRE(g.measured_s == Approx(1e-3));
}

TEST_CASE("stream waits and synchronization order a replay across streams and the host", "[traces]") {
  // Op 1 on stream 7 (100 us); an event is recorded, stream 20 waits on it, op 2 on stream 20.
  std::vector<trace::KinetoRuntimeCall> calls = {{"cudaLaunchKernel", 1, 0.0, 5.0, 1},
                                                 {"cudaEventRecord", 1, 6.0, 1.0, 2},
                                                 {"cudaStreamWaitEvent", 1, 8.0, 1.0, 3},
                                                 {"cudaLaunchKernel", 1, 10.0, 5.0, 4}};
  const std::vector<KinetoGpuOp> ops = {op(7, 6.0, 100.0, 1), op(20, 16.0, 10.0, 4)};
  REQUIRE(last_gpu_start(trace::replay_graph(made(calls, ops), 0)) == Approx(105.0));  // after op 1
  // Without the wait, op 2 starts when its launch returns (15 us).
  calls.erase(calls.begin() + 1, calls.begin() + 3);
  REQUIRE(last_gpu_start(trace::replay_graph(made(calls, ops), 0)) == Approx(15.0));
  // A cudaDeviceSynchronize blocks the host until op 1 is done (105 us); the 4 us gap before the
  // next launch and its 5 us cost follow: op 2 at 114.
  calls = {{"cudaLaunchKernel", 1, 0.0, 5.0, 1}, {"cudaDeviceSynchronize", 1, 6.0, 100.0, 2}, {"cudaLaunchKernel", 1, 110.0, 5.0, 4}};
  REQUIRE(last_gpu_start(trace::replay_graph(made(calls, ops), 0)) == Approx(114.0));
  REQUIRE_THROWS_AS(trace::replay_graph(made(calls, ops), 3), sim::TraceError);
}

TEST_CASE("a copy to pageable memory holds the host; a graph launch replays all its kernels", "[traces]") {
  // A 100 us kernel, then a copy to pageable host memory on stream 14 that waits for it
  // (cudaStreamWaitEvent after cudaEventRecord): cudaMemcpyAsync returns only when the copy is
  // done (CUDA's API synchronization behavior), so the next launch's 5 us come after it.
  std::vector<trace::KinetoRuntimeCall> calls = {{"cudaLaunchKernel", 1, 0.0, 5.0, 1},
                                                 {"cudaEventRecord", 1, 6.0, 1.0, 2},
                                                 {"cudaStreamWaitEvent", 1, 8.0, 1.0, 3},
                                                 {"cudaMemcpyAsync", 1, 10.0, 100.0, 4},
                                                 {"cudaLaunchKernel", 1, 111.0, 5.0, 5},
                                                 // unblocked copies after the step: the call's median is 3 us
                                                 {"cudaMemcpyAsync", 1, 2000.0, 3.0, 6},
                                                 {"cudaMemcpyAsync", 1, 2010.0, 3.0, 7}};
  KinetoGpuOp copy = op(14, 105.0, 2.0, 4);
  copy.kind = KinetoGpuOp::Kind::memcpy;
  copy.name = "Memcpy DtoH (Device -> Pageable)";
  std::vector<KinetoGpuOp> ops = {op(7, 5.0, 100.0, 1), copy, op(7, 116.0, 10.0, 5)};
  // The copy call's measured 100 us were spent blocked: it counts as 10 x its median + 5 = 35 us,
  // issuing the copy at 9 + 1 + 35 = 45. The copy runs 105-107 (after the kernel); the host
  // resumes at 107, then 1 us of gap and the 5 us call: the last kernel starts at 113.
  REQUIRE(last_gpu_start(trace::replay_graph(made(calls, ops), 0)) == Approx(113.0));
  // To pinned memory the call returns at once: the last launch is issued at 19, and its kernel
  // waits on stream 7 for the first to end (105).
  ops[1].name = "Memcpy DtoH (Device -> Pinned)";
  calls[3].dur_us = 3.0;
  calls[4].ts_us = 14.0;
  REQUIRE(last_gpu_start(trace::replay_graph(made(calls, ops), 0)) == Approx(105.0));  // stream 7 order
  // A cudaGraphLaunch whose three kernels share its correlation id: all three run, in order.
  calls = {{"cudaGraphLaunch", 1, 0.0, 10.0, 1}};
  ops = {op(7, 20.0, 30.0, 1), op(7, 50.0, 30.0, 1), op(7, 80.0, 30.0, 1)};
  const auto g = trace::replay_graph(made(calls, ops), 0);
  REQUIRE(g.gpu_ops == 3);
  REQUIRE(last_gpu_start(g) == Approx(70.0));  // issued at 10, then 10-40, 40-70, 70-100
}

TEST_CASE("a window of back-to-back steps: each step's host span, and the mean of the steady ones", "[traces]") {
  // Three steps of 100, 300 and 200 us, each launching one kernel of 150 us at its start, then
  // synchronizing. Step 1 (0-100): launch 0-5, the kernel runs 5-155, so its sync waits until
  // 155 although the trace measured 100; step 2 starts there.
  trace::KinetoTrace t = made({}, {});
  t.steps = {{1, 0.0, 100.0}, {2, 100.0, 300.0}, {3, 400.0, 200.0}};
  for (int k = 0; k < 3; ++k) {
    const double start = t.steps[static_cast<std::size_t>(k)].ts_us;
    t.runtime.push_back({"cudaLaunchKernel", 1, start, 5.0, 10 * k + 1});
    t.runtime.push_back({"cudaDeviceSynchronize", 1, start + 6.0, 20.0, 10 * k + 2});
    t.gpu_ops.push_back(op(7, start + 5.0, 150.0, 10 * k + 1));
  }
  const auto g = trace::replay_graph(t, -1);
  REQUIRE(g.warmup_steps == 2);
  REQUIRE(g.window.size() == 3);
  const auto r = run(g);
  // Step 1: the kernel ends at 155 and the host's remaining measured work (100 - 26 = 74 us:
  // the sync's own 20 us is waiting, not work) follows: 229. Step 2: 5 + 150, then 300 - 26 = 274
  // of host work: 429. Step 3: 5 + 150 + 174 = 329.
  REQUIRE(trace::replayed_seconds(g.window[0], r.end) * 1e6 == Approx(229.0));
  REQUIRE(trace::replayed_seconds(g.window[1], r.end) * 1e6 == Approx(429.0));
  REQUIRE(trace::replayed_seconds(g.window[2], r.end) * 1e6 == Approx(329.0));
  const trace::StepMeans m = trace::steady_means(g.window, r.end);
  REQUIRE(m.steps == 2);
  REQUIRE(m.measured_s * 1e6 == Approx(250.0));
  REQUIRE(m.replayed_s * 1e6 == Approx(379.0));
  // A gap of more than 1 ms before a step ends the window there.
  t.steps[2].ts_us = 1500.0;
  REQUIRE(trace::replay_graph(t, -1).warmup_steps == 0);
  REQUIRE(trace::replay_graph(t, 1).warmup_steps == 1);
}

TEST_CASE("the shared traces replay to their measured steps", "[traces]") {
  const std::string a100 = test::shared_path("validation/traces/hta/nccl_parser_config/nccl_data.json.gz");
  const std::string v100 =
      test::shared_path("validation/traces/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz");
  if (a100.empty() || v100.empty()) {
    WARN("skipped: ../shared/validation/traces is absent");
    return;
  }
  // A100 ResNet-50 DDP, rank 0 of 2: every step within the 5%.
  const auto t = trace::load_kineto(a100);
  for (int s = 0; s < 3; ++s) {
    const auto g = trace::replay_graph(t, s);
    const double replayed = trace::replayed_seconds(g, run(g).end);
    CAPTURE(s, replayed, g.measured_s);
    REQUIRE(replayed == Approx(g.measured_s).epsilon(0.05));
  }
  // V100 ResNet, steady steps of 95.6-95.7 ms, GPU-bound: the host runs a step ahead until the
  // launch queue is full, then launches at the GPU's pace. Replayed after the steps before them,
  // within the 5%.
  const auto v = trace::load_kineto(v100);
  for (int s = 2; s < 5; ++s) {
    const auto g = trace::replay_graph(v, s);
    REQUIRE(g.warmup_steps == static_cast<std::size_t>(s));
    const double replayed = trace::replayed_seconds(g, run(g).end);
    CAPTURE(s, replayed, g.measured_s);
    REQUIRE(replayed == Approx(g.measured_s).epsilon(0.05));
  }
  // Without the launch queue's bound the host would run ahead unchecked, and its window would
  // be its own time only: far short of the GPU-bound step.
  const auto g = trace::replay_graph(v, -1);
  sim::ExecutorOptions unbounded;
  unbounded.launch_queue_depth = 0;
  const auto r = sim::execute(g.graph, topo::resolve_cluster("dgx-a100", 1), sim::CollectiveConfig{},
                              sim::NetworkKind::analytical, unbounded);
  REQUIRE(trace::replayed_seconds(g, r.end) < 0.75 * g.measured_s);
}

TEST_CASE("replay on another cluster times the recorded NCCL collectives on its network", "[traces]") {
  const auto t = trace::load_kineto(test::data_path("traces/mini_kineto.json"));
  // The trace's all-reduce of 1,048,576 floats, over the job's 2 GPUs (its world size) or 16.
  auto nccl_time = [&](const char* preset, int gpus) {
    const auto g = trace::replay_graph(t, -1, {gpus});
    REQUIRE(g.modelled_collectives == 1);
    const topo::Cluster c = topo::resolve_cluster(preset, gpus);
    const auto r = sim::execute(g.graph, c, sim::CollectiveConfig{}, sim::NetworkKind::flow);
    for (sim::NodeId n = 0; n < g.graph.nodes.size(); ++n) {
      const auto& node = g.graph.nodes[n];
      if (node.kind != sim::OpKind::collective) continue;
      REQUIRE(node.op == sim::CollectiveOp::all_reduce);
      REQUIRE(node.bytes == 4.0 * 1048576);
      // Alone on the network it takes what the collective model says it takes there.
      sim::CollectiveRequest req;
      req.op = sim::CollectiveOp::all_reduce;
      req.bytes = node.bytes;
      for (int k = 0; k < gpus; ++k) req.ranks.push_back(static_cast<sim::GpuId>(k));
      const double expected = sim::measure_collective(c, sim::CollectiveConfig{}, sim::NetworkKind::flow, req).time.seconds();
      REQUIRE((r.end[n] - r.start[n]).seconds() == Approx(expected).epsilon(1e-6));
      return expected;
    }
    FAIL("no collective in the replay");
    return 0.0;
  };
  const double nvlink = nccl_time("dgx-a100", 2);
  const double across_pcie_nodes = nccl_time("pcie-8gpu", 16);
  REQUIRE(across_pcie_nodes > 2.0 * nvlink);
  // Without a target cluster the kernel keeps its measured 300 us.
  REQUIRE(trace::replay_graph(t, -1).modelled_collectives == 0);
}

namespace {

/// Rank `rank` of a 2-rank job: a compute kernel of `compute_us`, then an all-reduce kernel that
/// lasted `nccl_us`, each launched by a 5 us call, then a cudaDeviceSynchronize to the step's
/// end; the step starts at `start` and lasts `step_us`.
trace::KinetoTrace rank_trace(int rank, double start, double step_us, double compute_us, double nccl_us) {
  std::vector<trace::KinetoRuntimeCall> calls = {{"cudaLaunchKernel", 1, start, 5.0, 1},
                                                 {"cudaLaunchKernel", 1, start + 6.0, 5.0, 2},
                                                 {"cudaDeviceSynchronize", 1, start + 12.0, step_us - 12.0, 3}};
  KinetoGpuOp nccl = op(7, start + 5.0 + compute_us, nccl_us, 2);
  nccl.name = "ncclKernel_AllReduce_RING_LL_Sum_float";
  nccl.collective = "allreduce";
  trace::KinetoTrace t = made(calls, {op(7, start + 5.0, compute_us, 1), nccl});
  t.path = fmt::format("rank{}.json", rank);
  t.steps = {{4, start, step_us}};
  t.rank = rank;
  t.world_size = 2;
  return t;
}

std::vector<double> joint_steps(const std::vector<trace::KinetoTrace>& traces, trace::JointReplayGraph* out = nullptr) {
  const auto g = trace::joint_replay_graph(traces, -1);
  const auto r = sim::execute(g.graph, topo::resolve_cluster("dgx-a100", 2), sim::CollectiveConfig{},
                              sim::NetworkKind::analytical);
  auto steps = trace::rank_step_seconds(g, r.end);
  for (double& s : steps) s *= 1e6;
  if (out != nullptr) *out = g;
  return steps;
}

}  // namespace

TEST_CASE("a joint replay matches the ranks' NCCL kernels into collectives that wait for the last rank", "[traces]") {
  // Rank 0 computes 1000 us, rank 1 100 us; the all-reduce itself takes 100 us. Rank 0 arrives
  // last: its kernel is the transfer (100 us); rank 1's waited 900 us of it (1000 us measured).
  // Both steps end when the all-reduce does: 5 + 1000 + 100 = 1105 us on rank 0's clock.
  std::vector<trace::KinetoTrace> job = {rank_trace(1, 0.0, 1105.0, 100.0, 1000.0), rank_trace(0, 0.0, 1105.0, 1000.0, 100.0)};
  trace::JointReplayGraph g;
  std::vector<double> steps = joint_steps(job, &g);
  REQUIRE(g.ranks.size() == 2);
  REQUIRE(g.ranks[0].rank == 0);  // ordered by recorded rank, not file order
  REQUIRE(g.matched_collectives == 1);
  REQUIRE(g.shared_clock);
  REQUIRE(steps[0] == Approx(1105.0));
  REQUIRE(steps[1] == Approx(1105.0));
  // What if rank 0 computed 500 us? Replayed alone, rank 1 would keep its measured 1000 us
  // all-reduce; jointly it waits only for rank 0's new arrival: both end at 5 + 500 + 100.
  job[1] = rank_trace(0, 0.0, 1105.0, 500.0, 100.0);
  steps = joint_steps(job);
  REQUIRE(steps[0] == Approx(605.0));
  REQUIRE(steps[1] == Approx(605.0));
  // On a shared clock a rank whose step began 300 us later starts that much later: rank 1 now
  // arrives at 300 + 5 + 100 = 405 us, before rank 0 (505 us); its step is measured from 300.
  job = {rank_trace(0, 0.0, 605.0, 500.0, 100.0), rank_trace(1, 300.0, 305.0, 100.0, 200.0)};
  steps = joint_steps(job, &g);
  REQUIRE(g.ranks[1].offset_s == Approx(300e-6));
  REQUIRE(steps[0] == Approx(605.0));
  REQUIRE(steps[1] == Approx(305.0));
}

TEST_CASE("a joint replay rejects traces whose steps or collectives do not match", "[traces]") {
  const trace::KinetoTrace a = rank_trace(0, 0.0, 1105.0, 1000.0, 100.0);
  trace::KinetoTrace b = rank_trace(1, 0.0, 1105.0, 100.0, 1000.0);
  b.gpu_ops.pop_back();  // rank 1 launches no NCCL kernel
  REQUIRE_THROWS_WITH(trace::joint_replay_graph({a, b}, -1),
                      Catch::Contains("rank1.json: ProfilerStep#4 launches 0 NCCL kernels but rank0.json launches 1"));
  b = rank_trace(1, 0.0, 1105.0, 100.0, 1000.0);
  b.gpu_ops.back().collective = "broadcast";
  REQUIRE_THROWS_WITH(trace::joint_replay_graph({a, b}, -1), Catch::Contains("NCCL kernel #0 of ProfilerStep#4 is broadcast"));
  b = rank_trace(0, 0.0, 1105.0, 100.0, 1000.0);
  REQUIRE_THROWS_WITH(trace::joint_replay_graph({a, b}, -1), Catch::Contains("are both rank 0"));
  b = rank_trace(1, 0.0, 1105.0, 100.0, 1000.0);
  b.steps.front().number = 5;
  REQUIRE_THROWS_WITH(trace::joint_replay_graph({a, b}, -1), Catch::Contains("rank1.json: no ProfilerStep#4"));
  b = rank_trace(1, 0.0, 1105.0, 100.0, 1000.0);
  b.world_size = 4;
  REQUIRE_THROWS_WITH(trace::joint_replay_graph({a, b}, -1), Catch::Contains("not of one job"));
}

TEST_CASE("all 8 ranks of the PARAM DLRM job replay jointly to their measured steps", "[traces]") {
  const std::string archive = test::shared_path("validation/traces/param/dlrm_kineto.tar.gz");
  if (archive.empty()) {
    WARN("skipped: ../shared/validation/traces is absent");
    return;
  }
  const auto traces = trace::load_kineto_files(archive);
  REQUIRE(traces.size() == 8);
  const auto g = trace::joint_replay_graph(traces, -1);
  REQUIRE(g.shared_clock);
  REQUIRE(g.matched_collectives == 8);  // 5 all_to_all (SendRecv) and 3 all-reduces per rank
  const auto r = sim::execute(g.graph, topo::resolve_cluster("dgx-a100", 8), sim::CollectiveConfig{},
                              sim::NetworkKind::analytical);
  const auto steps = trace::rank_step_seconds(g, r.end);
  for (std::size_t k = 0; k < 8; ++k) {
    CAPTURE(k, steps[k], g.ranks[k].measured_s);
    REQUIRE(g.ranks[k].rank == static_cast<int>(k));
    REQUIRE(steps[k] == Approx(g.ranks[k].measured_s).epsilon(0.05));  // the 5%
  }
}
