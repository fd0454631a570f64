#!/usr/bin/env bash
# Sweeps gossip interval x fanout x cluster size over scenarios/sweep.toml and
# prints a Markdown table (docs/accuracy.md, "Choosing the gossip interval
# and fanout"). Usage: simulations/sweep.sh [SIM] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
sim="${1:-build/bin/rlimit-sim}"
seed="${2:-1}"
nodes_list="${NODES:-5 20 50}"
intervals="${INTERVALS:-10ms 20ms 50ms 100ms}"
fanouts="${FANOUTS:-1 3 6}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "| nodes | interval | fanout | admitted vs ideal | worst 1 s window over | peak excess | packets/s per node | bytes/s per node |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in $nodes_list; do
  for interval in $intervals; do
    for fanout in $fanouts; do
      "$sim" --scenario simulations/scenarios/sweep.toml --seed "$seed" --set "cluster.nodes=$n" \
        --set "cluster.gossip_interval=\"$interval\"" --set "cluster.fanout=$fanout" \
        --json "$out" > /dev/null
      python3 - "$out" "$n" "$interval" "$fanout" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("| %s | %s | %s | %+.2f%% | %+d (%.2f limits) | %d | %.0f | %.0f |" % (
    sys.argv[2], sys.argv[3], sys.argv[4], 100 * d["admitted_vs_ideal"],
    d["worst_window_over_tokens"], d["worst_window_over_limits"], d["peak_excess_tokens"],
    d["packets_per_node_s"], d["bytes_per_node_s"]))
PY
    done
  done
done
