#!/usr/bin/env python3
"""Writes examples/traces/synthetic-ddp-rank0.json.gz: a synthetic PyTorch-profiler (Kineto) trace
of rank 0 of 8 in a data-parallel training loop on A100s, so that `foresight replay` has an input in
a fresh clone (measured traces are third-party and not shipped: docs/validation.md).

Nothing in it was measured: it is a made-up ResNet-like step in Kineto's layout (ProfilerStep
annotations, aten ops on the main thread, cudaLaunchKernel records correlated with kernels on the
compute stream, NCCL all-reduce kernels on their own stream overlapping the backward pass, a
device-to-host copy at the end). Durations are fixed numbers chosen to look like a small CNN step;
the output is byte-identical on every run (gzip header without a timestamp).

Usage: scripts/synthesize_kineto_trace.py [OUT]   (default examples/traces/synthetic-ddp-rank0.json.gz)
"""
import gzip
import io
import json
import sys

WORLD = 8
STEPS = 3
COMPUTE_STREAM = 7
NCCL_STREAM = 20
CPU_PID, CPU_TID = 100, 11

# (op, kernel, forward us): a 12-layer CNN-like forward; backward takes twice as long per layer.
LAYERS = [("aten::cudnn_convolution", "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc", 180 + 10 * i)
          for i in range(12)]
# Gradient buckets: all-reduced once the backward of the layers they hold is done (DDP order:
# last layers first), (after how many backward layers, elements).
BUCKETS = [(3, 6_553_600), (6, 6_553_600), (9, 6_553_600), (12, 3_276_800)]


def main(out_path: str) -> int:
    events = []
    correlation = 1000
    external = 1
    t_cpu = 0.0
    t_gpu = 0.0
    t_nccl = 0.0

    def launch(name, cat_kernel, dur, stream, args=None):
        nonlocal correlation, t_cpu, t_gpu, t_nccl
        correlation += 1
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": t_cpu, "dur": 6.0,
                       "pid": CPU_PID, "tid": CPU_TID, "args": {"correlation": correlation}})
        kernel_args = {"device": 0, "stream": stream, "correlation": correlation}
        kernel_args.update(args or {})
        if stream == COMPUTE_STREAM:
            start = max(t_gpu, t_cpu + 8.0)
            t_gpu = start + dur
        else:
            start = max(t_nccl, t_gpu, t_cpu + 8.0)
            t_nccl = start + dur
        events.append({"ph": "X", "cat": cat_kernel, "name": name, "ts": start, "dur": float(dur), "pid": 0,
                       "tid": stream, "args": kernel_args})
        t_cpu += 10.0

    def cpu_op(name, dur):
        nonlocal external, t_cpu
        external += 1
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "ts": t_cpu, "dur": float(dur), "pid": CPU_PID,
                       "tid": CPU_TID, "args": {"External id": external}})

    for step in range(1, STEPS + 1):
        step_start = t_cpu
        step_index = len(events)
        events.append(None)  # the ProfilerStep annotation, filled once the step's length is known
        t_cpu += 20.0
        for op, kernel, us in LAYERS:
            cpu_op(op, 25)
            launch(kernel, "kernel", us, COMPUTE_STREAM)
            cpu_op("aten::relu_", 8)
            launch("void at::native::vectorized_elementwise_kernel<4, at::native::relu>", "kernel", 12,
                   COMPUTE_STREAM)
        done = 0
        for b, (after, elems) in enumerate(BUCKETS):
            while done < after:
                op, kernel, us = LAYERS[len(LAYERS) - 1 - done]
                cpu_op("aten::convolution_backward", 30)
                launch(kernel.replace("fprop", "dgrad"), "kernel", us, COMPUTE_STREAM)
                launch(kernel.replace("fprop", "wgrad"), "kernel", us, COMPUTE_STREAM)
                done += 1
            cpu_op("nccl:all_reduce", 15)
            ring_us = 2 * (WORLD - 1) / WORLD * elems * 4 / 150e3  # bytes / (150 GB/s in bytes per us)
            launch("ncclKernel_AllReduce_RING_LL128_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "kernel",
                   round(ring_us, 1), NCCL_STREAM,
                   {"Collective name": "allreduce", "In msg nelems": elems, "dtype": "Float", "Group size": WORLD})
        cpu_op("Optimizer.step#SGD.step", 40)
        for _ in range(3):
            launch("void at::native::(anonymous namespace)::multi_tensor_apply_kernel", "kernel", 35, COMPUTE_STREAM)
        correlation += 1
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "ts": t_cpu, "dur": 5.0,
                       "pid": CPU_PID, "tid": CPU_TID, "args": {"correlation": correlation}})
        copy_start = max(t_gpu, t_nccl, t_cpu + 8.0)
        events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "ts": copy_start,
                       "dur": 6.0, "pid": 0, "tid": COMPUTE_STREAM,
                       "args": {"device": 0, "stream": COMPUTE_STREAM, "correlation": correlation, "bytes": 4096}})
        t_gpu = copy_start + 6.0
        # .item() waits for the copy (cudaStreamSynchronize): the next step starts after it.
        sync_start = t_cpu + 6.0
        t_cpu = max(sync_start + 4.0, t_gpu + 5.0)
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": sync_start,
                       "dur": t_cpu - sync_start - 1.0, "pid": CPU_PID, "tid": CPU_TID,
                       "args": {"correlation": correlation + 1}})
        correlation += 1
        events[step_index] = {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "ts": step_start,
                              "dur": t_cpu - step_start, "pid": CPU_PID, "tid": CPU_TID,
                              "args": {"External id": external + 1}}
        external += 1

    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-40GB", "numSms": 108}],
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": WORLD},
        "traceEvents": events,
    }
    text = json.dumps(doc, indent=1).encode()
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
        gz.write(text)
    with open(out_path, "wb") as out:
        out.write(buf.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "examples/traces/synthetic-ddp-rank0.json.gz"))
