// The emulated collective kernel of scripts/gpu/overlap_bench.cu and comm_emulator_lib.cu: C
// persistent CTAs that reduce-copy through HBM (a ring step's traffic) at a paced rate, or spin.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace emu {

constexpr int kThreads = 512;
constexpr int kVecPerThread = 8;                                  // uint4 (16 B) per thread per chunk
constexpr size_t kChunkBytes = size_t(kThreads) * kVecPerThread * 16;  // 64 KiB per buffer per chunk

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint4 add_bf16x8(uint4 a, uint4 b) {
  uint4 r;
  auto* pa = reinterpret_cast<__nv_bfloat162*>(&a);
  auto* pb = reinterpret_cast<__nv_bfloat162*>(&b);
  auto* pr = reinterpret_cast<__nv_bfloat162*>(&r);
  for (int i = 0; i < 4; ++i) pr[i] = __hadd2(pa[i], pb[i]);
  return r;
}

// The collective's stand-in. Each CTA owns a slice of the buffers and walks it chunk by chunk,
// wrapping around; chunk k may start at t0 + k * ns_per_chunk (0: no pacing; < 0: move nothing).
// It stops when *stop becomes non-zero, or after max_ns.
__global__ void __launch_bounds__(kThreads) comm_emulator(const uint4* a, const uint4* b, uint4* out,
                                                          size_t vec_per_cta, double ns_per_chunk,
                                                          const volatile int* stop,
                                                          volatile int* started,
                                                          unsigned long long* chunks_done,
                                                          unsigned long long max_ns) {
  __shared__ int s_stop;
  const size_t base = size_t(blockIdx.x) * vec_per_cta;
  const size_t chunk_vec = size_t(kThreads) * kVecPerThread;
  const unsigned long long t0 = global_ns();
  if (threadIdx.x == 0) {
    started[blockIdx.x] = 1;
    __threadfence_system();
  }
  unsigned long long k = 0;
  size_t off = 0;
  for (;;) {
    if (threadIdx.x == 0) {
      int s = *stop;
      if (ns_per_chunk != 0.0) {
        // Wait for this chunk's turn (or, spinning, forever): resident and polling, as NCCL's
        // CTAs are while a peer has not yet written.
        const unsigned long long due = ns_per_chunk > 0 ? t0 + (unsigned long long)(k * ns_per_chunk) : ~0ull;
        while (s == 0 && global_ns() < due && global_ns() - t0 < max_ns) {
          __nanosleep(256);
          s = *stop;
        }
      }
      if (global_ns() - t0 > max_ns) s = 1;
      s_stop = s;
    }
    __syncthreads();
    if (s_stop) break;
    if (ns_per_chunk >= 0) {
      uint4 ra[kVecPerThread], rb[kVecPerThread];
#pragma unroll
      for (int v = 0; v < kVecPerThread; ++v) {
        const size_t i = base + off + size_t(v) * kThreads + threadIdx.x;
        ra[v] = a[i];
        rb[v] = b[i];
      }
#pragma unroll
      for (int v = 0; v < kVecPerThread; ++v) {
        out[base + off + size_t(v) * kThreads + threadIdx.x] = add_bf16x8(ra[v], rb[v]);
      }
      ++k;
      off += chunk_vec;
      if (off + chunk_vec > vec_per_cta) off = 0;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(chunks_done, k);
}

}  // namespace emu
