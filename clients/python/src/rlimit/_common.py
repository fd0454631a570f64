"""What the synchronous and the asyncio client share: options, the failure
stance, reconnect backoff and turning responses into results."""
from __future__ import annotations

import os
import time
from typing import Callable, List, Optional, Sequence, Union

from . import _wire
from .types import (
    CheckRequest,
    Decision,
    DecisionStatus,
    Descriptors,
    FailMode,
    InlineLimit,
    Mode,
    RuleStatus,
    check_status,
    error_code_name,
)

RequestLike = Union[CheckRequest, Descriptors]


def default_socket_path() -> str:
    """$XDG_RUNTIME_DIR/rlimitd.sock if XDG_RUNTIME_DIR names a directory,
    else /tmp/rlimitd.sock (docs/protocol.md, "Transport")."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isdir(runtime):
        return os.path.join(runtime, "rlimitd.sock")
    return "/tmp/rlimitd.sock"


class Failure(Exception):
    """Internal: why a call got no answer (turned into a Decision by FailMode,
    or into Unavailable / DaemonError)."""

    def __init__(self, status: DecisionStatus, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


class Options:
    """Validated client options; see Client for their meaning."""

    def __init__(
        self,
        socket_path: Optional[str],
        timeout: float,
        fail_mode: Union[FailMode, str],
        reconnect_backoff_min: float,
        reconnect_backoff_max: float,
        max_frame_bytes: int,
        max_response_bytes: int,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive (seconds)")
        self.socket_path = socket_path or default_socket_path()
        self.timeout = float(timeout)
        self.fail_mode = FailMode(fail_mode)
        self.reconnect_backoff_min = max(0.0, float(reconnect_backoff_min))
        self.reconnect_backoff_max = max(self.reconnect_backoff_min, float(reconnect_backoff_max))
        self.max_frame_bytes = int(max_frame_bytes) or _wire.DEFAULT_MAX_FRAME_BYTES
        self.max_response_bytes = max(
            int(max_response_bytes) or _wire.DEFAULT_MAX_RESPONSE_BYTES, self.max_frame_bytes
        )

    def fail_decision(self, status: DecisionStatus, message: str) -> Decision:
        return Decision(allowed=self.fail_mode is FailMode.OPEN, status=status, error=message)

    def timeout_text(self) -> str:
        return f"no reply within {self.timeout * 1000:g} ms"


class ConnectBackoff:
    """After a failed connect, no new attempt before the backoff has passed;
    the backoff doubles up to its maximum and resets on a connect."""

    def __init__(self, minimum: float, maximum: float) -> None:
        self.minimum = minimum
        self.maximum = maximum
        self.delay = minimum
        self.next_at = 0.0
        self.last_error = ""

    def check(self, path: str) -> None:
        if time.monotonic() < self.next_at:
            raise Failure(
                DecisionStatus.UNAVAILABLE,
                f"daemon unreachable ({self.last_error}); waiting to reconnect",
            )

    def failed(self, path: str, error: str) -> Failure:
        self.last_error = error
        self.next_at = time.monotonic() + self.delay
        self.delay = min(max(self.delay * 2, self.minimum), self.maximum)
        return Failure(DecisionStatus.UNAVAILABLE, f"connect {path}: {error}")

    def succeeded(self) -> None:
        self.delay = self.minimum
        self.next_at = 0.0


def make_request(
    request: RequestLike,
    cost: int = 1,
    *,
    inline_limit: Optional[InlineLimit] = None,
    mode: Optional[Mode] = None,
    max_wait_us: Optional[int] = None,
) -> CheckRequest:
    """A CheckRequest from either a CheckRequest (mode and max_wait_us replaced
    when given) or descriptors plus the keyword arguments."""
    if isinstance(request, CheckRequest):
        if mode is None and max_wait_us is None:
            return request
        return CheckRequest(
            request.descriptors,
            request.cost,
            request.inline_limit,
            request.mode if mode is None else mode,
            request.max_wait_us if max_wait_us is None else max_wait_us,
        )
    return CheckRequest.of(
        request,
        cost,
        inline_limit=inline_limit,
        mode=Mode.CHECK if mode is None else mode,
        max_wait_us=max_wait_us,
    )


def describe_error(error: _wire.ErrorMsg) -> str:
    text = "daemon error " + error_code_name(error.code)
    if error.message:
        text += ": " + error.message
    return text


def decision_from(result: _wire.CheckResultMsg) -> Decision:
    return Decision(
        allowed=result.allowed,
        status=check_status(result.status),
        error=result.error,
        delay_us=result.delay_us,
        rules=[
            RuleStatus(
                name=r.name,
                allowed=r.allowed,
                limit=r.limit,
                period_ms=r.period_ms,
                burst=r.burst,
                remaining=r.remaining,
                retry_after_us=r.retry_after_us,
                reset_after_us=r.reset_after_us,
                algorithm=r.algorithm,
                delay_us=r.delay_us,
                lease=r.lease,
                over_limit=r.over_limit,
            )
            for r in result.rules
        ],
    )


def decisions_from(response: _wire.Response, count: int, options: Options) -> List[Decision]:
    """The decisions of a reply to a CheckRequest of `count` checks; a reply
    that does not fit answers every check with PROTOCOL_ERROR by FailMode."""
    if response.kind == "error" and response.error is not None:
        problem = describe_error(response.error)
    elif response.kind != "check":
        problem = "reply to a check carries no check results"
    elif len(response.check) != count:
        problem = f"reply carries {len(response.check)} results for {count} checks"
    else:
        return [decision_from(result) for result in response.check]
    return [options.fail_decision(DecisionStatus.PROTOCOL_ERROR, problem) for _ in range(count)]


def expect(response: _wire.Response, kind: str, what: str) -> object:
    """The body of kind `kind`, or Failure (DaemonError) for an Error or a
    reply of another kind."""
    if response.kind == "error" and response.error is not None:
        raise Failure(
            DecisionStatus.PROTOCOL_ERROR, describe_error(response.error), response.error.code
        )
    if response.kind != kind:
        raise Failure(DecisionStatus.PROTOCOL_ERROR, f"reply to a {what} carries no {what} result")
    return getattr(response, kind)


def lease_bytes(leases: Sequence[Union[bytes, bytearray, memoryview]]) -> List[bytes]:
    return [bytes(lease) for lease in leases]


SleepFn = Callable[[float], None]
