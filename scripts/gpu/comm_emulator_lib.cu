// The emulated collective of comm_emulator.cuh as a shared library for Python (ctypes), so that
// PyTorch's kernels (cuDNN convolutions, fused attention, normalization) can be timed beside it
// by scripts/gpu/overlap_torch.py. Built against the CUDA runtime PyTorch has loaded:
//   nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC -cudart shared \
//        -o build-gpu/libcomm_emulator.so scripts/gpu/comm_emulator_lib.cu
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "comm_emulator.cuh"

using namespace emu;

namespace {

struct State {
  uint4* a = nullptr;
  uint4* b = nullptr;
  uint4* out = nullptr;
  size_t bytes = size_t(256) << 20;
  int* stop = nullptr;
  int* started_host = nullptr;
  int* started_dev = nullptr;
  unsigned long long* chunks = nullptr;
  cudaEvent_t e0{}, e1{};
  int ctas = 0;
} g;

int fail(const char* what, cudaError_t e) {
  std::fprintf(stderr, "comm_emulator: %s: %s\n", what, cudaGetErrorString(e));
  return -1;
}

}  // namespace

extern "C" {

// Launches `ctas` CTAs paced at `rate_gbps` per buffer (0: unpaced, < 0: spin) on `stream` and
// returns once every CTA is resident (0), or -1 on an error.
int emu_start(int ctas, double rate_gbps, void* stream) {
  cudaError_t e;
  if (g.a == nullptr) {
    if ((e = cudaMalloc(&g.a, g.bytes)) || (e = cudaMalloc(&g.b, g.bytes)) || (e = cudaMalloc(&g.out, g.bytes)) ||
        (e = cudaMemset(g.a, 0x3c, g.bytes)) || (e = cudaMemset(g.b, 0x3c, g.bytes)) ||
        (e = cudaMalloc(&g.stop, sizeof(int))) || (e = cudaMalloc(&g.chunks, sizeof(unsigned long long))) ||
        (e = cudaHostAlloc(&g.started_host, sizeof(int) * 1024, cudaHostAllocMapped)) ||
        (e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&g.started_dev), g.started_host, 0)) ||
        (e = cudaEventCreate(&g.e0)) || (e = cudaEventCreate(&g.e1))) {
      return fail("setup", e);
    }
  }
  if ((e = cudaMemset(g.stop, 0, sizeof(int))) || (e = cudaMemset(g.chunks, 0, sizeof(unsigned long long))) ||
      (e = cudaDeviceSynchronize())) {
    return fail("reset", e);
  }
  std::memset(g.started_host, 0, sizeof(int) * 1024);
  g.ctas = ctas;
  auto s = static_cast<cudaStream_t>(stream);
  const double ns_per_chunk = rate_gbps < 0 ? -1.0 : rate_gbps == 0 ? 0.0 : kChunkBytes * ctas / rate_gbps;
  const size_t vec_per_cta = g.bytes / 16 / ctas / (kThreads * kVecPerThread) * (kThreads * kVecPerThread);
  cudaEventRecord(g.e0, s);
  comm_emulator<<<ctas, kThreads, 0, s>>>(g.a, g.b, g.out, vec_per_cta, ns_per_chunk, g.stop, g.started_dev, g.chunks,
                                          20'000'000'000ull);
  if ((e = cudaGetLastError())) return fail("launch", e);
  cudaEventRecord(g.e1, s);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    int n = 0;
    for (int i = 0; i < ctas; ++i) n += reinterpret_cast<volatile int*>(g.started_host)[i];
    if (n == ctas) return 0;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "comm_emulator: only %d of %d CTAs became resident\n", n, ctas);
      return -1;
    }
  }
}

// Stops the emulator (the flag is written on `stream`, after the work queued there) and returns
// the link rate it kept, GB/s per buffer, or a negative number on an error.
double emu_stop(void* stream) {
  const int one = 1;
  cudaError_t e;
  auto s = static_cast<cudaStream_t>(stream);
  if ((e = cudaMemcpyAsync(g.stop, &one, sizeof(int), cudaMemcpyHostToDevice, s)) || (e = cudaDeviceSynchronize())) {
    return fail("stop", e);
  }
  float ms = 0;
  unsigned long long chunks = 0;
  if ((e = cudaEventElapsedTime(&ms, g.e0, g.e1)) ||
      (e = cudaMemcpy(&chunks, g.chunks, sizeof(chunks), cudaMemcpyDeviceToHost))) {
    return fail("read back", e);
  }
  return ms > 0 ? double(chunks) * kChunkBytes / (ms * 1e-3) / 1e9 : 0.0;
}

}  // extern "C"
