#!/usr/bin/env python3
"""GPU kernel-time sweep for fitting Foresight's compute model (kernel curves, not assumed efficiencies).

Measures on one CUDA GPU the kernels training spends its time in, over the shapes real models produce:
  gemm_align (only when named) GEMMs with an edge off 16-byte alignment beside padded twins
  gemm       torch.matmul bf16/fp16/tf32/fp32: square, skinny, transformer (QKV/proj/MLP, TP splits,
             Megatron H100 layers of 4096 tokens split 4 or 8 ways, SwiGLU,
             Llama), NN/NT/TN layouts
  bmm        torch.bmm of unfused attention (QK^T, PV)
  fp8        torch._scaled_mm e4m3 x e4m3 -> bf16 (capability >= 8.9)
  attention  F.scaled_dot_product_attention forward and forward+backward (flash; efficient/math/cudnn too)
  conv       F.conv2d forward and dgrad+wgrad of ResNet-18/50, VGG-19, MobileNetV2 (ImageNet, batch 64)
             and ResNet-18-CIFAR (batch 128)
  memory     copy, add, gelu, layer_norm, softmax, rms-norm, AdamW step (foreach and fused)
Per shape: torch.randn inputs, 3 warm-up calls, a probe call, then R = clamp(0.1 s / probe, 5, 50) calls,
each between its own pair of CUDA events; median, p10, p90 reported. Inputs under 2x L2 rotate among
distinct copies so every call reads cold data. Each family gets a share of the budget and visits its
shapes coarse-to-fine; the JSON is rewritten atomically after each family and every ~15 s.

Run:  python3 scripts/gpu/kernel_sweep.py --out sweep.json --budget-s 100 \\
          [--families gemm,bmm,fp8,attention,conv,memory]
Needs only the standard library, numpy and a CUDA build of torch 2.x.
"""
import argparse, contextlib, datetime, gc, itertools, json, math, os, shlex, signal, subprocess, sys, time
import warnings

T_START = time.time()
import numpy as np
import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore", category=UserWarning)
DEV = "cuda"
WARMUP, RMIN, RMAX, TARGET_S = 3, 5, 50, 0.1
ROT_CAP = 4 << 30  # at most this many bytes of rotating input copies
SHARES = {"gemm_align": .30, "gemm": .30, "bmm": .08, "fp8": .07, "attention": .20, "conv": .20, "memory": .15}
DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}
ES = {"bf16": 2, "fp16": 2, "tf32": 4, "fp32": 4}
ST = {"out": None, "prov": {}, "rows": [], "last_save": 0.0, "l2": 50 << 20, "scratch": None,
      "best": {}, "skipped": 0}
CONVENTIONS = {
    "bytes": "minimum traffic: each input read once, each output written once",
    "gemm": "flops 2*m*n*k (bmm: x batch); bytes (m*k + k*n + m*n) * element size; layout nn: A (m,k), "
            "B (k,n) row-major; gemm_nt: B = (n,k).t(); gemm_tn: A = (k,m).t(); tf32 = fp32 tensors with TF32",
    "fp8": "torch._scaled_mm e4m3 x e4m3 (B column-major), tensor-wise scales 1.0, bf16 out; "
           "bytes m*k + k*n + 2*m*n",
    "attention": "fwd flops 4*b*h*s*s*d, halved when causal; fwd_bwd flops = 3.5 x fwd (backward = 2.5 x "
                 "forward: flash backward recomputes QK^T); bytes fwd 4*b*h*s*d*e (q,k,v,o), fwd_bwd "
                 "12*b*h*s*d*e (+o,do read, dq,dk,dv written); b = max(1, 16384 // s)",
    "conv": "fwd flops 2*n*k*(c/groups)*r*s*oh*ow; conv_bwd = dgrad + wgrad = 2 x fwd flops, bytes "
            "2*x + 2*w + y; fp16/bf16 channels_last (nhwc), fp32/tf32 nchw; cudnn.benchmark on",
    "memory": "size_bytes = size of the first input; bytes copy 2S, add 3S, gelu/layer_norm/softmax/rmsnorm "
              "2S (bf16); adamw: fp32 params of S bytes in 16 tensors, 28 bytes per element (param r+w, "
              "grad r, exp_avg r+w, exp_avg_sq r+w) = 7S",
}

# ----------------------------------------------------------------------------- output and provenance
def save():
    try:
        ST["prov"]["elapsed_s"] = round(time.time() - T_START, 2)
        tmp = ST["out"] + ".tmp"
        with open(tmp, "w") as f:
            f.write('{"provenance": ' + json.dumps(ST["prov"], default=str) + ',\n "rows": [\n')
            f.write(",\n".join(json.dumps(r, default=str) for r in ST["rows"]) + "\n]}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, ST["out"])
    except Exception as e:  # never fatal
        print(f"warning: could not save {ST['out']}: {e}", flush=True)
    ST["last_save"] = time.time()

def on_signal(signum, frame):
    ST["prov"]["status"] = f"killed by signal {signum}"
    save()
    os._exit(128 + signum)

def nvidia_smi():
    q = "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit"
    try:
        r = subprocess.run(["nvidia-smi", q, "--format=csv"], capture_output=True, text=True, timeout=15)
        return r.stdout.strip() or r.stderr.strip()
    except Exception as e:
        return f"unavailable: {type(e).__name__}: {e}"

def provenance(args, fams):
    p = {"status": "running", "argv": sys.argv, "families": fams, "budget_s": args.budget_s,
         "command": " ".join(shlex.quote(a) for a in [os.path.basename(sys.executable)] + sys.argv),
         "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(), "python": sys.version.split()[0],
         "torch": torch.__version__, "cuda": torch.version.cuda, "numpy": np.__version__, "warmup": WARMUP,
         "reps": f"clamp(int({TARGET_S} / t_probe), {RMIN}, {RMAX}); fewer only when the family budget ends",
         "timing": "each call between its own pair of CUDA events, all R pairs queued behind torch.cuda._sleep so "
                   "launch gaps are not timed; seconds = median, p10/p90 of the R calls; inputs torch.randn; "
                   "inputs under 2x L2 rotate among distinct copies (<= 4 GiB, L2 flushed after allocation)",
         "conventions": CONVENTIONS, "family_summary": {}}
    try:
        p["cudnn"] = torch.backends.cudnn.version()
        pr = torch.cuda.get_device_properties(0)
        l2 = getattr(pr, "L2_cache_size", None)
        p.update(device=pr.name, capability=[pr.major, pr.minor], sm_count=pr.multi_processor_count,
                 total_memory=pr.total_memory, l2_cache_size=l2)
        if l2:
            ST["l2"] = int(l2)
    except Exception as e:
        p["device_error"] = str(e)
    p["nvidia_smi"] = nvidia_smi()
    return p

# ----------------------------------------------------------------------------- timing
def set_tf32(matmul=None, conv=None):
    # Legacy setters only: each keeps torch's legacy and new (fp32_precision) TF32 state consistent.
    try:
        if matmul is not None:
            torch.backends.cuda.matmul.allow_tf32 = bool(matmul)
        if conv is not None:
            torch.backends.cudnn.allow_tf32 = bool(conv)
    except Exception as e:  # legacy setters gone: fall back to the fp32_precision API
        try:
            if matmul is not None:
                torch.backends.cuda.matmul.fp32_precision = "tf32" if matmul else "ieee"
            if conv is not None:
                torch.backends.cudnn.conv.fp32_precision = "tf32" if conv else "ieee"
        except Exception as e2:
            print(f"warning: could not set TF32 flags: {e}; {e2}", flush=True)

def n_sets(set_bytes):
    """Input copies to rotate so a set is reused only after >= 2x L2 of other data was read."""
    if set_bytes <= 0 or set_bytes >= 2 * ST["l2"]:
        return 1
    return int(max(1, min(WARMUP + 1 + RMAX, math.ceil(2 * ST["l2"] / set_bytes) + 1, ROT_CAP // set_bytes)))

def available_bytes():
    free, _ = torch.cuda.mem_get_info()
    return free + torch.cuda.memory_reserved() - torch.cuda.memory_allocated()

def measure(make, run, set_bytes, deadline):
    n = n_sets(set_bytes)
    sets = [make() for _ in range(n)]
    if n > 1:  # evict the freshly written copies from L2
        if ST["scratch"] is None:
            ST["scratch"] = torch.empty(2 * ST["l2"] // 4 + 1024, dtype=torch.float32, device=DEV)
        ST["scratch"].zero_()
    order = itertools.cycle(sets)
    for _ in range(WARMUP):
        run(next(order))
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    x = next(order)
    c0 = time.perf_counter()
    e0.record()
    run(x)
    e1.record()
    cpu = time.perf_counter() - c0  # CPU cost of queueing one call
    torch.cuda.synchronize()
    t1 = max(e0.elapsed_time(e1) / 1e3, 1e-7)
    reps = min(max(RMIN, min(RMAX, int(TARGET_S / t1))), int((deadline - time.time()) / t1))
    if reps < 2:  # budget nearly spent: report the probe call alone
        return {"seconds": t1, "p10_seconds": t1, "p90_seconds": t1, "reps": 1, "rotating_sets": n}
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    if hasattr(torch.cuda, "_sleep"):
        try:  # hold the GPU (~2e9 cycles/s) while the CPU queues every timed call
            torch.cuda._sleep(int(min(0.05, reps * cpu * 1.5 + 1e-4) * 2e9))
        except Exception:
            pass
    for i in range(reps):
        x = next(order)
        starts[i].record()
        run(x)
        ends[i].record()
    torch.cuda.synchronize()
    ts = np.array([s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends)])
    return {"seconds": float(np.median(ts)), "p10_seconds": float(np.percentile(ts, 10)),
            "p90_seconds": float(np.percentile(ts, 90)), "reps": reps, "rotating_sets": n}

def run_shape(fam, meta, make, run, flops, nbytes, deadline, attempts=None, need_bytes=None):
    """Time one shape and append its row; failures become rows with "error", never exceptions."""
    key = (fam, meta.get("dtype"))
    rate = ST["best"].get(key)
    if flops and rate and flops / rate * (WARMUP + 1 + RMIN) > deadline - time.time():
        ST["skipped"] += 1  # cannot finish within this family's budget even at the best rate seen
        return
    row = {"family": fam, **meta, "seconds": None, "p10_seconds": None, "p90_seconds": None, "flops": flops,
           "bytes": nbytes, "tflops": None, "gbps": None, "reps": None}
    need = need_bytes if need_bytes is not None else nbytes * n_sets(nbytes)
    try:
        fits = need * 1.1 + (256 << 20) < available_bytes()
    except Exception:
        fits = True
    errs = [] if fits else ["skipped: memory"]
    for label, ctx in (attempts or [(None, contextlib.nullcontext)]) if fits else []:
        err, oom = None, False
        try:
            with ctx():
                row.update(measure(make, run, nbytes, deadline))
        except Exception as e:
            err = f"{label + ': ' if label else ''}{type(e).__name__}: {e}"[:400]
            oom = isinstance(e, torch.cuda.OutOfMemoryError) or "out of memory" in str(e)
        if label:
            row["backend"] = label
        if err is None:
            break
        errs.append(err)
        with contextlib.suppress(Exception):
            if oom:
                gc.collect()
            torch.cuda.empty_cache()
    if row["seconds"] is None:
        row["error"] = " | ".join(errs)
    else:
        if errs:
            row["fallback_errors"] = errs
        sec = max(row["seconds"], 1e-9)
        row["tflops"] = flops / sec / 1e12 if flops else None
        row["gbps"] = nbytes / sec / 1e9 if nbytes else None
        if flops:
            ST["best"][key] = max(rate or 0.0, flops / sec)
    ST["rows"].append(row)
    if time.time() - ST["last_save"] >= 15.0:
        save()

def loop(shapes, deadline, fn):
    for s in shapes:
        if time.time() >= deadline:
            break
        fn(*s)

# ----------------------------------------------------------------------------- gemm, bmm, fp8
H = (768, 1024, 2048, 4096, 5120, 8192, 12288)

def tfm(h, t, tp=1):
    """(tag, m, n, k) of one transformer layer's GEMMs; tp splits n (column-) or k (row-parallel)."""
    sfx = f"_h{h}" + (f"_tp{tp}" if tp > 1 else "")
    return [("qkv" + sfx, t, 3 * h // tp, h), ("proj" + sfx, t, h, h // tp),
            ("mlp_up" + sfx, t, 4 * h // tp, h), ("mlp_down" + sfx, t, h, 4 * h // tp)]

def llama(t):
    return [(f"llama_{w}_{f}", t, n, k) for f in (11008, 14336, 28672) for h in (4096, 8192)
            for w, n, k in (("up", f, h), ("down", h, f))]

def gemm_shapes():
    out, seen, lim = [], set(), 2 << 30
    ALL, HALF = ("bf16", "fp16", "tf32", "fp32"), ("bf16", "fp16")
    P2, P4 = [2 ** i for i in range(4, 17)], [4 ** i for i in range(2, 9)]  # 16 .. 65536
    def add(op, dts, items):
        for dt, (tag, m, n, k) in itertools.product(dts, items):
            e = ES[dt]
            if (max(m * k, k * n, m * n) * e <= lim and 2 * m * n * k <= 2 ** 44
                    and (op, dt, m, n, k) not in seen):
                seen.add((op, dt, m, n, k))
                out.append((op, dt, m, n, k, tag))
    sq = lambda sizes: [("square", s, s, s) for s in sizes]
    cube = lambda P: [("grid", m, n, k) for m, n, k in itertools.product(P, P, P)]
    for dt in ALL:  # 1. coarse, every dtype
        add("gemm", [dt], sq((256, 1024, 4096, 16384)) + tfm(4096, 8192))
    for dt in HALF:  # 2. half precision: squares, transformer layers, Llama, skinny
        add("gemm", [dt], sq(P2) + [x for t in (8192, 2048) for h in H for x in tfm(h, t)] + llama(8192)
            + llama(2048) + [("skinny", m, n, k) for m, n, k in
                             itertools.product((16, 64, 256), (4096, 16384, 65536), (4096, 16384, 65536))])
    for dt in HALF:  # 3. backward-like layouts, tensor-parallel splits
        layer = [x for h in (2048, 4096, 8192) for x in tfm(h, 8192)]
        add("gemm_nt", [dt], layer)
        add("gemm_tn", [dt], layer)
        add("gemm", [dt], [x for tp in (2, 4, 8) for h in H for x in tfm(h, 8192, tp)])
    # 3b. Megatron-style H100 layers: 4096 tokens, wide models split 4 or 8 ways (column- and
    # row-parallel), in the three layouts of forward, input gradient and weight gradient; SwiGLU MLPs.
    wide = [x for tp in (8, 4) for h in (6144, 12288, 16384, 18432) for x in tfm(h, 4096, tp)]
    swiglu = [(f"swiglu_{w}_h{h}_tp{tp}", 4096, n, k) for tp in (8, 4) for h, f in ((8192, 28672), (16384, 53248))
              for w, n, k in (("up", 2 * f // tp, h), ("down", h, f // tp))]
    add("gemm", ("bf16",), wide + swiglu)
    add("gemm_nt", ("bf16",), wide + swiglu)
    add("gemm_tn", ("bf16",), wide + swiglu)
    add("gemm", ("tf32", "fp32"), sq(P2) + [x for h in (1024, 4096, 8192) for x in tfm(h, 8192)])  # 4.
    add("gemm", ALL, cube(P4))  # 5. coarse cube, then fill
    add("gemm", HALF, [x for tp in (2, 4, 8) for h in H for x in tfm(h, 2048, tp)])
    add("gemm", ALL, cube(P2))
    return out

def fam_gemm(deadline, shapes=None):
    def one(op, dt, m, n, k, tag):
        tdt = DT[dt]
        set_tf32(matmul=(dt == "tf32"))
        rn = lambda *s: torch.randn(*s, device=DEV, dtype=tdt)
        make = lambda: (rn(k, m).t() if op == "gemm_tn" else rn(m, k), rn(n, k).t() if op == "gemm_nt" else rn(k, n))
        meta = {"op": op, "dtype": dt, "m": m, "n": n, "k": k, "batch": 1, "tag": tag,
                "layout": {"gemm": "nn", "gemm_nt": "nt", "gemm_tn": "tn"}[op]}
        run_shape("gemm", meta, make, lambda x: torch.matmul(x[0], x[1]), 2 * m * n * k,
                  (m * k + k * n + m * n) * ES[dt], deadline)
    loop((shapes or gemm_shapes)(), deadline, one)
    set_tf32(matmul=False)

def align_shapes():
    """GEMMs with an edge that is not a multiple of 8 elements (16 bytes), each beside its padded twin:
    the LM heads of GPT-2 (vocabulary 50257, padded 50304) and BERT (30522, padded 30528) in their
    forward, input-gradient and weight-gradient shapes, and a 4096-cube with one edge off by 1, 2 or 4."""
    heads = []
    for name, v, vp, h in (("gpt2", 50257, 50304, 768), ("bert", 30522, 30528, 1024)):
        for tag, vv in ((name, v), (name + "_padded", vp)):
            heads += [("lm_head_fwd_" + tag, 8192, vv, h), ("lm_head_dgrad_" + tag, 8192, h, vv),
                      ("lm_head_wgrad_" + tag, vv, h, 8192)]
    odd = [("cube", 4096, 4096, 4096)] + [(f"{edge}_plus{d}", *(4096 + d if e == edge else 4096 for e in "mnk"))
                                          for d in (1, 2, 4) for edge in "mnk"]
    return [(op, dt, m, n, k, tag) for dt in ("bf16", "fp16", "tf32") for op in ("gemm", "gemm_nt", "gemm_tn")
            for tag, m, n, k in heads + odd]

def fam_gemm_align(deadline):
    fam_gemm(deadline, align_shapes)

def fam_bmm(deadline):
    shapes = itertools.product(("bf16", "fp16"), (128, 64), (384, 96, 768), (512, 1024, 2048, 4096), ("qk", "pv"))
    def one(dt, d, B, s, which):
        tdt = DT[dt]
        m, n, k = (s, s, d) if which == "qk" else (s, d, s)
        rn = lambda *sh: torch.randn(*sh, device=DEV, dtype=tdt)
        # QK^T reads K stored (B, s, d) transposed; PV is plain
        make = lambda: (rn(B, m, k), rn(B, n, k).transpose(1, 2) if which == "qk" else rn(B, k, n))
        run_shape("bmm", {"op": "bmm", "dtype": dt, "batch": B, "m": m, "n": n, "k": k, "s": s, "d": d,
                          "layout": "nt" if which == "qk" else "nn", "tag": which}, make,
                  lambda x: torch.bmm(x[0], x[1]), 2 * B * m * n * k, B * (m * k + k * n + m * n) * ES[dt], deadline)
    loop(shapes, deadline, one)

def fam_fp8(deadline):
    cap = tuple(torch.cuda.get_device_capability())
    base = {"family": "fp8", "op": "scaled_mm", "dtype": "fp8_e4m3"}
    if cap < (8, 9) or not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        ST["rows"].append({**base, "error": f"unsupported: capability {cap}, _scaled_mm "
                                            f"{hasattr(torch, '_scaled_mm')}"})
        return
    f8, one = torch.float8_e4m3fn, torch.tensor(1.0, device=DEV)
    forms = [lambda a, b, f: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                              use_fast_accum=f),
             lambda a, b, f: torch._scaled_mm(a, b, one, one, None, None, torch.bfloat16, f)]
    mk = lambda m, n, k: (torch.randn(m, k, device=DEV, dtype=torch.bfloat16).to(f8),
                          torch.randn(n, k, device=DEV, dtype=torch.bfloat16).to(f8).t())  # B column-major
    form, errs = None, []
    for fm in forms:  # the signature moved across torch versions: find the form that works once
        try:
            fm(*mk(64, 64, 64), False)
            torch.cuda.synchronize()
            form = fm
            break
        except Exception as e:
            errs.append(f"{type(e).__name__}: {e}"[:300])
    if form is None:
        ST["rows"].append({**base, "error": " | ".join(errs)})
        return
    hs = (4096, 8192, 2048, 1024, 12288, 5120, 768)
    items = ([("scaled_mm", ("square", s, s, s)) for s in (1024, 4096, 16384, 2048, 8192, 512, 256)]
             + [("scaled_mm", x) for t in (8192, 2048) for x in [y for h in hs for y in tfm(h, t)] + llama(t)]
             + [("scaled_mm_fastacc", x) for x in [("square", s, s, s) for s in (4096, 8192, 16384)]
                + tfm(4096, 8192) + tfm(8192, 8192)])
    shapes = [(op,) + x for op, x in dict.fromkeys(items) if x[1] % 16 == 0 and x[2] % 16 == 0 and x[3] % 16 == 0]
    def one_shape(op, tag, m, n, k):
        fast = op.endswith("fastacc")
        run_shape("fp8", {"op": op, "dtype": "fp8_e4m3", "m": m, "n": n, "k": k, "batch": 1, "layout": "nt",
                          "tag": tag}, lambda: mk(m, n, k), lambda x: form(x[0], x[1], fast),
                  2 * m * n * k, m * k + k * n + 2 * m * n, deadline)
    loop(shapes, deadline, one_shape)

# ----------------------------------------------------------------------------- attention
try:
    from torch.nn.attention import sdpa_kernel, SDPBackend
except Exception:
    sdpa_kernel = SDPBackend = None
BACKENDS = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "math": "MATH",
            "cudnn": "CUDNN_ATTENTION"}

def backend_ctx(name):
    def factory():
        be = getattr(SDPBackend, BACKENDS[name], None) if SDPBackend is not None else None
        if be is None:
            raise RuntimeError(f"SDPBackend.{BACKENDS[name]} not available in this torch")
        return sdpa_kernel([be])
    return factory

def fam_attention(deadline):
    combos = [("bf16", 128, 32), ("bf16", 64, 12), ("bf16", 128, 16), ("fp16", 128, 32), ("bf16", 64, 16),
              ("bf16", 64, 32), ("bf16", 128, 12), ("fp16", 64, 12), ("fp16", 128, 16), ("fp16", 64, 16),
              ("fp16", 64, 32), ("fp16", 128, 12)]  # (dtype, d, h), most informative first
    seqs = (2048, 512, 8192, 128, 16384, 1024, 4096, 256)
    grid = lambda dt, d, h, be, ss=seqs: [(op, dt, max(1, 16384 // s), h, s, d, c, be) for s in ss
                                          for c in (True, False) for op in ("sdpa_fwd", "sdpa_fwd_bwd")]
    shapes = ([x for c in combos[:2] for x in grid(*c, "flash")]
              + [x for be in ("efficient", "math", "cudnn") for x in grid("bf16", 128, 16, be, (1024, 2048))]
              + [x for c in combos[2:] for x in grid(*c, "flash")])
    def one(op, dt, b, h, s, d, causal, be):
        tdt, e, bwd = DT[dt], ES[dt], op == "sdpa_fwd_bwd"

        def make():
            q, k, v = [torch.randn(b, h, s, d, device=DEV, dtype=tdt).requires_grad_(bwd) for _ in range(3)]
            return q, k, v, torch.randn(b, h, s, d, device=DEV, dtype=tdt) if bwd else None

        def run(x):
            q, k, v, go = x
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            if go is not None:
                torch.autograd.grad(o, (q, k, v), go)
        fl = int(4 * b * h * s * s * d * (0.5 if causal else 1.0) * (3.5 if bwd else 1.0))
        nb = (12 if bwd else 4) * b * h * s * d * e
        attempts = [(be, backend_ctx(be))] + ([("default", contextlib.nullcontext)] if be == "flash" else [])
        if sdpa_kernel is None:
            attempts = [("default", contextlib.nullcontext)]
        extra = b * h * s * s * 4 * (3 if bwd else 1) if be == "math" else 0  # materialised scores
        run_shape("attention", {"op": op, "dtype": dt, "b": b, "h": h, "s": s, "d": d, "causal": causal,
                                "backend": be}, make, run, fl, nb, deadline, attempts,
                  need_bytes=2 * nb * n_sets(nb) + extra)
    loop(shapes, deadline, one)

# ----------------------------------------------------------------------------- conv
# layer = (c, k, hw, r, stride, pad, groups), square inputs and kernels
def resnet18(cifar):
    L, hw, cin = ([(3, 64, 32, 3, 1, 1, 1)], 32, 64) if cifar else ([(3, 64, 224, 7, 2, 3, 1)], 56, 64)
    for c in (64, 128, 256, 512):
        st = 1 if c == 64 else 2
        L += [(cin, c, hw, 3, st, 1, 1)] + ([(cin, c, hw, 1, 2, 0, 1)] if st == 2 else [])
        hw //= st
        L.append((c, c, hw, 3, 1, 1, 1))
        cin = c
    return L

def resnet50():  # torchvision v1.5 bottlenecks: stride on the 3x3, 1x1 stride-2 downsample
    L, cin, hw = [(3, 64, 224, 7, 2, 3, 1)], 64, 56
    for width, st in ((64, 1), (128, 2), (256, 2), (512, 2)):
        out, hw2 = width * 4, hw // st
        L += [(cin, width, hw, 1, 1, 0, 1), (width, width, hw, 3, st, 1, 1), (width, out, hw2, 1, 1, 0, 1),
              (cin, out, hw, 1, st, 0, 1), (out, width, hw2, 1, 1, 0, 1), (width, width, hw2, 3, 1, 1, 1)]
        cin, hw = out, hw2
    return L

def vgg19():
    return [(c, k, hw, 3, 1, 1, 1) for c, k, hw in ((3, 64, 224), (64, 64, 224), (64, 128, 112), (128, 128, 112),
            (128, 256, 56), (256, 256, 56), (256, 512, 28), (512, 512, 28), (512, 512, 14))]

def mobilenetv2():
    L, cin, hw = [(3, 32, 224, 3, 2, 1, 1)], 32, 112
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            st, hid = (s if i == 0 else 1), cin * t
            L += ([(cin, hid, hw, 1, 1, 0, 1)] if t != 1 else []) + [(hid, hid, hw, 3, st, 1, hid)]
            hw = (hw - 1) // st + 1
            L.append((hid, c, hw, 1, 1, 0, 1))
            cin = c
    return L + [(320, 1280, hw, 1, 1, 0, 1)]

def fam_conv(deadline):
    torch.backends.cudnn.benchmark = True
    nets = [("resnet50", 64, resnet50()), ("resnet18", 64, resnet18(False)), ("resnet18_cifar", 128, resnet18(True)),
            ("vgg19", 64, vgg19()), ("mobilenetv2", 64, mobilenetv2())]
    layers, seen = [], set()
    for i in range(max(len(L) for _, _, L in nets)):  # round-robin: a short budget still covers every net
        for name, n, L in nets:
            if i < len(L) and (n,) + L[i] not in seen:
                seen.add((n,) + L[i])
                layers.append((name, n) + L[i])
    plan = [("bf16", layers[:24]), ("tf32", layers[:24]), ("fp16", layers[:12]), ("fp32", layers[:12]),
            ("bf16", layers[24:]), ("tf32", layers[24:]), ("fp16", layers[12:]), ("fp32", layers[12:])]
    shapes = [(dt, op) + ly for dt, part in plan for ly in part for op in ("conv_fwd", "conv_bwd")]
    def one(dt, op, net, n, c, k, hw, r, st, pad, g):
        tdt, e, bwd = DT[dt], ES[dt], op == "conv_bwd"
        set_tf32(conv=(dt == "tf32"))
        mf = torch.channels_last if e == 2 else torch.contiguous_format
        oh = (hw + 2 * pad - r) // st + 1
        xs, ws, ys = n * c * hw * hw, k * (c // g) * r * r, n * k * oh * oh

        def make():
            x = torch.randn(n, c, hw, hw, device=DEV, dtype=tdt).to(memory_format=mf).requires_grad_(bwd)
            w = torch.randn(k, c // g, r, r, device=DEV, dtype=tdt).to(memory_format=mf).requires_grad_(bwd)
            if not bwd:
                return x, w
            y = F.conv2d(x, w, None, st, pad, 1, g)
            return x, w, y, torch.randn_like(y)

        def run(t):  # conv_bwd: dgrad + wgrad through the retained graph
            if bwd:
                return torch.autograd.grad(t[2], (t[0], t[1]), t[3], retain_graph=True)
            return F.conv2d(t[0], t[1], None, st, pad, 1, g)
        nb = ((2 * xs + 2 * ws + ys) if bwd else (xs + ws + ys)) * e
        run_shape("conv", {"op": op, "dtype": dt, "layout": "nhwc" if e == 2 else "nchw", "net": net, "n": n,
                           "c": c, "h": hw, "w": hw, "k": k, "r": r, "s": r, "stride": st, "pad": pad, "groups": g,
                           "oh": oh, "ow": oh}, make, run, 2 * n * k * (c // g) * r * r * oh * oh * (2 if bwd else 1),
                  nb, deadline, need_bytes=(xs + ws + ys) * e * (3 if bwd else 2) * n_sets(nb))
    loop(shapes, deadline, one)
    set_tf32(conv=True)

# ----------------------------------------------------------------------------- memory
MEM_FOOT = {"copy": 2, "add": 3, "gelu": 2, "layer_norm": 2, "softmax": 2, "rmsnorm": 4,
            "adamw_foreach": 6, "adamw_fused": 4}  # peak bytes per byte of size, for the memory check
MEM_RUN = {"copy": lambda x: x[1].copy_(x[0]),
           "add": lambda x: torch.add(x[0], x[1], out=x[2]),
           "gelu": lambda x: F.gelu(x[0]),
           "layer_norm": lambda x: F.layer_norm(x[0], (4096,), x[1], x[2]),
           "softmax": lambda x: torch.softmax(x[0], dim=-1),
           "rmsnorm": lambda x: x[0] * torch.rsqrt(x[0].pow(2).mean(-1, keepdim=True) + 1e-6),
           "adamw_foreach": lambda x: x[0].step(),
           "adamw_fused": lambda x: x[0].step()}

def fam_memory(deadline):
    coarse = [2 ** e for e in range(12, 33, 2)]  # 4 KiB .. 4 GiB in powers of 4
    fill = [2 ** e for e in range(21, 33, 2)]    # then the 2x steps above 1 MiB
    shapes = [(op, S) for sizes in (coarse, fill) for op in MEM_RUN for S in sizes]
    def one(op, S):
        bf = torch.bfloat16
        if op.startswith("adamw"):
            per = max(1, S // 4 // 16)
            shape, size, dt, traffic = [16, per], 16 * per * 4, "fp32", 7 * 16 * per * 4
        else:
            last = {"layer_norm": 4096, "rmsnorm": 4096, "softmax": 2048}.get(op)
            shape = [max(1, S // 2 // last), last] if last else [S // 2]
            size = int(np.prod(shape)) * 2
            dt, traffic = "bf16", (3 if op == "add" else 2) * size
        rn = lambda *sh: torch.randn(*sh, device=DEV, dtype=bf)

        def make():
            if op == "copy":
                return rn(*shape), torch.empty(*shape, device=DEV, dtype=bf)
            if op == "add":
                return rn(*shape), rn(*shape), torch.empty(*shape, device=DEV, dtype=bf)
            if op == "layer_norm":
                return rn(*shape), rn(4096), rn(4096)
            if op.startswith("adamw"):
                ps = [torch.randn(per, device=DEV).requires_grad_(True) for _ in range(16)]
                for p in ps:
                    p.grad = torch.randn_like(p)
                opt = torch.optim.AdamW(ps, lr=1e-3, **({"fused": True} if op == "adamw_fused" else {"foreach": True}))
                opt.step()  # creates the optimizer state outside the timed calls
                return (opt,)
            return (rn(*shape),)
        torch.cuda.empty_cache()
        run_shape("memory", {"op": op, "dtype": dt, "size_bytes": size, "shape": shape}, make, MEM_RUN[op], None,
                  traffic, deadline, need_bytes=MEM_FOOT[op] * size * n_sets(traffic))
    with torch.no_grad():
        loop(shapes, deadline, one)

# ----------------------------------------------------------------------------- main
FAMILIES = {"gemm_align": fam_gemm_align, "gemm": fam_gemm, "bmm": fam_bmm, "fp8": fam_fp8, "attention": fam_attention, "conv": fam_conv,
            "memory": fam_memory}

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=100.0)
    ap.add_argument("--families", default=",".join(f for f in FAMILIES if f != "gemm_align"))
    args = ap.parse_args()
    fams = [f.strip() for f in args.families.split(",") if f.strip()]
    if not fams or any(f not in FAMILIES for f in fams):
        ap.error(f"--families must name some of {list(FAMILIES)}")
    ST["out"], ST["prov"] = args.out, {"status": "starting", "argv": sys.argv}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    if not torch.cuda.is_available():
        ST["prov"].update(status="error: CUDA not available", torch=torch.__version__)
        save()
        print(f"CUDA not available; wrote {args.out}", flush=True)
        return 2
    torch.manual_seed(0)
    ST["prov"] = provenance(args, fams)
    save()
    print(f"kernel_sweep: {ST['prov'].get('device')}, torch {torch.__version__}, cuda {torch.version.cuda}, "
          f"L2 {ST['l2'] >> 20} MiB, budget {args.budget_s:.0f} s", flush=True)
    t_loop = time.time()
    end = T_START + args.budget_s - min(5.0, 0.05 * args.budget_s)  # keep a margin for the last save
    usable, total, cum = max(1.0, end - t_loop), sum(SHARES[f] for f in fams), 0.0
    for fam in fams:
        cum += SHARES[fam] / total
        deadline = min(end, t_loop + usable * cum)  # cumulative: unused time passes to later families
        n0, f0, ST["skipped"] = len(ST["rows"]), time.time(), 0
        try:
            FAMILIES[fam](deadline)
        except Exception as e:  # one family never stops the others
            ST["rows"].append({"family": fam, "error": f"family aborted: {type(e).__name__}: {e}"[:400]})
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception:
            pass
        rows = ST["rows"][n0:]
        ok = [r for r in rows if r.get("seconds")]
        best_tf = max((r["tflops"] for r in ok if r.get("tflops")), default=None)
        best_gb = max((r["gbps"] for r in ok if r.get("gbps")), default=None)
        summ = {"rows": len(rows), "errors": len(rows) - len(ok), "skipped_budget": ST["skipped"],
                "seconds": round(time.time() - f0, 2), "best_tflops": best_tf, "best_gbps": best_gb}
        ST["prov"]["family_summary"][fam] = summ
        save()
        best = (f"best {best_tf:.1f} TFLOP/s" if best_tf else f"best {best_gb:.0f} GB/s" if best_gb
                else "no timings")
        print(f"[{fam}] rows={len(rows)} errors={summ['errors']} skipped={ST['skipped']} "
              f"time={summ['seconds']:.1f}s {best}", flush=True)
    ST["prov"]["nvidia_smi_end"] = nvidia_smi()
    ST["prov"]["status"] = "complete"
    save()
    print(f"wrote {args.out}", flush=True)
    return 0

if __name__ == "__main__":
    sys.exit(main())
