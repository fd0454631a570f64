"""rlimitd's gRPC face (Envoy's rate-limit API) asked by a client that is not
ours: Python grpcio with message modules protoc generated from
proto/envoy/**. Starts real rlimitd processes on loopback ports.

Environment (set by tests/faces/CMakeLists.txt):
  RLIMITD         path of the rlimitd binary
  RLIMIT_ENVOY_PY directory of the generated *_pb2 modules

Missing grpcio, protobuf or either variable fails the tests; nothing skips.
Every wait is bounded; every daemon is killed and every temp file removed.
"""

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
import threading
import time

import itertools

import grpc  # python3-grpcio: the test fails, not skips, without it
import pytest

# tests/support: sanitizer_report, which fails a test whose daemon reported
# an ASan/LSan/UBSan/TSan error (build-asan, build-tsan).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "support"))
from sanitizer_report import assert_no_sanitizer_report  # noqa: E402
from free_port import free_port  # noqa: E402

sys.path.insert(0, os.environ["RLIMIT_ENVOY_PY"])

from envoy.service.ratelimit.v3 import rls_pb2  # noqa: E402
from envoy.type.v3 import ratelimit_unit_pb2  # noqa: E402

RLIMITD = os.environ["RLIMITD"]
METHOD = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
Response = rls_pb2.RateLimitResponse
RateLimit = Response.RateLimit
CALL_TIMEOUT_S = 5


class Daemon:
    """One rlimitd with [grpc] listen on a free loopback port."""

    def __init__(self, tmp, name, rules, extra_args=(), grpc_extra=""):
        self.name = name
        self.port = free_port()
        self.config = os.path.join(tmp, name + ".toml")
        with open(self.config, "w") as f:
            f.write('[grpc]\nlisten = "127.0.0.1:%d"\n%s\n%s' % (self.port, grpc_extra, rules))
        self.log_path = os.path.join(tmp, name + ".log")
        self.log = open(self.log_path, "w")
        args = [RLIMITD, "--config", self.config, "--socket", os.path.join(tmp, name + ".sock"),
                "--node-id", name, "--log-level", "info", *extra_args]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % self.port)
        self.stub = self.channel.unary_unary(
            METHOD,
            request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
            response_deserializer=Response.FromString)

    def wait_ready(self, timeout_s=15):
        try:
            grpc.channel_ready_future(self.channel).result(timeout=timeout_s)
        except grpc.FutureTimeoutError:
            pytest.fail("%s not serving gRPC within %ss:\n%s" % (self.name, timeout_s, self.text()))
        assert self.proc.poll() is None, self.text()

    def ask(self, domain, *descriptors, hits_addend=0):
        return self.stub(request(domain, *descriptors, hits_addend=hits_addend),
                         timeout=CALL_TIMEOUT_S)

    def text(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self, check=True):
        """SIGTERM (SIGKILL after 10 s); with `check`, fails on a sanitizer
        report in the log."""
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()
        if check:
            assert_no_sanitizer_report([self.log_path])
        return self.proc.returncode


def request(domain, *descriptors, hits_addend=0):
    """descriptors: lists of (key, value) or dicts with entries/limit/hits."""
    r = rls_pb2.RateLimitRequest(domain=domain, hits_addend=hits_addend)
    for d in descriptors:
        if not isinstance(d, dict):
            d = {"entries": d}
        out = r.descriptors.add()
        for key, value in d["entries"]:
            out.entries.add(key=key, value=value)
        if "limit" in d:
            out.limit.requests_per_unit, out.limit.unit = d["limit"]
        if "hits" in d:
            out.hits_addend.value = d["hits"]
    return r


def headers(response):
    return {h.key.lower(): h.value for h in response.response_headers_to_add}


RULES = """
[[rule]]
name = "per-ip"
match = { domain = "edge", ip = { each = true } }
limit = 3
period = "1m"

[[rule]]
name = "per-ip-hourly"
match = { domain = "edge", ip = { each = true } }
limit = 10
period = "1h"

[[rule]]
name = "quarter"
match = { domain = "edge", user = { each = true } }
limit = 10
period = "250ms"

[[rule]]
name = "watch"
match = { domain = "edge", path = { each = true } }
limit = 1
period = "1s"
mode = "shadow"
"""


@pytest.fixture(scope="module")
def tmp():
    path = tempfile.mkdtemp(prefix="rlimit-grpc-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def daemon(tmp):
    d = Daemon(tmp, "single", RULES, grpc_extra="max_message_bytes = 4096\n")
    try:
        d.wait_ready()
        yield d
    finally:
        code = d.stop()
        assert code == 0, d.text()


def test_ok_then_over_limit_with_the_deciding_rule(daemon):
    for left in (2, 1, 0):
        r = daemon.ask("edge", [("ip", "10.0.0.1")])
        assert r.overall_code == Response.OK
        assert len(r.statuses) == 1
        s = r.statuses[0]
        assert s.code == Response.OK
        assert s.current_limit.name == "per-ip"
        assert s.current_limit.requests_per_unit == 3
        assert s.current_limit.unit == RateLimit.MINUTE
        assert s.limit_remaining == left
        reset_s = s.duration_until_reset.seconds + s.duration_until_reset.nanos / 1e9
        assert 0 < reset_s <= 60
        h = headers(r)
        assert h["ratelimit-policy"] == '"per-ip";q=3;w=60, "per-ip-hourly";q=10;w=3600'
        assert re.match(r'"per-ip";r=%d;t=\d+, "per-ip-hourly";r=\d+;t=\d+$' % left,
                        h["ratelimit"]), h
        assert "retry-after" not in h
    r = daemon.ask("edge", [("ip", "10.0.0.1")])
    assert r.overall_code == Response.OVER_LIMIT
    s = r.statuses[0]
    assert s.code == Response.OVER_LIMIT
    assert s.current_limit.name == "per-ip"
    assert s.limit_remaining == 0
    assert 15 <= int(headers(r)["retry-after"]) <= 20


def test_a_period_that_is_no_unit_reports_a_whole_rate(daemon):
    r = daemon.ask("edge", [("user", "u1")])
    s = r.statuses[0]
    assert s.current_limit.name == "quarter"
    # 10 per 250 ms is 40 per second.
    assert (s.current_limit.requests_per_unit, s.current_limit.unit) == (40, RateLimit.SECOND)
    assert s.limit_remaining == 9


def test_hits_addend_request_then_descriptor(daemon):
    r = daemon.ask("edge", [("ip", "10.0.0.2")], hits_addend=2)
    assert r.statuses[0].limit_remaining == 1
    # The descriptor's own hits_addend wins over the request's.
    r = daemon.ask("edge", {"entries": [("ip", "10.0.0.2")], "hits": 1}, hits_addend=3)
    assert r.overall_code == Response.OK
    assert r.statuses[0].limit_remaining == 0
    r = daemon.ask("edge", [("ip", "10.0.0.2")])
    assert r.overall_code == Response.OVER_LIMIT


def test_any_descriptor_over_limit_is_overall_and_unmatched_is_ok(daemon):
    r = daemon.ask("edge", [("ip", "10.0.0.3")], [("nothing", "matches")], hits_addend=3)
    assert r.overall_code == Response.OK
    assert not r.statuses[1].HasField("current_limit")
    r = daemon.ask("edge", [("ip", "10.0.0.3")], [("nothing", "matches")])
    assert [s.code for s in r.statuses] == [Response.OVER_LIMIT, Response.OK]
    assert r.overall_code == Response.OVER_LIMIT
    # Another domain matches none of the rules.
    r = daemon.ask("other", [("ip", "10.0.0.3")])
    assert r.overall_code == Response.OK
    assert not r.statuses[0].HasField("current_limit")


def test_shadow_rule_answers_ok_and_says_so(daemon):
    r = daemon.ask("edge", [("path", "/watched")])
    assert "x-rlimit-over-limit" not in headers(r)
    r = daemon.ask("edge", [("path", "/watched")])
    assert r.overall_code == Response.OK
    assert r.statuses[0].code == Response.OK
    assert headers(r)["x-rlimit-over-limit"] == "watch"


def test_limit_override_is_an_inline_limit(daemon):
    d = {"entries": [("tenant", "t1")], "limit": (2, ratelimit_unit_pb2.HOUR)}
    assert daemon.ask("api", d).overall_code == Response.OK
    assert daemon.ask("api", d).overall_code == Response.OK
    r = daemon.ask("api", d)
    assert r.overall_code == Response.OVER_LIMIT
    limit = r.statuses[0].current_limit
    assert (limit.name, limit.requests_per_unit, limit.unit) == (
        "envoy:api/tenant=t1", 2, RateLimit.HOUR)


FRESH = itertools.count()


@pytest.mark.parametrize("req,says", [
    (request("", [("ip", "1")]), "domain is empty"),
    (request("edge"), "no descriptors"),
    (request("edge", [("ip", "1")], []), "descriptor 1: no entries"),
    (request("edge", [("", "x")]), "descriptor 0: an entry has an empty key"),
    (request("edge", [("a", "1"), ("a", "2")]), 'descriptor 0: entry key "a" appears twice'),
    (request("edge", [("domain", "x")]), 'descriptor 0: entry key "domain"'),
    (request("edge", {"entries": [("t", "1")], "limit": (1, ratelimit_unit_pb2.UNKNOWN)}),
     "descriptor 0: limit override has no known unit"),
    (request("edge", {"entries": [("t", "1")], "hits": 2 ** 51}), "is above 2^50"),
])
def test_invalid_requests_are_invalid_argument_and_the_daemon_keeps_answering(daemon, req, says):
    with pytest.raises(grpc.RpcError) as error:
        daemon.stub(req, timeout=CALL_TIMEOUT_S)
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert says in error.value.details()
    fresh_ip = "10.9.0.%d" % next(FRESH)
    assert daemon.ask("edge", [("ip", fresh_ip)]).overall_code == Response.OK


def test_a_message_above_max_message_bytes_is_refused(daemon):
    with pytest.raises(grpc.RpcError) as error:
        daemon.ask("edge", [("ip", "x" * 8192)])
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert daemon.ask("edge", [("ip", "10.9.9.8")]).overall_code == Response.OK


def test_many_concurrent_calls_are_all_answered(daemon):
    errors = []
    codes = []
    lock = threading.Lock()

    def drive(i):
        try:
            for j in range(25):
                r = daemon.ask("edge", [("ip", "c%d-%d" % (i, j % 5))])
                with lock:
                    codes.append(r.overall_code)
        except Exception as e:  # noqa: BLE001
            with lock:
                errors.append(e)

    threads = [threading.Thread(target=drive, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert len(codes) == 200
    # 40 keys (8 threads x 5) of 3 per minute, 5 asks each: 3 OK, 2 over.
    assert codes.count(Response.OK) == 120
    assert codes.count(Response.OVER_LIMIT) == 80


def test_a_second_daemon_on_the_same_port_fails_to_start(daemon, tmp):
    config = os.path.join(tmp, "clash.toml")
    with open(config, "w") as f:
        f.write('[grpc]\nlisten = "127.0.0.1:%d"\n' % daemon.port)
    proc = subprocess.run([RLIMITD, "--config", config, "--socket", os.path.join(tmp, "clash.sock"),
                           "--log-level", "info"], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "grpc" in proc.stdout + proc.stderr


def test_sigterm_with_calls_in_flight_stops_cleanly(tmp):
    d = Daemon(tmp, "stopping", RULES)
    try:
        d.wait_ready()
        stop = threading.Event()
        outcomes = []
        lock = threading.Lock()

        def drive(i):
            while not stop.is_set():
                try:
                    d.ask("edge", [("ip", "s%d" % i)])
                    outcome = "ok"
                except grpc.RpcError as e:
                    outcome = e.code()
                with lock:
                    outcomes.append(outcome)
                if outcome != "ok":
                    return

        threads = [threading.Thread(target=drive, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        d.proc.send_signal(signal.SIGTERM)
        # Calls handed to the loop still finish; the daemon neither hangs
        # nor fails.
        assert d.proc.wait(timeout=10) == 0, d.text()
        stop.set()
        for t in threads:
            t.join(timeout=20)
        assert outcomes.count("ok") > 0
        assert "grpc: stopped" in d.text()
    finally:
        d.stop()


# ---------------------------------------------------------------------------
# Three nodes in gossip mode, one key driven through every node's gRPC face.

CLUSTER_LIMIT = 30
CLUSTER_RULES = """
[[rule]]
name = "tenant-hourly"
match = { domain = "cluster", tenant = { each = true } }
limit = %d
period = "1h"
""" % CLUSTER_LIMIT


def test_three_nodes_hold_the_limit_together(tmp):
    secret = os.path.join(tmp, "secret")
    with open(secret, "w") as f:
        f.write("# this test cluster's own (tests run side by side on loopback)\n"
                + secrets.token_hex(16) + "\n")
    os.chmod(secret, 0o600)
    peer_ports = [free_port(socket.SOCK_DGRAM) for _ in range(3)]
    seeds = ",".join("127.0.0.1:%d" % p for p in peer_ports[:2])
    nodes = []
    try:
        for i, port in enumerate(peer_ports):
            nodes.append(Daemon(tmp, "node%d" % i, CLUSTER_RULES, extra_args=(
                "--cluster-mode", "gossip", "--bind", "127.0.0.1:%d" % port, "--seeds", seeds,
                "--secret-file", secret)))
        for n in nodes:
            n.wait_ready()
        # Every node has heard of both others (member_watch logs each join).
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if all(("member %s (" % o.name) in n.text() for n in nodes for o in nodes if o is not n):
                break
            time.sleep(0.1)
        else:
            pytest.fail("\n----\n".join(n.text() for n in nodes))

        admitted = [0, 0, 0]
        errors = []
        go = threading.Event()

        def drive(i):
            try:
                go.wait(10)
                for _ in range(40):
                    r = nodes[i].ask("cluster", [("tenant", "acme")])
                    admitted[i] += r.overall_code == Response.OK
                    time.sleep(0.02)
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=drive, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        go.set()
        for t in threads:
            t.join(timeout=60)
        assert not errors
        total = sum(admitted)
        print("[grpc cluster] admitted per node %s, total %d, limit %d" % (admitted, total,
                                                                            CLUSTER_LIMIT))
        # docs/cluster.md, "Bounds on accuracy": a key new to the cluster and
        # asked at every node at once may be over-admitted by up to about one
        # burst in its first window (measured 1.10 to 1.58 x); nothing refills
        # within an hour. And not starved: at least 80% of the limit.
        assert total <= 2 * CLUSTER_LIMIT, admitted
        assert total >= 0.8 * CLUSTER_LIMIT, admitted
        # Once the news has spread, every node refuses the key.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            codes = [n.ask("cluster", [("tenant", "acme")]).overall_code for n in nodes]
            if codes == [Response.OVER_LIMIT] * 3:
                break
            time.sleep(0.2)
        else:
            pytest.fail("not every node refuses: %s" % codes)
    finally:
        for n in nodes:
            n.stop(check=False)
        assert_no_sanitizer_report(n.log_path for n in nodes)
