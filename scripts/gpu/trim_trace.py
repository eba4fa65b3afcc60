#!/usr/bin/env python3
"""Keeps the ProfilerStep windows of a libforesight_inject.so trace (Kineto JSON, gzip or plain).

The injection library records the whole process: start-up, model building and warm-up steps too
(100,000+ runtime calls). Replay and profile import read only the ProfilerStep#N ranges, so the
committed traces keep the events that start between the first step's start and the last step's
end plus --tail-ms (GPU work still running when the host leaves the last step), every step
annotation, and the top-level fields as they were.

  trim_trace.py IN.json.gz OUT.json.gz [--tail-ms 50]
"""
import argparse
import gzip
import json


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--tail-ms", type=float, default=50.0)
    a = ap.parse_args()
    opener = gzip.open if a.input.endswith(".gz") else open
    with opener(a.input, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    if not steps:
        raise SystemExit(f"{a.input}: no ProfilerStep#N range to keep")
    begin = min(e["ts"] for e in steps)
    end = max(e["ts"] + e["dur"] for e in steps) + a.tail_ms * 1e3
    kept = [e for e in events if e.get("ph") != "X" or begin <= e.get("ts", begin) <= end]
    doc["traceEvents"] = kept
    doc["foresightTrimmed"] = {"kept_events": len(kept), "of": len(events),
                               "window_us": [begin, end], "by": "scripts/gpu/trim_trace.py"}
    with gzip.open(a.output, "wt", compresslevel=9) as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"{a.output}: {len(kept)} of {len(events)} events")


if __name__ == "__main__":
    main()
