#!/usr/bin/env bash
# Runs test suites under AddressSanitizer and UndefinedBehaviorSanitizer (clang): sets up
# build-sanitize when it is missing, builds only the suites' test programs and runs them; any
# sanitizer report fails its test (UBSan halts on its first report).
#
#   scripts/sanitize.sh [SUITE...]
#
# SUITE is a Meson test suite (tests/meson.build: common, sim, net, collectives, exec,
# topologies, models, strategies, run, traces, plots, profiler, validate, fuzz, cli) or "all"
# (every test, as CI's .ci/run runs them). The default, the suites that read input files and do
# the unit arithmetic: common topologies models run traces fuzz.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=build-sanitize
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(common topologies models run traces fuzz)

if [ ! -f "$build/build.ninja" ]; then
  # clang at -O1 with line tables only (-g1): the whole test suite builds in 4.5 minutes on 2
  # cores and runs in 4, against 21 and 11 with gcc at -O2 -g (docs/internals.md, "The sanitizer
  # build of the test suite"). Assertions stay on.
  CXX=${FORESIGHT_SANITIZE_CXX:-clang++} meson setup "$build" -Db_sanitize=address,undefined -Db_lundef=false \
    -Db_ndebug=false --buildtype=plain -Doptimization=1 -Ddebug=false -Dcpp_args=-g1 \
    -Dpython=disabled -Dmpi=disabled -Dprofiler=disabled
fi

# ASan and UBSan make the tests several times slower: the ones that read the shared traces
# (gpu_timeline_test, profile_import_test) took over Meson's 300 s, hence --timeout-multiplier.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
jobs=$(nproc)
if [ "${suites[*]}" = all ]; then
  # What the tests run and nothing else (no benchmarks).
  ninja -C "$build" -j "$jobs" meson-test-prereq
  exec meson test -C "$build" --no-rebuild --print-errorlogs --num-processes "$jobs" --timeout-multiplier 4
fi
programs=()
suite_args=()
for s in "${suites[@]}"; do
  case "$s" in
    cli) programs+=(tests/cli_tests cli/foresight) ;;
    validate) programs+=(tests/validate_tests cli/foresight) ;;
    *) programs+=("tests/${s}_tests") ;;
  esac
  suite_args+=(--suite "$s")
done
meson compile -C "$build" -j "$jobs" "${programs[@]}"
meson test -C "$build" --no-rebuild --print-errorlogs --num-processes "$jobs" --timeout-multiplier 4 "${suite_args[@]}"
