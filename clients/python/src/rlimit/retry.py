"""Retrying denied checks: exponential backoff with full jitter (a uniform
random delay in [0, min(cap, base * 2**attempt)]) never shorter than the
daemon's retry_after, as libclient's rlimit/retry.h."""
from __future__ import annotations

import asyncio
import random
import time
from typing import TYPE_CHECKING, Awaitable, Callable, Optional

from .types import CheckRequest, Decision

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .client import Client


class Backoff:
    """base, cap: seconds. max_retries: attempts after the first."""

    def __init__(
        self,
        base: float = 0.001,
        cap: float = 1.0,
        max_retries: int = 5,
        rng: Optional[random.Random] = None,
    ) -> None:
        self.base = base
        self.cap = cap
        self.max_retries = max_retries
        self.retries = 0
        self._rng = rng or random.Random()

    def next_delay(self, retry_after_us: int) -> Optional[float]:
        """Seconds to wait before the next attempt after a denial whose
        retry_after was `retry_after_us` (0: unknown); None when the retries
        are used up, when the daemon said the request never succeeds (-1), or
        when retry_after exceeds the cap."""
        if retry_after_us < 0 or self.retries >= self.max_retries:
            return None
        floor = retry_after_us / 1_000_000
        if floor > self.cap:
            return None
        ceiling = min(self.cap, self.base * (2 ** self.retries))
        self.retries += 1
        return max(floor, self._rng.uniform(0.0, ceiling))

    def reset(self) -> None:
        self.retries = 0


def check_with_retry(
    client: "Client",
    request: CheckRequest,
    backoff: Backoff,
    sleep: Callable[[float], None] = time.sleep,
) -> Decision:
    """Checks `request` and, while denied, sleeps as `backoff` says and tries
    again. Returns the last decision."""
    decision = client.check(request)
    while not decision.allowed:
        delay = backoff.next_delay(decision.retry_after_us)
        if delay is None:
            break
        sleep(delay)
        decision = client.check(request)
    return decision


async def check_with_retry_async(
    client: "AsyncClient",
    request: CheckRequest,
    backoff: Backoff,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Decision:
    decision = await client.check(request)
    while not decision.allowed:
        delay = backoff.next_delay(decision.retry_after_us)
        if delay is None:
            break
        await sleep(delay)
        decision = await client.check(request)
    return decision
