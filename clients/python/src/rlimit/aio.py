"""rlimit.aio.AsyncClient: an asyncio client for rlimitd.

The same stance as the synchronous Client (per-call timeout, fail open or
closed, reconnect with backoff), with one difference that asyncio makes
natural: any number of coroutines may call one AsyncClient at once. Their
requests share one connection, in flight together (pipelining), and each
reply is handed to its caller by request id. When a call times out the
connection is closed and every call still waiting on it gets the FailMode
answer (the daemon answers in order, so they were all behind the late one);
the next call reconnects.
"""
from __future__ import annotations

import asyncio
from typing import Callable, Dict, List, Optional, Sequence, Union

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

_STREAM_LIMIT = 1024 * 1024


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.pending: Dict[int, "asyncio.Future[_wire.Response]"] = {}
        self.drain_lock = asyncio.Lock()
        self.read_task: Optional["asyncio.Task[None]"] = None
        self.closed = False


class AsyncClient:
    """Options as for rlimit.Client (timeout in seconds per call, connect
    included; fail_mode; reconnect backoff; frame bounds). Use one per event
    loop; it may be shared by any number of tasks of that loop."""

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
        self.last_error = ""
        self._backoff = ConnectBackoff(
            self.options.reconnect_backoff_min, self.options.reconnect_backoff_max
        )
        self._conn: Optional[_Connection] = None
        self._connect_lock: Optional[asyncio.Lock] = None
        self._next_id = 1

    # ------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        conn = self._conn
        if conn is not None:
            self._close(conn, Failure(DecisionStatus.UNAVAILABLE, "client closed"))
            try:
                await conn.writer.wait_closed()
            except (OSError, asyncio.CancelledError):
                pass
            if conn.read_task is not None:
                try:
                    await conn.read_task
                except (asyncio.CancelledError, Exception):
                    pass

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    @property
    def in_flight(self) -> int:
        """Requests written on the current connection and not yet answered."""
        return len(self._conn.pending) if self._conn is not None else 0

    # ------------------------------------------------------------ checks

    async def check(
        self,
        request: RequestLike = (),
        cost: int = 1,
        *,
        inline_limit: Optional[InlineLimit] = None,
        max_wait_us: Optional[int] = None,
    ) -> Decision:
        return await self._check_one(
            make_request(request, cost, inline_limit=inline_limit, max_wait_us=max_wait_us)
        )

    async def peek(
        self, request: RequestLike = (), cost: int = 1, *, inline_limit: Optional[InlineLimit] = None
    ) -> Decision:
        return await self._check_one(
            make_request(request, cost, inline_limit=inline_limit, mode=Mode.PEEK)
        )

    async def reserve(
        self,
        request: RequestLike = (),
        cost: int = 1,
        *,
        inline_limit: Optional[InlineLimit] = None,
        max_wait_us: Optional[int] = None,
    ) -> Decision:
        return await self._check_one(
            make_request(
                request, cost, inline_limit=inline_limit, mode=Mode.RESERVE, max_wait_us=max_wait_us
            )
        )

    async def acquire(
        self,
        request: RequestLike = (),
        cost: int = 1,
        *,
        inline_limit: Optional[InlineLimit] = None,
        max_wait_us: Optional[int] = None,
    ) -> Decision:
        """reserve(), then awaits delay_us (beyond `timeout`, which bounds the
        round trip only)."""
        decision = await self.reserve(
            request, cost, inline_limit=inline_limit, max_wait_us=max_wait_us
        )
        if decision.allowed and decision.delay_us > 0:
            await asyncio.sleep(decision.delay_us / 1_000_000)
        return decision

    async def check_batch(self, requests: Sequence[RequestLike]) -> List[Decision]:
        """Several checks in one frame; see Client.check_batch."""
        checks = [make_request(r) for r in requests]
        if not checks:
            return []
        try:
            response = await self._round_trip(lambda i: _wire.encode_check_request(i, checks))
        except Failure as failure:
            return [self.options.fail_decision(failure.status, failure.message) for _ in checks]
        return decisions_from(response, len(checks), self.options)

    async def check_pipelined(self, requests: Sequence[RequestLike]) -> List[Decision]:
        """Each check in its own frame, all in flight at once; in order."""
        return list(await asyncio.gather(*(self.check(r) for r in requests)))

    # ------------------------------------------------------------ leases

    async def release(self, lease: bytes) -> LeaseStatus:
        return (await self.release_leases([lease]))[0]

    async def extend(self, lease: bytes) -> LeaseStatus:
        return (await self.release_leases([lease], extend=True))[0]

    async def release_leases(
        self, leases: Sequence[bytes], extend: bool = False
    ) -> List[LeaseStatus]:
        tokens = lease_bytes(leases)
        if not tokens:
            return []
        try:
            response = await self._round_trip(
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

    async def reset(
        self, descriptors: Descriptors = (), *, inline_limit: Optional[InlineLimit] = None
    ) -> ResetResult:
        pairs = descriptor_pairs(descriptors)
        body = await self._call(
            lambda i: _wire.encode_reset_request(i, pairs, inline_limit), "reset"
        )
        assert isinstance(body, _wire.ResetMsg)
        return ResetResult(body.keys_reset, list(body.rules))

    async def status(self) -> DaemonStatus:
        body = await self._call(_wire.encode_status_request, "status")
        assert isinstance(body, DaemonStatus)
        return body

    async def members(self) -> ClusterMembers:
        body = await self._call(_wire.encode_members_request, "members")
        assert isinstance(body, ClusterMembers)
        return body

    # ------------------------------------------------------------ internals

    async def _check_one(self, check: CheckRequest) -> Decision:
        try:
            response = await self._round_trip(lambda i: _wire.encode_check_request(i, [check]))
        except Failure as failure:
            return self.options.fail_decision(failure.status, failure.message)
        return decisions_from(response, 1, self.options)[0]

    async def _call(self, encode: Callable[[int], bytes], kind: str) -> object:
        try:
            response = await self._round_trip(encode)
            return expect(response, kind, kind)
        except Failure as failure:
            if failure.status is DecisionStatus.UNAVAILABLE:
                raise Unavailable(failure.message) from None
            raise DaemonError(failure.message, failure.code) from None

    def _take_id(self) -> int:
        request_id = self._next_id
        self._next_id = 1 if self._next_id >= (1 << 64) - 1 else self._next_id + 1
        return request_id

    async def _round_trip(self, encode: Callable[[int], bytes]) -> _wire.Response:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.timeout
        request_id = self._take_id()
        payload = encode(request_id)
        if len(payload) > self.options.max_frame_bytes:
            raise Failure(
                DecisionStatus.PROTOCOL_ERROR,
                f"request exceeds max_frame_bytes ({self.options.max_frame_bytes})",
            )
        conn = await self._connection(deadline)
        future: "asyncio.Future[_wire.Response]" = loop.create_future()
        conn.pending[request_id] = future
        try:
            conn.writer.write(_wire.frame(payload))
            if conn.writer.transport.get_write_buffer_size() > 0:
                async with conn.drain_lock:
                    await asyncio.wait_for(conn.writer.drain(), max(deadline - loop.time(), 0))
            return await asyncio.wait_for(future, max(deadline - loop.time(), 0))
        except asyncio.TimeoutError:
            failure = Failure(DecisionStatus.UNAVAILABLE, self.options.timeout_text())
            # A late reply must never be taken for a later request's answer.
            self._close(conn, failure)
            raise failure from None
        except (ConnectionError, OSError) as error:
            failure = Failure(DecisionStatus.UNAVAILABLE, f"send: {error}")
            self._close(conn, failure)
            raise failure from None
        finally:
            conn.pending.pop(request_id, None)

    async def _connection(self, deadline: float) -> _Connection:
        conn = self._conn
        if conn is not None and not conn.closed and not conn.reader.at_eof():
            return conn
        if conn is not None and not conn.closed:
            # The daemon closed it (restart, idle_timeout): start afresh.
            self._close(conn, Failure(DecisionStatus.UNAVAILABLE, "daemon closed the connection"))
        if self._connect_lock is None:
            self._connect_lock = asyncio.Lock()
        loop = asyncio.get_running_loop()
        async with self._connect_lock:
            conn = self._conn
            if conn is not None and not conn.closed:
                return conn  # another task connected meanwhile
            path = self.options.socket_path
            self._backoff.check(path)
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_unix_connection(path, limit=_STREAM_LIMIT),
                    max(deadline - loop.time(), 0),
                )
            except asyncio.TimeoutError:
                raise self._backoff.failed(path, "timed out") from None
            except OSError as error:
                raise self._backoff.failed(path, error.strerror or str(error)) from None
            self._backoff.succeeded()
            conn = _Connection(reader, writer)
            conn.read_task = loop.create_task(self._read_loop(conn))
            self._conn = conn
            return conn

    async def _read_loop(self, conn: _Connection) -> None:
        header = _wire.FRAME_HEADER
        try:
            while True:
                (length,) = header.unpack(await conn.reader.readexactly(4))
                if length > self.options.max_response_bytes:
                    raise Failure(
                        DecisionStatus.PROTOCOL_ERROR,
                        f"reply frame of {length} bytes is above the reply limit",
                    )
                payload = await conn.reader.readexactly(length)
                try:
                    response = _wire.decode_response(payload)
                except _wire.DecodeError as error:
                    raise Failure(
                        DecisionStatus.PROTOCOL_ERROR, f"malformed reply frame: {error}"
                    ) from None
                future = conn.pending.pop(response.id, None)
                if future is None:
                    # Not a request of ours (an Error for a frame the daemon
                    # could not read carries id 0): the stream is out of step.
                    if response.kind == "error" and response.error is not None:
                        message = describe_error(response.error)
                    else:
                        message = f"reply id {response.id} matches no request in flight"
                    raise Failure(DecisionStatus.PROTOCOL_ERROR, message)
                if not future.done():
                    future.set_result(response)
        except Failure as failure:
            self._close(conn, failure)
        except asyncio.IncompleteReadError:
            self._close(conn, Failure(DecisionStatus.UNAVAILABLE, "daemon closed the connection"))
        except (ConnectionError, OSError) as error:
            self._close(conn, Failure(DecisionStatus.UNAVAILABLE, f"recv: {error}"))

    def _close(self, conn: _Connection, failure: Failure) -> None:
        """Closes `conn` and fails every call still waiting on it."""
        if conn.closed:
            return
        conn.closed = True
        if self._conn is conn:
            self._conn = None
        conn.writer.close()
        task = conn.read_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        pending = list(conn.pending.values())
        conn.pending.clear()
        for future in pending:
            if not future.done():
                future.set_exception(Failure(failure.status, failure.message, failure.code))
