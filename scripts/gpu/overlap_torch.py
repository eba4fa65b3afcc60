#!/usr/bin/env python3
"""PyTorch's kernels beside an emulated collective: the convolution, attention and normalization
rows of validate/data/comm_compute_overlap/ (scripts/gpu/overlap_bench.cu has the GEMM rows).

Each victim (cuDNN convolutions in channels-last bf16, FlashAttention through
scaled_dot_product_attention, LayerNorm, a matmul as a cross-check with the cuBLAS rows) is timed
alone and beside the emulator of scripts/gpu/comm_emulator.cuh on another stream, at NCCL's
operating points. Prints one JSON object per line.

    nvcc -O3 -std=c++17 -arch=sm_90 -shared -Xcompiler -fPIC -cudart shared \\
         -o build-gpu/libcomm_emulator.so scripts/gpu/comm_emulator_lib.cu
    python3 scripts/gpu/overlap_torch.py build-gpu/libcomm_emulator.so > rows.jsonl
"""
import ctypes
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# (CTAs, GB/s per buffer): one resident CTA that moves nothing, NCCL across nodes (16 channels,
# network-bound), in one node (24 channels, NVLink-bound), and 32 unpaced channels.
POINTS = [(1, -1.0), (16, 100.0), (24, 0.0), (32, 0.0)]
TRIALS = 3
BF16 = torch.bfloat16


def conv(n, c, hw, k, r, backward=False):
    x = torch.randn(n, c, hw, hw, device="cuda", dtype=BF16).to(memory_format=torch.channels_last)
    w = torch.randn(k, c, r, r, device="cuda", dtype=BF16).to(memory_format=torch.channels_last)
    if not backward:
        return lambda: F.conv2d(x, w, padding=r // 2)
    x.requires_grad_(True)
    w.requires_grad_(True)
    y = F.conv2d(x, w, padding=r // 2)
    g = torch.randn_like(y)

    def step():
        gx, gw = torch.autograd.grad(y, (x, w), g, retain_graph=True)
        return gx
    return step


def attention(backward=False):
    q, k, v = (torch.randn(8, 16, 2048, 128, device="cuda", dtype=BF16, requires_grad=backward) for _ in range(3))

    def fwd():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if not backward:
        return fwd
    o = fwd()
    g = torch.randn_like(o)
    return lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True)


def layernorm():
    x = torch.randn(16384, 5120, device="cuda", dtype=BF16)
    w = torch.ones(5120, device="cuda", dtype=BF16)
    b = torch.zeros(5120, device="cuda", dtype=BF16)
    return lambda: F.layer_norm(x, (5120,), w, b)


def matmul():
    a = torch.randn(4096, 5120, device="cuda", dtype=BF16)
    b = torch.randn(5120, 5120, device="cuda", dtype=BF16)
    return lambda: a @ b


VICTIMS = [
    ("conv 3x3 64->64 56x56 b256 fwd", "conv", lambda: conv(256, 64, 56, 64, 3)),
    ("conv 3x3 256->256 14x14 b256 fwd", "conv", lambda: conv(256, 256, 14, 256, 3)),
    ("conv 1x1 1024->256 14x14 b256 fwd", "conv", lambda: conv(256, 1024, 14, 256, 1)),
    ("conv 3x3 256->256 14x14 b256 dgrad+wgrad", "conv", lambda: conv(256, 256, 14, 256, 3, backward=True)),
    ("flash attention b8 h16 s2048 d128 causal fwd", "attention", lambda: attention()),
    ("flash attention b8 h16 s2048 d128 causal bwd", "attention", lambda: attention(backward=True)),
    ("layernorm 16384x5120 fwd", "memory", layernorm),
    ("matmul 4096x5120x5120", "gemm", matmul),
]


def timed(fn, reps):
    e0 = torch.cuda.Event(enable_timing=True)
    e1 = torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(reps):
        fn()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) * 1e3 / reps  # us per run


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.emu_start.argtypes = [ctypes.c_int, ctypes.c_double, ctypes.c_void_p]
    lib.emu_start.restype = ctypes.c_int
    lib.emu_stop.argtypes = [ctypes.c_void_p]
    lib.emu_stop.restype = ctypes.c_double
    torch.backends.cudnn.benchmark = True
    p = torch.cuda.get_device_properties(0)
    print(json.dumps({"device": p.name, "sms": p.multi_processor_count, "torch": torch.__version__,
                      "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}), flush=True)
    victim_stream = torch.cuda.Stream()
    comm_stream = torch.cuda.Stream()
    with torch.cuda.stream(victim_stream):
        for name, family, make in VICTIMS:
            fn = make()
            timed(fn, 5)  # cuDNN's algorithm search, clocks
            one = timed(fn, 5)
            reps = max(5, int(40_000 / max(one, 1.0)))
            alone = statistics.median(timed(fn, reps) for _ in range(TRIALS))
            print(json.dumps({"kind": "victim_alone", "victim": name, "family": family, "reps": reps,
                              "us": round(alone, 3)}), flush=True)
            for ctas, rate in POINTS:
                us, link = [], []
                for _ in range(TRIALS):
                    if lib.emu_start(ctas, rate, ctypes.c_void_p(comm_stream.cuda_stream)) != 0:
                        sys.exit("emu_start failed")
                    us.append(timed(fn, reps))
                    link.append(lib.emu_stop(ctypes.c_void_p(victim_stream.cuda_stream)))
                with_comm = statistics.median(us)
                print(json.dumps({"kind": "victim_with_comm", "victim": name, "family": family, "ctas": ctas,
                                  "target_gbps": rate, "us_alone": round(alone, 3), "us_with": round(with_comm, 3),
                                  "slowdown": round(with_comm / alone - 1.0, 4),
                                  "link_gbps_during": round(statistics.median(link), 1)}), flush=True)
            del fn
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
