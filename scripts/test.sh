#!/usr/bin/env bash
# Builds Foresight (installing what is missing) and runs every test suite: unit tests, the
# collective and executor tests, and validation against measured data; then suites under ASan and
# UBSan (below). The last line is
# "N passed, N failed" (Catch2 test cases; a test program that crashes counts as one failure), with
# ", N skipped" when test cases skipped themselves for want of their data.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! ./scripts/setup.sh; then
  echo "setup or build failed"
  echo "0 passed, 1 failed"
  exit 1
fi
meson test -C build --print-errorlogs --num-processes "$(nproc)"
rc=$?
# Suites again under AddressSanitizer and UndefinedBehaviorSanitizer (clang, build-sanitize): by
# default common (the JSON reader every input goes through, units and their overflow checks, the
# node containers), about a minute; FORESIGHT_SANITIZE_SUITES names others, or "all" (CI's
# .ci/run: every test, about 8.5 more minutes on 2 cores;
# docs/internals.md#the-sanitizer-build-of-the-test-suite).
read -r -a sanitized <<< "${FORESIGHT_SANITIZE_SUITES:-common}"
logs=(build/meson-logs/testlog.json)
extra=()
rm -f build-sanitize/meson-logs/testlog.json
./scripts/sanitize.sh "${sanitized[@]}" || rc=1
if [ -f build-sanitize/meson-logs/testlog.json ]; then
  logs+=(build-sanitize/meson-logs/testlog.json)
else
  extra+=("--failed=the sanitizer build (scripts/sanitize.sh ${sanitized[*]})")
fi
python3 scripts/summarize_tests.py "${logs[@]}" "${extra[@]}" || rc=1
exit $rc
