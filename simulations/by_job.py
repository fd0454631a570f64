#!/usr/bin/env python3
"""A scheduled job, job by job: what the cluster admitted of each against the ideal.

Reads `rlimit-sim --requests FILE` (every request's decision) of a run whose
demand comes in jobs, one every --every seconds from --start (`periodic`:
a 200 ms job every 5 s from 3 s), and prints each job's admissions (the
cost of the requests the cluster admitted from its start to the next job's)
against the ideal's; with --window, also each window of that many seconds
from the job's start over its first --span seconds, as admitted/ideal, so
a job across a fixed window's start shows what each of its two windows
admitted. Then the mean and standard deviation of the jobs after the first
(the key's cold start), so that a change's effect on the jobs' spread can
be told from its effect on their sum.

  build/bin/rlimit-sim --scenario simulations/scenarios/periodic.toml \\
      --set cluster.nodes=200 --set 'rule.0.algorithm="fixed_window"' \\
      --set 'traffic.0.start="3900ms"' --seed 1 --requests /tmp/requests.csv
  simulations/by_job.py /tmp/requests.csv --start 3.9 --every 5 --window 0.1 --span 0.2
"""
import argparse
import collections
import math
import sys

import requests_rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("requests", help="the CSV rlimit-sim --requests wrote")
    parser.add_argument("--start", type=float, required=True, help="the first job's start, seconds")
    parser.add_argument("--every", type=float, required=True, help="seconds from one job to the next")
    parser.add_argument("--window", type=float, default=0.0,
                        help="also print each window of this many seconds within a job")
    parser.add_argument("--span", type=float, default=0.0,
                        help="with --window: how far into each job (default: the whole job)")
    args = parser.parse_args()
    if args.every <= 0 or args.window < 0 or args.span < 0:
        sys.exit("by_job.py: --every must be positive, --window and --span not negative")
    start_us = round(args.start * 1e6)
    every_us = round(args.every * 1e6)
    window_us = round(args.window * 1e6)
    span_us = round(args.span * 1e6) if args.span > 0 else every_us
    if args.window > 0 and window_us == 0:
        sys.exit("by_job.py: --window is below a microsecond")

    admitted = collections.Counter()  # job -> cost admitted
    ideal = collections.Counter()
    in_window = collections.defaultdict(collections.Counter)  # job -> window -> (admitted, ideal)
    for r in requests_rows.read(args.requests, "by_job.py"):
        if r.t_us < start_us:
            continue
        job, into_us = divmod(r.t_us - start_us, every_us)
        if r.admitted:
            admitted[job] += r.cost
        if r.ideal:
            ideal[job] += r.cost
        if window_us > 0 and into_us < span_us:
            w = into_us // window_us
            in_window[job][(w, 0)] += r.cost if r.admitted else 0
            in_window[job][(w, 1)] += r.cost if r.ideal else 0

    jobs = sorted(set(admitted) | set(ideal))
    if not jobs:
        sys.exit(f"by_job.py: no request at or after {args.start} s")
    windows = (span_us + window_us - 1) // window_us if window_us > 0 else 0
    print("job start_s admitted ideal diff" + (" windows(admitted/ideal)" if windows else ""))
    for job in jobs:
        line = (f"{job} {(start_us + job * every_us) / 1e6:.3f} {admitted[job]} {ideal[job]} "
                f"{admitted[job] - ideal[job]:+d}")
        if windows:
            counts = in_window[job]
            line += " " + " ".join(f"{counts[(w, 0)]}/{counts[(w, 1)]}" for w in range(windows))
        print(line)
    later = jobs[1:]
    if later:
        diffs = [admitted[j] - ideal[j] for j in later]
        mean = sum(diffs) / len(diffs)
        sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / len(diffs))
        a = sum(admitted[j] for j in later)
        i = sum(ideal[j] for j in later)
        print(f"jobs {later[0]}-{later[-1]}: admitted {a}, ideal {i}, "
              f"a job {mean:+.1f} on average, standard deviation {sd:.1f}")


if __name__ == "__main__":
    main()
