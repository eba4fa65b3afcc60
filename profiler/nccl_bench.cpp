#include "profiler/nccl_bench.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "profiler/detail/cuda_check.hpp"
#include "profiler/device_buffer.hpp"
#include "profiler/records.hpp"

namespace foresight::prof {
namespace {

using detail::check_cuda;

constexpr int kElementBytes = 4;  // float32, as nccl-tests runs by default
/// Memory left to NCCL's own buffers and the CUDA context when sizing the sweep's buffers.
constexpr std::size_t kReserveBytes = 1ULL << 30;

void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw sim::Error(fmt::format("{}: {}", what, ncclGetErrorString(r)));
}

/// One GPU's part: its communicator, stream, events and buffers.
struct Rank {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t begin = nullptr;
  cudaEvent_t end = nullptr;
  DeviceBuffer send;
  DeviceBuffer recv;

  Rank() = default;
  Rank(const Rank&) = delete;
  Rank& operator=(const Rank&) = delete;
  ~Rank() {
    if (begin != nullptr) cudaEventDestroy(begin);
    if (end != nullptr) cudaEventDestroy(end);
    if (stream != nullptr) cudaStreamDestroy(stream);
    if (comm != nullptr) ncclCommDestroy(comm);
  }
};

/// Launches `op` over `elements` (as sweep_elements counts them) on every rank, in one group.
void launch(CollectiveOp op, std::uint64_t elements, const std::vector<std::unique_ptr<Rank>>& ranks) {
  const auto n = ranks.size();
  const std::size_t per_rank = elements / n;  // the split ops' share of each rank
  check(ncclGroupStart(), "ncclGroupStart");
  for (const auto& r : ranks) {
    const void* send = r->send.get();
    void* recv = r->recv.get();
    switch (op) {
      case CollectiveOp::all_reduce:
        check(ncclAllReduce(send, recv, elements, ncclFloat32, ncclSum, r->comm, r->stream), "ncclAllReduce");
        break;
      case CollectiveOp::all_gather:
        check(ncclAllGather(send, recv, per_rank, ncclFloat32, r->comm, r->stream), "ncclAllGather");
        break;
      case CollectiveOp::reduce_scatter:
        check(ncclReduceScatter(send, recv, per_rank, ncclFloat32, ncclSum, r->comm, r->stream), "ncclReduceScatter");
        break;
      case CollectiveOp::broadcast:
        check(ncclBroadcast(send, recv, elements, ncclFloat32, 0, r->comm, r->stream), "ncclBroadcast");
        break;
      case CollectiveOp::alltoall:
        for (std::size_t peer = 0; peer < n; ++peer) {
          const std::size_t offset = peer * per_rank * kElementBytes;
          check(ncclSend(static_cast<const char*>(send) + offset, per_rank, ncclFloat32, static_cast<int>(peer),
                         r->comm, r->stream),
                "ncclSend");
          check(ncclRecv(static_cast<char*>(recv) + offset, per_rank, ncclFloat32, static_cast<int>(peer), r->comm,
                         r->stream),
                "ncclRecv");
        }
        break;
    }
  }
  check(ncclGroupEnd(), "ncclGroupEnd");
}

/// The median over `reps` of the slowest rank's time of one `op`, after `warmup` untimed runs.
double time_collective(CollectiveOp op, std::uint64_t elements, const std::vector<std::unique_ptr<Rank>>& ranks,
                       int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) launch(op, elements, ranks);
  for (const auto& r : ranks) check_cuda(cudaStreamSynchronize(r->stream), "cudaStreamSynchronize");
  std::vector<double> seconds;
  for (int i = 0; i < reps; ++i) {
    for (const auto& r : ranks) check_cuda(cudaEventRecord(r->begin, r->stream), "cudaEventRecord");
    launch(op, elements, ranks);
    for (const auto& r : ranks) check_cuda(cudaEventRecord(r->end, r->stream), "cudaEventRecord");
    double slowest = 0.0;
    for (const auto& r : ranks) {
      check_cuda(cudaEventSynchronize(r->end), "cudaEventSynchronize");
      float ms = 0.0f;
      check_cuda(cudaEventElapsedTime(&ms, r->begin, r->end), "cudaEventElapsedTime");
      slowest = std::max(slowest, static_cast<double>(ms) * 1e-3);
    }
    seconds.push_back(slowest);
  }
  return median(std::move(seconds));
}

}  // namespace

int nccl_version() {
  int v = 0;
  check(ncclGetVersion(&v), "ncclGetVersion");
  return v;
}

CollectiveSweep run_nccl_sweep(const NcclSweepOptions& o) {
  sweep_sizes(o.min_bytes, o.max_bytes, o.factor);  // rejects bad options before touching a GPU
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(count), nullptr);
  check(ncclCommInitAll(comms.data(), count, nullptr), "ncclCommInitAll");
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int i = 0; i < count; ++i) {
    ranks.push_back(std::make_unique<Rank>());
    ranks.back()->device = i;
    ranks.back()->comm = comms[static_cast<std::size_t>(i)];
  }
  // Buffers as large as the largest size every GPU can hold twice (send and receive).
  std::size_t free_min = SIZE_MAX;
  for (const auto& r : ranks) {
    check_cuda(cudaSetDevice(r->device), "cudaSetDevice");
    std::size_t free = 0, total = 0;
    check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    free_min = std::min(free_min, free);
  }
  const std::uint64_t fits = free_min > kReserveBytes ? (free_min - kReserveBytes) / 2 : 0;
  const std::uint64_t max_bytes = std::min<std::uint64_t>(o.max_bytes, fits);
  if (max_bytes < o.min_bytes) {
    throw sim::Error(fmt::format("NCCL sweep: {} B free on the fullest GPU, too little for {} B buffers", free_min,
                                 o.min_bytes));
  }
  const std::vector<std::uint64_t> sizes = sweep_sizes(o.min_bytes, max_bytes, o.factor);
  const auto n = static_cast<int>(ranks.size());
  std::uint64_t buffer_bytes = 0;
  for (const CollectiveOp op : kSweepOps) {
    buffer_bytes = std::max(buffer_bytes, sweep_elements(op, sizes.back(), n, kElementBytes) * kElementBytes);
  }
  for (const auto& r : ranks) {
    check_cuda(cudaSetDevice(r->device), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check_cuda(cudaEventCreate(&r->begin), "cudaEventCreate");
    check_cuda(cudaEventCreate(&r->end), "cudaEventCreate");
    std::optional<DeviceBuffer> send = DeviceBuffer::allocate(buffer_bytes);
    std::optional<DeviceBuffer> recv = DeviceBuffer::allocate(buffer_bytes);
    if (!send || !recv) throw sim::Error(fmt::format("NCCL sweep: {} B buffers do not fit on GPU {}", buffer_bytes, r->device));
    r->send = std::move(*send);
    r->recv = std::move(*recv);
    r->send.fill_finite(kElementBytes, static_cast<std::uint64_t>(r->device) + 1);
  }

  CollectiveSweep sweep;
  sweep.gpus = n;
  for (const CollectiveOp op : kSweepOps) {
    std::uint64_t previous = 0;
    for (const std::uint64_t requested : sizes) {
      const std::uint64_t elements = sweep_elements(op, requested, n, kElementBytes);
      const std::uint64_t bytes = elements * kElementBytes;
      if (bytes == previous) continue;
      previous = bytes;
      sweep.rows.push_back(collective_row(op, bytes, n, time_collective(op, elements, ranks, o.warmup, o.reps)));
    }
  }
  const int v = nccl_version();
  sweep.provenance = {{"nccl", fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)},
                      {"gpus", std::to_string(n)},
                      {"timing", "cuda-events (each repetition: the slowest GPU's time)"},
                      {"warmup", std::to_string(o.warmup)},
                      {"reps", std::to_string(o.reps)},
                      {"dtype", "float32"},
                      {"min_bytes", std::to_string(sizes.front())},
                      {"max_bytes", std::to_string(sizes.back())},
                      {"step", std::to_string(o.factor)}};
  if (n == 1) sweep.note = "one GPU visible: every row is for n = 1 (no transfer between GPUs; bus bandwidth 0 but broadcast's)";
  if (max_bytes < o.max_bytes) {
    if (!sweep.note.empty()) sweep.note += "; ";
    sweep.note += fmt::format("sizes capped at {} B by free GPU memory", sizes.back());
  }
  return sweep;
}

}  // namespace foresight::prof
