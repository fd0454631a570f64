#!/usr/bin/env bash
# Chaos against real daemons: starts K rlimitd nodes as a gossip cluster,
# drives checks of one shared key through libclient at twice its limit,
# kill -9s a node and restarts it, partitions the cluster (when network
# namespaces work here), and reports what the cluster admitted against one
# perfect limiter: the figures rlimit-sim reports for the same scenario.
#
#   simulations/chaos/run.sh            # 5 nodes, 30 s of load
#   K=3 SECONDS_OF_LOAD=20 simulations/chaos/run.sh
#
# With root and `ip netns`, every node gets a network namespace on a bridge;
# if the kernel has the netem qdisc, LOSS_PCT and DELAY_MS apply to each
# node's link; the partition cuts nodes {0,1} from the rest with blackhole
# routes. Otherwise the nodes share loopback and there is no partition.
# Bounded in time; removes every process, namespace and file it made.
set -euo pipefail
cd "$(dirname "$0")/../.."

K="${K:-5}"
SECONDS_OF_LOAD="${SECONDS_OF_LOAD:-30}"
LIMIT="${LIMIT:-100}"
RATE="${RATE:-$((2 * LIMIT))}"
LOSS_PCT="${LOSS_PCT:-1}"
DELAY_MS="${DELAY_MS:-1}"
BASE_PORT="${BASE_PORT:-17946}"
CRASH_NODE="${CRASH_NODE:-2}"
CRASH_AT="${CRASH_AT:-8}"        # seconds into the load
RESTART_AT="${RESTART_AT:-13}"
PARTITION_AT="${PARTITION_AT:-18}"
HEAL_AT="${HEAL_AT:-24}"
NETNS="${NETNS:-auto}"           # auto, yes or no

find_bin() {
  for dir in "${RLIMIT_BIN:-}" build/bin build-sim/bin; do
    if [ -n "$dir" ] && [ -x "$dir/$1" ]; then
      echo "$dir/$1"
      return
    fi
  done
  echo "chaos: $1 not found; build it first (cmake --build build --target $1)" >&2
  exit 1
}
RLIMITD=$(find_bin rlimitd)
RLIMITCTL=$(find_bin rlimitctl)
LOAD=$(find_bin rlimit-chaos-load)
if [ "$K" -lt 3 ] || [ "$CRASH_NODE" -ge "$K" ]; then
  echo "chaos: need K >= 3 and CRASH_NODE < K" >&2
  exit 2
fi

workdir=$(mktemp -d /tmp/rlimit-chaos.XXXXXX)
tag="rlc$$"
pids=()
namespaces=()
links=()
cleanup() {
  set +e
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
  for link in "${links[@]}"; do ip link del "$link" 2>/dev/null; done
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$workdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Namespaces if we may make them; netem if the kernel has it.
use_netns=0
netem=0
if [ "$NETNS" != no ] && [ "$(id -u)" = 0 ] && command -v ip >/dev/null; then
  if ip netns add "${tag}-probe" 2>/dev/null; then
    ip netns del "${tag}-probe"
    use_netns=1
  fi
fi
if [ "$NETNS" = yes ] && [ "$use_netns" = 0 ]; then
  echo "chaos: NETNS=yes but network namespaces are not available" >&2
  exit 2
fi

addr_of() {  # node index -> host
  if [ "$use_netns" = 1 ]; then echo "10.77.0.$(($1 + 1))"; else echo "127.0.0.1"; fi
}
port_of() {
  if [ "$use_netns" = 1 ]; then echo "$BASE_PORT"; else echo "$((BASE_PORT + $1))"; fi
}

if [ "$use_netns" = 1 ]; then
  hub="${tag}-hub"
  ip netns add "$hub"
  namespaces+=("$hub")
  ip -n "$hub" link add br0 type bridge
  ip -n "$hub" link set br0 up
  for i in $(seq 0 $((K - 1))); do
    ns="${tag}-n$i"
    ip netns add "$ns"
    namespaces+=("$ns")
    ip link add "${tag}v$i" type veth peer name "${tag}p$i"
    links+=("${tag}p$i")
    ip link set "${tag}v$i" netns "$ns"
    ip link set "${tag}p$i" netns "$hub"
    ip -n "$hub" link set "${tag}p$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "${tag}v$i" name eth0
    ip -n "$ns" addr add "$(addr_of "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    if ip netns exec "$ns" tc qdisc add dev eth0 root netem loss "${LOSS_PCT}%" delay "${DELAY_MS}ms" 2>/dev/null; then
      netem=1
    fi
  done
fi

head -c 32 /dev/urandom | base64 > "$workdir/secret"
cat > "$workdir/rlimitd.toml" <<EOF
[[rule]]
name = "chaos"
match = { api = "chaos" }
limit = $LIMIT
period = "1s"
EOF
seeds="$(addr_of 0):$(port_of 0),$(addr_of 1):$(port_of 1)"

start_node() {  # index
  local i=$1
  local run=()
  [ "$use_netns" = 1 ] && run=(ip netns exec "${tag}-n$i")
  "${run[@]}" "$RLIMITD" --config "$workdir/rlimitd.toml" --socket "$workdir/n$i.sock" \
    --node-id "n$i" --cluster-mode gossip --bind "$(addr_of "$i"):$(port_of "$i")" \
    --seeds "$seeds" --secret-file "$workdir/secret" --log-level warn 2>>"$workdir/n$i.log" &
  node_pid[$i]=$!
  pids+=($!)
}
wait_socket() {
  for _ in $(seq 100); do [ -S "$workdir/n$1.sock" ] && return 0; sleep 0.05; done
  echo "chaos: node $1 did not start:" >&2
  cat "$workdir/n$1.log" >&2
  exit 1
}
alive_seen_by() {
  "$RLIMITCTL" --socket "$workdir/n$1.sock" members --json 2>/dev/null | grep -c '"state": "alive"' || true
}

declare -a node_pid
for i in $(seq 0 $((K - 1))); do start_node "$i"; done
for i in $(seq 0 $((K - 1))); do wait_socket "$i"; done
for _ in $(seq 150); do
  [ "$(alive_seen_by 0)" -ge "$K" ] && break
  sleep 0.1
done

echo "chaos: $K rlimitd nodes ($([ "$use_netns" = 1 ] && echo "network namespaces on a bridge" || echo "loopback")," \
  "$([ "$netem" = 1 ] && echo "netem ${LOSS_PCT}% loss ${DELAY_MS}ms delay" || echo "no netem: no injected loss or delay"))"
echo "chaos: limit $LIMIT/s on one shared key, $RATE checks/s spread over the nodes for ${SECONDS_OF_LOAD}s"
"$RLIMITCTL" --socket "$workdir/n0.sock" members
echo

sockets=()
for i in $(seq 0 $((K - 1))); do sockets+=(--socket "$workdir/n$i.sock"); done
"$LOAD" "${sockets[@]}" --rate "$RATE" --seconds "$SECONDS_OF_LOAD" --limit "$LIMIT" \
  --csv "$workdir/series.csv" > "$workdir/load.txt" &
load_pid=$!
pids+=($load_pid)
t0=$(date +%s.%N)
at() {  # sleep until $1 seconds after the load started
  local now
  now=$(date +%s.%N)
  local left
  left=$(echo "$1 - ($now - $t0)" | bc -l)
  if [ "$(echo "$left > 0" | bc -l)" = 1 ]; then sleep "$left"; fi
}
events=()
if [ "$CRASH_AT" -lt "$SECONDS_OF_LOAD" ]; then
  at "$CRASH_AT"
  kill -KILL "${node_pid[$CRASH_NODE]}"
  wait "${node_pid[$CRASH_NODE]}" 2>/dev/null || true
  events+=("${CRASH_AT}s: kill -9 n$CRASH_NODE")
  at "$RESTART_AT"
  rm -f "$workdir/n$CRASH_NODE.sock"
  start_node "$CRASH_NODE"
  wait_socket "$CRASH_NODE"
  events+=("${RESTART_AT}s: n$CRASH_NODE restarted")
fi
if [ "$use_netns" = 1 ] && [ "$PARTITION_AT" -lt "$SECONDS_OF_LOAD" ]; then
  at "$PARTITION_AT"
  for a in 0 1; do
    for b in $(seq 2 $((K - 1))); do
      ip -n "${tag}-n$a" route add blackhole "$(addr_of "$b")/32"
      ip -n "${tag}-n$b" route add blackhole "$(addr_of "$a")/32"
    done
  done
  events+=("${PARTITION_AT}s: partition {n0,n1} | {n2..n$((K - 1))}")
  at "$HEAL_AT"
  for a in 0 1; do
    for b in $(seq 2 $((K - 1))); do
      ip -n "${tag}-n$a" route del blackhole "$(addr_of "$b")/32"
      ip -n "${tag}-n$b" route del blackhole "$(addr_of "$a")/32"
    done
  done
  events+=("${HEAL_AT}s: healed")
fi
wait "$load_pid"

cat "$workdir/load.txt"
echo "  events:"
for e in "${events[@]}"; do echo "    $e"; done
echo
echo "per second (t_s,requested,ideal,admitted,failed_open,n0..):"
cat "$workdir/series.csv"
echo
echo "membership at the end, as n0 sees it:"
"$RLIMITCTL" --socket "$workdir/n0.sock" members
