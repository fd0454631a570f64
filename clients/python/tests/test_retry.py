"""Backoff and check_with_retry (libclient's rlimit/retry.h)."""
from __future__ import annotations

import asyncio
import random

import rlimit
from rlimit import Backoff, CheckRequest, check_with_retry, check_with_retry_async


def test_backoff_never_sooner_than_retry_after_and_bounded():
    backoff = Backoff(base=0.001, cap=1.0, max_retries=4, rng=random.Random(1))
    delays = [backoff.next_delay(200_000) for _ in range(4)]
    assert all(d is not None and 0.2 <= d <= 1.0 for d in delays)
    assert backoff.next_delay(200_000) is None  # retries used up
    backoff.reset()
    assert backoff.next_delay(-1) is None  # never succeeds
    assert backoff.next_delay(2_000_000) is None  # above the cap
    ceilings = Backoff(base=0.01, cap=0.05, max_retries=10, rng=random.Random(2))
    for attempt in range(10):
        d = ceilings.next_delay(0)
        assert d is not None and 0 <= d <= min(0.05, 0.01 * 2 ** attempt)


def test_check_with_retry_waits_for_the_daemon(daemon, key):
    with rlimit.Client(daemon.socket, timeout=5.0) as client:
        request = CheckRequest.of({"paced": key})
        assert client.check(request).allowed
        slept = []
        decision = check_with_retry(client, request, Backoff(max_retries=50), sleep=slept.append)
        # Fake sleeps: the retries hit the daemon at once and are denied
        # until the retries run out, each sleep at least the retry_after.
        assert not decision.allowed and len(slept) == 50
        assert all(s > 0.0 for s in slept)
        assert check_with_retry(client, request, Backoff(max_retries=20, cap=1.0)).allowed


def test_check_with_retry_async(daemon, key):
    async def main():
        async with rlimit.AsyncClient(daemon.socket, timeout=5.0) as client:
            request = CheckRequest.of({"paced": key})
            assert (await client.check(request)).allowed
            return await check_with_retry_async(client, request, Backoff(max_retries=20))

    assert asyncio.run(main()).allowed
