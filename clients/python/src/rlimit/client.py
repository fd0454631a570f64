"""rlimit.Client: a synchronous client for rlimitd (docs/protocol.md).

Like libclient's rlimit::Client: every call is bounded by `timeout` (connect
included); when no daemon answers in time a check returns at once, allowed
(fail open) or denied (fail closed), with status UNAVAILABLE; after a timeout
the connection is closed (a late reply is never read as a later request's
answer) and a later call reconnects, no sooner than the reconnect backoff
allows. A Client is NOT thread-safe: use one per thread.
"""
from __future__ import annotations

import errno
import math
import select
import socket
import time
from collections import OrderedDict, deque
from typing import Callable, Deque, Dict, List, Optional, Sequence, Tuple, Union

from . import _wire
from ._common import (
    ConnectBackoff,
    Failure,
    Options,
    RequestLike,
    decisions_from,
    describe_error,
    expect,
    lease_bytes,
    make_request,
)
from .types import (
    CheckRequest,
    ClusterMembers,
    DaemonError,
    DaemonStatus,
    Decision,
    DecisionStatus,
    Descriptors,
    FailMode,
    InlineLimit,
    LeaseStatus,
    Mode,
    ResetResult,
    Unavailable,
    descriptor_pairs,
    lease_status,
)

_READ_CHUNK = 64 * 1024
_AUTO_FLUSH_BYTES = 64 * 1024
_SYNC = 0
_TICKET = 1


class Client:
    """A connection to one rlimitd.

    socket_path: the daemon's socket (None: $XDG_RUNTIME_DIR/rlimitd.sock or
      /tmp/rlimitd.sock). timeout: seconds per call, connect included
      (default 5 ms, as libclient). fail_mode: FailMode.OPEN (default) or
      CLOSED, what a check gets when no daemon answered.
      reconnect_backoff_min/max: seconds to wait before connecting again
      after a failed connect, doubling up to the maximum. max_frame_bytes: the
      largest request frame sent (the daemon's max_frame_bytes).
      max_response_bytes: the largest reply frame accepted. max_pending: most
      pipelined checks outstanding (submitted, not yet received).
    """

    def __init__(
        self,
        socket_path: Optional[str] = None,
        *,
        timeout: float = 0.005,
        fail_mode: Union[FailMode, str] = FailMode.OPEN,
        reconnect_backoff_min: float = 0.01,
        reconnect_backoff_max: float = 1.0,
        max_frame_bytes: int = _wire.DEFAULT_MAX_FRAME_BYTES,
        max_response_bytes: int = _wire.DEFAULT_MAX_RESPONSE_BYTES,
        max_pending: int = 65536,
    ) -> None:
        self.options = Options(
            socket_path,
            timeout,
            fail_mode,
            reconnect_backoff_min,
            reconnect_backoff_max,
            max_frame_bytes,
            max_response_bytes,
        )
        self.max_pending = max_pending
        # The error text of the last release/extend that returned FAILED.
        self.last_error = ""
        self._sock: Optional[socket.socket] = None
        self._backoff = ConnectBackoff(
            self.options.reconnect_backoff_min, self.options.reconnect_backoff_max
        )
        self._next_id = 1
        self._out = bytearray()
        self._in = bytearray()
        # Every request whose frame is in _out or written on this connection,
        # oldest first: (id, kind). The daemon answers in order.
        self._in_flight: Deque[Tuple[int, int]] = deque()
        self._unsent_frames = 0  # frames in _out of which nothing was written yet
        self._peer_gone_before_send = False
        # Pipelined checks in submission order: id -> decision (None until answered).
        self._tickets: "OrderedDict[int, Optional[Decision]]" = OrderedDict()
        self._sync_reply: Optional[_wire.Response] = None
        self.refused_over_max_pending = 0

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Closes the connection; outstanding pipelined checks are answered by
        FailMode. The client stays usable (the next call reconnects)."""
        self._fail_all(Failure(DecisionStatus.UNAVAILABLE, "client closed"))

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        sock = getattr(self, "_sock", None)
        if sock is not None:
            sock.close()

    @property
    def connected(self) -> bool:
        return self._sock is not None

    @property
    def pending(self) -> int:
        """Pipelined checks submitted and not yet received."""
        return len(self._tickets)

    # ------------------------------------------------------------ checks

    def check(
        self,
        request: RequestLike = (),
        cost: int = 1,
        *,
        inline_limit: Optional[InlineLimit] = None,
        max_wait_us: Optional[int] = None,
    ) -> Decision:
        """One check: descriptors (a mapping or (key, value) pairs) and cost, or
        a CheckRequest (whose mode is kept)."""
        return self._check_one(
            make_request(request, cost, inline_limit=inline_limit, max_wait_us=max_wait_us)
        )

    def peek(
        self, request: RequestLike = (), cost: int = 1, *, inline_limit: Optional[InlineLimit] = None
    ) -> Decision:
        """Decides as check() would and consumes nothing."""
        return self._check_one(
            make_request(request, cost, inline_limit=inline_limit, mode=Mode.PEEK)
        )

    def reserve(
        self,
        request: RequestLike = (),
        cost: int = 1,
        *,
        inline_limit: Optional[InlineLimit] = None,
        max_wait_us: Optional[int] = None,
    ) -> Decision:
        """Consumes now and returns the wait before proceeding in delay_us;
        refused when it would exceed max_wait_us (None: the request's own, or
        none)."""
        return self._check_one(
            make_request(
                request, cost, inline_limit=inline_limit, mode=Mode.RESERVE, max_wait_us=max_wait_us
            )
        )

    def acquire(
        self,
        request: RequestLike = (),
        cost: int = 1,
        *,
        inline_limit: Optional[InlineLimit] = None,
        max_wait_us: Optional[int] = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Decision:
        """reserve(), then sleeps delay_us in this thread (beyond `timeout`,
        which bounds the round trip only) before returning."""
        decision = self.reserve(request, cost, inline_limit=inline_limit, max_wait_us=max_wait_us)
        # Only a daemon's allowance carries a wait; a fail-open answer has none.
        if decision.allowed and decision.delay_us > 0:
            sleep(decision.delay_us / 1_000_000)
        return decision

    def check_batch(self, requests: Sequence[RequestLike]) -> List[Decision]:
        """Several checks in one frame, decided in order; one round trip. A
        batch above the daemon's max_checks_per_frame (or whose answer could
        exceed its max_response_bytes) is refused whole: every decision is
        PROTOCOL_ERROR (by FailMode) and nothing was charged."""
        checks = [make_request(r) for r in requests]
        if not checks:
            return []
        try:
            response = self._round_trip(lambda i: _wire.encode_check_request(i, checks))
        except Failure as failure:
            return [self.options.fail_decision(failure.status, failure.message) for _ in checks]
        return decisions_from(response, len(checks), self.options)

    # ------------------------------------------------------------ pipelining

    def submit(self, request: RequestLike, cost: int = 1) -> int:
        """Queues a check (sent when the output buffer fills, on flush() or
        receive()) and returns its ticket: the request id its reply carries."""
        check = make_request(request, cost)
        ticket = self._take_id()
        if len(self._tickets) >= self.max_pending:
            self.refused_over_max_pending += 1
            self._tickets[ticket] = self.options.fail_decision(
                DecisionStatus.UNAVAILABLE,
                f"max_pending ({self.max_pending}) checks already outstanding; receive() some first",
            )
            return ticket
        self._drop_if_stale()
        payload = _wire.encode_check_request(ticket, [check])
        if len(payload) > self.options.max_frame_bytes:
            self._tickets[ticket] = self.options.fail_decision(
                DecisionStatus.PROTOCOL_ERROR, self._too_large_text()
            )
            return ticket
        self._queue(ticket, _TICKET, payload)
        self._tickets[ticket] = None
        if len(self._out) >= _AUTO_FLUSH_BYTES:
            self.flush()
        return ticket

    def flush(self) -> None:
        """Writes what submit() queued, waiting at most `timeout`."""
        if not self._out:
            return
        try:
            self._pump(time.monotonic() + self.options.timeout, lambda: not self._out)
        except Failure:
            pass  # every outstanding ticket has been answered by FailMode

    def receive(self) -> Tuple[int, Decision]:
        """The oldest outstanding ticket and its decision, waiting at most
        `timeout` for it. With nothing pending: ticket 0 and an INVALID
        decision (not allowed)."""
        if not self._tickets:
            return 0, Decision(False, DecisionStatus.INVALID, "receive() with nothing pending")
        ticket = next(iter(self._tickets))
        if self._tickets[ticket] is None:
            try:
                self._pump(
                    time.monotonic() + self.options.timeout,
                    lambda: self._tickets[ticket] is not None,
                )
            except Failure:
                pass  # every outstanding ticket has been answered by FailMode
        decision = self._tickets.pop(ticket)
        assert decision is not None  # _pump answered it or failed, which answers all
        return ticket, decision

    def check_pipelined(self, requests: Sequence[RequestLike]) -> List[Decision]:
        """Each check in its own frame, all in flight at once on this
        connection; decisions in order. Unlike check_batch, no frame or
        max_checks_per_frame bound applies to the whole."""
        tickets = [self.submit(r) for r in requests]
        self.flush()
        answers: Dict[int, Decision] = {}
        while len(answers) < len(tickets):
            ticket, decision = self.receive()
            answers[ticket] = decision
        return [answers[t] for t in tickets]

    # ------------------------------------------------------------ leases

    def release(self, lease: bytes) -> LeaseStatus:
        """Releases a concurrency lease (RuleStatus.lease)."""
        return self.release_leases([lease])[0]

    def extend(self, lease: bytes) -> LeaseStatus:
        """Restarts a lease's TTL (a heartbeat for long work)."""
        return self.release_leases([lease], extend=True)[0]

    def release_leases(self, leases: Sequence[bytes], extend: bool = False) -> List[LeaseStatus]:
        """Several leases in one round trip; a status per lease, in order (all
        FAILED, with last_error set, when no usable answer came)."""
        tokens = lease_bytes(leases)
        if not tokens:
            return []
        try:
            response = self._round_trip(
                lambda i: _wire.encode_release_request(i, tokens, extend)
            )
            statuses = expect(response, "release", "release")
            assert isinstance(statuses, list)
            if len(statuses) != len(tokens):
                raise Failure(
                    DecisionStatus.PROTOCOL_ERROR, "reply to a release carries no status per lease"
                )
        except Failure as failure:
            self.last_error = failure.message
            return [LeaseStatus.FAILED] * len(tokens)
        self.last_error = ""
        return [lease_status(s) for s in statuses]

    # ------------------------------------------------------------ other requests

    def reset(
        self, descriptors: Descriptors = (), *, inline_limit: Optional[InlineLimit] = None
    ) -> ResetResult:
        """Forgets the daemon's state for every key a check with these
        descriptors (and inline limit) would touch. Raises Unavailable, or
        DaemonError (bad descriptors: INVALID_REQUEST; allow_reset = false:
        NOT_ALLOWED)."""
        pairs = descriptor_pairs(descriptors)
        response = self._call(lambda i: _wire.encode_reset_request(i, pairs, inline_limit))
        body = _unwrap(lambda: expect(response, "reset", "reset"))
        assert isinstance(body, _wire.ResetMsg)
        return ResetResult(body.keys_reset, list(body.rules))

    def status(self) -> DaemonStatus:
        """The daemon's status (rules, keys, counters). Raises Unavailable or DaemonError."""
        response = self._call(_wire.encode_status_request)
        body = _unwrap(lambda: expect(response, "status", "status"))
        assert isinstance(body, DaemonStatus)
        return body

    def members(self) -> ClusterMembers:
        """The cluster as the daemon sees it. Raises Unavailable or DaemonError."""
        response = self._call(_wire.encode_members_request)
        body = _unwrap(lambda: expect(response, "members", "members"))
        assert isinstance(body, ClusterMembers)
        return body

    # ------------------------------------------------------------ internals

    def _take_id(self) -> int:
        request_id = self._next_id
        self._next_id = 1 if self._next_id >= (1 << 64) - 1 else self._next_id + 1
        return request_id

    def _too_large_text(self) -> str:
        return f"request exceeds max_frame_bytes ({self.options.max_frame_bytes})"

    def _check_one(self, check: CheckRequest) -> Decision:
        try:
            response = self._round_trip(lambda i: _wire.encode_check_request(i, [check]))
        except Failure as failure:
            return self.options.fail_decision(failure.status, failure.message)
        return decisions_from(response, 1, self.options)[0]

    def _call(self, encode: Callable[[int], bytes]) -> _wire.Response:
        try:
            return self._round_trip(encode)
        except Failure as failure:
            if failure.status is DecisionStatus.UNAVAILABLE:
                raise Unavailable(failure.message) from None
            raise DaemonError(failure.message, failure.code) from None

    def _round_trip(self, encode: Callable[[int], bytes]) -> _wire.Response:
        deadline = time.monotonic() + self.options.timeout
        self._drop_if_stale()
        request_id = self._take_id()
        payload = encode(request_id)
        if len(payload) > self.options.max_frame_bytes:
            raise Failure(DecisionStatus.PROTOCOL_ERROR, self._too_large_text())
        self._queue(request_id, _SYNC, payload)
        self._sync_reply = None
        self._pump(deadline, lambda: self._sync_reply is not None)
        reply = self._sync_reply
        self._sync_reply = None
        assert reply is not None
        return reply

    def _queue(self, request_id: int, kind: int, payload: bytes) -> None:
        self._out += _wire.frame(payload)
        self._in_flight.append((request_id, kind))
        self._unsent_frames += 1

    def _close_socket(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self._in.clear()
        self._out.clear()
        self._unsent_frames = 0
        self._peer_gone_before_send = False

    def _fail_all(self, failure: Failure) -> None:
        """Closes the connection and answers every unanswered ticket."""
        self._close_socket()
        self._in_flight.clear()
        for ticket, decision in self._tickets.items():
            if decision is None:
                self._tickets[ticket] = self.options.fail_decision(failure.status, failure.message)

    def _drop_if_stale(self) -> None:
        """An idle connection the daemon closed (restart, idle_timeout) shows
        EOF: drop it here so this call reconnects instead of failing."""
        if self._sock is None or self._in_flight or self._in:
            return
        try:
            data = self._sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        # EOF, an error, or bytes nobody asked for: start afresh.
        del data
        self._close_socket()

    def _connect(self, deadline: float) -> None:
        path = self.options.socket_path
        self._backoff.check(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(max(deadline - time.monotonic(), 0.0001))
            sock.connect(path)
        except socket.timeout:
            sock.close()
            raise self._backoff.failed(path, "timed out") from None
        except OSError as error:
            sock.close()
            raise self._backoff.failed(path, error.strerror or str(error)) from None
        sock.setblocking(False)
        self._sock = sock
        self._backoff.succeeded()

    def _pump(self, deadline: float, done: Callable[[], bool]) -> None:
        """Connects if needed, writes _out and reads replies (dispatching them)
        until done() or the deadline. Reading while writing keeps a daemon that
        answers as it reads from stalling on full socket buffers. On failure
        the connection is closed, every ticket answered, and Failure raised."""
        try:
            self._pump_once(deadline, done)
            return
        except Failure as failure:
            if not self._peer_gone_before_send:
                self._fail_all(failure)
                raise
        # The daemon had closed the connection before any of what is in
        # flight was written (a restart): send it all again on a new one.
        out = bytes(self._out)
        unsent = self._unsent_frames
        self._close_socket()
        self._out += out
        self._unsent_frames = unsent
        try:
            self._pump_once(deadline, done)
        except Failure as failure:
            self._fail_all(failure)
            raise

    def _pump_once(self, deadline: float, done: Callable[[], bool]) -> None:
        if done():
            return
        if self._sock is None:
            self._connect(deadline)
        sock = self._sock
        assert sock is not None
        poller = select.poll()
        registered = 0
        while True:
            self._process_frames(done)
            if done():
                return
            if self._out:
                self._write_some(sock)
            events = select.POLLIN | (select.POLLOUT if self._out else 0)
            if events != registered:
                poller.register(sock.fileno(), events)
                registered = events
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure(DecisionStatus.UNAVAILABLE, self.options.timeout_text())
            ready = poller.poll(max(1, math.ceil(left * 1000)))
            if not ready:
                continue  # the deadline check above ends the loop
            revents = ready[0][1]
            if revents & select.POLLNVAL:
                raise Failure(DecisionStatus.UNAVAILABLE, "socket closed unexpectedly")
            if revents & select.POLLOUT and self._out:
                self._write_some(sock)
            if revents & (select.POLLIN | select.POLLHUP | select.POLLERR):
                self._read_some(sock)

    def _write_some(self, sock: socket.socket) -> None:
        while self._out:
            try:
                sent = sock.send(self._out)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                self._peer_gone_before_send = (
                    error.errno in (errno.EPIPE, errno.ECONNRESET)
                    and self._unsent_frames == len(self._in_flight)
                    and not self._in
                )
                raise Failure(DecisionStatus.UNAVAILABLE, f"send: {error.strerror}") from None
            del self._out[:sent]
            self._unsent_frames = 0

    def _read_some(self, sock: socket.socket) -> None:
        while True:
            try:
                data = sock.recv(_READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                raise Failure(DecisionStatus.UNAVAILABLE, f"recv: {error.strerror}") from None
            if not data:
                raise Failure(DecisionStatus.UNAVAILABLE, "daemon closed the connection")
            self._in += data
            if len(data) < _READ_CHUNK:
                return

    def _process_frames(self, done: Callable[[], bool]) -> None:
        """Decodes the complete frames read so far until done()."""
        buffered = self._in
        offset = 0
        try:
            while not done() and len(buffered) - offset >= 4:
                (length,) = _wire.FRAME_HEADER.unpack_from(buffered, offset)
                if length > self.options.max_response_bytes:
                    raise Failure(
                        DecisionStatus.PROTOCOL_ERROR,
                        f"reply frame of {length} bytes is above the reply limit",
                    )
                if len(buffered) - offset - 4 < length:
                    break
                payload = bytes(buffered[offset + 4 : offset + 4 + length])
                offset += 4 + length
                try:
                    response = _wire.decode_response(payload)
                except _wire.DecodeError as error:
                    raise Failure(
                        DecisionStatus.PROTOCOL_ERROR, f"malformed reply frame: {error}"
                    ) from None
                self._dispatch(response)
        finally:
            if offset:
                del buffered[:offset]

    def _dispatch(self, response: _wire.Response) -> None:
        if not self._in_flight or response.id != self._in_flight[0][0]:
            # Out of step with the daemon (e.g. an Error for a frame it could
            # not read, carrying id 0): nothing later on this stream can be trusted.
            if response.kind == "error" and response.error is not None:
                message = describe_error(response.error)
            elif self._in_flight:
                message = f"reply id {response.id}, expected {self._in_flight[0][0]}"
            else:
                message = f"reply id {response.id} with nothing outstanding"
            raise Failure(DecisionStatus.PROTOCOL_ERROR, message)
        request_id, kind = self._in_flight.popleft()
        if kind == _SYNC:
            self._sync_reply = response
        elif request_id in self._tickets:
            self._tickets[request_id] = decisions_from(response, 1, self.options)[0]


def _unwrap(get: Callable[[], object]) -> object:
    try:
        return get()
    except Failure as failure:
        raise DaemonError(failure.message, failure.code) from None
