#!/usr/bin/env bash
# A 3-node rlimit cluster on this machine in one command: set up (install,
# build), start three rlimitd on loopback (gossip by default; mesh with
# RLIMIT_CLUSTER_MODE=mesh) with a fresh shared secret, wait until they see
# each other, show the membership, drive traffic through all three at once,
# and print what the cluster allowed against the global limits. Stops
# everything it started, unless --keep: then the nodes run until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

mode="${RLIMIT_CLUSTER_MODE:-gossip}"
base_port="${RLIMIT_BASE_PORT:-7946}"
keep=0
[ "${1:-}" = "--keep" ] && keep=1

workdir=$(mktemp -d /tmp/rlimit-cluster.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -rf "$workdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

head -c 32 /dev/urandom | base64 > "$workdir/secret"
seeds="127.0.0.1:$base_port,127.0.0.1:$((base_port + 1))"
sockets=()
for i in 1 2 3; do
  sock="$workdir/node$i.sock"
  sockets+=("$sock")
  build/bin/rlimitd --config config/rlimitd.toml --socket "$sock" --node-id "node$i" \
    --cluster-mode "$mode" --bind "127.0.0.1:$((base_port + i - 1))" --seeds "$seeds" \
    --secret-file "$workdir/secret" --log-level warn 2>"$workdir/node$i.log" &
  pids+=($!)
done
for sock in "${sockets[@]}"; do
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
  if [ ! -S "$sock" ]; then
    echo "cluster: a node did not start:" >&2
    cat "$workdir"/node*.log >&2
    exit 1
  fi
done

# Wait (at most 15 s) until node1 sees all three alive.
for _ in $(seq 150); do
  alive=$(build/bin/rlimitctl --socket "${sockets[0]}" members --json 2>/dev/null | grep -c '"state": "alive"' || true)
  [ "$alive" -ge 3 ] && break
  sleep 0.1
done
build/bin/rlimitctl --socket "${sockets[0]}" members
echo

args=()
for sock in "${sockets[@]}"; do args+=(--socket "$sock"); done
build/bin/rlimit-traffic-demo "${args[@]}" --seconds "${DEMO_SECONDS:-3}"

if [ "$keep" = 1 ]; then
  echo
  echo "The cluster keeps running (Ctrl-C stops it). Try:"
  for i in 1 2 3; do echo "  build/bin/rlimitctl --socket ${sockets[$((i - 1))]} check user=alice"; done
  echo "  build/bin/rlimitctl --socket ${sockets[0]} members"
  wait
fi
