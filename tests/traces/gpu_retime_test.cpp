// Retiming a trace's kernels for another GPU model (Habitat's wave scaling): occupancy from the
// launch configuration, the rule each op follows, and a replay that uses it.
#include <catch2/catch.hpp>

#include "collectives/collective_config.hpp"
#include "common/error.hpp"
#include "exec/executor.hpp"
#include "tests/test_paths.hpp"
#include "topologies/cluster_builders.hpp"
#include "traces/gpu_retime.hpp"
#include "traces/replay.hpp"

using namespace foresight;
using trace::KinetoGpuOp;
using trace::RetimeRule;

namespace {

// The GPUs as the catalog and the compute model describe them: achievable HBM is peak x the
// measured copy fraction (1.61 / 2.039 before Hopper, 2.90 / 3.35 on it).
const trace::RetimeGpu kV100{"V100", 70, 80, 900e9 * (1.61 / 2.039)};
const trace::RetimeGpu kA100{"A100", 80, 108, 1555e9 * (1.61 / 2.039)};
const trace::RetimeGpu kH100{"H100", 90, 132, 3350e9 * (2.90 / 3.35)};

KinetoGpuOp kernel(std::int64_t blocks, int threads, int registers, std::int64_t shared, double dur_us = 100.0) {
  KinetoGpuOp k;
  k.name.append("kernel");  // (assigning a literal trips GCC 12's false -Wrestrict)
  k.blocks = blocks;
  k.threads_per_block = threads;
  k.registers_per_thread = registers;
  k.shared_bytes = shared;
  k.dur_us = dur_us;
  return k;
}

}  // namespace

TEST_CASE("the blocks an SM holds follow the CUDA occupancy limits of each compute capability", "[traces]") {
  const trace::SmLimits volta = trace::sm_limits(70), ampere = trace::sm_limits(80), hopper = trace::sm_limits(90);
  // 256 threads (8 warps), 64 registers (2048 per warp), 16 KiB of shared memory:
  // threads 2048 / 256 = 8; registers 65536 / 2048 = 32 warps = 4 blocks; shared memory
  // 96 KiB / 16 KiB = 6 on Volta, 164 KiB / 17 KiB (1 KiB reserved per block) = 9 on Ampere.
  REQUIRE(trace::resident_blocks(kernel(1000, 256, 64, 16384), volta) == 4);
  REQUIRE(trace::resident_blocks(kernel(1000, 256, 64, 16384), ampere) == 4);
  // 40 KiB of shared memory per block: 98304 / 40960 = 2 on Volta, 167936 / 41984 = 4 on Ampere,
  // and 128-thread blocks of 32 registers on Hopper: 233472 / 41984 = 5 (threads and registers
  // allow 16).
  REQUIRE(trace::resident_blocks(kernel(1000, 256, 64, 40960), volta) == 2);
  REQUIRE(trace::resident_blocks(kernel(1000, 256, 64, 40960), ampere) == 4);
  REQUIRE(trace::resident_blocks(kernel(1000, 128, 32, 40960), hopper) == 5);
  // 32 threads, 16 registers, no shared memory: the 32 resident blocks per SM bind.
  REQUIRE(trace::resident_blocks(kernel(1000, 32, 16, 0), ampere) == 32);
  // 255 registers (8160 -> 8192 per warp) x 32 warps exceed the SM: still one block.
  REQUIRE(trace::resident_blocks(kernel(1000, 1024, 255, 0), volta) == 1);
  REQUIRE(trace::resident_blocks(kernel(0, 0, 0, 0), ampere) == 0);  // not recorded
  REQUIRE_THROWS_AS(trace::sm_limits(60), sim::ConfigError);
}

TEST_CASE("a kernel under one wave on both GPUs keeps its time; the others scale by HBM bandwidth", "[traces]") {
  const trace::KernelRetimer r(kV100, kA100);
  const double factor = 900.0 / 1555.0;  // the same copy fraction on both
  REQUIRE(r.bandwidth_factor() == Approx(factor));
  // 32-thread blocks, 32 per SM: a wave is 80 x 32 = 2560 blocks on the V100, 3456 on the A100.
  const auto small = r.retime(kernel(2559, 32, 16, 0));
  REQUIRE(small.rule == RetimeRule::kept_under_one_wave);
  REQUIRE(small.dur_us == 100.0);
  const auto full = r.retime(kernel(2560, 32, 16, 0));  // a full wave on the V100
  REQUIRE(full.rule == RetimeRule::scaled_bandwidth);
  REQUIRE(full.dur_us == Approx(100.0 * factor));
  // Without a recorded launch configuration a kernel counts as bandwidth-bound.
  REQUIRE(r.retime(kernel(0, 0, 0, 0)).rule == RetimeRule::scaled_bandwidth);
  KinetoGpuOp set = kernel(0, 0, 0, 0);
  set.kind = KinetoGpuOp::Kind::memset;
  REQUIRE(r.retime(set).dur_us == Approx(100.0 * factor));
  KinetoGpuOp copy = set;
  copy.kind = KinetoGpuOp::Kind::memcpy;
  copy.name = "Memcpy DtoD (Device -> Device)";
  REQUIRE(r.retime(copy).rule == RetimeRule::scaled_bandwidth);
  copy.name = "Memcpy HtoD (Pinned -> Device)";
  REQUIRE(r.retime(copy).rule == RetimeRule::kept_link_copy);
  REQUIRE(r.retime(copy).dur_us == 100.0);
  copy.name = "Memcpy PtoP (Device -> Device)";  // to another GPU: over NVLink or PCIe
  REQUIRE(r.retime(copy).rule == RetimeRule::kept_link_copy);
  KinetoGpuOp nccl = kernel(1'000'000, 512, 32, 0);
  nccl.collective = "allreduce";
  REQUIRE(r.retime(nccl).rule == RetimeRule::kept_nccl);
  REQUIRE(r.retime(nccl).dur_us == 100.0);
  // From an A100 to an H100: 1555 x 0.790 / (3350 x 0.866).
  REQUIRE(trace::KernelRetimer(kA100, kH100).bandwidth_factor() == Approx(1555.0 * (1.61 / 2.039) / 2900.0));
  REQUIRE_THROWS_AS(trace::KernelRetimer(kV100, trace::RetimeGpu{"none", 80, 0, 1e12}), sim::ConfigError);
}

TEST_CASE("a replay retimed for another GPU runs its kernels at their retimed durations", "[traces]") {
  const auto t = trace::load_kineto(test::data_path("traces/mini_kineto.json"));
  const trace::KernelRetimer r(kA100, kH100);
  const auto g = trace::replay_graph(t, -1, {0, &r});
  // The step's GEMM (400 us, no launch configuration recorded) scales; its copy to the host
  // and its NCCL kernel (left on its measured time without a target network) keep theirs.
  REQUIRE(g.retimed.scaled == 1);
  REQUIRE(g.retimed.link_copies == 1);
  REQUIRE(g.retimed.nccl == 1);
  REQUIRE(g.retimed.under_one_wave == 0);
  const auto run = sim::execute(g.graph, topo::resolve_cluster("dgx-a100", 1), sim::CollectiveConfig{},
                                sim::NetworkKind::analytical);
  std::vector<double> durations;
  for (sim::NodeId n = g.begin; n < g.end; ++n) {
    if (g.graph.nodes[n].kind == sim::OpKind::compute) durations.push_back((run.end[n] - run.start[n]).seconds() * 1e6);
  }
  REQUIRE(durations.size() == 3);
  REQUIRE(durations[0] == Approx(400.0 * r.bandwidth_factor()));
  REQUIRE(durations[1] == Approx(300.0));
  REQUIRE(durations[2] == Approx(20.0));
  // Without a retimer the GEMM keeps its 400 us.
  REQUIRE(trace::replay_graph(t, -1).retimed.scaled == 0);
}
