#!/usr/bin/env python3
"""Fails when a folder includes a header of a library DESIGN.md's layout table does not let it use.

Each top-level folder is one library; headers are included from the repository root
("sim/event_queue.hpp"), so the first path component names the library. Allowed (DESIGN.md):
sim -> (nothing); topologies -> sim; strategies -> sim, topologies; traces -> sim;
profiler -> traces (and what traces uses); validate, cli, tests, bench -> everything.
"""
import pathlib
import re
import sys

ALLOWED = {
    "sim": {"sim"},
    "topologies": {"topologies", "sim"},
    "strategies": {"strategies", "sim", "topologies"},
    "traces": {"traces", "sim"},
    "profiler": {"profiler", "traces", "sim"},
}
LIBRARIES = {"sim", "topologies", "strategies", "traces", "profiler", "validate", "cli", "tests", "bench"}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([a-z_]+)/')


def main(root: str, stamp: str = "") -> int:
    base = pathlib.Path(root)
    bad = []
    checked = 0
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
