"""HTTP RateLimit header fields (draft-ietf-httpapi-ratelimit-headers) from a
Decision.

    RateLimit-Policy: "per-user";q=100;w=60
    RateLimit: "per-user";r=50;t=30
    Retry-After: 7          (only on a denial)

One list member per matched rule (or inline limit), in the daemon's order,
serialised as RFC 8941 Lists (members joined by ", "):

- q per w: the rule's limit per its period (after tier overrides) when the
  period is whole seconds; else the same rate over the shortest whole-second
  window that keeps q whole (10 per 250 ms: q=40;w=1; 1 per 1500 ms:
  q=2;w=3), or per second rounded down if no window up to 1000 s does (the
  draft has no sub-second windows);
- r: the tokens remaining after this request;
- t: seconds until the bucket is full again (reset_after_us), rounded up;
  left out when it never will be (a zero limit);
- a concurrency rule has q (its slots) with qu="concurrent-requests", r (the
  slots free) and neither w nor t: it has no window;
- Retry-After (delay-seconds, rounded up) on a denial when the daemon said
  when the request could succeed: left out when it never can (-1) and when no
  rule said (e.g. a fail-closed answer with no daemon).

Integers are clamped to the 15 digits an RFC 8941 Integer allows. This is
what libclient's rlimit::ratelimit_headers() writes, except for concurrency
rules and for t of a bucket that never refills, which it writes as w = the
lease TTL and t=0.

Rule names are sf-strings: `"` and `\\` are escaped, and any character
outside printable ASCII (possible only in an inline limit's key) becomes `?`.
"""
from __future__ import annotations

from typing import List, Tuple

from .types import Decision

_US = 1_000_000


def _ceil_div(value: int, divisor: int) -> int:
    return -(-value // divisor)


_MAX_SF_INTEGER = 999_999_999_999_999
_MAX_EXACT_WINDOW_S = 1000


def _sf_int(value: int) -> str:
    return str(min(max(value, 0), _MAX_SF_INTEGER))


def policy_window(limit: int, period_ms: int) -> Tuple[int, int]:
    """`limit` per `period_ms` as (q, w): q per w whole seconds."""
    if period_ms % 1000 == 0:
        return limit, period_ms // 1000
    for window in range(1, _MAX_EXACT_WINDOW_S + 1):
        scaled = limit * window * 1000
        if scaled % period_ms == 0:
            return scaled // period_ms, window
    return limit * 1000 // period_ms, 1


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
        limit = f"{name};r={_sf_int(rule.remaining)}"
        if rule.algorithm == "concurrency" or rule.period_ms == 0:
            # Slots in flight, no window: the daemon reports the lease TTL as
            # the period and the time until a lease expires as the reset,
            # neither of which is a quota window.
            policy = f"{name};q={_sf_int(rule.limit)}"
            if rule.algorithm == "concurrency":
                policy += ';qu="concurrent-requests"'
        else:
            q, w = policy_window(rule.limit, rule.period_ms)
            policy = f"{name};q={_sf_int(q)};w={_sf_int(w)}"
            if rule.reset_after_us >= 0:
                limit += f";t={_sf_int(_ceil_div(rule.reset_after_us, _US))}"
        policies.append(policy)
        limits.append(limit)
    headers: List[Tuple[str, str]] = []
    if policies:
        headers.append(("RateLimit-Policy", ", ".join(policies)))
        headers.append(("RateLimit", ", ".join(limits)))
    if not decision.allowed:
        retry_after_us = decision.retry_after_us
        if retry_after_us > 0:
            headers.append(("Retry-After", _sf_int(_ceil_div(retry_after_us, _US))))
    return headers
