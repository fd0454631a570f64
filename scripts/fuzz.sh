#!/usr/bin/env bash
# Runs every libFuzzer target in fuzz/ (or the ones named) for the given
# number of seconds each, one after another: scripts/fuzz.sh [seconds]
# [target...]. Default 60 s; CI runs `scripts/fuzz.sh 10`. Configures and
# builds build-fuzz with clang first if needed (RLIMIT_FUZZ=ON; only the
# fuzzers and the libraries they link).
#
# Each target runs on a working copy of its corpus under
# build-fuzz/fuzz-runs/<target>/corpus (seeds from fuzz_make_seeds and
# fuzz/corpus/<target>, plus whatever earlier runs there found), never in the
# repository. Prints executions, executions per second and corpus size per
# target; exits non-zero if any target found a crash, leak, UB report,
# timeout or out-of-memory (the input that did is in fuzz-runs/<target>/).
#
# Environment: FUZZ_RUNS=N stops each target after N executions instead
# (seconds 0: no time limit); FUZZ_BUILD_DIR (default build-fuzz);
# JOBS (build parallelism, default the number of CPUs); FUZZ_FRESH=1
# starts each corpus again from the seeds.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
seconds=${1:-60}
shift || true
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=${JOBS:-$(nproc)}

# A single input running this long is a finding (a hang), not slowness.
readonly kInputTimeoutSeconds=10
readonly kRssLimitMb=2048

if ! grep -qs '^RLIMIT_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
  command -v clang++ >/dev/null || { echo "fuzz: clang++ is missing (scripts/setup.sh installs it)" >&2; exit 1; }
  # -O2 with line tables for the crash's stack; no -DNDEBUG (RelWithDebInfo's
  # default), so the code's assert()s, its broken invariants, stop a fuzzer
  # like any crash.
  flags="-O2 -gline-tables-only"
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$flags" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$flags" \
    -DRLIMIT_FUZZ=ON -DRLIMIT_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" --target fuzz -j"$jobs" >/dev/null

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cd "$build/fuzz" && ls fuzz_* | grep -v '^fuzz_make_seeds$' | sort)
fi

seeds=$build/fuzz-seeds
rm -rf "$seeds"
"$build/fuzz/fuzz_make_seeds" "$root" "$seeds"

limit=(-max_total_time="$seconds")
[ "$seconds" = 0 ] && limit=()
[ -n "${FUZZ_RUNS:-}" ] && limit+=(-runs="$FUZZ_RUNS")

failed=()
printf '%-20s %12s %9s %8s %10s  %s\n' target executions exec/s corpus bytes result
for target in "${targets[@]}"; do
  work=$build/fuzz-runs/$target
  [ "${FUZZ_FRESH:-0}" = 1 ] && rm -rf "$work"
  mkdir -p "$work/corpus"
  [ -d "$seeds/$target" ] && cp -r "$seeds/$target/." "$work/corpus/"
  [ -d "$root/fuzz/corpus/$target" ] && cp -r "$root/fuzz/corpus/$target/." "$work/corpus/"
  dict=()
  [ -f "$root/fuzz/dict/$target.dict" ] && dict=(-dict="$root/fuzz/dict/$target.dict")
  status=0
  (cd "$work" && "$build/fuzz/$target" corpus "${limit[@]}" "${dict[@]}" \
    -timeout=$kInputTimeoutSeconds -rss_limit_mb=$kRssLimitMb -print_final_stats=1 \
    -artifact_prefix="$work/" >"$work/log" 2>&1) || status=$?
  stat() { sed -n "s/^stat::$1: *//p" "$work/log" | tail -1; }
  executions=$(stat number_of_executed_units)
  rate=$(stat average_exec_per_sec)
  files=$(find "$work/corpus" -type f | wc -l)
  bytes=$(du -sb "$work/corpus" | cut -f1)
  result=ok
  if [ "$status" -ne 0 ]; then
    result="FAILED (exit $status): $(ls "$work" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' | head -1)"
    failed+=("$target")
  fi
  printf '%-20s %12s %9s %8s %10s  %s\n' "$target" "${executions:-?}" "${rate:-?}" "$files" "$bytes" "$result"
done
if [ ${#failed[@]} -gt 0 ]; then
  for target in "${failed[@]}"; do
    echo "---- $target: $build/fuzz-runs/$target/log"
    grep -E 'ERROR|FUZZ_CHECK|runtime error|SUMMARY' "$build/fuzz-runs/$target/log" | head -20
  done
  exit 1
fi
