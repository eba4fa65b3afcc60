#!/usr/bin/env python3
"""One transformer layer's training step (forward and backward) in BF16 and under Transformer
Engine's FP8 recipe, on one GPU: how much FP8 saves where the GEMMs dominate. Prints one JSON
object per line; exits with a message when Transformer Engine is not installed.

    python3 scripts/gpu/fp8_layer.py > rows.jsonl
"""
import json
import statistics
import sys

import torch

try:
    import transformer_engine.pytorch as te
    from transformer_engine.common.recipe import DelayedScaling, Format
except Exception as e:  # noqa: BLE001 - any import failure means: not available here
    print(json.dumps({"kind": "unavailable", "reason": f"transformer_engine: {e}"}), flush=True)
    sys.exit(0)

SHAPES = [  # (hidden, ffn, heads, seq, micro-batch)
    (4096, 16384, 32, 2048, 2),
    (8192, 32768, 64, 2048, 1),
]


def step_ms(layer, x, fp8, reps=20):
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    g = torch.randn_like(x)

    def one():
        with te.fp8_autocast(enabled=fp8, fp8_recipe=recipe):
            y = layer(x)
        y.backward(g)

    for _ in range(5):
        one()
    torch.cuda.synchronize()
    times = []
    for _ in range(3):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(reps):
            one()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) / reps)
    return statistics.median(times)


def main():
    p = torch.cuda.get_device_properties(0)
    print(json.dumps({"device": p.name, "sms": p.multi_processor_count, "torch": torch.__version__,
                      "transformer_engine": getattr(te, "__version__", "?")}), flush=True)
    for hidden, ffn, heads, seq, mb in SHAPES:
        layer = te.TransformerLayer(hidden, ffn, heads, hidden_dropout=0.0, attention_dropout=0.0,
                                    params_dtype=torch.bfloat16, self_attn_mask_type="causal").cuda()
        x = torch.randn(seq, mb, hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        bf16 = step_ms(layer, x, False)
        fp8 = step_ms(layer, x, True)
        print(json.dumps({"kind": "te_layer_step", "hidden": hidden, "ffn": ffn, "heads": heads, "seq": seq,
                          "micro_batch": mb, "bf16_ms": round(bf16, 4), "fp8_ms": round(fp8, 4),
                          "fp8_over_bf16": round(fp8 / bf16, 4)}), flush=True)
        del layer, x
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
