"""rlimit.ietf_headers against the examples of
draft-ietf-httpapi-ratelimit-headers (sections 3.2, 4.2 and 6) and the
rounding the package promises. The draft writes its multi-member examples
without a space after the comma; RFC 8941 serialises a List with ", ", and
both parse the same."""
from __future__ import annotations

from rlimit import Decision, RuleStatus, ietf_headers


def rule(name, limit, period_s, remaining, reset_s, **kw):
    return RuleStatus(name=name, allowed=kw.pop("allowed", True), limit=limit,
                      period_ms=int(period_s * 1000), remaining=remaining,
                      reset_after_us=int(reset_s * 1_000_000), algorithm=kw.pop("algorithm", "token_bucket"),
                      **kw)


def fields(decision):
    return dict(ietf_headers(decision))


def test_draft_single_policy():
    got = fields(Decision(allowed=True, rules=[rule("default", 100, 10, 50, 30)]))
    assert got == {
        "RateLimit-Policy": '"default";q=100;w=10',  # draft section 3.2
        "RateLimit": '"default";r=50;t=30',  # draft section 4.2
    }


def test_draft_multiple_policies():
    got = fields(Decision(allowed=True, rules=[rule("permin", 50, 60, 10, 45),
                                                rule("perhr", 1000, 3600, 900, 3000)]))
    draft = '"permin";q=50;w=60,"perhr";q=1000;w=3600'  # draft section 3.2
    assert got["RateLimit-Policy"] == draft.replace(",", ", ")
    assert got["RateLimit"] == '"permin";r=10;t=45, "perhr";r=900;t=3000'


def test_draft_burst_and_daily():
    got = fields(Decision(allowed=True, rules=[rule("burst", 100, 60, 1, 7),
                                                rule("daily", 1000, 86400, 100, 36000)]))
    draft = '"burst";q=100;w=60,"daily";q=1000;w=86400'  # draft section 3
    assert got["RateLimit-Policy"] == draft.replace(",", ", ")
    assert got["RateLimit"] == '"burst";r=1;t=7, "daily";r=100;t=36000'  # sections 7, 2


def test_a_denial_adds_retry_after_rounded_up():
    denied = Decision(allowed=False, rules=[
        rule("problemPolicy", 10, 10, 0, 10, allowed=False, retry_after_us=1_200_000)])
    assert ietf_headers(denied) == [
        ("RateLimit-Policy", '"problemPolicy";q=10;w=10'),
        ("RateLimit", '"problemPolicy";r=0;t=10'),  # draft section 6
        ("Retry-After", "2"),
    ]
    # The longest wait of the denying rules; an allowing rule's says nothing.
    two = Decision(allowed=False, rules=[
        rule("a", 1, 1, 0, 1, allowed=False, retry_after_us=1),
        rule("b", 1, 1, 1, 0, allowed=True, retry_after_us=0),
        rule("c", 1, 1, 0, 1, allowed=False, retry_after_us=3_000_000)])
    assert fields(two)["Retry-After"] == "3"
    assert fields(Decision(allowed=False, rules=[
        rule("a", 1, 1, 0, 1, allowed=False, retry_after_us=1)]))["Retry-After"] == "1"


def test_no_retry_after_when_allowed_never_or_unknown():
    assert "Retry-After" not in fields(Decision(allowed=True, rules=[rule("a", 1, 1, 0, 1)]))
    never = Decision(allowed=False, rules=[rule("a", 1, 1, 0, 1, allowed=False, retry_after_us=-1)])
    assert "Retry-After" not in fields(never)
    # A fail-closed answer: no daemon, no rules, nothing to say.
    assert ietf_headers(Decision(allowed=False)) == []
    assert ietf_headers(Decision(allowed=True)) == []


def test_rounding_and_windows():
    # t rounds up; a bucket that never refills (reset -1) has no t.
    got = fields(Decision(allowed=True, rules=[
        RuleStatus(name="a", limit=5, period_ms=1000, remaining=1, reset_after_us=29_000_001),
        RuleStatus(name="z", limit=0, period_ms=1000, remaining=0, reset_after_us=-1)]))
    assert got["RateLimit"] == '"a";r=1;t=30, "z";r=0'
    # Sub-second periods: the same rate over the shortest whole-second window.
    assert fields(Decision(allowed=True, rules=[
        RuleStatus(name="s", limit=10, period_ms=250)]))["RateLimit-Policy"] == '"s";q=40;w=1'
    assert fields(Decision(allowed=True, rules=[
        RuleStatus(name="s", limit=1, period_ms=1500)]))["RateLimit-Policy"] == '"s";q=2;w=3'
    # Integers are clamped to RFC 8941's 15 digits.
    huge = fields(Decision(allowed=True, rules=[
        RuleStatus(name="h", limit=1 << 50, period_ms=1, remaining=1 << 50)]))
    assert huge["RateLimit-Policy"] == '"h";q=999999999999999;w=1'


def test_concurrency_rules_have_no_window():
    got = fields(Decision(allowed=True, rules=[
        RuleStatus(name="jobs", limit=4, period_ms=300_000, remaining=3,
                   reset_after_us=300_000_000, algorithm="concurrency", lease=b"x")]))
    assert got == {"RateLimit-Policy": '"jobs";q=4;qu="concurrent-requests"',
                   "RateLimit": '"jobs";r=3'}


def test_names_are_sf_strings():
    got = fields(Decision(allowed=True, rules=[
        RuleStatus(name='in"line\\é\n', limit=1, period_ms=1000, remaining=1)]))
    assert got["RateLimit-Policy"] == '"in\\"line\\\\??";q=1;w=1'
