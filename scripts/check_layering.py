#!/usr/bin/env python3
"""Fails when a folder includes a header of a library below which it does not sit.

Each top-level folder is one library; headers are included from the repository root
("sim/event_queue.hpp"), so the first path component names the library. USES lists each library's
direct dependencies (as meson.build links them); a folder may include its own headers and those
of everything it reaches through USES. docs/architecture.md draws the same order.
"""
import pathlib
import re
import sys

USES = {
    "common": set(),                          # errors, units, strict JSON, atomic files
    "sim": {"common"},                        # the discrete-event kernel
    "net": {"sim"},                           # fabrics and network models
    "collectives": {"net"},                   # NCCL algorithms, tuner, communication jobs
    "exec": {"collectives"},                  # execution graph and its executor
    "topologies": {"net"},                    # clusters, presets, routing
    "traces": {"exec"},                       # Perfetto output, Kineto input, replay
    "models": {"exec", "topologies"},         # layers, zoo, HF import, compute cost
    "strategies": {"models"},                 # plan and strategy compilers
    "run": {"strategies"},                    # scenario, simulation driver, report, calibration
    "plots": {"common"},                      # SVG plots
    "validate": {"run", "traces", "plots"},   # datasets, fitting, the suite
    "profiler": {"traces", "exec"},           # CUPTI and micro-benchmarks
    "python": {"validate"},                   # the Python module
    "fuzz": {"run", "traces"},                # fuzz targets of the input readers
}
TOP = {"cli", "tests", "bench"}               # may use everything
LIBRARIES = set(USES) | TOP


def reach(lib: str) -> set:
    seen = {lib}
    todo = [lib]
    while todo:
        for d in USES[todo.pop()]:
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


ALLOWED = {lib: reach(lib) for lib in USES}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([a-z_]+)/')


def main(root: str, stamp: str = "") -> int:
    base = pathlib.Path(root)
    bad = []
    checked = 0
    for folder in sorted(d for d in base.iterdir() if d.is_dir() and not d.name.startswith(".")):
        if folder.name in LIBRARIES or folder.name.startswith("build") or folder.name in ("docs", "examples", "scripts"):
            continue
        if any(f.suffix in (".hpp", ".cpp") for f in folder.rglob("*")):
            bad.append(f"{folder.name}/: C++ sources in a folder that is no layer of check_layering.py's USES")
    for folder, allowed in ALLOWED.items():
        for path in sorted((base / folder).rglob("*")):
            if path.suffix not in (".hpp", ".cpp", ".h", ".cc", ".cu"):
                continue
            checked += 1
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                m = INCLUDE.match(line)
                if m and m.group(1) in LIBRARIES and m.group(1) not in allowed:
                    bad.append(f"{path.relative_to(base)}:{number}: {folder}/ may not include {m.group(1)}/ "
                               f"(allowed: {', '.join(sorted(allowed))})")
    for b in bad:
        print(b)
    print(f"layering: {checked} files checked, {len(bad)} wrong-way includes")
    if bad:
        return 1
    if stamp:
        pathlib.Path(stamp).write_text("ok\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""))
