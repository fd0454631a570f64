"""The synchronous Client against a real rlimitd (and a fake one for timeouts)."""
from __future__ import annotations

import os
import socket
import threading
import time

import pytest

import rlimit
from rlimit import (
    CheckRequest,
    DaemonError,
    DecisionStatus,
    ErrorCode,
    FailMode,
    InlineLimit,
    LeaseStatus,
    Mode,
    Unavailable,
)

from conftest import FakeDaemon, check_reply, error_reply, read_request_id, wait_for_eof

# Generous: the machine is shared and the tests must not flake on a slow
# reply. The timeout tests below set their own short ones.
TIMEOUT = 5.0


@pytest.fixture
def client(daemon):
    with rlimit.Client(daemon.socket, timeout=TIMEOUT) as c:
        yield c


def test_check_allows_the_burst_then_denies(client, key):
    decisions = [client.check({"user": key}) for _ in range(6)]
    assert [d.allowed for d in decisions] == [True] * 5 + [False]
    assert [d.rules[0].remaining for d in decisions] == [4, 3, 2, 1, 0, 0]
    first, denied = decisions[0], decisions[5]
    assert first.status is DecisionStatus.OK and first.error == ""
    rule = first.rules[0]
    assert (rule.name, rule.algorithm, rule.limit, rule.period_ms, rule.burst) == (
        "per-user", "token_bucket", 60, 60_000, 5,
    )
    assert rule.allowed and rule.retry_after_us == 0 and rule.lease == b""
    # One token a second: the denied check could pass within about a second.
    assert 0 < denied.retry_after_us <= 1_000_000
    assert denied.rules[0].retry_after_us == denied.retry_after_us
    assert not denied.rules[0].allowed


def test_cost_zero_and_cost_above_burst(client, key):
    assert client.check({"user": key}, cost=3).rules[0].remaining == 2
    zero = client.check({"user": key}, cost=0)
    assert zero.allowed and zero.rules[0].remaining == 2
    assert not client.check({"user": key}, cost=3).allowed
    never = client.check({"user": key}, cost=6)  # above the burst: never fits
    assert not never.allowed and never.retry_after_us == -1


def test_descriptors_as_pairs_and_unmatched(client, key):
    assert client.check([("user", key), ("path", "/x")]).rules[0].name == "per-user"
    unmatched = client.check({"nobody": key})
    assert unmatched.allowed and unmatched.status is DecisionStatus.OK and unmatched.rules == []


def test_peek_consumes_nothing(client, daemon, key):
    before = client.status().counters["peeks"]
    for _ in range(8):
        peeked = client.peek({"user": key})
        assert peeked.allowed and peeked.rules[0].remaining == 4
    assert client.status().counters["peeks"] - before == 8
    assert client.check({"user": key}).rules[0].remaining == 4
    # A CheckRequest passed to peek() is peeked whatever its own mode.
    assert client.peek(CheckRequest.of({"user": key})).rules[0].remaining == 3


def test_reserve_reports_the_wait_and_honours_max_wait(client, key):
    first = client.reserve({"paced": key})
    assert first.allowed and first.delay_us == 0
    second = client.reserve({"paced": key})
    # 10 a second: the next token is 100 ms away.
    assert second.allowed and 0 < second.delay_us <= 100_000
    assert second.rules[0].delay_us == second.delay_us
    refused = client.reserve({"paced": key}, max_wait_us=1_000)
    assert not refused.allowed and refused.delay_us == 0
    # A refused reservation charges nothing: an unbounded one waits one
    # token (100 ms) beyond `second`, not two.
    third = client.reserve({"paced": key})
    assert third.allowed and second.delay_us < third.delay_us <= 200_000


def test_acquire_sleeps_the_delay(client, key):
    assert client.acquire({"paced": key}).delay_us == 0
    slept = []
    decision = client.acquire({"paced": key}, sleep=slept.append)
    assert decision.allowed and decision.delay_us > 0
    assert slept == [decision.delay_us / 1_000_000]
    started = time.monotonic()
    decision = client.acquire({"paced": key})
    assert decision.delay_us > 0
    assert time.monotonic() - started >= decision.delay_us / 1_000_000


def test_a_shaper_hands_out_waits_on_plain_checks(client, key):
    assert client.check({"shaped": key}).delay_us == 0
    shaped = client.check({"shaped": key})
    assert shaped.allowed and shaped.delay_us > 0
    assert shaped.rules[0].algorithm == "leaky_bucket"


def test_inline_limit(client, key):
    limit = InlineLimit(key=f"inline-{key}", limit=2, period_ms=60_000)
    decisions = [client.check({"any": "thing"}, inline_limit=limit) for _ in range(3)]
    assert [d.allowed for d in decisions] == [True, True, False]
    assert decisions[0].rules[0].name == limit.key
    assert decisions[0].rules[0].algorithm == "token_bucket"


def test_exempt_and_invalid(client, key):
    exempt = client.check({"user": "healthcheck"})
    assert exempt.allowed and exempt.status is DecisionStatus.EXEMPT
    duplicate = client.check([("user", key), ("user", key + "x")])
    assert not duplicate.allowed and duplicate.status is DecisionStatus.INVALID
    assert "twice" in duplicate.error
    bad_wait = client.check({"user": key}, max_wait_us=-5)
    assert bad_wait.status is DecisionStatus.INVALID
    # Neither was charged: the bucket is still full.
    assert client.peek({"user": key}).rules[0].reset_after_us == 0


def test_batch_is_decided_in_order(client, key):
    requests = [{"user": key}] * 4 + [[("user", key), ("user", key)]] + [{"user": key}] * 3
    decisions = client.check_batch(requests)
    assert [d.status for d in decisions] == [DecisionStatus.OK] * 4 + [DecisionStatus.INVALID] + [
        DecisionStatus.OK
    ] * 3
    assert [d.allowed for d in decisions] == [True] * 4 + [False, True, False, False]
    assert client.check_batch([]) == []


def test_batch_modes(client, key):
    decisions = client.check_batch(
        [
            CheckRequest.of({"user": key}, mode=Mode.PEEK),
            CheckRequest.of({"user": key}, cost=2),
            CheckRequest.of({"paced": key}, mode=Mode.RESERVE),
            CheckRequest.of({"paced": key}, mode=Mode.RESERVE),
        ]
    )
    assert [d.rules[0].remaining for d in decisions[:2]] == [4, 3]
    assert decisions[2].delay_us == 0 and decisions[3].delay_us > 0


@pytest.mark.parametrize("fail_mode", [FailMode.OPEN, FailMode.CLOSED])
def test_a_batch_above_max_checks_per_frame_is_refused_whole(daemon, key, fail_mode):
    with rlimit.Client(daemon.socket, timeout=TIMEOUT, fail_mode=fail_mode) as client:
        decisions = client.check_batch([{"user": key}] * 65)  # the daemon takes 64
        assert len(decisions) == 65
        assert {d.status for d in decisions} == {DecisionStatus.PROTOCOL_ERROR}
        assert {d.allowed for d in decisions} == {fail_mode is FailMode.OPEN}
        assert "TOO_MANY_CHECKS" in decisions[0].error
        # Nothing was charged and the connection stays usable.
        assert client.connected
        assert client.check({"user": key}).rules[0].remaining == 4


def test_a_request_above_max_frame_bytes_is_not_sent(client, key):
    decision = client.check({"user": "x" * 70_000})
    assert decision.status is DecisionStatus.PROTOCOL_ERROR and decision.allowed
    assert "max_frame_bytes" in decision.error
    assert client.check({"user": key}).status is DecisionStatus.OK


def test_pipelining_matches_replies_to_tickets(client, key):
    tickets = [client.submit({"user": key}) for _ in range(20)]
    assert len(set(tickets)) == 20 and client.pending == 20
    # A synchronous call in between: replies to earlier tickets are kept.
    assert client.peek({"user": key}).allowed in (True, False)
    received = [client.receive() for _ in range(20)]
    assert [t for t, _ in received] == tickets
    assert [d.allowed for _, d in received] == [True] * 5 + [False] * 15
    assert client.pending == 0
    ticket, nothing = client.receive()
    assert ticket == 0 and nothing.status is DecisionStatus.INVALID and not nothing.allowed


def test_pipelining_thousands_in_flight(client, daemon, key):
    # Far more than the socket buffers hold either way: the client must read
    # replies while it writes or both sides stall.
    count = 3000
    before = client.status().counters["check_requests"]
    decisions = client.check_pipelined([{"user": f"{key}-{i % 500}"} for i in range(count)])
    assert len(decisions) == count
    assert all(d.status is DecisionStatus.OK for d in decisions)
    # 500 users, 6 checks each: the burst of 5 passes, the 6th is denied.
    assert sum(d.allowed for d in decisions) == 500 * 5
    assert [d.allowed for d in decisions[:500]] == [True] * 500
    assert [d.allowed for d in decisions[2500:]] == [False] * 500
    assert client.status().counters["check_requests"] - before == count


def test_max_pending_refuses_at_once(daemon, key):
    with rlimit.Client(daemon.socket, timeout=TIMEOUT, max_pending=3) as client:
        tickets = [client.submit({"user": key}) for _ in range(4)]
        assert client.refused_over_max_pending == 1
        decisions = dict(client.receive() for _ in range(4))
        assert decisions[tickets[3]].status is DecisionStatus.UNAVAILABLE
        assert [decisions[t].rules[0].remaining for t in tickets[:3]] == [4, 3, 2]


def test_leases(client, key):
    first = client.check({"job": key})
    second = client.check({"job": key})
    third = client.check({"job": key})
    assert first.allowed and second.allowed and not third.allowed
    assert first.rules[0].algorithm == "concurrency"
    assert len(first.leases) == 1 and first.leases[0] != second.leases[0]
    assert client.release(first.leases[0]) is LeaseStatus.DONE
    assert client.release(first.leases[0]) is LeaseStatus.UNKNOWN  # twice is harmless
    assert client.extend(second.leases[0]) is LeaseStatus.DONE
    forged = bytearray(second.leases[0])
    forged[-1] ^= 1
    statuses = client.release_leases([bytes(forged), b"x", second.leases[0]])
    assert statuses == [LeaseStatus.UNKNOWN, LeaseStatus.MALFORMED, LeaseStatus.DONE]
    assert client.release_leases([]) == []
    # Both slots are free again.
    assert client.check_batch([{"job": key}] * 3)[1].allowed


def test_reset(client, key):
    for _ in range(5):
        client.check({"user": key})
    assert not client.check({"user": key}).allowed
    result = client.reset({"user": key})
    assert result.keys_reset == 1 and result.rules == ["per-user"]
    assert client.check({"user": key}).rules[0].remaining == 4
    assert client.reset({"user": key + "-never-used"}).keys_reset == 0
    with pytest.raises(DaemonError) as error:
        client.reset([("user", key), ("user", key)])
    assert error.value.code == ErrorCode.INVALID_REQUEST
    # The connection stays open after INVALID_REQUEST.
    assert client.connected and client.check({"user": key}).allowed


def test_reset_inline_limit(client, key):
    limit = InlineLimit(key=f"inline-{key}", limit=1, period_ms=60_000)
    assert client.check(inline_limit=limit).allowed
    assert not client.check(inline_limit=limit).allowed
    assert client.reset(inline_limit=limit).rules == [limit.key]
    assert client.check(inline_limit=limit).allowed


def test_reset_refused_by_the_daemon(own_daemon, key):
    daemon = own_daemon(allow_reset=False)
    with rlimit.Client(daemon.socket, timeout=TIMEOUT) as client:
        with pytest.raises(DaemonError) as error:
            client.reset({"user": key})
        assert error.value.code == ErrorCode.NOT_ALLOWED
        assert client.check({"user": key}).allowed


def test_status_and_members(client, daemon):
    status = client.status()
    assert status.version and status.node_id and status.uptime_ms >= 0
    assert status.max_keys == 1_000_000
    assert [r.name for r in status.rules] == ["per-user", "jobs", "paced", "shaped"]
    assert status.rules[0].match == "user=* (each)"
    assert status.config_source.endswith(os.path.basename(daemon.config))
    assert status.counters["checks"] >= 0 and "connections_open" in status.counters
    members = client.members()
    assert members.mode == "none" and len(members.members) == 1
    assert members.members[0].self and members.members[0].node_id == status.node_id


# ---------------------------------------------------------------- no daemon


@pytest.mark.parametrize("fail_mode", ["open", "closed"])
def test_fail_open_or_closed_without_a_daemon(missing_socket, fail_mode):
    client = rlimit.Client(
        missing_socket, timeout=0.05, fail_mode=fail_mode, reconnect_backoff_min=0.2
    )
    started = time.monotonic()
    decision = client.check({"user": "alice"})
    assert time.monotonic() - started < 1.0
    assert decision.status is DecisionStatus.UNAVAILABLE
    assert decision.allowed is (fail_mode == "open")
    assert missing_socket in decision.error
    # Within the backoff no connect is tried.
    again = client.check({"user": "alice"})
    assert again.status is DecisionStatus.UNAVAILABLE and "waiting to reconnect" in again.error
    assert [d.allowed for d in client.check_batch([{"a": "b"}] * 2)] == [fail_mode == "open"] * 2
    with pytest.raises(Unavailable):
        client.status()
    with pytest.raises(Unavailable):
        client.reset({"user": "alice"})
    assert client.release(b"token") is LeaseStatus.FAILED and client.last_error
    ticket = client.submit({"user": "alice"})
    got, decision = client.receive()
    assert got == ticket and decision.status is DecisionStatus.UNAVAILABLE
    assert decision.allowed is (fail_mode == "open")
    # After the backoff a connect is tried again (and fails the same way).
    time.sleep(0.25)
    retried = client.check({"user": "alice"})
    assert retried.status is DecisionStatus.UNAVAILABLE and "waiting" not in retried.error


def test_the_client_connects_once_the_daemon_appears(own_daemon, workdir, key):
    daemon = own_daemon()
    daemon.stop()
    client = rlimit.Client(daemon.socket, timeout=TIMEOUT, reconnect_backoff_min=0.01,
                           reconnect_backoff_max=0.05)
    assert client.check({"user": key}).status is DecisionStatus.UNAVAILABLE
    daemon.start()
    deadline = time.monotonic() + 10
    for _ in range(500):
        decision = client.check({"user": key})
        if decision.status is DecisionStatus.OK or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert decision.status is DecisionStatus.OK
    client.close()


# ---------------------------------------------------------------- timeouts


def test_timeout_fails_by_fail_mode_and_drops_the_connection(fake_daemon):
    closed = threading.Event()
    fake = fake_daemon(lambda conn, n: wait_for_eof(conn, closed))  # reads, never answers
    for fail_mode in (FailMode.OPEN, FailMode.CLOSED):
        client = rlimit.Client(fake.path, timeout=0.05, fail_mode=fail_mode)
        started = time.monotonic()
        decision = client.check({"user": "alice"})
        elapsed = time.monotonic() - started
        assert 0.04 <= elapsed < 1.0
        assert decision.status is DecisionStatus.UNAVAILABLE
        assert decision.allowed is (fail_mode is FailMode.OPEN)
        assert "no reply within 50 ms" in decision.error
        assert not client.connected
        assert closed.wait(5), "the client kept the timed-out connection open"
        closed.clear()
        with pytest.raises(Unavailable):
            client.status()
        client.close()


def test_a_late_reply_is_never_taken_for_a_later_answer(fake_daemon):
    def handler(conn: socket.socket, n: int) -> None:
        while True:
            request_id = read_request_id(conn)
            if request_id is None:
                return
            if n == 0:
                time.sleep(0.3)  # too late: the client gave up at 50 ms
                conn.sendall(check_reply(request_id, allowed=True))
            else:
                conn.sendall(check_reply(request_id, allowed=False))

    fake = fake_daemon(handler)
    client = rlimit.Client(fake.path, timeout=0.05, fail_mode=FailMode.CLOSED)
    first = client.check({"user": "alice"})
    assert first.status is DecisionStatus.UNAVAILABLE and not first.allowed
    time.sleep(0.4)  # the late "allowed" has been written by now
    second = client.check({"user": "alice"})
    assert second.status is DecisionStatus.OK and not second.allowed
    assert fake.connections == 2
    client.close()


def test_a_reply_out_of_step_is_a_protocol_error(fake_daemon):
    def handler(conn: socket.socket, n: int) -> None:
        request_id = read_request_id(conn)
        if request_id is None:
            return
        if n == 0:
            conn.sendall(error_reply(0, 2, "frame does not decode"))  # id 0
        elif n == 1:
            conn.sendall(check_reply(request_id + 1, allowed=True))  # wrong id
        else:
            conn.sendall(b"\x00\x00\x00\x02\xff\xff")  # does not decode
        wait_for_eof(conn, threading.Event())

    fake = fake_daemon(handler)
    client = rlimit.Client(fake.path, timeout=TIMEOUT, fail_mode=FailMode.CLOSED)
    errors = []
    for _ in range(3):
        decision = client.check({"user": "alice"})
        assert decision.status is DecisionStatus.PROTOCOL_ERROR and not decision.allowed
        assert not client.connected  # nothing later on that stream can be trusted
        errors.append(decision.error)
    assert "MALFORMED_FRAME: frame does not decode" in errors[0]
    assert "reply id" in errors[1]
    assert "malformed reply frame" in errors[2]
    client.close()


# ---------------------------------------------------------------- restarts


def test_reconnects_after_the_daemon_restarts(own_daemon, key):
    daemon = own_daemon()
    client = rlimit.Client(daemon.socket, timeout=TIMEOUT, reconnect_backoff_min=0.01,
                           reconnect_backoff_max=0.1)
    assert client.check({"user": key}).rules[0].remaining == 4
    lease = client.check({"job": key}).leases[0]
    assert daemon.stop() == 0
    down = client.check({"user": key})
    assert down.status is DecisionStatus.UNAVAILABLE and down.allowed
    daemon.start()
    deadline = time.monotonic() + 10
    for _ in range(500):
        decision = client.check({"user": key})
        if decision.status is DecisionStatus.OK or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert decision.status is DecisionStatus.OK
    assert decision.rules[0].remaining == 4  # a new daemon: a new bucket
    # Leases never survive a restart.
    assert client.release(lease) is LeaseStatus.UNKNOWN
    client.close()


def test_an_idle_connection_to_a_restarted_daemon_is_replaced_unnoticed(own_daemon, key):
    daemon = own_daemon()
    client = rlimit.Client(daemon.socket, timeout=TIMEOUT)
    assert client.check({"user": key}).allowed and client.connected
    daemon.stop()
    daemon.start()
    # The old connection is dead; the first call must see that and reconnect
    # instead of failing open.
    decision = client.check({"user": key})
    assert decision.status is DecisionStatus.OK and decision.rules[0].remaining == 4
    assert client.status().counters["connections_accepted"] == 2  # the probe in start() and us
    client.close()
