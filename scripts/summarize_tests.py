#!/usr/bin/env python3
"""Counts passed and failed test cases from Meson's test log (one JSON object per test program).

Catch2 programs report their own counts ("All tests passed (A assertions in N test cases)" or
"test cases: T | P passed | F failed"); any other program, or one that died before its summary,
counts as a single case. Skipped programs (exit 77) are listed, not counted. The last line printed
is "N passed, N failed".
"""
import json
import re
import sys

ALL_PASSED = re.compile(r"All tests passed \((\d+) assertions? in (\d+) test cases?\)")
SUMMARY = re.compile(r"test cases:\s*(\d+)(?:\s*\|\s*(\d+) passed)?(?:\s*\|\s*(\d+) failed)?")


def main(path: str) -> int:
    passed = failed = 0
    skipped = []
    failures = []
    with open(path, encoding="utf-8") as log:
        for line in log:
            if not line.strip():
                continue
            test = json.loads(line)
            result = test.get("result", "")
            out = (test.get("stdout") or "") + (test.get("stderr") or "")
            if result == "SKIP":
                skipped.append(test["name"])
                continue
            ok = result in ("OK", "EXPECTEDFAIL")
            m = ALL_PASSED.search(out)
            s = SUMMARY.search(out)
            if m and ok:
                passed += int(m.group(2))
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
    for name in skipped:
        print(f"skipped: {name}")
    for name in failures:
        print(f"failed: {name}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
