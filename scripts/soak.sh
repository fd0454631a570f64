#!/usr/bin/env bash
# Soak test: a 3-node rlimitd cluster (gossip, loopback) under steady load for
# MINUTES (default 60), with key churn, rules reloads and one node killed and
# restarted, sampled every 10 s into a CSV, then a plot and a summary.
#
#   scripts/soak.sh [MINUTES]
#
# Load (bench/soak_load.cc, rlimit-soak-load; spread evenly over the three
# nodes, ~2,750 checks/s in total by default):
#   global  300/s on one key whose rule allows 100/s (burst 100)
#   hot     450/s over 30 users whose rule allows 5/s each (burst 5); a new
#           set of 30 names every 5 minutes
#   cold    2,000/s over a window of 1,000,000 user keys that moves 1,000
#           keys/s, so old keys go idle, expire and are garbage-collected
# Events: node3 is SIGKILLed every SOAK_KILL_INTERVAL_S (300 s; 60 s for runs
# under 20 minutes), half an interval in, and restarted SOAK_DOWN_S (5 s)
# later; every SOAK_RELOAD_INTERVAL_S (60 s) the rule soak-reload (on the
# global key, never binding) toggles its limit: in the first half of the run
# by editing the config files and sending SIGHUP to every node, in the second
# half through the rules API (rlimitctl rules apply, alternately on node1 and
# node2; SIGHUP still sent, reloading the settings). node1 and node2 are never
# killed: their RSS and fds are the drift measurement.
# Each 10 s (scripts/soak_report.py sample): per node VmRSS, open fds, CPU,
# keys held and ledger keys (/metrics), rules version; the load's admitted
# counts against the ideal. A node that dies unasked is a crash: logged,
# counted, restarted.
#
# Output in SOAK_OUT (default: a new /tmp/rlimit-soak.XXXXXX, kept): soak.csv,
# soak.svg, summary.md, events.log, stalls.log (scripts/soak_probe.py: every
# answer of a node's /healthz slower than 100 ms), the daemons' logs. Everything else it
# starts (processes, sockets, configs, secret) is removed on exit.
# Environment: RLIMIT_BUILD_DIR (build), SOAK_OUT, SOAK_WARMUP_S (300; 60 for
# short runs), SOAK_COLD_RATE, SOAK_COLD_KEYS, SOAK_CHURN, and the intervals
# above.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes="${1:-60}"
if ! [[ "$minutes" =~ ^[0-9]+$ ]] || [ "$minutes" -lt 1 ] || [ "$minutes" -gt 1440 ]; then
  echo "usage: scripts/soak.sh [MINUTES: 1..1440]" >&2
  exit 2
fi
build="${RLIMIT_BUILD_DIR:-build}"
for tool in rlimitd rlimitctl rlimit-soak-load; do
  if [ ! -x "$build/bin/$tool" ]; then
    echo "soak: $build/bin/$tool is missing; build it (cmake --build $build --target $tool)" >&2
    exit 2
  fi
done
short=0
[ "$minutes" -lt 20 ] && short=1
kill_interval_s="${SOAK_KILL_INTERVAL_S:-$([ "$short" = 1 ] && echo 60 || echo 300)}"
down_s="${SOAK_DOWN_S:-5}"
reload_interval_s="${SOAK_RELOAD_INTERVAL_S:-60}"
warmup_s="${SOAK_WARMUP_S:-$([ "$short" = 1 ] && echo 60 || echo 300)}"
sample_interval_s=10
global_limit=100 global_rate=300
user_limit=5 hot_users=30 hot_rate=450 hot_rotate_s=300
cold_rate="${SOAK_COLD_RATE:-2000}"
cold_keys="${SOAK_COLD_KEYS:-1000000}"
churn="${SOAK_CHURN:-1000}"
duration_s=$((minutes * 60))

out="${SOAK_OUT:-$(mktemp -d /tmp/rlimit-soak.XXXXXX)}"
mkdir -p "$out"
if [ -e "$out/soak.csv" ]; then
  echo "soak: $out already holds a run (soak.csv); give another SOAK_OUT" >&2
  exit 2
fi
work=$(mktemp -d /tmp/rlimit-soak-work.XXXXXX)
declare -A pids=()
load_pid=""
sampler_pid=""
probe_pid=""

stop_pid() {  # TERM, up to 5 s, then KILL; reaps it
  local pid="$1"
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  [ -n "$sampler_pid" ] && stop_pid "$sampler_pid"
  [ -n "$probe_pid" ] && stop_pid "$probe_pid"
  [ -n "$load_pid" ] && stop_pid "$load_pid"
  for i in "${!pids[@]}"; do stop_pid "${pids[$i]}"; done
  rm -f "$out"/node?.pid "$out"/node?.http "$out"/events.pending "$out"/events.taken "$out/load.json.tmp"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Six ports free for both TCP and UDP on 127.0.0.1 (peer: UDP; HTTP: TCP).
read -r -a ports <<<"$(python3 - <<'EOF'
import socket
found = []
while len(found) < 6:
    t = socket.socket(); t.bind(("127.0.0.1", 0)); port = t.getsockname()[1]
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.bind(("127.0.0.1", port)); found.append(port)
    except OSError:
        pass
    u.close(); t.close()
print(" ".join(map(str, found)))
EOF
)"
seeds="\"127.0.0.1:${ports[0]}\", \"127.0.0.1:${ports[1]}\", \"127.0.0.1:${ports[2]}\""
(umask 077 && head -c 32 /dev/urandom | base64 >"$work/secret")

# The rules; $1 is soak-reload's limit (toggled by every reload).
rules() {
  cat <<EOF
[[rule]]
name = "soak-global"
match = { soak = "global" }
limit = $global_limit
period = "1s"
burst = $global_limit

[[rule]]
name = "per-user"
match = { user = { each = true } }
limit = $user_limit
period = "1s"
burst = $user_limit

# Toggled by every reload; on the global key but never the binding rule.
[[rule]]
name = "soak-reload"
match = { soak = "global" }
limit = $1
period = "1s"
EOF
}
write_config() {  # $1 node, $2 soak-reload's limit
  local i="$1"
  {
    cat <<EOF
[daemon]
node_id = "node$i"
socket = "$work/node$i.sock"
log_level = "warn"
rules_state_file = "$work/node$i.rules.toml"

[cluster]
mode = "gossip"
bind = "127.0.0.1:${ports[$((i - 1))]}"
seeds = [$seeds]
secret_file = "$work/secret"

[http]
listen = "127.0.0.1:${ports[$((i + 2))]}"

EOF
    rules "$2"
  } >"$work/node$i.toml.tmp"
  mv "$work/node$i.toml.tmp" "$work/node$i.toml"
}

running() {  # a live process, not a zombie waiting to be reaped
  local state
  state=$(sed -n 's/^[0-9]* (.*) \([A-Z]\).*/\1/p' "/proc/$1/stat" 2>/dev/null || true)
  [ -n "$state" ] && [ "$state" != Z ]
}
start_s=$(date +%s)
now_s() { echo $(($(date +%s) - start_s)); }
event() {  # appended to the full log and to what the next sample reports
  local line
  line="$(now_s) $*"
  echo "$line" >>"$out/events.log"
  echo "$line" >>"$out/events.pending"
  echo "soak: t=$line" >&2
}

start_node() {
  local i="$1"
  "$build/bin/rlimitd" --config "$work/node$i.toml" 2>>"$out/node$i.log" &
  pids[$i]=$!
  echo "${pids[$i]}" >"$out/node$i.pid"
  echo "127.0.0.1:${ports[$((i + 2))]}" >"$out/node$i.http"
  for _ in $(seq 100); do [ -S "$work/node$i.sock" ] && return 0; sleep 0.05; done
  echo "soak: node$i did not start; see $out/node$i.log" >&2
  return 1
}

reload_limit=10000
for i in 1 2 3; do write_config "$i" "$reload_limit"; done
for i in 1 2 3; do rm -f "$work/node$i.sock"; start_node "$i"; done
# At most 15 s for node1 to see all three alive.
for _ in $(seq 150); do
  alive=$("$build/bin/rlimitctl" --socket "$work/node1.sock" members --json 2>/dev/null |
    grep -c '"state": "alive"' || true)
  [ "$alive" -ge 3 ] && break
  sleep 0.1
done
if [ "$alive" -lt 3 ]; then
  echo "soak: the cluster did not form (node1 sees $alive alive)" >&2
  exit 1
fi
start_s=$(date +%s)
event "cluster up; load ${global_rate}+${hot_rate}+${cold_rate} checks/s for ${minutes} min"

"$build/bin/rlimit-soak-load" --socket "$work/node1.sock" --socket "$work/node2.sock" \
  --socket "$work/node3.sock" --stats "$out/load.json" --seconds "$((duration_s + 30))" \
  --global-rate "$global_rate" --global-limit "$global_limit" --global-burst "$global_limit" \
  --hot-rate "$hot_rate" --hot-users "$hot_users" --hot-rotate-s "$hot_rotate_s" \
  --user-limit "$user_limit" --user-burst "$user_limit" --cold-rate "$cold_rate" \
  --cold-keys "$cold_keys" --churn-keys-per-s "$churn" 2>>"$out/load.log" &
load_pid=$!
# The sampler: a row every 10 s, the last at the end (while the load runs).
python3 scripts/soak_report.py sample "$out" "$start_s" "$((start_s + duration_s))" \
  "$sample_interval_s" 2>>"$out/sampler.log" &
sampler_pid=$!
# The stall probe: each node's /healthz every 50 ms; answers slower than
# 100 ms go to stalls.log with what the node and the machine did meanwhile.
python3 scripts/soak_probe.py probe "$out" "$start_s" "$((start_s + duration_s))" 50 100 \
  2>>"$out/probe.log" &
probe_pid=$!

crashes=0
next_reload_s=$reload_interval_s
next_kill_s=$((kill_interval_s / 2))
restart_at_s=-1
reloads=0
last_t=-1
# One pass a second (five polls of 0.2 s each), bounded by duration + 60 s of polls.
for _ in $(seq $(((duration_s + 60) * 5))); do
  t=$(now_s)
  [ "$t" -ge "$duration_s" ] && break
  if [ "$t" = "$last_t" ]; then sleep 0.2; continue; fi
  last_t=$t
  # Crashes: a node that should run and does not.
  for i in 1 2 3; do
    [ -n "${pids[$i]:-}" ] || continue
    if ! running "${pids[$i]}"; then
      rc=0
      wait "${pids[$i]}" 2>/dev/null || rc=$?
      crashes=$((crashes + 1))
      event "CRASH node$i (pid ${pids[$i]}, exit status $rc); restarting it"
      start_node "$i" || true
    fi
  done
  if [ -n "$load_pid" ] && ! running "$load_pid"; then
    rc=0
    wait "$load_pid" 2>/dev/null || rc=$?
    event "load tool exited early (status $rc)"
    load_pid=""
    break
  fi
  if [ "$t" -ge "$next_kill_s" ]; then
    next_kill_s=$((next_kill_s + kill_interval_s))
    event "kill node3 (SIGKILL pid ${pids[3]})"
    kill -KILL "${pids[3]}" 2>/dev/null || true
    wait "${pids[3]}" 2>/dev/null || true
    unset 'pids[3]'
    rm -f "$out/node3.pid"
    restart_at_s=$((t + down_s))
  fi
  if [ "$restart_at_s" -ge 0 ] && [ "$t" -ge "$restart_at_s" ]; then
    restart_at_s=-1
    if start_node 3; then event "restart node3 (pid ${pids[3]})"; else event "node3 failed to restart"; fi
  fi
  if [ "$t" -ge "$next_reload_s" ]; then
    next_reload_s=$((next_reload_s + reload_interval_s))
    reloads=$((reloads + 1))
    reload_limit=$([ "$reload_limit" = 10000 ] && echo 20000 || echo 10000)
    for i in 1 2 3; do write_config "$i" "$reload_limit"; done
    if [ "$t" -lt $((duration_s / 2)) ]; then
      for i in "${!pids[@]}"; do kill -HUP "${pids[$i]}" 2>/dev/null || true; done
      event "reload by SIGHUP (soak-reload limit $reload_limit)"
    else
      node=$((1 + reloads % 2))
      rules "$reload_limit" >"$work/rules.toml"
      rc=0
      "$build/bin/rlimitctl" --socket "$work/node$node.sock" --timeout-ms 2000 rules apply \
        "$work/rules.toml" >/dev/null 2>>"$out/rlimitctl.log" || rc=$?
      for i in "${!pids[@]}"; do kill -HUP "${pids[$i]}" 2>/dev/null || true; done
      event "reload by rules apply on node$node (soak-reload limit $reload_limit, exit $rc) + SIGHUP"
    fi
  fi
done

event "end; crashes $crashes"
# The sampler's last row is due now: at most 30 s for it.
for _ in $(seq 300); do running "$sampler_pid" || break; sleep 0.1; done
stop_pid "$sampler_pid"
sampler_pid=""
if [ -n "$load_pid" ]; then
  stop_pid "$load_pid"
  load_pid=""
fi
python3 scripts/soak_report.py report "$out" "$warmup_s"
stop_pid "$probe_pid"
probe_pid=""
python3 scripts/soak_probe.py summary "$out" | tee -a "$out/summary.md"
echo "soak: results in $out (soak.csv, soak.svg, summary.md)"
