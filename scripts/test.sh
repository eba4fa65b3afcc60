#!/usr/bin/env bash
# Builds Foresight (installing what is missing) and runs every test suite: unit tests, the
# collective and executor tests, and validation against measured data. The last line is
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
python3 scripts/summarize_tests.py build/meson-logs/testlog.json || rc=1
exit $rc
