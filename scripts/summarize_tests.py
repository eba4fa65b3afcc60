#!/usr/bin/env python3
"""Counts passed and failed test cases from Meson's test logs (one JSON object per test program).

    summarize_tests.py LOG [LOG...] [--failed=NAME...]

Tests of a log after the first are named with its build folder ("build-sanitize: common/units_test");
each --failed=NAME counts one failure more (a step that left no log, such as a build that failed).

Catch2 programs report their own counts ("All tests passed (A assertions in N test cases)" or
"test cases: T | P passed | F failed"); any other program, or one that died before its summary,
counts as a single case; a pytest run counts its own last line ("N failed, N passed, N skipped in
Ts"). Test cases that skip themselves (tests/catch_main.cpp prints "skipped test cases: N") count
as skipped, not passed; a program that exits 77 (Meson's skip) counts as one skipped case. The
last line printed is "N passed, N failed", with ", N skipped" when any was.
"""
import json
import re
import sys

ALL_PASSED = re.compile(r"All tests passed \((\d+) assertions? in (\d+) test cases?\)")
SUMMARY = re.compile(r"test cases:\s*(\d+)(?:\s*\|\s*(\d+) passed)?(?:\s*\|\s*(\d+) failed)?")
SKIPPED = re.compile(r"^skipped test cases: (\d+)$", re.MULTILINE)
# pytest's last line: "3 failed, 40 passed, 2 skipped in 12.34s" (with "=" around it unless -q).
PYTEST = re.compile(r"^=*\s*((?:\d+ [a-z]+(?:, )?)+) in [\d.]+s\b.*$", re.MULTILINE)


def main(paths: list, extra_failures: list) -> int:
    passed = failed = skipped_cases = 0
    skipped = []
    failures = []
    for index, path in enumerate(paths):
        prefix = "" if index == 0 else path.split("/meson-logs/")[0] + ": "
        p, f, s = count(path, prefix, skipped, failures)
        passed += p
        failed += f
        skipped_cases += s
    for name in extra_failures:
        failures.append(name)
        failed += 1
    for name in skipped:
        print(f"skipped: {name}")
    for name in failures:
        print(f"failed: {name}")
    print(f"{passed} passed, {failed} failed" + (f", {skipped_cases} skipped" if skipped_cases else ""))
    return 0 if failed == 0 else 1


def count(path: str, prefix: str, skipped: list, failures: list):
    """Passed, failed and skipped test cases of one log; appends names to skipped and failures."""
    passed = failed = skipped_cases = 0
    with open(path, encoding="utf-8") as log:
        for line in log:
            if not line.strip():
                continue
            test = json.loads(line)
            test["name"] = prefix + test["name"]
            result = test.get("result", "")
            out = (test.get("stdout") or "") + (test.get("stderr") or "")
            if result == "SKIP":
                skipped.append(test["name"])
                skipped_cases += 1
                continue
            k = SKIPPED.search(out)
            if k and int(k.group(1)) > 0:
                skipped_cases += int(k.group(1))
                passed -= int(k.group(1))  # counted among the passes below
                skipped.append(f"{test['name']} ({k.group(1)} test cases: their data is absent)")
            ok = result in ("OK", "EXPECTEDFAIL")
            m = ALL_PASSED.search(out)
            s = SUMMARY.search(out)
            t = PYTEST.findall(out)
            if m and ok:
                passed += int(m.group(2))
            elif t and not s:
                counts = {kind: int(n) for n, kind in re.findall(r"(\d+) ([a-z]+)", t[-1])}
                f = counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)
                passed += counts.get("passed", 0)
                failed += max(f, 0 if ok else 1)
                if counts.get("skipped"):
                    skipped_cases += counts["skipped"]
                    skipped.append(f"{test['name']} ({counts['skipped']} test cases)")
                if not ok or f:
                    failures.append(test["name"])
            elif s:
                total = int(s.group(1))
                p = int(s.group(2) or 0)
                f = int(s.group(3) or (total - p))
                passed += p
                failed += max(f, 0 if ok else 1)
                if not ok or f:
                    failures.append(test["name"])
            else:
                passed += 1 if ok else 0
                failed += 0 if ok else 1
                if not ok:
                    failures.append(test["name"])
    return passed, failed, skipped_cases


if __name__ == "__main__":
    args = sys.argv[1:]
    logs = [a for a in args if not a.startswith("--failed=")]
    extra = [a[len("--failed="):] for a in args if a.startswith("--failed=")]
    if not logs:
        sys.exit("usage: summarize_tests.py LOG [LOG...] [--failed=NAME...]")
    sys.exit(main(logs, extra))
