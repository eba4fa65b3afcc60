#!/usr/bin/env python3
"""A linear layer's training kernels in BF16 and in FP8 as Transformer Engine's recipe runs them,
with plain PyTorch on one GPU (Transformer Engine itself is not needed): what
validate/data/fp8_linear/ was made from.

For tokens x in -> out: BF16 runs the forward, input-gradient and weight-gradient GEMMs
(torch.matmul). FP8 first casts the input, the weight and the output gradient to float8_e4m3fn
(the gradient to float8_e5m2, TE's HYBRID format), each with its transpose (one scaling
kernel and one transpose copy each: TE fuses them into one cast_transpose), then runs the same
three GEMMs with torch._scaled_mm. Each row is the median of 3 timed batches of ~40 ms.

    python3 scripts/gpu/fp8_linear.py > rows.jsonl
"""
import json
import statistics

import torch

SHAPES = [  # (tokens, in, out): GPT layers at 4096 tokens
    (4096, 4096, 12288),   # h 4096 QKV
    (4096, 4096, 16384),   # h 4096 MLP up
    (4096, 16384, 4096),   # h 4096 MLP down
    (4096, 8192, 8192),    # h 8192 output projection
    (8192, 8192, 32768),   # h 8192 MLP up, 8192 tokens
    (2048, 2048, 8192),    # h 2048 MLP up, 2048 tokens
]
E4M3 = torch.float8_e4m3fn
E5M2 = torch.float8_e5m2


def timed(fn):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    e0 = torch.cuda.Event(enable_timing=True)
    e1 = torch.cuda.Event(enable_timing=True)
    e0.record()
    fn()
    e1.record()
    e1.synchronize()
    one = e0.elapsed_time(e1)
    reps = max(3, int(40.0 / max(one, 1e-3)))
    out = []
    for _ in range(3):
        e0.record()
        for _ in range(reps):
            fn()
        e1.record()
        e1.synchronize()
        out.append(e0.elapsed_time(e1) * 1e3 / reps)
    return statistics.median(out)  # us


def cast_transpose(t, dtype, scale):
    q = (t * scale).to(dtype)
    return q, q.t().contiguous()


def main():
    p = torch.cuda.get_device_properties(0)
    print(json.dumps({"device": p.name, "sms": p.multi_processor_count, "torch": torch.__version__,
                      "cuda": torch.version.cuda}), flush=True)
    one = torch.ones((), device="cuda")
    for m, k, n in SHAPES:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02
        dy = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
        # BF16: y = x W^T, dx = dy W, dW = dy^T x.
        bf16 = {
            "fwd": timed(lambda: x @ w.t()),
            "dgrad": timed(lambda: dy @ w),
            "wgrad": timed(lambda: dy.t() @ x),
        }
        # FP8 operands and their transposes; _scaled_mm takes a row-major A and a column-major B.
        xq, xt = cast_transpose(x, E4M3, one)
        wq, wt = cast_transpose(w, E4M3, one)
        gq, gt = cast_transpose(dy, E5M2, one)
        mm = torch._scaled_mm
        fp8 = {
            "cast_input": timed(lambda: cast_transpose(x, E4M3, one)),
            "cast_weight": timed(lambda: cast_transpose(w, E4M3, one)),
            "cast_grad": timed(lambda: cast_transpose(dy, E5M2, one)),
            # y[m, n] = xq[m, k] @ (wq[n, k])^T: B = wq.t() is column-major.
            "fwd": timed(lambda: mm(xq, wq.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)),
            # dx[m, k] = gq[m, n] @ wt^T where wt = W^T [k, n] row-major: B = wt.t() is [n, k] column-major.
            "dgrad": timed(lambda: mm(gq, wt.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)),
            # dW[n, k] = gt[n, m] @ xt^T where xt = x^T [k, m]: B = xt.t() is [m, k] column-major.
            "wgrad": timed(lambda: mm(gt, xt.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)),
        }
        bf16_total = sum(bf16.values())
        fp8_total = sum(fp8.values())
        print(json.dumps({"kind": "linear_step", "tokens": m, "in": k, "out": n,
                          "bf16_us": {key: round(v, 3) for key, v in bf16.items()},
                          "fp8_us": {key: round(v, 3) for key, v in fp8.items()},
                          "bf16_total_us": round(bf16_total, 3), "fp8_total_us": round(fp8_total, 3),
                          "fp8_over_bf16": round(fp8_total / bf16_total, 4)}), flush=True)
        del x, w, dy, xq, xt, wq, wt, gq, gt
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
