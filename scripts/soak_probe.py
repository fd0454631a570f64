#!/usr/bin/env python3
"""scripts/soak.sh's stall probe (standard library only).

  soak_probe.py probe OUT_DIR START END INTERVAL_MS THRESHOLD_MS
      until END (epoch seconds), ask each node's GET /healthz every
      INTERVAL_MS (answered on the node's event loop, like every check) and
      append every answer slower than THRESHOLD_MS to OUT_DIR/stalls.log;
      a fourth thread logs its own oversleeps past THRESHOLD_MS as "probe"
      (the probe itself was not run: the machine, not a node)
  soak_probe.py summary OUT_DIR   the stalls, counted and attributed

A stalls.log line: t_s (when the request was sent, since START, as in
events.log) node latency_ms, then
over the slow request: the node's event-loop thread's run and run-queue wait
(/proc/PID/schedstat) and the machine's pressure stall time
(/proc/pressure/cpu "some", /proc/pressure/io "some" and "full"), all in ms.
A node blocked in the kernel (a disk write) shows low run and wait and io
pressure; a node starved of CPU shows wait; a busy node shows run. Nodes
that are down (connection refused) are skipped.
"""
import os
import sys
import threading
import time
import urllib.request

from soak_report import read_text  # same directory; defines, runs nothing on import

NODES = (1, 2, 3)
REQUEST_TIMEOUT_S = 30


def schedstat_ms(pid, tid=None):
    """(run_ms, wait_ms) of the process's main thread (rlimitd's event loop) or of
    its thread `tid`, or (0, 0)."""
    path = f"/proc/{pid}/task/{tid}/schedstat" if tid else f"/proc/{pid}/schedstat"
    text = read_text(path) if pid else None
    if not text:
        return 0.0, 0.0
    run_ns, wait_ns = text.split()[:2]
    return int(run_ns) / 1e6, int(wait_ns) / 1e6


def pressure_ms():
    """(cpu some, io some, io full) total stall time so far, ms; zeros if unavailable."""
    out = []
    for res, kind in (("cpu", "some"), ("io", "some"), ("io", "full")):
        total = 0.0
        for line in (read_text(f"/proc/pressure/{res}") or "").splitlines():
            if line.startswith(kind):
                total = int(line.rsplit("total=", 1)[1]) / 1e3
        out.append(total)
    return out


LOCK = threading.Lock()


def log(out_dir, t_s, node, latency_ms, before, after):
    run = after[0] - before[0]
    wait = after[1] - before[1]
    psi = [a - b for a, b in zip(after[2], before[2])]
    line = (f"{t_s:.1f} {node} {latency_ms:.0f} run {run:.0f} wait {wait:.0f} "
            f"psi_cpu {psi[0]:.0f} psi_io {psi[1]:.0f} psi_io_full {psi[2]:.0f}\n")
    with LOCK, open(os.path.join(out_dir, "stalls.log"), "a") as f:
        f.write(line)


def probe_node(out_dir, i, start, end, interval_s, threshold_s):
    while time.time() < end:
        next_at = time.monotonic() + interval_s
        address = (read_text(os.path.join(out_dir, f"node{i}.http")) or "").strip()
        pid = (read_text(os.path.join(out_dir, f"node{i}.pid")) or "").strip()
        if address and pid:
            before = (*schedstat_ms(pid), pressure_ms())
            t_s = time.time() - start
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(f"http://{address}/healthz",
                                            timeout=REQUEST_TIMEOUT_S) as r:
                    r.read()
                ok = True
            except (OSError, ValueError):
                ok = False  # down (killed on purpose) or restarting
            latency = time.monotonic() - t0
            if ok and latency > threshold_s:
                log(out_dir, t_s, f"node{i}", latency * 1e3, before,
                    (*schedstat_ms(pid), pressure_ms()))
        time.sleep(max(0.0, next_at - time.monotonic()))


def probe_self(out_dir, start, end, interval_s, threshold_s):
    pid, tid = os.getpid(), threading.get_native_id()
    while time.time() < end:
        before = (*schedstat_ms(pid, tid), pressure_ms())
        t_s = time.time() - start
        t0 = time.monotonic()
        time.sleep(interval_s)
        late = time.monotonic() - t0 - interval_s
        if late > threshold_s:
            log(out_dir, t_s, "probe", late * 1e3, before,
                (*schedstat_ms(pid, tid), pressure_ms()))


def probe(out_dir, start, end, interval_ms, threshold_ms):
    interval_s, threshold_s = interval_ms / 1e3, threshold_ms / 1e3
    threads = [threading.Thread(target=probe_node,
                                args=(out_dir, i, start, end, interval_s, threshold_s),
                                daemon=True) for i in NODES]
    threads.append(threading.Thread(target=probe_self,
                                    args=(out_dir, start, end, interval_s, threshold_s),
                                    daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(0.0, end - time.time()) + REQUEST_TIMEOUT_S + 5)


def summary(out_dir):
    rows = []
    for line in (read_text(os.path.join(out_dir, "stalls.log")) or "").splitlines():
        f = line.split()
        rows.append({"t": float(f[0]), "who": f[1], "ms": float(f[2]), "run": float(f[4]),
                     "wait": float(f[6]), "psi_cpu": float(f[8]), "psi_io": float(f[10]),
                     "psi_io_full": float(f[12])})
    out = []
    for who in [f"node{i}" for i in NODES] + ["probe"]:
        mine = [r for r in rows if r["who"] == who]
        over = lambda ms: sum(r["ms"] > ms for r in mine)
        worst = max(mine, key=lambda r: r["ms"], default=None)
        text = (f"stalls {who}: {len(mine)} answers over the threshold, {over(200)} over 200 ms, "
                f"{over(1000)} over 1 s")
        if worst:
            text += (f"; longest {worst['ms']:.0f} ms at t={worst['t']:.0f} s (run "
                     f"{worst['run']:.0f} ms, run-queue wait {worst['wait']:.0f} ms, pressure cpu "
                     f"{worst['psi_cpu']:.0f} / io {worst['psi_io']:.0f} / io full "
                     f"{worst['psi_io_full']:.0f} ms)")
        out.append(text)
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) == 7 and sys.argv[1] == "probe":
        probe(sys.argv[2], *map(float, sys.argv[3:]))
    elif len(sys.argv) == 3 and sys.argv[1] == "summary":
        sys.stdout.write(summary(sys.argv[2]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
