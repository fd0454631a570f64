#!/usr/bin/env python3
"""Where a cluster's under-admission goes: room lost at the cap.

Reads `rlimit-sim --requests FILE` (every request's decision) of a run whose
keys each have one bucket of `--rate` tokens per second and `--burst`
capacity, and charges one bucket per key (stream, key) with what the cluster
admitted, when it admitted it: full at the key's first request, refilling at
the rate, going negative on an overshoot (a debt the cluster repays) and
losing whatever its refill would take past the cap. That loss is admission
the cluster never makes up; an overshoot is repaid. Under demand above the
limit the ideal's bucket stands near zero and loses nothing, so the room lost
from --from on is the cluster's lasting under-admission there.

Prints, per second: the cluster's admissions, the ideal's, and the room lost
(counted in the second of the request that found it); then the totals from
--from on.

  build/bin/rlimit-sim --scenario simulations/scenarios/coldkeys.toml \\
      --set cluster.nodes=200 --seed 1 --requests /tmp/requests.csv
  simulations/lost_at_cap.py /tmp/requests.csv --rate 10 --burst 10 --from 6
"""
import argparse
import collections
import sys

import requests_rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("requests", help="the CSV rlimit-sim --requests wrote")
    parser.add_argument("--rate", type=float, required=True, help="tokens per second per key")
    parser.add_argument("--burst", type=float, required=True, help="a key's capacity, tokens")
    parser.add_argument("--from", dest="from_s", type=int, default=0,
                        help="count totals from this second on (after the cold start)")
    args = parser.parse_args()
    if args.rate <= 0 or args.burst <= 0:
        sys.exit("lost_at_cap.py: --rate and --burst must be positive")

    level = {}      # (stream, key) -> tokens
    last_us = {}    # (stream, key) -> time of the last request
    admitted = collections.Counter()
    ideal = collections.Counter()
    lost = collections.Counter()
    for r in requests_rows.read(args.requests, "lost_at_cap.py"):
        key = (r.stream, r.key)
        second = r.t_us // 1_000_000
        if key not in level:
            level[key] = args.burst
        else:
            refilled = level[key] + args.rate * (r.t_us - last_us[key]) / 1e6
            if refilled > args.burst:
                lost[second] += refilled - args.burst
                refilled = args.burst
            level[key] = refilled
        last_us[key] = r.t_us
        if r.admitted:
            level[key] -= r.cost
            admitted[second] += r.cost
        if r.ideal:
            ideal[second] += r.cost

    seconds = sorted(set(admitted) | set(ideal) | set(lost))
    print("second admitted ideal lost_at_cap")
    for s in seconds:
        print(f"{s} {admitted[s]} {ideal[s]} {lost[s]:.1f}")
    counted = [s for s in seconds if s >= args.from_s]
    a = sum(admitted[s] for s in counted)
    i = sum(ideal[s] for s in counted)
    l = sum(lost[s] for s in counted)
    if i == 0:
        sys.exit(f"lost_at_cap.py: the ideal admitted nothing from second {args.from_s} on")
    print(f"from {args.from_s} s: admitted {a}, ideal {i} ({100 * (a - i) / i:+.2f}%), "
          f"lost at the cap {l:.0f} ({100 * l / i:.2f}% of the ideal)")


if __name__ == "__main__":
    main()
