#!/usr/bin/env python3
"""Where a run's error sits among its keys: admitted against the ideal by key.

Reads `rlimit-sim --requests FILE` (every request's decision) and sums, over
bands of key index, what was asked, what the cluster admitted and what the
ideal (one perfect limiter) admitted, in cost units. With Zipf demand
(`key_distribution = "zipf"`) a key's index is its rank: key 0 is asked the
most. Users far over their limit and users below it fail differently (a
cluster that loses room below the limit loses it for good), so a run's total
hides what this shows.

  build/bin/rlimit-sim --scenario simulations/scenarios/hotkeys.toml \\
      --set cluster.nodes=50 --seed 1 --requests /tmp/requests.csv
  simulations/by_rank.py /tmp/requests.csv

Prints a row per band (its first and one-past-last key index, demand,
admitted, ideal, admitted - ideal, and that as a percentage of the ideal),
then the total.
"""
import argparse
import bisect
import sys

import requests_rows

DEFAULT_EDGES = "0,5,20,50,100,150,200,267,350,500,1000"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("requests", help="the CSV rlimit-sim --requests wrote")
    parser.add_argument("--edges", default=DEFAULT_EDGES,
                        help="ascending key indexes where bands start; the last ends them "
                             f"(default {DEFAULT_EDGES}); keys beyond it are left out")
    parser.add_argument("--from", dest="from_s", type=float, default=0.0,
                        help="count requests from this second on")
    parser.add_argument("--stream", type=int, default=None,
                        help="only this traffic stream's requests (default: every stream's, "
                             "keys of the same index summed)")
    args = parser.parse_args()
    try:
        edges = [int(e) for e in args.edges.split(",")]
    except ValueError:
        sys.exit(f"by_rank.py: --edges {args.edges!r}: not a list of integers")
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])) or edges[0] < 0:
        sys.exit(f"by_rank.py: --edges {args.edges!r}: need two or more ascending indexes >= 0")

    bands = len(edges) - 1
    demand = [0] * bands
    admitted = [0] * bands
    ideal = [0] * bands
    from_us = args.from_s * 1e6
    for r in requests_rows.read(args.requests, "by_rank.py"):
        if args.stream is not None and r.stream != args.stream:
            continue
        if r.t_us < from_us or r.key < edges[0] or r.key >= edges[-1]:
            continue
        band = bisect.bisect_right(edges, r.key) - 1
        demand[band] += r.cost
        admitted[band] += r.cost if r.admitted else 0
        ideal[band] += r.cost if r.ideal else 0

    def percent(a, i):
        return f"{100 * (a - i) / i:+.2f}%" if i > 0 else "-"

    print("keys demand admitted ideal diff diff%")
    for b in range(bands):
        print(f"{edges[b]}-{edges[b + 1]} {demand[b]} {admitted[b]} {ideal[b]} "
              f"{admitted[b] - ideal[b]:+d} {percent(admitted[b], ideal[b])}")
    total_a, total_i = sum(admitted), sum(ideal)
    print(f"total demand {sum(demand)}, admitted {total_a}, ideal {total_i} "
          f"({percent(total_a, total_i)})")


if __name__ == "__main__":
    main()
