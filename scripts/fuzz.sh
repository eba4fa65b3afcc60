#!/usr/bin/env bash
# Fuzzes Foresight's input readers (fuzz/targets.hpp) with libFuzzer: sets up build-fuzz when it
# is missing (clang, ASan + UBSan, coverage on every library), builds the fuzz targets and runs
# each for SECONDS (default 60) on its corpus. New crash inputs go to fuzz/findings/<target>/;
# the script exits 1 when any target found something.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     targets: scenario topology profile_db kineto kineto_archive chakra pytorch_et
#
# Corpora: fuzz/corpus/<target>/ (committed: seeds and minimized findings, which the tests/fuzz
# suite replays in every build) plus the repository's own inputs, copied into
# build-fuzz/fuzz-seeds/<target>/; what libFuzzer adds goes to build-fuzz/fuzz-work/<target>/,
# never into the source tree. Minimize a finding before committing it (see docs):
#   build-fuzz/fuzz/fuzz_kineto -minimize_crash=1 -runs=10000 fuzz/findings/kineto/crash-...
set -euo pipefail

seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(scenario topology profile_db kineto kineto_archive chakra pytorch_et)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=build-fuzz

# The largest input libFuzzer makes, per target: a few times its largest seed.
declare -A max_len=([scenario]=8192 [topology]=16384 [profile_db]=32768 [kineto]=16384 [kineto_archive]=32768 [chakra]=65536 [pytorch_et]=16384)

if [ ! -f "$build/build.ninja" ]; then
  # -fsanitize=fuzzer-no-link gives every library libFuzzer's coverage; the fuzz executables add
  # -fsanitize=fuzzer (fuzz/meson.build).
  CXX=${CXX:-clang++} meson setup "$build" -Dfuzz=enabled -Db_sanitize=address,undefined -Db_lundef=false \
    --buildtype=debugoptimized -Dpython=disabled -Dmpi=disabled -Dprofiler=disabled \
    -Dcpp_args=-fsanitize=fuzzer-no-link
fi
# FUZZ_NO_BUILD=1 runs the executables already built.
[ -n "${FUZZ_NO_BUILD:-}" ] || meson compile -C "$build" "${targets[@]/#/fuzz_}"

# The repository's own inputs of each kind, as seeds.
seeds() {
  case "$1" in
    scenario) ls examples/*.json tests/data/scenarios/*.json tests/data/bad/scenarios/*.json ;;
    topology) ls examples/topologies/*.json tests/data/topologies/*.json tests/data/bad/topologies/*.json ;;
    profile_db) ls validate/data/profiles/*/*.json ;;
    kineto) ls tests/data/traces/*.json ;;
    kineto_archive) ls tests/data/traces/*.gz examples/traces/*.gz ;;
    chakra) ;;  # fuzz/corpus/chakra holds ETs exported by `foresight simulate --chakra-out`
    pytorch_et) ;;  # fuzz/corpus/pytorch_et holds host ETs of both layouts
  esac
}

# UBSan stops at its first report, so that libFuzzer sees it as a crash.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
status=0
for t in "${targets[@]}"; do
  [ -n "${max_len[$t]:-}" ] || { echo "fuzz.sh: unknown target $t" >&2; exit 2; }
  work="$build/fuzz-work/$t"
  seed_dir="$build/fuzz-seeds/$t"
  findings="fuzz/findings/$t"
  mkdir -p "$work" "$seed_dir" "$findings"
  for f in $(seeds "$t"); do cp "$f" "$seed_dir/$(echo "$f" | tr / _)"; done
  if [ "$t" = kineto ]; then zcat examples/traces/synthetic-ddp-rank0.json.gz > "$seed_dir/synthetic-ddp-rank0.json"; fi
  before=$(ls "$findings" | wc -l)
  echo "== fuzz_$t for ${seconds}s"
  log="$build/fuzz-$t.log"
  rc=0
  "$build/fuzz/fuzz_$t" "$work" "fuzz/corpus/$t" "$seed_dir" \
    -dict="fuzz/$t.dict" -max_len="${max_len[$t]}" -timeout=10 -rss_limit_mb=2048 \
    -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$findings/" > "$log" 2>&1 || rc=$?
  grep -E '^(#[0-9]+ +(INITED|DONE)|==[0-9]+==|SUMMARY|Test unit written|stat::number_of_executed_units|stat::peak_rss)' "$log" || true
  after=$(ls "$findings" | wc -l)
  if [ "$rc" -ne 0 ] || [ "$after" -gt "$before" ]; then
    echo "fuzz_$t: FINDING (exit $rc; $log; inputs in $findings/)"
    status=1
  fi
done
exit $status
