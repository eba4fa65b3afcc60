#!/usr/bin/env python3
"""Foresight from Python: one simulation, then a small sweep as a table.

Build the module and run this from the repository root:

    ./scripts/setup.sh    # builds build/python/foresight.*.so with the rest (pybind11-dev, python3-dev)
    PYTHONPATH=build/python python3 examples/python_quickstart.py

It runs cell by cell in a notebook too (set sys.path or PYTHONPATH to build/python first).
"""
import pathlib

import foresight

EXAMPLES = pathlib.Path(__file__).resolve().parent

# %% One scenario: the same report as `foresight simulate examples/thetagpu-resnet18-ddp.json --json`.
report = foresight.simulate(EXAMPLES / "thetagpu-resnet18-ddp.json")
model, cluster = report["model"], report["cluster"]
print(f"foresight {foresight.__version__}: {model['name']} on {cluster['gpus']} x {cluster['gpu']}")
print(f"iteration {report['iteration_time_s'] * 1e3:.1f} ms, {report['throughput']['samples_per_s']:.0f} samples/s, "
      f"peak memory {report['memory']['peak_bytes_max'] / 2**30:.2f} GiB")

# %% The same scenario as a dict, edited in Python (relative paths would resolve against base_dir).
scenario = {
    "model": {"name": "resnet18-cifar", "classes": 100},
    "cluster": {"preset": "thetagpu", "gpus": 8},
    "plan": {"dp": 8, "micro_batch": 128, "framework": "ddp", "precision": "amp_fp16", "optimizer": "sgd"},
    "workload": {"epochs": 10, "dataset_samples": 50000},
}
amp = foresight.simulate(scenario)
print(f"with amp_fp16 and no input limit: iteration {amp['iteration_time_s'] * 1e3:.1f} ms")

# %% A sweep: one row per configuration, the columns of `foresight sweep`'s CSV.
rows = foresight.sweep(scenario, gpus=[2, 4, 8], micro_batch=[64, 128], jobs=2)
try:
    import pandas

    table = pandas.DataFrame(rows)[["gpus", "micro_batch", "iteration_time_s", "samples_per_s", "mfu", "oom"]]
    print(table.to_string(index=False))
except ImportError:  # pandas is optional: the rows are plain dicts
    print(f"{'gpus':>4} {'micro_batch':>11} {'iteration_time_s':>16} {'samples_per_s':>13} {'mfu':>6} {'oom':>5}")
    for r in rows:
        print(f"{r['gpus']:>4} {r['micro_batch']:>11} {r['iteration_time_s']:>16.6f} {r['samples_per_s']:>13.1f} "
              f"{r['mfu']:>6.3f} {r['oom']!s:>5}")

fits = [r for r in rows if r["error"] is None and not r["oom"]]
best = max(fits, key=lambda r: r["samples_per_s"] / r["gpus"])
print(f"most samples per GPU-second: gpus={best['gpus']} micro_batch={best['micro_batch']} "
      f"({best['samples_per_s'] / best['gpus']:.0f})")
