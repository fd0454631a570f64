#!/usr/bin/env bash
# Regenerates the table of docs/accuracy.md, guarantee 3 ("Every replicated
# algorithm over 60 s"): the `aligned` scenario (demand at every node at
# once) for each replicated algorithm at 5, 20, 50 and 200 nodes, each over
# several seeds (rlimit-sim --seeds), as a Markdown table of the windows'
# extremes over the seeds and the run against the ideal (range, mean, runs
# beyond 1%), the bounds of issue 14 that a row misses in bold. About 20
# minutes on two cores with the defaults (19 min 49 s measured), most of it
# the 200-node runs. SCENARIO runs another of issue 14's shapes the same way
# (`coldkeys`: many keys new at once; `periodic`: a job on a schedule;
# `storm`: a retry storm on a key under steady contention).
# Usage: simulations/aligned_table.sh [SIM]
#   SEEDS (default 8: seeds 1..8), DURATION (default 60s), JOBS (default 2),
#   NODES (default "5 20 50 200"), ALGORITHMS (default every replicated one),
#   SCENARIO (default aligned: simulations/scenarios/$SCENARIO.toml),
#   SET: one more `--set` for every run, as simulations/figures.sh takes it
#   (e.g. SET='traffic.0.start="3900ms"' with SCENARIO=periodic: each job
#   across a window's start, docs/cluster.md "A job across a fixed window's
#   start").
set -euo pipefail
cd "$(dirname "$0")/.."
sim="${1:-build/bin/rlimit-sim}"
seeds="${SEEDS:-8}"
duration="${DURATION:-60s}"
jobs="${JOBS:-2}"
nodes_list="${NODES:-5 20 50 200}"
scenario="${SCENARIO:-aligned}"
algorithms="${ALGORITHMS:-token_bucket leaky_bucket fixed_window gcra smooth_bursty sliding_log sliding_window}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "| nodes | algorithm | first | worst later | fewest later | the ideal's fewest | fewest vs the ideal | vs the ideal's rate | run vs ideal | mean | beyond 1% |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|"
for n in $nodes_list; do
  for algorithm in $algorithms; do
    extra=()
    # Smooth bursty with no delay: a replicated meter (docs/algorithms.md).
    if [ "$algorithm" = smooth_bursty ]; then extra=(--set 'rule.0.max_delay="0s"'); fi
    if [ -n "${SET:-}" ]; then extra+=(--set "$SET"); fi
    "$sim" --scenario "simulations/scenarios/$scenario.toml" --set "cluster.nodes=$n" \
      --set "rule.0.algorithm=\"$algorithm\"" --set "duration=\"$duration\"" "${extra[@]}" \
      --seed 1 --seeds "$seeds" --jobs "$jobs" --json "$out" > /dev/null 2>&1
    python3 - "$out" "$n" "$algorithm" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = d["summary"]
def limits(v):
    return "" if v is None else "%.2f" % v
def pct(ratio):  # as rlimit-sim prints it: +0.00%, not -0.00%
    text = "%+.2f" % (100 * ratio)
    return "+0.00" if text == "-0.00" else text
def bold(text, missed):  # a bound of issue 14 missed
    return "**%s**" % text if missed else text
# Issue 14's bounds, in limits (the burst is the limit here): at most 2 x
# the burst in the first window, 1.5 x in a later one, at least 0.5 x (or,
# where one perfect limiter of the algorithm admits less than the limit,
# half of what it admits: in that window or, where its own echo makes it
# alternate between full and near-empty windows, at its rate around it,
# whichever is lower: "vs the ideal's rate" at least 0.5; rlimit-sim's
# Results::least_window_vs_ideal_rate); each run within 1% of the ideal is
# rlimit-sim's own tolerance (beyond_tolerance).
MOST_FIRST, MOST_LATER, FEWEST_LATER = 2.0, 1.5, 0.5
first, later = s["most_first_window_limits"], s["most_later_window_limits"]
fewest, vs_ideal = s["fewest_later_window_limits"], s["fewest_later_window_vs_ideal"]
vs_rate = s["fewest_later_window_vs_ideal_rate"]
silent = fewest is not None and fewest < FEWEST_LATER and (vs_rate is None or vs_rate < FEWEST_LATER)
print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s%% | %d of %d |" % (
    sys.argv[2], sys.argv[3], bold(limits(first), first is not None and first > MOST_FIRST),
    bold(limits(later), later is not None and later > MOST_LATER),
    bold(limits(fewest), silent), limits(s["ideal_fewest_later_window_limits"]),
    limits(vs_ideal), bold(limits(vs_rate), silent),
    bold("%s..%s%%" % (pct(s["min_admitted_vs_ideal"]), pct(s["max_admitted_vs_ideal"])),
         s["beyond_tolerance"] > 0),
    pct(s["mean_admitted_vs_ideal"]), s["beyond_tolerance"], s["runs"]))
PY
  done
done
