"""The values the client takes and returns (mirroring libclient's client.h)."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Tuple, Union

# Descriptors as callers may give them: a mapping (one value per key) or pairs
# (order kept; a repeated key makes the daemon answer INVALID).
Descriptors = Union[Mapping[str, str], Iterable[Tuple[str, str]]]


def descriptor_pairs(descriptors: Descriptors) -> Tuple[Tuple[str, str], ...]:
    items = descriptors.items() if isinstance(descriptors, Mapping) else descriptors
    pairs = tuple((str(k), str(v)) for k, v in items)
    return pairs


class Mode(enum.IntEnum):
    """What the daemon does with a check (docs/protocol.md, "Modes")."""

    CHECK = 0  # decide; consume when allowed
    PEEK = 1  # decide as CHECK would; consume nothing
    RESERVE = 2  # admit if the wait fits max_wait_us, consume now, report the wait


class FailMode(enum.Enum):
    """What a check gets when no daemon answered."""

    OPEN = "open"  # allowed
    CLOSED = "closed"  # denied


class DecisionStatus(str, enum.Enum):
    OK = "ok"  # decided by the daemon's rules (maybe none matched)
    EXEMPT = "exempt"  # an exemption matched; nothing charged
    INVALID = "invalid"  # the daemon rejected the check; see `error`
    KEY_TABLE_FULL = "key_table_full"  # the daemon's key_table_full policy decided
    UNAVAILABLE = "unavailable"  # no daemon answered; FailMode decided
    PROTOCOL_ERROR = "protocol_error"  # the daemon answered with an error; FailMode decided


_CHECK_STATUS = {
    0: DecisionStatus.OK,
    1: DecisionStatus.EXEMPT,
    2: DecisionStatus.INVALID,
    3: DecisionStatus.KEY_TABLE_FULL,
}


def check_status(code: int) -> DecisionStatus:
    # A status newer than this client: the daemon's `allowed` still holds.
    return _CHECK_STATUS.get(code, DecisionStatus.OK)


class LeaseStatus(str, enum.Enum):
    DONE = "done"  # released (or extended)
    UNKNOWN = "unknown"  # no such live lease: expired, released already, never issued
    NOT_A_LEASE = "not_a_lease"  # the token names no concurrency rule's key
    MALFORMED = "malformed"  # the token cannot be one
    FAILED = "failed"  # no answer (unavailable, error reply): see Client.last_error


_LEASE_STATUS = {
    0: LeaseStatus.DONE,
    1: LeaseStatus.UNKNOWN,
    2: LeaseStatus.NOT_A_LEASE,
    3: LeaseStatus.MALFORMED,
}


def lease_status(code: int) -> LeaseStatus:
    return _LEASE_STATUS.get(code, LeaseStatus.FAILED)


class ErrorCode(enum.IntEnum):
    """rlimit.v1.Error.Code."""

    UNKNOWN = 0
    UNSUPPORTED_VERSION = 1
    MALFORMED_FRAME = 2
    FRAME_TOO_LARGE = 3
    UNKNOWN_MESSAGE_TYPE = 4
    TOO_MANY_CHECKS = 5
    SHUTTING_DOWN = 6
    INVALID_REQUEST = 7
    NOT_ALLOWED = 8


def error_code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)  # a code newer than this client


@dataclass(frozen=True)
class InlineLimit:
    """An ad-hoc bucket sent with a check: `limit` per `period_ms`, capacity
    `burst` (0: same as limit)."""

    key: str
    limit: int
    period_ms: int = 1000
    burst: int = 0


@dataclass(frozen=True)
class CheckRequest:
    """One check. `cost` 1 is the protocol's default; `max_wait_us` None
    means none given (the rules' own max_delay; any reservation)."""

    descriptors: Tuple[Tuple[str, str], ...] = ()
    cost: int = 1
    inline_limit: Optional[InlineLimit] = None
    mode: Mode = Mode.CHECK
    max_wait_us: Optional[int] = None

    @staticmethod
    def of(
        descriptors: Descriptors = (),
        cost: int = 1,
        *,
        inline_limit: Optional[InlineLimit] = None,
        mode: Mode = Mode.CHECK,
        max_wait_us: Optional[int] = None,
    ) -> "CheckRequest":
        return CheckRequest(descriptor_pairs(descriptors), cost, inline_limit, mode, max_wait_us)


@dataclass
class RuleStatus:
    """How one matched rule (or the inline limit) judged a check."""

    name: str = ""
    allowed: bool = False
    limit: int = 0
    period_ms: int = 0
    burst: int = 0
    remaining: int = 0
    retry_after_us: int = 0  # 0 when allowed, -1 when never
    reset_after_us: int = 0  # until the bucket is full again; -1 never
    algorithm: str = ""
    delay_us: int = 0
    lease: bytes = b""  # a concurrency rule's lease token; empty when none
    over_limit: bool = False


@dataclass
class Decision:
    allowed: bool = False
    status: DecisionStatus = DecisionStatus.OK
    error: str = ""
    rules: List[RuleStatus] = field(default_factory=list)
    # When allowed: microseconds to wait before proceeding (acquire() waited it).
    delay_us: int = 0

    @property
    def retry_after_us(self) -> int:
        """Largest retry_after_us of the denying rules: -1 if one never
        allows, 0 when allowed (or when no rule says, e.g. unavailable)."""
        if self.allowed:
            return 0
        longest = 0
        for rule in self.rules:
            if rule.allowed:
                continue
            if rule.retry_after_us < 0:
                return -1
            longest = max(longest, rule.retry_after_us)
        return longest

    @property
    def leases(self) -> List[bytes]:
        """The rules' lease tokens, in rule order: release each when done."""
        return [rule.lease for rule in self.rules if rule.lease]

    @property
    def over_limit(self) -> bool:
        return any(rule.over_limit for rule in self.rules)


@dataclass
class ResetResult:
    keys_reset: int = 0  # keys that held state and were forgotten (on this daemon)
    rules: List[str] = field(default_factory=list)  # rules (and inline key) touched


@dataclass
class RuleInfo:
    name: str = ""
    algorithm: str = ""
    limit: int = 0
    period_ms: int = 0
    burst: int = 0
    match: str = ""
    overrides: int = 0


@dataclass
class DaemonStatus:
    node_id: str = ""
    version: str = ""
    uptime_ms: int = 0
    keys: int = 0
    max_keys: int = 0
    config_source: str = ""
    rules: List[RuleInfo] = field(default_factory=list)
    counters: Dict[str, int] = field(default_factory=dict)  # in daemon order


@dataclass
class ClusterMember:
    node_id: str = ""
    address: str = ""
    state: str = ""  # alive, suspect, dead, left
    incarnation: int = 0
    seq: int = 0
    last_heard_ms_ago: int = -1  # -1: never heard from directly
    self: bool = False


@dataclass
class ClusterMembers:
    cluster: str = ""
    mode: str = ""  # none, gossip, mesh
    members: List[ClusterMember] = field(default_factory=list)


class RlimitError(Exception):
    """A non-check call (status, reset, members) got no usable answer."""


class Unavailable(RlimitError):
    """No daemon answered: connect failed, timed out, or the connection broke."""


class DaemonError(RlimitError):
    """The daemon answered with rlimit.v1.Error (or an answer that does not fit)."""

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        self.code = code
