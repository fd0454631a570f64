#!/usr/bin/env bash
# The second README command: set up (install what is missing, build) and run
# the whole test suite through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ctest --test-dir build --output-on-failure -j"${JOBS:-2}" --timeout 300
# The same suite under ASan+UBSan (build-asan), and libclient's threaded parts
# under TSan (build-tsan): scripts/sanitize.sh, docs/reliability.md.
scripts/sanitize.sh
# Every fuzz target for 10 s on its corpus (build-fuzz, clang): scripts/fuzz.sh.
scripts/fuzz.sh 10
