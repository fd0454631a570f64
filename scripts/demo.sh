#!/usr/bin/env bash
# The first README command, the main job: set up, start rlimitd on the example
# rules (config/rlimitd.toml) on a private socket, drive a few seconds of
# traffic through libclient, print allowed and denied per rule against the
# limits, show the daemon's status, and stop everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

workdir=$(mktemp -d /tmp/rlimit-demo.XXXXXX)
socket="$workdir/rlimitd.sock"
daemon_pid=""
cleanup() {
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$daemon_pid" 2>/dev/null || true
  fi
  rm -rf "$workdir"
}
trap cleanup EXIT INT TERM

build/bin/rlimitd --config config/rlimitd.toml --socket "$socket" --node-id demo \
  --log-level warn 2>"$workdir/rlimitd.log" &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.05; done
if [ ! -S "$socket" ]; then
  echo "demo: rlimitd did not start:" >&2
  cat "$workdir/rlimitd.log" >&2
  exit 1
fi

build/bin/rlimit-traffic-demo --socket "$socket" --seconds "${DEMO_SECONDS:-3}"
echo
build/bin/rlimitctl --socket "$socket" status
