#!/usr/bin/env bash
# The test suite under the sanitizers (docs/reliability.md, "Sanitizers in
# CI"); scripts/test.sh runs it after the Release suite.
#
#   scripts/sanitize.sh [asan|tsan|all]     (default all)
#
# asan: configures and builds everything in build-asan with ASan+UBSan
#       (-DRLIMIT_SANITIZE=address,undefined) and runs the whole ctest suite
#       there but for the tests labelled no_asan (see their CMakeLists) and
#       long_sim (fair shares' bounds at up to 200 nodes: tests/sim/CMakeLists.txt).
# tsan: builds libclient, its tests and the integration tests in build-tsan
#       with TSan (-DRLIMIT_SANITIZE=thread) and runs the multi-threaded
#       parts: client_test (the fake daemon's thread against the client, the
#       retry loop, the C ABI) and the DaemonTest suite, where one Client per
#       thread asks a real rlimitd, itself built with TSan; and seeds_test
#       (rlimit-sim --seeds runs simulations on threads of its own).
#
# Every program a test starts (rlimitd, rlimitctl; the pytest suites take
# rlimitd from the build directory under test) inherits the options below: a
# report stops the process (halt_on_error) and the test that ran it fails, by
# its exit code or because the harness finds the report in the child's log
# (tests/support/sanitizer_report.{h,py}). Suppressions for libraries built
# without sanitizers are in tests/sanitizers/, each with its reason.
#
# JOBS (default 2) sets build and ctest parallelism. Each stage prints the
# seconds its build and its tests took.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${JOBS:-2}
stage=${1:-all}
supp=$root/tests/sanitizers

# halt_on_error: the first report ends the process, with a non-zero exit.
# detect_leaks: LeakSanitizer at exit (tests stop daemons with SIGTERM so
# that they exit normally and run it). print_stacktrace: UBSan's reports
# name the call chain, not only the line.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp:print_suppressions=0"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp:print_suppressions=0"

# -O1 -g1: stack traces with file, line and inlined frames (the line tables),
# without the types and locals of -g: each file compiles in 0.6-0.8 x the
# time (limiter.cc 17.8 against 28.7 s, http_server.cc 106 against 159 s).
configure() {  # configure <dir> <sanitizers>
  local flags="-O1 -g1"
  cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$flags" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$flags" \
    -DRLIMIT_SANITIZE="$2" >/dev/null
}

timed() {  # timed <label> <command...>: runs it, prints its wall time
  local start=$SECONDS status=0
  "${@:2}" || status=$?
  echo "sanitize: $1 took $((SECONDS - start)) s (exit $status)"
  return "$status"
}

asan() {
  configure build-asan "address,undefined"
  timed "asan build" cmake --build build-asan -j"$jobs"
  # no_asan: tests that cannot run sanitized (the .deb test: see
  # tests/packaging/CMakeLists.txt). long_sim: long accuracy runs whose code
  # runs sanitized in shorter tests (tests/sim/CMakeLists.txt).
  timed "asan tests" ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 600 \
    --no-tests=error -LE '^(no_asan|long_sim)$'
}

tsan() {
  configure build-tsan "thread"
  timed "tsan build" cmake --build build-tsan -j"$jobs" --target client_test integration_test seeds_test
  timed "tsan tests" ctest --test-dir build-tsan --output-on-failure -j"$jobs" --timeout 600 \
    --no-tests=error -R '^(ClientTest|CApiTest|BackoffTest|CheckWithRetryTest|DaemonTest|SeedsTest)\.'
}

case "$stage" in
  asan) asan ;;
  tsan) tsan ;;
  all) asan; tsan ;;
  *) echo "usage: scripts/sanitize.sh [asan|tsan|all]" >&2; exit 2 ;;
esac
