"""GET /metrics, /healthz and /readyz on real rlimitd processes (path in
$RLIMITD): a single daemon with the HTTP and gRPC faces, and three gossip
nodes on loopback. The exposition is checked by Prometheus' own parser and
linter (Debian's promtool, path in $PROMTOOL), and the shipped alerting rules
and Grafana dashboard are checked against what the daemon really exports.

Every wait is bounded in count and time; every process is killed and every
temporary directory removed when its test ends."""
from __future__ import annotations

import http.client
import json
import os
import pathlib
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

# tests/support: sanitizer_report, which fails a test whose daemon reported
# an ASan/LSan/UBSan/TSan error (build-asan, build-tsan).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "support"))
from sanitizer_report import assert_no_sanitizer_report  # noqa: E402
from free_port import free_port  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
MONITORING = os.path.join(REPO, "docs", "monitoring")
START_TIMEOUT_S = 10.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

RULES = """
[[rule]]
name = "per-user"
match = { user = { each = true } }
limit = 2
period = "1m"

[[rule]]
name = "shadow-search"
match = { path = "/search" }
limit = 1
period = "1h"
algorithm = "fixed_window"
mode = "shadow"
"""


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


class Daemon:
    def __init__(self, directory: str, name: str, http_extra: str = "", extra_config: str = "",
                 args: Tuple[str, ...] = ()) -> None:
        self.directory = os.path.join(directory, name)
        os.mkdir(self.directory)
        self.name = name
        self.http_port = free_port()
        self.socket = os.path.join(self.directory, "rlimitd.sock")
        self.log = os.path.join(self.directory, "rlimitd.log")
        config = os.path.join(self.directory, "rlimitd.toml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(f'[daemon]\nsocket = "{self.socket}"\nshutdown_grace = "1s"\n\n'
                    f'[http]\nlisten = "127.0.0.1:{self.http_port}"\n{http_extra}\n\n'
                    f'{extra_config}\n{RULES}\n')
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [os.environ["RLIMITD"], "--config", config, "--node-id", name, *args],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{name} exited with {self.process.returncode}:\n{self.text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.http_port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"{name}: nothing listens on {self.http_port}:\n{self.text()}")

    def text(self) -> str:
        with open(self.log, encoding="utf-8", errors="replace") as f:
            return f.read()

    def get(self, target: str, method: str = "GET") -> Tuple[int, Dict[str, str], str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=5)
        try:
            connection.request(method, target)
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read().decode()
        finally:
            connection.close()

    def metrics(self) -> str:
        status, headers, body = self.get("/metrics")
        assert status == 200, body
        assert headers["Content-Type"] == CONTENT_TYPE
        return body


def samples(text: str) -> Dict[str, float]:
    """'name{labels}' -> value, for every sample line."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def families(text: str) -> Dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r"^# TYPE (\S+) (\S+)$", text, re.M)}


def promtool(*args: str, stdin: Optional[str] = None) -> subprocess.CompletedProcess:
    return subprocess.run([os.environ["PROMTOOL"], *args], input=stdin, capture_output=True,
                          text=True, timeout=60)


def assert_promtool_accepts(text: str) -> None:
    # Exit 0 and no output: it parsed, and the linter found nothing.
    result = promtool("check", "metrics", stdin=text)
    assert result.returncode == 0 and not (result.stdout + result.stderr).strip(), (
        f"promtool check metrics: rc {result.returncode}\n{result.stdout}{result.stderr}\n----\n"
        f"{text}")


@pytest.fixture
def tmp() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="rlimit-metrics-")
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def daemons() -> Iterator[List[Daemon]]:
    started: List[Daemon] = []
    yield started
    for d in started:
        stop(d.process)
    assert_no_sanitizer_report(d.log for d in started)


def wait_until(what: str, predicate, timeout_s: float = 15.0, step_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(step_s)
    pytest.fail(f"{what} not within {timeout_s}s (last: {last!r})")


def test_single_daemon_metrics_health_and_ready(tmp, daemons):
    grpc_port = free_port()
    d = Daemon(tmp, "solo", extra_config=f'[grpc]\nlisten = "127.0.0.1:{grpc_port}"\n')
    daemons.append(d)
    for target in ("/v1/check?user=alice",) * 3 + ("/v1/check?user=bob&path=/search",) * 2:
        d.get(target)

    text = d.metrics()
    assert_promtool_accepts(text)
    s = samples(text)
    per_user = '{rule="per-user",algorithm="token_bucket"}'
    shadow = '{rule="shadow-search",algorithm="fixed_window"}'
    assert s["rlimit_rule_checks_total" + per_user] == 5
    assert s["rlimit_rule_allowed_total" + per_user] == 4
    assert s["rlimit_rule_denied_total" + per_user] == 1
    assert s["rlimit_rule_checks_total" + shadow] == 2
    assert s["rlimit_rule_over_limit_total" + shadow] == 1
    assert s["rlimit_checks_total"] == 5
    assert s["rlimit_http_checks_total"] == 5
    assert s['rlimit_decision_seconds_count{face="http"}'] == 5
    assert s['rlimit_decision_seconds_bucket{face="http",le="+Inf"}'] == 5
    assert 0 < s['rlimit_decision_seconds_sum{face="http"}'] < 5
    assert s["rlimit_keys"] == 3
    assert s["rlimit_key_table_fill_ratio"] == pytest.approx(3 / s["rlimit_max_keys"])
    assert s["rlimit_rules"] == 2
    assert 0 < s["rlimit_rules_digest"] < 2 ** 52
    assert s["rlimit_ready"] == 1
    assert s["rlimit_grpc_pending"] == 0  # the gRPC face's counters are there
    assert any(k.startswith("rlimit_build_info{") and v == 1 for k, v in s.items())
    assert "rlimit_cluster_members" not in families(text)

    status, headers, body = d.get("/healthz")
    assert (status, body) == (200, "ok\n")
    status, headers, body = d.get("/readyz")
    assert status == 200 and json.loads(body)["ready"] is True, body
    status, headers, body = d.get("/metrics", method="POST")
    assert status == 405 and headers.get("Allow") == "GET", body
    # Scrapes are HTTP requests, never checks.
    assert samples(d.metrics())["rlimit_checks_total"] == 5


def start_cluster(tmp: str, daemons: List[Daemon], count: int = 3) -> List[Daemon]:
    secret = os.path.join(tmp, "secret")
    with open(secret, "w") as f:
        f.write("# this test cluster's own (tests run side by side on loopback)\n"
                + secrets.token_hex(16) + "\n")
    os.chmod(secret, 0o600)
    ports = [free_port(socket.SOCK_DGRAM) for _ in range(count)]
    seeds = ",".join(f"127.0.0.1:{p}" for p in ports[:2])
    nodes = []
    for i, port in enumerate(ports):
        node = Daemon(tmp, f"node{i}", args=("--cluster-mode", "gossip", "--bind",
                                             f"127.0.0.1:{port}", "--seeds", seeds,
                                             "--secret-file", secret))
        daemons.append(node)
        nodes.append(node)
    return nodes


def test_cluster_node_metrics_and_readiness(tmp, daemons):
    nodes = start_cluster(tmp, daemons)
    alive = 'rlimit_cluster_members{state="alive"}'
    for node in nodes:
        wait_until(f"{node.name} sees 3 alive members",
                   lambda: samples(node.metrics()).get(alive) == 3)
    for i in range(6):
        nodes[i % 3].get("/v1/check?user=carol")
    # The news of carol's key reaches the other nodes as gossip.
    wait_until("gossip bytes flow",
               lambda: all(samples(n.metrics())['rlimit_peer_bytes_total{direction="out"}'] > 0
                           for n in nodes))
    for node in nodes:
        text = node.metrics()
        assert_promtool_accepts(text)
        s = samples(text)
        assert s['rlimit_cluster_members{state="suspect"}'] == 0
        assert s['rlimit_cluster_members{state="dead"}'] == 0
        assert s['rlimit_peer_dropped_total{cause="bad_mac"}'] == 0
        assert s['rlimit_peer_packets_total{direction="in"}'] > 0
        assert s["rlimit_gossip_backlog_keys"] >= 0
        assert s["rlimit_ready"] == 1
        status, _, body = node.get("/readyz")
        assert status == 200 and json.loads(body)["joined"] is True, body
    # Same rules everywhere: one digest, and one rule set as members names it.
    assert len({samples(n.metrics())["rlimit_rules_digest"] for n in nodes}) == 1
    infos = [[key for key in samples(n.metrics()) if key.startswith("rlimit_rules_info{")]
             for n in nodes]
    assert all(len(info) == 1 for info in infos), infos
    # Version 0 is each node's own file (its origin is the node); the digest
    # says the documents are the same.
    digests = {re.search(r'digest="([0-9a-f]{12})"', info[0]).group(1) for info in infos}
    assert len(digests) == 1, infos
    assert all('version="0"' in info[0] for info in infos), infos

    # A member that goes away is suspected, then dead, on the others.
    stop(nodes[2].process)
    wait_until("node2 suspect or dead on node0",
               lambda: (samples(nodes[0].metrics())['rlimit_cluster_members{state="suspect"}'] +
                        samples(nodes[0].metrics())['rlimit_cluster_members{state="dead"}'] +
                        samples(nodes[0].metrics())['rlimit_cluster_members{state="left"}']) >= 1)


def test_lone_node_becomes_ready_after_its_seeds_stay_silent(tmp, daemons):
    secret = os.path.join(tmp, "secret")
    with open(secret, "w") as f:
        f.write(secrets.token_hex(16) + "\n")
    os.chmod(secret, 0o600)
    silent_seed = free_port(socket.SOCK_DGRAM)  # nobody listens there
    node = Daemon(tmp, "lone", http_extra='ready_after_seeds_unreachable = "2s"',
                  args=("--cluster-mode", "gossip", "--bind", "127.0.0.1:0", "--seeds",
                        f"127.0.0.1:{silent_seed}", "--secret-file", secret))
    daemons.append(node)
    status, headers, body = node.get("/readyz")
    assert status == 503, body
    assert headers["Content-Type"] == "application/json"
    why = json.loads(body)
    assert why["ready"] is False and why["joined"] is False and "seed" in why["reason"], why
    assert why["ready_after_seeds_unreachable_ms"] == 2000
    assert samples(node.metrics())["rlimit_ready"] == 0
    # /healthz does not wait for the cluster: the loop answers.
    assert node.get("/healthz")[0] == 200
    wait_until("ready alone", lambda: node.get("/readyz")[0] == 200, timeout_s=10)
    assert samples(node.metrics())["rlimit_ready"] == 1


def exported(text: str) -> set:
    """Every name a query may use: families, and a histogram's series."""
    names = set()
    for family, kind in families(text).items():
        names.add(family)
        if kind == "histogram":
            names.update({family + "_bucket", family + "_sum", family + "_count"})
    return names


def test_alerting_rules_check_and_unit_tests_pass():
    result = promtool("check", "rules", os.path.join(MONITORING, "alerts.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
    result = promtool("test", "rules", os.path.join(MONITORING, "alerts_test.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboard_and_alerts_use_only_exported_metrics(tmp, daemons):
    grpc_port = free_port()
    solo = Daemon(tmp, "solo", extra_config=f'[grpc]\nlisten = "127.0.0.1:{grpc_port}"\n')
    daemons.append(solo)
    nodes = start_cluster(tmp, daemons, count=2)
    names = exported(solo.metrics()) | exported(nodes[0].metrics())

    with open(os.path.join(MONITORING, "grafana-dashboard.json"), encoding="utf-8") as f:
        dashboard = json.load(f)
    assert dashboard["title"] and dashboard["panels"] and dashboard["schemaVersion"] >= 30
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 8
    # Every panel query is valid PromQL once Grafana's variables are filled
    # in: promtool checks it as a recording rule.
    rules_file = os.path.join(tmp, "dashboard-queries.yml")
    with open(rules_file, "w", encoding="utf-8") as f:
        f.write("groups:\n  - name: dashboard\n    rules:\n")
        for i, expr in enumerate(exprs):
            filled = (expr.replace("$__rate_interval", "5m").replace("$job", ".*")
                      .replace("$instance", ".*"))
            f.write(f"      - record: dashboard_query_{i}\n        expr: {json.dumps(filled)}\n")
    result = promtool("check", "rules", rules_file)
    assert result.returncode == 0, result.stdout + result.stderr
    with open(os.path.join(MONITORING, "alerts.yml"), encoding="utf-8") as f:
        exprs.append(f.read())
    used = set()
    for expr in exprs:
        used.update(re.findall(r"\brlimit_[a-z0-9_]+", expr))
    missing = sorted(used - names)
    assert not missing, f"not exported by rlimitd: {missing}"
