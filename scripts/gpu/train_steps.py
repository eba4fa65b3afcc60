#!/usr/bin/env python3
"""Measured single-GPU training steps, the ground truth of validate/data/h200_single_gpu_steps.

Each configuration (CONFIGS below) is one model, batch, precision and recompute setting that a
Foresight scenario in validate/data/h200_single_gpu_steps/ describes exactly. Inputs are random
tensors already on the GPU (no data loader), the model is randomly initialised (no download), and
the loop is the plain PyTorch one: forward, loss, backward, optimizer step, zero_grad, loss.item().

  python3 train_steps.py --mode time   --configs all --out DIR   # step times and peak memory
  python3 train_steps.py --mode kineto --configs NAME --out DIR  # + a PyTorch-profiler trace
  python3 train_steps.py --mode inject --configs NAME --out DIR  # steps in NVTX "ProfilerStep#N"
                                                                 # ranges for libforesight_inject.so

--mode time writes DIR/steps.json (rewritten after every configuration): per configuration the
median, 10th and 90th percentile of --steps timed steps after --warmup untimed ones (host wall
clock around a step that ends with loss.item(), i.e. the whole step as a training loop sees it)
and the peak memory PyTorch's allocator reports. --mode kineto additionally records 2 steps with
torch.profiler (record_shapes) to DIR/kineto-NAME.json. --mode inject times the same steps inside
NVTX ranges, for a process started with CUDA_INJECTION64_PATH=libforesight_inject.so.
"""
import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "validate", "data", "h200_single_gpu_steps")

# name: model, batch (samples per step), precision, recompute. Precision: fp32 (TF32 convolutions,
# FP32 matmuls: PyTorch's defaults), amp_bf16 / amp_fp16 (torch.autocast; fp16 with GradScaler).
CONFIGS = {
    "resnet50-amp_bf16-b128": dict(model="resnet50", batch=128, precision="amp_bf16"),
    "resnet50-fp32-b64": dict(model="resnet50", batch=64, precision="fp32"),
    "resnet18-amp_fp16-b256": dict(model="resnet18", batch=256, precision="amp_fp16"),
    "gpt2-amp_bf16-b8": dict(model="gpt2", batch=8, precision="amp_bf16"),
    "gpt2-amp_bf16-b8-recompute": dict(model="gpt2", batch=8, precision="amp_bf16", recompute=True),
    "gpt2-fp32-b4": dict(model="gpt2", batch=4, precision="fp32"),
    "bert-large-amp_fp16-b16": dict(model="bert-large", batch=16, precision="amp_fp16"),
    "llama-1b-amp_bf16-b4": dict(model="llama-1b", batch=4, precision="amp_bf16"),
    "llama-1b-amp_bf16-b4-recompute": dict(model="llama-1b", batch=4, precision="amp_bf16", recompute=True),
}


def build(cfg):
    """(model, optimizer, loss function, attention implementation) for a configuration, on the GPU."""
    name = cfg["model"]
    dev = torch.device("cuda")
    b = cfg["batch"]
    if name.startswith("resnet"):
        import torchvision
        model = getattr(torchvision.models, name)(weights=None, num_classes=1000)
        fmt = torch.channels_last if cfg["precision"] != "fp32" else torch.contiguous_format
        model = model.to(dev, memory_format=fmt)
        x = torch.randn(b, 3, 224, 224, device=dev).to(memory_format=fmt)
        y = torch.randint(0, 1000, (b,), device=dev)
        lossf = torch.nn.CrossEntropyLoss()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        return model, opt, lambda: lossf(model(x), y), None
    import transformers
    if name == "gpt2":
        conf = transformers.GPT2Config(attn_implementation="sdpa")  # HF gpt2: 12 x 768, 12 heads, 1024 positions
        seq = 1024
        model = transformers.GPT2LMHeadModel(conf)
    elif name == "bert-large":
        conf = transformers.BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                       intermediate_size=4096, max_position_embeddings=512,
                                       attn_implementation="sdpa")
        seq = 512
        model = transformers.BertForPreTraining(conf)
    elif name == "llama-1b":
        with open(os.path.join(DATA, "llama-1b-config.json")) as f:
            conf = transformers.LlamaConfig(**json.load(f), attn_implementation="sdpa")
        seq = 2048
        model = transformers.LlamaForCausalLM(conf)
    else:
        raise ValueError(name)
    model = model.to(dev)
    model.train()
    if cfg.get("recompute"):
        model.gradient_checkpointing_enable()
    ids = torch.randint(0, conf.vocab_size, (b, seq), device=dev)
    if name == "bert-large":
        nsp = torch.randint(0, 2, (b,), device=dev)
        loss = lambda: model(input_ids=ids, labels=ids, next_sentence_label=nsp).loss
    else:
        loss = lambda: model(input_ids=ids, labels=ids).loss
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt, loss, getattr(model.config, "_attn_implementation", None)


def make_step(cfg, opt, loss_fn):
    p = cfg["precision"]
    scaler = torch.amp.GradScaler("cuda") if p == "amp_fp16" else None
    dtype = {"amp_bf16": torch.bfloat16, "amp_fp16": torch.float16}.get(p)

    def step():
        if dtype is not None:
            with torch.autocast("cuda", dtype=dtype):
                loss = loss_fn()
        else:
            loss = loss_fn()
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    return step


def provenance():
    props = torch.cuda.get_device_properties(0)
    return {
        "device": props.name, "sm_count": props.multi_processor_count,
        "memory_bytes": props.total_memory, "capability": f"{props.major}.{props.minor}",
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "tf32": {"matmul": torch.backends.cuda.matmul.allow_tf32, "cudnn": torch.backends.cudnn.allow_tf32},
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "command": " ".join(sys.argv),
    }


def run_config(name, args):
    cfg = CONFIGS[name]
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats()
    model, opt, loss_fn, attention = build(cfg)
    step = make_step(cfg, opt, loss_fn)
    params = sum(p.numel() for p in model.parameters())
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for i in range(args.steps):
        if args.mode == "inject":
            torch.cuda.nvtx.range_push(f"ProfilerStep#{i}")
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        if args.mode == "inject":
            torch.cuda.nvtx.range_pop()
    row = dict(cfg, name=name, mode=args.mode, parameters=params, attention=attention, warmup=args.warmup,
               steps=args.steps, step_seconds=statistics.median(times),
               p10_seconds=sorted(times)[len(times) // 10],
               p90_seconds=sorted(times)[(len(times) * 9) // 10], all_seconds=times,
               peak_allocated_bytes=torch.cuda.max_memory_allocated(),
               peak_reserved_bytes=torch.cuda.max_memory_reserved())
    if args.mode == "kineto":
        from torch.profiler import ProfilerActivity, profile, schedule
        path = os.path.join(args.out, f"kineto-{name}.json")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     schedule=schedule(wait=0, warmup=1, active=2), record_shapes=True,
                     on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
            for _ in range(3):
                step()
                prof.step()
        row["kineto_trace"] = os.path.basename(path)
    del model, opt, loss_fn, step
    gc.collect()
    torch.cuda.empty_cache()
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["time", "kineto", "inject"], default="time")
    ap.add_argument("--configs", default="all", help="comma-separated names, or all")
    ap.add_argument("--out", required=True)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    names = list(CONFIGS) if args.configs == "all" else args.configs.split(",")
    os.makedirs(args.out, exist_ok=True)
    torch.zeros(1, device="cuda")  # CUDA (and an injected collector) starts before any NVTX call
    doc = {"provenance": provenance(), "rows": []}
    out = os.path.join(args.out, f"steps-{args.mode}.json" if args.mode != "time" else "steps.json")
    if args.mode != "time" and len(names) == 1:
        out = os.path.join(args.out, f"steps-{args.mode}-{names[0]}.json")
    for name in names:
        t0 = time.perf_counter()
        try:
            row = run_config(name, args)
        except Exception as e:  # one configuration's failure (OOM, API) must not lose the others
            row = {"name": name, "mode": args.mode, "error": f"{type(e).__name__}: {e}"}
            gc.collect()
            torch.cuda.empty_cache()
        row["wall_seconds"] = time.perf_counter() - t0
        doc["rows"].append(row)
        with open(out + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(out + ".tmp", out)
        print(f"{name:32s} {args.mode:6s} step {row.get('step_seconds', float('nan')) * 1e3:9.2f} ms  "
              f"peak {row.get('peak_allocated_bytes', 0) / 2**30:6.2f} GiB  ({row['wall_seconds']:.1f} s)"
              + (f"  ERROR {row['error']}" if "error" in row else ""), flush=True)


if __name__ == "__main__":
    main()
