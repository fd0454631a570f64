"""HTTP RateLimit header fields (draft-ietf-httpapi-ratelimit-headers) from a
Decision.

    RateLimit-Policy: "per-user";q=100;w=60
    RateLimit: "per-user";r=50;t=30
    Retry-After: 7          (only on a denial)

One list member per matched rule (or inline limit), in the daemon's order,
serialised as RFC 8941 Lists (members joined by ", "):

- q: the rule's limit (tokens per period, after tier overrides);
- w: the period in whole seconds, rounded up (the draft has no sub-second
  windows);
- r: the tokens remaining after this request;
- t: seconds until the bucket is full again (reset_after_us), rounded up;
  left out when it never will be (a zero limit);
- a concurrency rule has q (its slots) with qu="concurrent-requests", r (the
  slots free) and neither w nor t: it has no window;
- Retry-After (delay-seconds, rounded up) on a denial when the daemon said
  when the request could succeed: left out when it never can (-1) and when no
  rule said (e.g. a fail-closed answer with no daemon).

Rule names are sf-strings: `"` and `\\` are escaped, and any character
outside printable ASCII (possible only in an inline limit's key) becomes `?`.
"""
from __future__ import annotations

from typing import List, Tuple

from .types import Decision

_US = 1_000_000


def _ceil_div(value: int, divisor: int) -> int:
    return -(-value // divisor)


def sf_string(text: str) -> str:
    """`text` as an RFC 8941 String."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append("?")
    out.append('"')
    return "".join(out)


def ietf_headers(decision: Decision) -> List[Tuple[str, str]]:
    """The RateLimit-Policy and RateLimit fields for `decision` (none when no
    rule matched) and, on a denial, Retry-After; as (name, value) pairs in
    that order, ready for a WSGI or ASGI response."""
    policies: List[str] = []
    limits: List[str] = []
    for rule in decision.rules:
        name = sf_string(rule.name)
        policy = f"{name};q={rule.limit}"
        limit = f"{name};r={rule.remaining}"
        if rule.algorithm == "concurrency":
            # Slots in flight, no window: the daemon reports the lease TTL as
            # the period and the time until the oldest lease expires as the
            # reset, neither of which is a quota window.
            policy += ';qu="concurrent-requests"'
        else:
            if rule.period_ms > 0:
                policy += f";w={_ceil_div(rule.period_ms, 1000)}"
            if rule.reset_after_us >= 0:
                limit += f";t={_ceil_div(rule.reset_after_us, _US)}"
        policies.append(policy)
        limits.append(limit)
    headers: List[Tuple[str, str]] = []
    if policies:
        headers.append(("RateLimit-Policy", ", ".join(policies)))
        headers.append(("RateLimit", ", ".join(limits)))
    if not decision.allowed:
        retry_after_us = decision.retry_after_us
        if retry_after_us > 0:
            headers.append(("Retry-After", str(_ceil_div(retry_after_us, _US))))
    return headers
