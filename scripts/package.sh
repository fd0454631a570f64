#!/usr/bin/env bash
# Builds the Debian package: configures a Release tree (BUILD_DIR, default
# build-pkg), builds what the package installs (rlimitd, rlimitctl and the
# client libraries; no tests or benchmarks), and runs CPack. Prints the .deb's
# path: BUILD_DIR/packages/rlimit_<version>_<arch>.deb.
#
#   scripts/package.sh                 # build-pkg/packages/rlimit_0.1.0_amd64.deb
#   BUILD_DIR=/tmp/b scripts/package.sh
#   JOBS=1 NICE=19 scripts/package.sh  # on a shared machine
#
# Needs dpkg-shlibdeps (dpkg-dev) for the package's library dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build-pkg}"

for tool in cmake cpack dpkg-shlibdeps dpkg-deb; do
  command -v "$tool" >/dev/null || { echo "package.sh: $tool is missing (apt-get install dpkg-dev cmake)" >&2; exit 1; }
done

cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
nice -n "${NICE:-0}" cmake --build "$build_dir" -j"${JOBS:-2}" \
  --target rlimitd rlimitctl rlimit_client rlimit_client_static
# cpack configures its own install of the tree; its log names the package.
(cd "$build_dir" && cpack -G DEB --config CPackConfig.cmake >cpack.log) || {
  cat "$build_dir/cpack.log" >&2
  exit 1
}
deb=$(sed -n 's/^CPack: - package: \(.*\.deb\) generated\.$/\1/p' "$build_dir/cpack.log")
[ -f "$deb" ] || { cat "$build_dir/cpack.log" >&2; echo "package.sh: no .deb generated" >&2; exit 1; }
echo "$deb"
