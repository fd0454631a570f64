"""AsyncClient against a real rlimitd (and a fake one for timeouts)."""
from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

import rlimit
from rlimit import (
    AsyncClient,
    CheckRequest,
    DaemonError,
    DecisionStatus,
    ErrorCode,
    InlineLimit,
    LeaseStatus,
    Mode,
    Unavailable,
)

from conftest import check_reply, read_request_id, wait_for_eof

TIMEOUT = 5.0


def run(coro, limit=60):
    """Runs a test coroutine, bounded in time."""
    return asyncio.run(asyncio.wait_for(coro, limit))


def test_every_call(daemon, key):
    async def main():
        async with AsyncClient(daemon.socket, timeout=TIMEOUT) as client:
            checks = [await client.check({"user": key}) for _ in range(6)]
            assert [d.allowed for d in checks] == [True] * 5 + [False]
            assert checks[5].retry_after_us > 0
            assert (await client.peek({"user": key + "p"})).rules[0].remaining == 4
            assert (await client.check({"user": key + "p"}, cost=5)).allowed
            assert (await client.reserve({"paced": key})).delay_us == 0
            reserved = await client.reserve({"paced": key})
            assert reserved.allowed and reserved.delay_us > 0
            assert not (await client.reserve({"paced": key}, max_wait_us=1)).allowed
            started = time.monotonic()
            acquired = await client.acquire({"paced": key})
            assert acquired.delay_us > 0
            assert time.monotonic() - started >= acquired.delay_us / 1_000_000
            limit = InlineLimit(f"inline-{key}", 1, 60_000)
            assert (await client.check(inline_limit=limit)).allowed
            assert not (await client.check(inline_limit=limit)).allowed

            batch = await client.check_batch(
                [{"user": key + "b"}] * 3 + [CheckRequest.of({"user": key + "b"}, mode=Mode.PEEK)]
            )
            assert [d.rules[0].remaining for d in batch] == [4, 3, 2, 1]
            refused = await client.check_batch([{"user": key + "b"}] * 65)
            assert {d.status for d in refused} == {DecisionStatus.PROTOCOL_ERROR}
            assert "TOO_MANY_CHECKS" in refused[0].error

            jobs = [await client.check({"job": key}) for _ in range(3)]
            assert [d.allowed for d in jobs] == [True, True, False]
            assert await client.release(jobs[0].leases[0]) is LeaseStatus.DONE
            assert await client.extend(jobs[1].leases[0]) is LeaseStatus.DONE
            assert await client.release_leases([jobs[0].leases[0], b"x"]) == [
                LeaseStatus.UNKNOWN, LeaseStatus.MALFORMED]

            reset = await client.reset({"user": key})
            assert reset.keys_reset == 1 and reset.rules == ["per-user"]
            assert (await client.check({"user": key})).rules[0].remaining == 4
            with pytest.raises(DaemonError) as error:
                await client.reset([("user", key), ("user", key)])
            assert error.value.code == ErrorCode.INVALID_REQUEST

            status = await client.status()
            assert [r.name for r in status.rules] == ["per-user", "jobs", "paced", "shaped"]
            members = await client.members()
            assert members.mode == "none" and members.members[0].self

    run(main())


def test_concurrent_callers_share_one_connection(daemon, key):
    async def main():
        async with AsyncClient(daemon.socket, timeout=TIMEOUT) as probe:
            before = (await probe.status()).counters["connections_accepted"]
        async with AsyncClient(daemon.socket, timeout=TIMEOUT) as client:
            users = [f"{key}-{i % 200}" for i in range(1200)]
            decisions = await asyncio.gather(*(client.check({"user": u}) for u in users))
            assert all(d.status is DecisionStatus.OK for d in decisions)
            allowed = {}
            for user, d in zip(users, decisions):
                allowed[user] = allowed.get(user, 0) + d.allowed
            assert set(allowed.values()) == {5}  # each user's burst, exactly
            pipelined = await client.check_pipelined([{"user": key + "x"}] * 7)
            assert [d.allowed for d in pipelined] == [True] * 5 + [False] * 2
            status = await client.status()
            # `before` counted the probe's connection: this client used one.
            assert status.counters["connections_accepted"] - before == 1
            assert client.in_flight == 0

    run(main())


@pytest.mark.parametrize("fail_mode", ["open", "closed"])
def test_fail_open_or_closed_without_a_daemon(missing_socket, fail_mode):
    async def main():
        client = AsyncClient(missing_socket, timeout=0.05, fail_mode=fail_mode,
                             reconnect_backoff_min=0.2)
        decision = await client.check({"user": "alice"})
        assert decision.status is DecisionStatus.UNAVAILABLE
        assert decision.allowed is (fail_mode == "open")
        again = await client.check({"user": "alice"})
        assert "waiting to reconnect" in again.error
        assert [d.allowed for d in await client.check_batch([{"a": "b"}] * 2)] == [
            fail_mode == "open"] * 2
        with pytest.raises(Unavailable):
            await client.status()
        assert await client.release(b"t") is LeaseStatus.FAILED and client.last_error
        await client.close()

    run(main())


def test_timeout_fails_every_waiting_call_and_drops_the_connection(fake_daemon):
    closed = threading.Event()
    fake = fake_daemon(lambda conn, n: wait_for_eof(conn, closed))

    async def main():
        client = AsyncClient(fake.path, timeout=0.05, fail_mode="closed")
        started = time.monotonic()
        decisions = await asyncio.gather(*(client.check({"user": str(i)}) for i in range(10)))
        assert time.monotonic() - started < 1.0
        assert {d.status for d in decisions} == {DecisionStatus.UNAVAILABLE}
        assert not any(d.allowed for d in decisions)
        assert any("no reply within 50 ms" in d.error for d in decisions)
        assert not client.connected
        await client.close()

    run(main())
    assert closed.wait(5), "the client kept the timed-out connection open"


def test_a_late_reply_is_never_taken_for_a_later_answer(fake_daemon):
    def handler(conn: socket.socket, n: int) -> None:
        while True:
            request_id = read_request_id(conn)
            if request_id is None:
                return
            if n == 0:
                time.sleep(0.3)
            conn.sendall(check_reply(request_id, allowed=(n == 0)))

    fake = fake_daemon(handler)

    async def main():
        client = AsyncClient(fake.path, timeout=0.05, fail_mode="closed")
        first = await client.check({"user": "alice"})
        assert first.status is DecisionStatus.UNAVAILABLE
        await asyncio.sleep(0.4)
        second = await client.check({"user": "alice"})
        assert second.status is DecisionStatus.OK and not second.allowed
        await client.close()

    run(main())
    assert fake.connections == 2


def test_reconnects_after_the_daemon_restarts(own_daemon, key):
    daemon = own_daemon()

    async def main():
        client = AsyncClient(daemon.socket, timeout=TIMEOUT, reconnect_backoff_min=0.01,
                             reconnect_backoff_max=0.1)
        assert (await client.check({"user": key})).rules[0].remaining == 4
        lease = (await client.check({"job": key})).leases[0]
        assert daemon.stop() == 0
        down = await client.check({"user": key})
        assert down.status is DecisionStatus.UNAVAILABLE and down.allowed
        daemon.start()
        deadline = time.monotonic() + 10
        for _ in range(500):
            decision = await client.check({"user": key})
            if decision.status is DecisionStatus.OK or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.02)
        assert decision.status is DecisionStatus.OK and decision.rules[0].remaining == 4
        assert await client.release(lease) is LeaseStatus.UNKNOWN
        # Restarted while idle: the first call after reconnects unnoticed.
        daemon.stop()
        daemon.start()
        await asyncio.sleep(0.05)  # the reader sees the old connection's EOF
        again = await client.check({"user": key})
        assert again.status is DecisionStatus.OK and again.rules[0].remaining == 4
        await client.close()

    run(main())
