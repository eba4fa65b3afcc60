// Compute slowed by a concurrent collective, measured on one GPU: what
// validate/data/comm_compute_overlap/ was made from.
//
// A collective's kernel (NCCL: one CTA per channel, 512 threads) holds SMs for as long as it runs
// and moves data through HBM: in a ring all-reduce each step reads the local chunk and the chunk a
// peer wrote, reduces, and writes the result on (about three HBM accesses per byte on the link).
// With one GPU there is no peer, so this program emulates that kernel: C persistent CTAs of 512
// threads, each reading two bf16 buffers, adding them and writing a third, paced to a target link
// rate R (HBM traffic 3R; 0 = as fast as the CTAs go; "spin" = the CTAs stay resident and move
// nothing, as NCCL's do while they wait on a peer). A victim kernel (cuBLAS bf16 GEMMs of
// transformer shapes, or a bandwidth-bound bf16 axpy over the whole GPU) is timed alone and while
// the emulator runs on another stream; the slowdown is t_concurrent / t_alone - 1.
//
// Build (the project's machines have CUDA 13 at /usr/local/cuda):
//   nvcc -O3 -std=c++17 -arch=sm_90 -o build-gpu/overlap_bench scripts/gpu/overlap_bench.cu \
//        -lcublas -Xlinker -rpath=/usr/local/cuda/lib64
// Run: build-gpu/overlap_bench [--quick | --launch-wait] > rows.jsonl   (one JSON object per line)
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "comm_emulator.cuh"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)
#define CB(x)                                                                            \
  do {                                                                                   \
    cublasStatus_t s_ = (x);                                                             \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                   \
      std::fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

namespace {

using namespace emu;

// A bandwidth-bound victim: y = 2 x + y over bf16, grid-stride, the whole GPU.
__global__ void axpy_bf16(const __nv_bfloat162* x, __nv_bfloat162* y, size_t n2) {
  const __nv_bfloat162 two = __floats2bfloat162_rn(2.f, 2.f);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n2; i += size_t(gridDim.x) * blockDim.x) {
    y[i] = __hfma2(two, x[i], y[i]);
  }
}

struct Victim {
  std::string name;
  int m = 0, n = 0, k = 0;  // GEMM; m == 0: axpy over `bytes`
  size_t bytes = 0;
  double flops() const { return 2.0 * m * n * k; }
};

struct Gpu {
  cudaStream_t victim_stream{}, comm_stream{};
  cublasHandle_t blas{};
  int sms = 0;
  // GEMM operands (large enough for every shape), the axpy vectors, the emulator's buffers.
  void* ga = nullptr; void* gb = nullptr; void* gc = nullptr;
  void* ax = nullptr; void* ay = nullptr;
  uint4* ea = nullptr; uint4* eb = nullptr; uint4* eo = nullptr;
  size_t emu_bytes = 0;
  int* stop = nullptr;
  int* started_host = nullptr; int* started_dev = nullptr;
  unsigned long long* chunks = nullptr;
};

void run_victim(Gpu& g, const Victim& v, int reps) {
  if (v.m == 0) {
    const size_t n2 = v.bytes / sizeof(__nv_bfloat162);  // `bytes` per vector
    for (int r = 0; r < reps; ++r) {
      axpy_bf16<<<g.sms * 4, 256, 0, g.victim_stream>>>(static_cast<const __nv_bfloat162*>(g.ax),
                                                         static_cast<__nv_bfloat162*>(g.ay), n2);
    }
    CK(cudaGetLastError());
    return;
  }
  const float alpha = 1.f, beta = 0.f;
  for (int r = 0; r < reps; ++r) {
    CB(cublasGemmEx(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, v.m, v.n, v.k, &alpha, g.ga, CUDA_R_16BF, v.m, g.gb,
                    CUDA_R_16BF, v.k, &beta, g.gc, CUDA_R_16BF, v.m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

double time_victim(Gpu& g, const Victim& v, int reps) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0, g.victim_stream));
  run_victim(g, v, reps);
  CK(cudaEventRecord(e1, g.victim_stream));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return ms * 1e3 / reps;  // us per run
}

struct CommRun {
  double victim_us = 0;   // per run, < 0 when no victim
  double wall_us = 0;     // the emulator's whole run
  double link_gbps = 0;   // chunk bytes per second, per buffer (= the emulated link rate)
};

// Starts the emulator with `ctas` CTAs paced at `rate_gbps` (0: unpaced, < 0: spin), waits until
// every CTA is resident, then times `reps` victim runs (or sleeps `alone_ms` without a victim),
// stops the emulator and returns both.
CommRun with_comm(Gpu& g, int ctas, double rate_gbps, const Victim* v, int reps, int alone_ms) {
  CK(cudaMemset(g.stop, 0, sizeof(int)));
  CK(cudaMemset(g.chunks, 0, sizeof(unsigned long long)));
  std::memset(g.started_host, 0, sizeof(int) * 1024);
  CK(cudaDeviceSynchronize());
  const double ns_per_chunk = rate_gbps < 0 ? -1.0 : rate_gbps == 0 ? 0.0 : kChunkBytes * ctas / rate_gbps;
  const size_t vec_per_cta = g.emu_bytes / 16 / ctas / (kThreads * kVecPerThread) * (kThreads * kVecPerThread);
  cudaEvent_t c0, c1;
  CK(cudaEventCreate(&c0));
  CK(cudaEventCreate(&c1));
  CK(cudaEventRecord(c0, g.comm_stream));
  comm_emulator<<<ctas, kThreads, 0, g.comm_stream>>>(g.ea, g.eb, g.eo, vec_per_cta, ns_per_chunk, g.stop,
                                                       g.started_dev, g.chunks, 20'000'000'000ull);
  CK(cudaGetLastError());
  CK(cudaEventRecord(c1, g.comm_stream));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    int n = 0;
    for (int i = 0; i < ctas; ++i) n += reinterpret_cast<volatile int*>(g.started_host)[i];
    if (n == ctas) break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "emulator: only %d of %d CTAs became resident\n", n, ctas);
      std::exit(1);
    }
  }
  CommRun out;
  if (v) {
    out.victim_us = time_victim(g, *v, reps);
  } else {
    out.victim_us = -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(alone_ms));
  }
  const int one = 1;
  CK(cudaMemcpyAsync(g.stop, &one, sizeof(int), cudaMemcpyHostToDevice, g.victim_stream));
  CK(cudaDeviceSynchronize());
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, c0, c1));
  unsigned long long chunks = 0;
  CK(cudaMemcpy(&chunks, g.chunks, sizeof(chunks), cudaMemcpyDeviceToHost));
  out.wall_us = ms * 1e3;
  out.link_gbps = ms > 0 ? double(chunks) * kChunkBytes / (ms * 1e-3) / 1e9 : 0;
  CK(cudaEventDestroy(c0));
  CK(cudaEventDestroy(c1));
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

// How long a collective launched while GEMMs hold every SM waits for its CTAs: `reps` GEMMs
// are queued, the emulator is launched `delay_us` after the first starts, and the host polls the
// CTAs' start flags. Prints the wait and where the GEMM batch stood.
void launch_wait(Gpu& g, const Victim& v, int reps, int ctas, int delay_us) {
  const double one_us = time_victim(g, v, 3);
  CK(cudaMemset(g.stop, 0, sizeof(int)));
  std::memset(g.started_host, 0, sizeof(int) * 1024);
  CK(cudaDeviceSynchronize());
  run_victim(g, v, reps);
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
  const size_t vec_per_cta = g.emu_bytes / 16 / ctas / (kThreads * kVecPerThread) * (kThreads * kVecPerThread);
  const auto launched = std::chrono::steady_clock::now();
  comm_emulator<<<ctas, kThreads, 0, g.comm_stream>>>(g.ea, g.eb, g.eo, vec_per_cta, -1.0, g.stop, g.started_dev,
                                                       g.chunks, 20'000'000'000ull);
  CK(cudaGetLastError());
  double first_us = -1, all_us = -1;
  for (;;) {
    int n = 0;
    for (int i = 0; i < ctas; ++i) n += reinterpret_cast<volatile int*>(g.started_host)[i];
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - launched).count();
    if (n > 0 && first_us < 0) first_us = us;
    if (n == ctas) {
      all_us = us;
      break;
    }
    if (us > 5e6) break;
  }
  const bool victims_left = cudaStreamQuery(g.victim_stream) == cudaErrorNotReady;
  const int one = 1;
  CK(cudaMemcpyAsync(g.stop, &one, sizeof(int), cudaMemcpyHostToDevice, g.victim_stream));
  CK(cudaDeviceSynchronize());
  std::printf("{\"kind\": \"launch_wait\", \"victim\": \"%s\", \"victim_us\": %.3f, \"queued\": %d, \"ctas\": %d, "
              "\"launched_after_us\": %.1f, \"first_cta_us\": %.1f, \"all_ctas_us\": %.1f, \"victims_still_queued\": %s}\n",
              v.name.c_str(), one_us, reps, ctas,
              std::chrono::duration<double, std::micro>(launched - t0).count(), first_us, all_us,
              victims_left ? "true" : "false");
  std::fflush(stdout);
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const bool wait_only = argc > 1 && std::strcmp(argv[1], "--launch-wait") == 0;
  Gpu g;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  g.sms = prop.multiProcessorCount;
  int clock_khz = 0, mem_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0);
  std::printf("{\"device\": \"%s\", \"sms\": %d, \"sm_clock_mhz\": %d, \"cc\": \"%d.%d\", \"hbm_bytes\": %zu, "
              "\"emulator_threads\": %d, \"chunk_bytes\": %zu}\n",
              prop.name, g.sms, clock_khz / 1000, prop.major, prop.minor, prop.totalGlobalMem, kThreads, kChunkBytes);
  std::fflush(stdout);
  CK(cudaStreamCreateWithFlags(&g.victim_stream, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&g.comm_stream, cudaStreamNonBlocking));
  CB(cublasCreate(&g.blas));
  CB(cublasSetStream(g.blas, g.victim_stream));
  const size_t gemm_elems = size_t(16384) * 16384;
  CK(cudaMalloc(&g.ga, gemm_elems * 2));
  CK(cudaMalloc(&g.gb, gemm_elems * 2));
  CK(cudaMalloc(&g.gc, gemm_elems * 2));
  CK(cudaMemset(g.ga, 0x3c, gemm_elems * 2));  // bf16 0x3c3c: a small finite value
  CK(cudaMemset(g.gb, 0x3c, gemm_elems * 2));
  const size_t axpy_bytes = size_t(512) << 20;
  CK(cudaMalloc(&g.ax, axpy_bytes));
  CK(cudaMalloc(&g.ay, axpy_bytes));
  CK(cudaMemset(g.ax, 0x3c, axpy_bytes));
  CK(cudaMemset(g.ay, 0x3c, axpy_bytes));
  g.emu_bytes = size_t(256) << 20;  // per buffer: far larger than L2 (50 MiB), so HBM is used
  CK(cudaMalloc(&g.ea, g.emu_bytes));
  CK(cudaMalloc(&g.eb, g.emu_bytes));
  CK(cudaMalloc(&g.eo, g.emu_bytes));
  CK(cudaMemset(g.ea, 0x3c, g.emu_bytes));
  CK(cudaMemset(g.eb, 0x3c, g.emu_bytes));
  CK(cudaMalloc(&g.stop, sizeof(int)));
  CK(cudaMalloc(&g.chunks, sizeof(unsigned long long)));
  CK(cudaHostAlloc(&g.started_host, sizeof(int) * 1024, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&g.started_dev), g.started_host, 0));

  // Victims: GPT layer GEMMs at 4096 tokens (micro-batch x sequence) for hidden 5120 and 12288
  // with TP 4 and 8 (QKV, attention projection, MLP up/down), a square 8192, and the axpy.
  std::vector<Victim> victims = {
      {"gemm 8192^3", 8192, 8192, 8192},
      {"h5120 tp4 qkv", 3840, 4096, 5120},
      {"h5120 tp4 mlp-down", 5120, 4096, 5120},
      {"h12288 tp8 mlp-up", 6144, 4096, 12288},
      {"h12288 tp8 proj", 12288, 4096, 1536},
      {"axpy 2 x 512 MiB", 0, 0, 0, axpy_bytes},
  };
  if (wait_only) {
    // Queued GEMMs (about 25 ms of work), the collective launched 5 ms in; the axpy likewise.
    for (const Victim& v : victims) {
      for (int c : {1, 16, 24}) {
        for (int t = 0; t < 3; ++t) {
          const double one = time_victim(g, v, 3);
          launch_wait(g, v, std::max(5, int(25'000.0 / std::max(one, 1.0))), c, 5000);
        }
      }
    }
    return 0;
  }
  std::vector<int> ctas = {1, 4, 8, 16, 24, 32};
  std::vector<double> rates = {-1.0, 100.0, 200.0, 0.0};  // GB/s per buffer; -1 spin, 0 unpaced
  const int trials = quick ? 1 : 3;
  if (quick) {
    victims.resize(2);
    ctas = {16};
    rates = {-1.0, 200.0, 0.0};
  }
  // The emulator alone: what rate it reaches per CTA count.
  for (int c : ctas) {
    for (double r : rates) {
      if (r < 0) continue;
      std::vector<double> rate;
      for (int t = 0; t < trials; ++t) rate.push_back(with_comm(g, c, r, nullptr, 0, 30).link_gbps);
      std::printf("{\"kind\": \"emulator_alone\", \"ctas\": %d, \"target_gbps\": %.0f, \"link_gbps\": %.1f}\n", c, r,
                  median(rate));
      std::fflush(stdout);
    }
  }
  for (const Victim& v : victims) {
    // Warm up (cuBLAS heuristics, clocks), then size the batch to about 40 ms.
    const double one = time_victim(g, v, 3);
    const int reps = std::max(5, int(40'000.0 / std::max(one, 1.0)));
    std::vector<double> alone;
    for (int t = 0; t < trials; ++t) alone.push_back(time_victim(g, v, reps));
    const double t_alone = median(alone);
    std::printf("{\"kind\": \"victim_alone\", \"victim\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, \"bytes\": %zu, "
                "\"reps\": %d, \"us\": %.3f, \"tflops\": %.1f}\n",
                v.name.c_str(), v.m, v.n, v.k, v.bytes, reps, t_alone, v.m ? v.flops() / t_alone / 1e6 : 0.0);
    std::fflush(stdout);
    for (int c : ctas) {
      for (double r : rates) {
        std::vector<double> us, link;
        for (int t = 0; t < trials; ++t) {
          const CommRun run = with_comm(g, c, r, &v, reps, 0);
          us.push_back(run.victim_us);
          link.push_back(run.link_gbps);
        }
        const double t_with = median(us);
        std::printf("{\"kind\": \"victim_with_comm\", \"victim\": \"%s\", \"ctas\": %d, \"target_gbps\": %.0f, "
                    "\"us_alone\": %.3f, \"us_with\": %.3f, \"slowdown\": %.4f, \"link_gbps_during\": %.1f}\n",
                    v.name.c_str(), c, r, t_alone, t_with, t_with / t_alone - 1.0, median(link));
        std::fflush(stdout);
      }
    }
    // cuBLAS told to leave the emulator's SMs free (cublasSetSmCountTarget, what frameworks that
    // overlap communication set): alone, then beside the unpaced emulator.
    if (v.m == 0) continue;
    for (int c : ctas) {
      CB(cublasSetSmCountTarget(g.blas, g.sms - c));
      time_victim(g, v, 3);
      std::vector<double> al, us;
      for (int t = 0; t < trials; ++t) al.push_back(time_victim(g, v, reps));
      for (int t = 0; t < trials; ++t) us.push_back(with_comm(g, c, 0.0, &v, reps, 0).victim_us);
      std::printf("{\"kind\": \"victim_sm_target\", \"victim\": \"%s\", \"ctas\": %d, \"sm_target\": %d, "
                  "\"us_alone_all_sms\": %.3f, \"us_alone\": %.3f, \"us_with\": %.3f, \"slowdown\": %.4f}\n",
                  v.name.c_str(), c, g.sms - c, t_alone, median(al), median(us), median(us) / t_alone - 1.0);
      std::fflush(stdout);
    }
    CB(cublasSetSmCountTarget(g.blas, 0));
  }
  return 0;
}
