"""The HTTP check face of a real rlimitd: answers, the IETF fields, bounds,
and bad input that is refused, counted and never disturbs another client."""
from __future__ import annotations

import json
import socket
import time

RULES = """
[[rule]]
name = "per-user"
match = { user = { each = true } }
limit = 5
period = "1m"

[[rule]]
name = "shadow-search"
match = { path = "/search" }
limit = 1
period = "1h"
mode = "shadow"
"""


def test_the_limit_holds_and_the_fields_arrive(start_daemon):
    daemon = start_daemon(RULES)
    statuses = [daemon.request("GET", "/v1/check?user=alice")[0] for _ in range(8)]
    assert statuses == [200] * 5 + [429] * 3
    status, headers, body = daemon.request("GET", "/v1/check?user=alice")
    assert status == 429
    assert headers["RateLimit-Policy"] == '"per-user";q=5;w=60'
    assert headers["RateLimit"].startswith('"per-user";r=0;t=')
    assert 1 <= int(headers["Retry-After"]) <= 12
    answer = json.loads(body)
    assert answer["allowed"] is False
    assert answer["rules"][0]["name"] == "per-user"
    # Another user, and the same over POST with a cost.
    status, _, body = daemon.request("POST", "/v1/check",
                                     json.dumps({"descriptors": {"user": "bob"}, "cost": 5}))
    assert status == 200
    assert json.loads(body)["rules"][0]["remaining"] == 0
    assert daemon.request("GET", "/v1/check?user=bob&_deny_status=403")[0] == 403
    counters = daemon.counters()
    assert counters["http_checks"] == 11
    assert counters["http_denied"] == 5


def test_shadow_rules_admit_and_say_so(start_daemon):
    daemon = start_daemon(RULES)
    for _ in range(3):
        status, _, body = daemon.request("GET", "/v1/check?path=/search")
        assert status == 200
    assert json.loads(body)["over_limit"] is True


def raw_exchange(port: int, data: bytes, timeout_s: float = 5.0) -> bytes:
    """Sends `data` on a new connection and reads until the daemon closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(data)
        chunks = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_bad_input_is_refused_counted_and_disturbs_nobody(start_daemon):
    daemon = start_daemon(RULES, 'max_body_bytes = 1024\nmax_header_bytes = 2048\n'
                                 'request_timeout = "500ms"')
    # A slow client that never finishes its request holds its own connection only.
    slow = socket.create_connection(("127.0.0.1", daemon.http_port), timeout=5)
    slow.sendall(b"GET /v1/check?user=slow HTTP/1.1\r\nHost: x\r\n")
    try:
        assert b"400 Bad Request" in raw_exchange(daemon.http_port, b"NOT HTTP AT ALL\r\n\r\n")
        big_body = b"x" * 4096
        answer = raw_exchange(daemon.http_port, b"POST /v1/check HTTP/1.1\r\nHost: x\r\n"
                              b"Content-Length: 4096\r\n\r\n" + big_body)
        assert b"413 Payload Too Large" in answer
        answer = raw_exchange(daemon.http_port, b"GET /v1/check HTTP/1.1\r\nX-Big: " +
                              b"y" * 4096 + b"\r\n\r\n")
        assert b"431" in answer
        status, _, body = daemon.request("GET", "/v1/check?user=%zz")
        assert status == 400 and "percent-escape" in json.loads(body)["error"]
        status, _, body = daemon.request("POST", "/v1/check", "{broken")
        assert status == 400 and "not JSON" in json.loads(body)["error"]
        assert daemon.request("GET", "/nowhere")[0] == 404
        # Meanwhile a well-behaved client is answered as before.
        assert [daemon.request("GET", "/v1/check?user=carol")[0] for _ in range(6)] == \
            [200] * 5 + [429]
        # The slow request is cut at request_timeout.
        slow.settimeout(5)
        assert slow.recv(1024) == b""
    finally:
        slow.close()
    counters = daemon.counters()
    assert counters["http_malformed"] == 1
    assert counters["http_too_large"] == 2
    assert counters["http_bad_requests"] == 2
    assert counters["http_not_found"] == 1
    assert counters["http_timeouts"] == 1
    assert counters["http_checks"] == 6


def test_connections_beyond_the_bound_are_closed_and_counted(start_daemon):
    daemon = start_daemon(RULES, "max_connections = 2")
    held = [socket.create_connection(("127.0.0.1", daemon.http_port), timeout=5)
            for _ in range(2)]
    try:
        time.sleep(0.2)  # both accepted
        extra = socket.create_connection(("127.0.0.1", daemon.http_port), timeout=5)
        extra.settimeout(5)
        try:
            extra.sendall(b"GET /v1/check?user=x HTTP/1.1\r\nHost: x\r\n\r\n")
            assert extra.recv(1024) == b""
        except ConnectionResetError:
            pass
        finally:
            extra.close()
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 5
    while daemon.counters()["http_connections_open"] != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert daemon.request("GET", "/v1/check?user=x")[0] == 200
    assert daemon.counters()["http_connections_rejected"] == 1


def test_keep_alive_answers_many_requests_on_one_connection(start_daemon):
    import http.client
    daemon = start_daemon(RULES)
    # The harness connected once to see the port open.
    accepted_before = daemon.counters()["http_connections_accepted"]
    connection = http.client.HTTPConnection("127.0.0.1", daemon.http_port, timeout=5)
    try:
        statuses = []
        for _ in range(7):
            connection.request("GET", "/v1/check?user=dora")
            response = connection.getresponse()
            response.read()
            statuses.append(response.status)
    finally:
        connection.close()
    assert statuses == [200] * 5 + [429] * 2
    assert daemon.counters()["http_connections_accepted"] == accepted_before + 1
