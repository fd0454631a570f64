#!/usr/bin/env python3
"""Redis mode measured with the real things: N rlimitd ([cluster] mode =
"redis") sharing consumption through a real redis-server, or a real
three-master Redis Cluster, all on loopback ports, driven by
rlimit-soak-load (bench/soak_load.cc) for SECONDS, with the store killed
for OUTAGE_S seconds in the middle and started again empty.

    scripts/redis_accuracy.py --store single  [--nodes 4] [--seconds 90]
    scripts/redis_accuracy.py --store cluster [--nodes 4] [--seconds 90]

Load (spread evenly over the nodes; every key is demanded from every node):
  global  300/s on one key whose rule allows 100/s (burst 100)
  users   3,000/s over 200 users whose rule allows 5/s each (burst 5):
          each user demanded at 3x its limit
  cold    1,000/s over 100,000 user keys demanded far below the limit
Ideal admitted: the limit's burst plus the limit over the time (the load
tool's ideal); the worst 1 s window is the most admitted in one of the
load tool's 1 s intervals, for the global key and for any one user.
Store traffic: each node's redis_* counters (rlimitctl status --json)
sampled every 5 s, divided by the time and the number of nodes.

With --compare-sim it also runs the simulated twin of the same run
(simulations/scenarios/redis4.toml: the same nodes, load, rules and
outage; traffic there starts at 2 s) and sets the simulator's figures
beside the real ones: admitted / ideal over every class together, per
phase (the sim/real comparison of docs/accuracy.md).

Writes to OUT (default: a new /tmp/rlimit-redis-accuracy.XXXXXX, kept):
summary.md (the figures), seconds.csv (one row per second), counters.csv,
the daemons' and Redis' logs. Everything it starts is stopped on exit.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

REDIS_SERVER = "/usr/bin/redis-server"
REDIS_CLI = "/usr/bin/redis-cli"
GLOBAL_LIMIT, GLOBAL_RATE = 100, 300
USER_LIMIT, USERS, USERS_RATE = 5, 200, 3000
COLD_RATE, COLD_KEYS, COLD_CHURN = 1000, 100_000, 100
WARMUP_S = 5  # excluded from the steady phase (every key starts with its burst)
COUNTER_INTERVAL_S = 5
COUNTERS = ["redis_commands", "redis_round_trips", "redis_bytes_out", "redis_bytes_in",
            "store_batches", "store_batches_failed", "store_down", "store_keys_written",
            "store_keys_read", "store_writes_failed", "store_tokens_charged_remote",
            "redis_connect_failures", "redis_connects_deferred"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout_s} s waiting for {what}")


def cli(port, *args, timeout_s=5):
    r = subprocess.run([REDIS_CLI, "-p", str(port), *args], capture_output=True, text=True,
                       timeout=timeout_s)
    return r.stdout.strip()


class Run:
    def __init__(self, args):
        self.args = args
        self.build = args.build
        self.work = tempfile.mkdtemp(prefix="rlimit-redis-accuracy-work.")
        self.out = args.out or tempfile.mkdtemp(prefix="rlimit-redis-accuracy.")
        os.makedirs(self.out, exist_ok=True)
        self.procs = []  # everything started, stopped on exit
        self.redis = {}  # port -> (Popen, argv)
        self.nodes = []  # (Popen, socket path)
        self.events = []

    # ---- processes ----
    def spawn(self, argv, log_name):
        log = open(os.path.join(self.out, log_name), "ab")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        self.procs.append(p)
        return p

    def start_redis(self, port, extra):
        argv = [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", self.work, "--daemonize", "no", *extra]
        self.redis[port] = (self.spawn(argv, f"redis-{port}.log"), argv)
        wait_for(lambda: cli(port, "ping") == "PONG", 10, f"redis-server on {port}")

    def kill_redis(self, port):
        p, argv = self.redis[port]
        p.kill()
        p.wait(timeout=10)

    def restart_redis(self, port):
        _, argv = self.redis[port]
        self.redis[port] = (self.spawn(argv, f"redis-{port}.log"), argv)
        wait_for(lambda: cli(port, "ping") == "PONG", 10, f"redis-server on {port} again")

    def stop_all(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        shutil.rmtree(self.work, ignore_errors=True)

    # ---- set-up ----
    def start_store(self):
        if self.args.store == "single":
            port = free_port()
            self.start_redis(port, [])
            self.store_ports = [port]
            self.victim = port
            return
        ports = [free_port() for _ in range(3)]
        for port in ports:
            self.start_redis(port, ["--cluster-enabled", "yes", "--cluster-config-file",
                                    f"nodes-{port}.conf", "--cluster-port", str(free_port()),
                                    "--cluster-node-timeout", "15000"])
        r = subprocess.run([REDIS_CLI, "--cluster", "create",
                            *[f"127.0.0.1:{p}" for p in ports], "--cluster-yes"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError("redis-cli --cluster create failed:\n" + r.stdout + r.stderr)
        wait_for(lambda: all("cluster_state:ok" in cli(p, "cluster", "info") for p in ports),
                 30, "cluster_state:ok")
        self.store_ports = ports
        self.victim = ports[-1]  # one master of three: its keys' slots

    def config(self, i, sock):
        addresses = ", ".join(f'"127.0.0.1:{p}"' for p in self.store_ports)
        return f"""[daemon]
node_id = "node{i}"
socket = "{sock}"
log_level = "info"

[cluster]
mode = "redis"

[redis]
addresses = [{addresses}]
cluster = {"true" if self.args.store == "cluster" else "false"}
key_prefix = "acc:"
sync_interval = "{self.args.sync_interval}"
standin_max = "{self.args.standin_max}"

[[rule]]
name = "global"
match = {{ soak = "global" }}
limit = {GLOBAL_LIMIT}
period = "1s"
burst = {GLOBAL_LIMIT}

[[rule]]
name = "per-user"
match = {{ user = {{ each = true }} }}
limit = {USER_LIMIT}
period = "1s"
burst = {USER_LIMIT}
"""

    def start_nodes(self):
        for i in range(1, self.args.nodes + 1):
            sock = os.path.join(self.work, f"node{i}.sock")
            path = os.path.join(self.work, f"node{i}.toml")
            with open(path, "w") as f:
                f.write(self.config(i, sock))
            p = self.spawn([os.path.join(self.build, "bin", "rlimitd"), "--config", path],
                           f"node{i}.log")
            self.nodes.append((p, sock))
        for p, sock in self.nodes:
            wait_for(lambda: os.path.exists(sock) or p.poll() is not None, 10, sock)
            if p.poll() is not None:
                raise RuntimeError(f"rlimitd exited; see {self.out}/node*.log")

    def counters(self):
        row = {}
        for i, (_, sock) in enumerate(self.nodes, 1):
            r = subprocess.run([os.path.join(self.build, "bin", "rlimitctl"), "--socket", sock,
                                "--timeout-ms", "2000", "status", "--json"],
                               capture_output=True, text=True, timeout=10)
            try:
                status = json.loads(r.stdout)
            except ValueError:
                continue
            found = status.get("counters", {})
            if isinstance(found, list):  # [{"name":..., "value":...}]
                found = {c["name"]: c["value"] for c in found}
            for name in COUNTERS:
                row[f"n{i}_{name}"] = int(found.get(name, 0))
        return row

    # ---- the run ----
    def run(self):
        a = self.args
        self.start_store()
        self.start_nodes()
        stats_log = os.path.join(self.out, "stats.jsonl")
        load = self.spawn([
            os.path.join(self.build, "bin", "rlimit-soak-load"),
            *sum((["--socket", sock] for _, sock in self.nodes), []),
            "--stats", os.path.join(self.work, "stats.json"), "--stats-log", stats_log,
            "--seconds", str(a.seconds), "--global-rate", str(GLOBAL_RATE),
            "--global-limit", str(GLOBAL_LIMIT), "--global-burst", str(GLOBAL_LIMIT),
            "--hot-rate", str(USERS_RATE), "--hot-users", str(USERS), "--hot-rotate-s", "100000",
            "--user-limit", str(USER_LIMIT), "--user-burst", str(USER_LIMIT),
            "--cold-rate", str(COLD_RATE), "--cold-keys", str(COLD_KEYS),
            "--churn-keys-per-s", str(COLD_CHURN)], "load.log")
        start = time.monotonic()
        samples = []  # (t, counters)
        outage_end = a.outage_at + a.outage_s
        down = False
        done_outage = a.outage_s <= 0
        next_sample = 0.0
        # Bounded: the run's length plus 30 s.
        while time.monotonic() - start < a.seconds + 30 and load.poll() is None:
            t = time.monotonic() - start
            if t >= next_sample:
                samples.append((round(t, 2), self.counters()))
                next_sample += COUNTER_INTERVAL_S
            if not done_outage and not down and t >= a.outage_at:
                self.kill_redis(self.victim)
                self.events.append((round(t, 1), f"SIGKILL redis-server :{self.victim}"))
                down = True
            if down and t >= outage_end:
                self.restart_redis(self.victim)
                self.events.append((round(time.monotonic() - start, 1),
                                    f"redis-server :{self.victim} started again, empty"))
                down = False
                done_outage = True
            time.sleep(0.1)
        load.wait(timeout=30)
        samples.append((round(time.monotonic() - start, 2), self.counters()))
        with open(stats_log) as f:
            seconds = [json.loads(line) for line in f if line.strip()]
        return self.report(seconds, samples)

    # ---- the figures ----
    def report(self, seconds, samples):
        a = self.args
        n = a.nodes
        outage_end = a.outage_at + a.outage_s
        rows = []
        prev = {"elapsed_s": 0.0, "global_admitted": 0, "hot_admitted": 0, "global_unavailable": 0,
                "hot_unavailable": 0, "cold_admitted": 0, "cold_denied": 0}
        for s in seconds:
            dt = s["elapsed_s"] - prev["elapsed_s"]
            if dt <= 0.5:
                continue
            rows.append({
                "t0": prev["elapsed_s"], "t1": s["elapsed_s"],
                "global": s["global_admitted"] - prev["global_admitted"],
                "users": s["hot_admitted"] - prev["hot_admitted"],
                "user_max": s["hot_user_max_window"],
                "unavailable": s["global_unavailable"] + s["hot_unavailable"]
                - prev["global_unavailable"] - prev["hot_unavailable"],
                "cold": s["cold_admitted"] - prev["cold_admitted"],
                "cold_answered": s["cold_admitted"] + s["cold_denied"] - prev["cold_admitted"]
                - prev["cold_denied"],
                "dt": dt})
            prev = s
        with open(os.path.join(self.out, "seconds.csv"), "w") as f:
            f.write("t0_s,t1_s,global_admitted,global_per_limit,users_admitted,users_per_limit,"
                    "user_max,user_max_per_limit,unavailable\n")
            for r in rows:
                f.write(f"{r['t0']:.2f},{r['t1']:.2f},{r['global']},"
                        f"{r['global'] / (GLOBAL_LIMIT * r['dt']):.3f},{r['users']},"
                        f"{r['users'] / (USERS * USER_LIMIT * r['dt']):.3f},{r['user_max']},"
                        f"{r['user_max'] / (USER_LIMIT * r['dt']):.2f},{r['unavailable']}\n")
        with open(os.path.join(self.out, "counters.csv"), "w") as f:
            names = sorted({k for _, c in samples for k in c})
            f.write("t_s," + ",".join(names) + "\n")
            for t, c in samples:
                f.write(f"{t}," + ",".join(str(c.get(k, "")) for k in names) + "\n")

        def phase(name, t_from, t_to):
            rs = [r for r in rows if r["t0"] >= t_from - 0.5 and r["t1"] <= t_to + 0.5]
            if not rs:
                return None
            span = rs[-1]["t1"] - rs[0]["t0"]
            burst_g = GLOBAL_LIMIT if rs[0]["t0"] < 0.5 else 0
            burst_u = USERS * USER_LIMIT if rs[0]["t0"] < 0.5 else 0
            g = sum(r["global"] for r in rs)
            u = sum(r["users"] for r in rs)
            # Worst windows after the first second (which holds the burst).
            later = [r for r in rs if r["t0"] >= 0.5] or rs
            everything = (g + u + sum(r["cold"] for r in rs)) / (
                burst_g + GLOBAL_LIMIT * span + burst_u + USERS * USER_LIMIT * span
                + sum(r["cold_answered"] for r in rs))
            return {
                "all_ratio": everything,
                "name": name, "from": rs[0]["t0"], "to": rs[-1]["t1"],
                "global_ratio": g / (burst_g + GLOBAL_LIMIT * span),
                "users_ratio": u / (burst_u + USERS * USER_LIMIT * span),
                "global_worst": max(r["global"] / (GLOBAL_LIMIT * r["dt"]) for r in later),
                "global_least": min(r["global"] / (GLOBAL_LIMIT * r["dt"]) for r in later),
                "user_worst": max(r["user_max"] / (USER_LIMIT * r["dt"]) for r in later),
                "unavailable": sum(r["unavailable"] for r in rs)}

        def store_rate(t_from, t_to):
            inside = [(t, c) for t, c in samples if t_from - 0.5 <= t <= t_to + 0.5 and c]
            if len(inside) < 2:
                return None
            (t0, c0), (t1, c1) = inside[0], inside[-1]
            per = {}
            for name in ("redis_commands", "redis_round_trips", "redis_bytes_out",
                         "redis_bytes_in", "store_keys_written", "store_keys_read"):
                total = sum(c1.get(f"n{i}_{name}", 0) - c0.get(f"n{i}_{name}", 0)
                            for i in range(1, n + 1))
                per[name] = total / n / (t1 - t0)
            return per

        phases = [phase("whole run", 0, a.seconds)]
        if a.outage_s > 0:
            phases += [phase("before the outage", WARMUP_S, a.outage_at),
                       phase("store down", a.outage_at, outage_end),
                       phase("first 5 s after", outage_end, outage_end + 5),
                       phase("after the outage", outage_end + 5, a.seconds)]
        else:
            phases += [phase("steady", WARMUP_S, a.seconds)]
        phases = [p for p in phases if p]
        steady_to = a.outage_at if a.outage_s > 0 else a.seconds
        rate = store_rate(WARMUP_S, steady_to)
        final = samples[-1][1]
        lines = [
            f"# Redis mode, {n} real rlimitd, {'one redis-server' if a.store == 'single' else 'a three-master Redis Cluster'}",
            "",
            f"`scripts/redis_accuracy.py --store {a.store} --nodes {n} --seconds {a.seconds} "
            f"--outage-at {a.outage_at} --outage-s {a.outage_s} --sync-interval {a.sync_interval} "
            f"--standin-max {a.standin_max}`",
            "",
            f"Load: global {GLOBAL_RATE}/s on a limit of {GLOBAL_LIMIT}/s (burst {GLOBAL_LIMIT}); "
            f"{USERS_RATE}/s over {USERS} users limited to {USER_LIMIT}/s each (burst {USER_LIMIT}); "
            f"{COLD_RATE}/s over {COLD_KEYS} cold keys. Every key demanded from every node.",
            "",
            "Events: " + ("; ".join(f"t={t} s {e}" for t, e in self.events) or "none"),
            "",
            "| phase | seconds | global admitted / ideal | users admitted / ideal | "
            "global worst 1 s / limit | global least 1 s / limit | worst user 1 s / limit | "
            "unavailable |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
        for p in phases:
            lines.append(f"| {p['name']} | {p['from']:.0f}-{p['to']:.0f} | {p['global_ratio']:.4f} | "
                         f"{p['users_ratio']:.4f} | {p['global_worst']:.2f} | "
                         f"{p['global_least']:.2f} | {p['user_worst']:.2f} | {p['unavailable']} |")
        if rate:
            lines += ["",
                      f"Store traffic per node per second (t = {WARMUP_S}-{steady_to:.0f} s): "
                      f"{rate['redis_commands']:.1f} commands in {rate['redis_round_trips']:.1f} "
                      f"round trips, {rate['redis_bytes_out'] / 1000:.1f} KB out, "
                      f"{rate['redis_bytes_in'] / 1000:.1f} KB in; "
                      f"{rate['store_keys_written']:.1f} keys written, "
                      f"{rate['store_keys_read']:.1f} keys read."]
        lines += ["", "Counters at the end, per node: " + "; ".join(
            f"node{i}: store_down {final.get(f'n{i}_store_down', '?')}, "
            f"batches {final.get(f'n{i}_store_batches', '?')} "
            f"({final.get(f'n{i}_store_batches_failed', '?')} failed)"
            for i in range(1, n + 1))]
        if a.compare_sim and a.store == "single" and a.outage_s > 0:
            lines += ["", *self.compare_sim(phases)]
        text = "\n".join(lines) + "\n"
        with open(os.path.join(self.out, "summary.md"), "w") as f:
            f.write(text)
        return text


    def compare_sim(self, phases):
        """The twin scenario in rlimit-sim; admitted / ideal of every class
        together per phase, real beside simulated."""
        a = self.args
        csv_path = os.path.join(self.out, "sim.csv")
        started = time.monotonic()
        r = subprocess.run([os.path.join(self.build, "bin", "rlimit-sim"), "--scenario",
                            "simulations/scenarios/redis4.toml", "--seed", "1", "--csv", csv_path,
                            "--set", f'redis.sync_interval="{a.sync_interval}"',
                            "--set", f"cluster.nodes={a.nodes}",
                            "--set", f'duration="{a.seconds + 2}s"',
                            "--set", f'redis_outage.0.start="{a.outage_at + 2}s"',
                            "--set", f'redis_outage.0.end="{a.outage_at + a.outage_s + 2}s"'],
                           capture_output=True, text=True, timeout=1800)
        wall_s = time.monotonic() - started
        with open(os.path.join(self.out, "sim.txt"), "w") as f:
            f.write(r.stdout + r.stderr)
        if r.returncode != 0:
            return [f"rlimit-sim failed: {r.stderr.strip()}"]
        samples = []
        with open(csv_path) as f:
            header = f.readline().strip().split(",")
            at = {name: i for i, name in enumerate(header)}
            for line in f:
                v = line.strip().split(",")
                samples.append((float(v[at["t_s"]]) - 2.0, float(v[at["ideal_per_s"]]),
                                float(v[at["admitted_per_s"]])))
        step = samples[1][0] - samples[0][0] if len(samples) > 1 else 0.1

        def sim_ratio(t_from, t_to):
            inside = [(i, ad) for t, i, ad in samples if t_from <= t < t_to]
            ideal = sum(i for i, _ in inside) * step
            return sum(ad for _, ad in inside) * step / ideal if ideal > 0 else float("nan")

        out = ["Simulated twin (`rlimit-sim --scenario simulations/scenarios/redis4.toml "
               f"--seed 1`, {a.seconds} s simulated in {wall_s:.1f} s wall: "
               f"{a.seconds / wall_s:.1f}x real time). Admitted / ideal, every class together:",
               "", "| phase | real | simulated | sim / real |", "|---|---:|---:|---:|"]
        for p in phases:
            sim = sim_ratio(p["from"] if p["name"] != "whole run" else 0, p["to"])
            out.append(f"| {p['name']} | {p['all_ratio']:.4f} | {sim:.4f} | "
                       f"{sim / p['all_ratio']:.3f} |")
        return out


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["single", "cluster"], default="single")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=90)
    parser.add_argument("--outage-at", type=int, default=40)
    parser.add_argument("--outage-s", type=int, default=10, help="0: no outage")
    parser.add_argument("--sync-interval", default="100ms")
    parser.add_argument("--standin-max", default="60s",
                        help="[redis] standin_max; \"0s\": each node alone while Redis is down")
    parser.add_argument("--build", default=os.environ.get("RLIMIT_BUILD_DIR", "build"))
    parser.add_argument("--out")
    parser.add_argument("--compare-sim", action="store_true",
                        help="also run the simulated twin (--store single only)")
    args = parser.parse_args()
    if not 1 <= args.nodes <= 16 or not 10 <= args.seconds <= 3600:
        parser.error("--nodes 1..16, --seconds 10..3600")
    if args.outage_s > 0 and args.outage_at + args.outage_s + 10 > args.seconds:
        parser.error("the outage must end at least 10 s before the run does")
    for tool in ("rlimitd", "rlimitctl", "rlimit-soak-load"):
        if not os.access(os.path.join(args.build, "bin", tool), os.X_OK):
            sys.exit(f"redis_accuracy: {args.build}/bin/{tool} is missing; build it first")
    for tool in (REDIS_SERVER, REDIS_CLI):
        if not os.access(tool, os.X_OK):
            sys.exit(f"redis_accuracy: {tool} is missing (apt-get install redis-server)")
    run = Run(args)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    try:
        print(run.run(), end="")
        print(f"redis_accuracy: results in {run.out}")
    finally:
        run.stop_all()


if __name__ == "__main__":
    main()
