#!/usr/bin/env bash
# Regenerates the figures and plots of docs/accuracy.md: runs every shipped
# scenario with seed 1 (the 5-node ones with seeds 1..5 as well), writes the
# plots to docs/plots/ and prints the Markdown tables.
# Usage: simulations/figures.sh [SIM]     (scale1000 is left out: see the doc)
#   SET: one `--set` for every run (e.g. SET=cluster.fair_share=false, the
#   same binary without fair shares, side by side); PLOTS=0 draws no plots.
set -euo pipefail
cd "$(dirname "$0")/.."
sim="${1:-build/bin/rlimit-sim}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p docs/plots

extra=()
if [ -n "${SET:-}" ]; then extra=(--set "$SET"); fi

row() {  # scenario seed
  "$sim" --scenario "simulations/scenarios/$1.toml" --seed "$2" "${extra[@]}" --json "$tmp/r.json" > /dev/null
  python3 - "$tmp/r.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
conv = "; ".join(
    "%s %s / %s" % (c["event"],
                    "%.2fs" % c["counters_after_s"] if c["counters_after_s"] is not None else "never",
                    "%.2fs" % c["balances_after_s"] if c["balances_after_s"] is not None else "never")
    for c in d["convergence"]) or "-"
print("| %s | %d | %d | %d | %d | %+.2f%% | %d | %d | %+d (%.2f) | %d | %d | %s | %.0f | %.0f |" % (
    d["scenario"], d["seed"], d["nodes"], d["ideal_tokens"], d["admitted_tokens"],
    100 * d["admitted_vs_ideal"], d["over_admission_run_tokens"], d["under_admission_run_tokens"],
    d["worst_window_over_tokens"], d["worst_window_over_limits"], d["peak_excess_tokens"],
    d["final_excess_tokens"], conv, d["packets_per_node_s"], d["bytes_per_node_s"]))
PY
}
header() {
  echo "| scenario | seed | nodes | ideal | admitted | vs ideal | over (run) | under (run) | worst 1 s window over (limits) | peak excess | excess at end | convergence: counters / balances | packets/s per node | bytes/s per node |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"
}

echo "## Every scenario, seed 1"
header
for s in steady loss1 loss10 partition asymmetric crash skew hotkeys multirule inline bursts mtu \
         nodes100 nodes100-loss10 nodes100-partition; do
  row "$s" 1
done
echo
echo "## Five seeds of the 5-node fault scenarios"
header
for s in loss1 loss10 partition; do
  for seed in 1 2 3 4 5; do row "$s" "$seed"; done
done

if [ "${PLOTS:-1}" != 0 ]; then
  for s in steady loss10 partition crash skew hotkeys nodes100-partition; do
    "$sim" --scenario "simulations/scenarios/$s.toml" --seed 1 "${extra[@]}" --svg "docs/plots/$s.svg" > /dev/null
  done
fi
