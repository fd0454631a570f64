"""The rlimit.v1 wire format: frames and a small hand-written protobuf codec.

Only the messages of proto/rlimit/v1/client.proto that a client sends or
receives are covered. Encoding writes exactly the bytes protobuf would write
(fields in number order, proto3 defaults left out, `optional` fields written
whenever set); decoding accepts anything protobuf would accept for these
messages: unknown fields are skipped and repeated scalars may be packed or
not. One simplification: a singular field that appears twice keeps its last
value, where protobuf would merge two copies of a message field; the daemon
writes each field once, so nothing it sends decodes differently.
"""
from __future__ import annotations

import struct
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from .types import (
    CheckRequest,
    ClusterMember,
    ClusterMembers,
    DaemonStatus,
    InlineLimit,
    RuleInfo,
)

VERSION_1 = 1
FRAME_HEADER = struct.Struct(">I")
DEFAULT_MAX_FRAME_BYTES = 64 * 1024
DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024

_U64 = (1 << 64) - 1

# Wire types.
_VARINT = 0
_I64 = 1
_LEN = 2
_I32 = 5


class DecodeError(ValueError):
    """Bytes that do not decode as the expected message."""


# ---------------------------------------------------------------- encoding


def _varint(value: int, out: bytearray) -> None:
    value &= _U64  # negative int64 values travel as 10-byte two's complement
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _tag(field: int, wire_type: int, out: bytearray) -> None:
    _varint((field << 3) | wire_type, out)


def _uint(field: int, value: int, out: bytearray, *, always: bool = False) -> None:
    if value or always:
        _tag(field, _VARINT, out)
        _varint(value, out)


def _bytes(field: int, value: bytes, out: bytearray, *, always: bool = False) -> None:
    if value or always:
        _tag(field, _LEN, out)
        _varint(len(value), out)
        out += value


def _str(field: int, value: str, out: bytearray) -> None:
    _bytes(field, value.encode("utf-8"), out)


def _descriptors(field: int, descriptors: Sequence[Tuple[str, str]], out: bytearray) -> None:
    for key, value in descriptors:
        body = bytearray()
        _str(1, key, body)
        _str(2, value, body)
        _bytes(field, bytes(body), out, always=True)


def _inline_limit(field: int, limit: Optional[InlineLimit], out: bytearray) -> None:
    if limit is None:
        return
    body = bytearray()
    _str(1, limit.key, body)
    _uint(2, limit.limit, body)
    _uint(3, limit.period_ms, body)
    _uint(4, limit.burst, body)
    _bytes(field, bytes(body), out)  # an all-default inline limit is the same as none


def encode_check(request: CheckRequest) -> bytes:
    """One rlimit.v1.Check."""
    out = bytearray()
    _descriptors(1, request.descriptors, out)
    if request.cost != 1:  # unset means 1: leaving it out keeps the frame small
        _uint(2, request.cost, out, always=True)
    _inline_limit(3, request.inline_limit, out)
    _uint(4, int(request.mode), out)
    if request.max_wait_us is not None:
        _uint(5, request.max_wait_us, out, always=True)
    return bytes(out)


def _request(request_id: int, body_field: int, body: bytes) -> bytes:
    out = bytearray()
    _uint(1, VERSION_1, out)
    _uint(2, request_id, out)
    _bytes(body_field, body, out, always=True)  # oneof: present even when empty
    return bytes(out)


def encode_check_request(request_id: int, checks: Iterable[CheckRequest]) -> bytes:
    body = bytearray()
    for check in checks:
        _bytes(1, encode_check(check), body, always=True)
    return _request(request_id, 3, bytes(body))


def encode_status_request(request_id: int) -> bytes:
    return _request(request_id, 4, b"")


def encode_members_request(request_id: int) -> bytes:
    return _request(request_id, 5, b"")


def encode_release_request(request_id: int, leases: Sequence[bytes], extend: bool) -> bytes:
    body = bytearray()
    for lease in leases:
        _bytes(1, bytes(lease), body, always=True)
    _uint(2, 1 if extend else 0, body)
    return _request(request_id, 6, bytes(body))


def encode_reset_request(
    request_id: int, descriptors: Sequence[Tuple[str, str]], inline_limit: Optional[InlineLimit]
) -> bytes:
    body = bytearray()
    _descriptors(1, descriptors, body)
    _inline_limit(2, inline_limit, body)
    return _request(request_id, 7, bytes(body))


def frame(payload: bytes) -> bytes:
    return FRAME_HEADER.pack(len(payload)) + payload


# ---------------------------------------------------------------- decoding

# A decoded field: (number, wire type, value); value is an int for varints
# and fixed-width fields, a memoryview for length-delimited ones.
Field = Tuple[int, int, object]


def _read_varint(data: memoryview, pos: int) -> Tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise DecodeError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & _U64, pos
        shift += 7
        if shift >= 70:
            raise DecodeError("varint longer than 10 bytes")


def _fields(data: memoryview) -> List[Field]:
    fields: List[Field] = []
    pos = 0
    end = len(data)
    while pos < end:
        key, pos = _read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise DecodeError("field number 0")
        if wire_type == _VARINT:
            value, pos = _read_varint(data, pos)
            fields.append((number, wire_type, value))
        elif wire_type == _LEN:
            length, pos = _read_varint(data, pos)
            if length > end - pos:
                raise DecodeError("truncated length-delimited field")
            fields.append((number, wire_type, data[pos : pos + length]))
            pos += length
        elif wire_type == _I64:
            if pos + 8 > end:
                raise DecodeError("truncated fixed64")
            fields.append((number, wire_type, int.from_bytes(data[pos : pos + 8], "little")))
            pos += 8
        elif wire_type == _I32:
            if pos + 4 > end:
                raise DecodeError("truncated fixed32")
            fields.append((number, wire_type, int.from_bytes(data[pos : pos + 4], "little")))
            pos += 4
        else:
            raise DecodeError(f"unsupported wire type {wire_type}")
    return fields


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= (1 << 63) else value


def _as_int(wire_type: int, value: object) -> int:
    if wire_type != _VARINT:
        raise DecodeError("expected a varint")
    assert isinstance(value, int)
    return value


def _as_bytes(wire_type: int, value: object) -> bytes:
    if wire_type != _LEN:
        raise DecodeError("expected a length-delimited field")
    assert isinstance(value, memoryview)
    return value.tobytes()


def _as_view(wire_type: int, value: object) -> memoryview:
    if wire_type != _LEN:
        raise DecodeError("expected a length-delimited field")
    assert isinstance(value, memoryview)
    return value


def _as_str(wire_type: int, value: object) -> str:
    try:
        return _as_bytes(wire_type, value).decode("utf-8")
    except UnicodeDecodeError as error:
        raise DecodeError("string field is not UTF-8") from error


def _repeated_varints(wire_type: int, value: object) -> List[int]:
    """A repeated varint field: packed (one LEN field) or one value per field."""
    if wire_type == _VARINT:
        assert isinstance(value, int)
        return [value]
    view = _as_view(wire_type, value)
    values = []
    pos = 0
    while pos < len(view):
        v, pos = _read_varint(view, pos)
        values.append(v)
    return values


class RuleResultMsg:
    __slots__ = (
        "name", "allowed", "limit", "period_ms", "burst", "remaining", "retry_after_us",
        "reset_after_us", "algorithm", "delay_us", "lease", "over_limit",
    )

    def __init__(self) -> None:
        self.name = ""
        self.allowed = False
        self.limit = 0
        self.period_ms = 0
        self.burst = 0
        self.remaining = 0
        self.retry_after_us = 0
        self.reset_after_us = 0
        self.algorithm = ""
        self.delay_us = 0
        self.lease = b""
        self.over_limit = False


class CheckResultMsg:
    __slots__ = ("allowed", "status", "rules", "error", "delay_us")

    def __init__(self) -> None:
        self.allowed = False
        self.status = 0
        self.rules: List[RuleResultMsg] = []
        self.error = ""
        self.delay_us = 0


class ErrorMsg:
    __slots__ = ("code", "message")

    def __init__(self) -> None:
        self.code = 0
        self.message = ""


class ResetMsg:
    __slots__ = ("keys_reset", "rules")

    def __init__(self) -> None:
        self.keys_reset = 0
        self.rules: List[str] = []


class Response:
    """A decoded rlimit.v1.Response. `kind` names the oneof body that was set
    ("check", "status", "error", "members", "release", "reset") or is None."""

    __slots__ = ("id", "kind", "check", "status", "error", "members", "release", "reset")

    def __init__(self) -> None:
        self.id = 0
        self.kind: Optional[str] = None
        self.check: List[CheckResultMsg] = []
        self.status: Optional[DaemonStatus] = None
        self.error: Optional[ErrorMsg] = None
        self.members: Optional[ClusterMembers] = None
        self.release: List[int] = []
        self.reset: Optional[ResetMsg] = None


def _rule_result(data: memoryview) -> RuleResultMsg:
    r = RuleResultMsg()
    for number, wt, value in _fields(data):
        if number == 1:
            r.name = _as_str(wt, value)
        elif number == 2:
            r.allowed = _as_int(wt, value) != 0
        elif number == 3:
            r.limit = _as_int(wt, value)
        elif number == 4:
            r.period_ms = _as_int(wt, value)
        elif number == 5:
            r.burst = _as_int(wt, value)
        elif number == 6:
            r.remaining = _as_int(wt, value)
        elif number == 7:
            r.retry_after_us = _int64(_as_int(wt, value))
        elif number == 8:
            r.reset_after_us = _int64(_as_int(wt, value))
        elif number == 9:
            r.algorithm = _as_str(wt, value)
        elif number == 10:
            r.delay_us = _int64(_as_int(wt, value))
        elif number == 11:
            r.lease = _as_bytes(wt, value)
        elif number == 12:
            r.over_limit = _as_int(wt, value) != 0
    return r


def _check_result(data: memoryview) -> CheckResultMsg:
    c = CheckResultMsg()
    for number, wt, value in _fields(data):
        if number == 1:
            c.allowed = _as_int(wt, value) != 0
        elif number == 2:
            c.status = _as_int(wt, value)
        elif number == 3:
            c.rules.append(_rule_result(_as_view(wt, value)))
        elif number == 4:
            c.error = _as_str(wt, value)
        elif number == 5:
            c.delay_us = _int64(_as_int(wt, value))
    return c


def _check_response(data: memoryview) -> List[CheckResultMsg]:
    return [
        _check_result(_as_view(wt, value)) for number, wt, value in _fields(data) if number == 1
    ]


def _rule_info(data: memoryview) -> RuleInfo:
    info = RuleInfo()
    for number, wt, value in _fields(data):
        if number == 1:
            info.name = _as_str(wt, value)
        elif number == 2:
            info.algorithm = _as_str(wt, value)
        elif number == 3:
            info.limit = _as_int(wt, value)
        elif number == 4:
            info.period_ms = _as_int(wt, value)
        elif number == 5:
            info.burst = _as_int(wt, value)
        elif number == 6:
            info.match = _as_str(wt, value)
        elif number == 7:
            info.overrides = _as_int(wt, value) & 0xFFFFFFFF
    return info


def _status_response(data: memoryview) -> DaemonStatus:
    status = DaemonStatus()
    for number, wt, value in _fields(data):
        if number == 1:
            status.node_id = _as_str(wt, value)
        elif number == 2:
            status.version = _as_str(wt, value)
        elif number == 3:
            status.uptime_ms = _as_int(wt, value)
        elif number == 4:
            status.keys = _as_int(wt, value)
        elif number == 5:
            status.max_keys = _as_int(wt, value)
        elif number == 6:
            status.rules.append(_rule_info(_as_view(wt, value)))
        elif number == 7:
            name, count = "", 0
            for n, w, v in _fields(_as_view(wt, value)):
                if n == 1:
                    name = _as_str(w, v)
                elif n == 2:
                    count = _as_int(w, v)
            status.counters[name] = count
        elif number == 8:
            status.config_source = _as_str(wt, value)
    return status


def _member(data: memoryview) -> ClusterMember:
    m = ClusterMember()
    for number, wt, value in _fields(data):
        if number == 1:
            m.node_id = _as_str(wt, value)
        elif number == 2:
            m.address = _as_str(wt, value)
        elif number == 3:
            m.state = _as_str(wt, value)
        elif number == 4:
            m.incarnation = _as_int(wt, value)
        elif number == 5:
            m.seq = _as_int(wt, value)
        elif number == 6:
            m.last_heard_ms_ago = _int64(_as_int(wt, value))
        elif number == 7:
            m.self = _as_int(wt, value) != 0
    return m


def _members_response(data: memoryview) -> ClusterMembers:
    members = ClusterMembers()
    for number, wt, value in _fields(data):
        if number == 1:
            members.cluster = _as_str(wt, value)
        elif number == 2:
            members.mode = _as_str(wt, value)
        elif number == 3:
            members.members.append(_member(_as_view(wt, value)))
    return members


def _error(data: memoryview) -> ErrorMsg:
    error = ErrorMsg()
    for number, wt, value in _fields(data):
        if number == 1:
            error.code = _as_int(wt, value)
        elif number == 2:
            error.message = _as_str(wt, value)
    return error


def _release_response(data: memoryview) -> List[int]:
    statuses: List[int] = []
    for number, wt, value in _fields(data):
        if number == 1:
            statuses.extend(_repeated_varints(wt, value))
    return statuses


def _reset_response(data: memoryview) -> ResetMsg:
    reset = ResetMsg()
    for number, wt, value in _fields(data):
        if number == 1:
            reset.keys_reset = _as_int(wt, value)
        elif number == 2:
            reset.rules.append(_as_str(wt, value))
    return reset


_BODIES: Dict[int, Tuple[str, Callable[[memoryview], object]]] = {
    2: ("check", _check_response),
    3: ("status", _status_response),
    4: ("error", _error),
    5: ("members", _members_response),
    6: ("release", _release_response),
    7: ("reset", _reset_response),
}


def decode_response(payload: bytes) -> Response:
    """Decodes one rlimit.v1.Response payload (raises DecodeError)."""
    response = Response()
    for number, wt, value in _fields(memoryview(payload)):
        if number == 1:
            response.id = _as_int(wt, value)
        elif number in _BODIES:
            kind, decode = _BODIES[number]
            # oneof: the last body on the wire wins, as in protobuf.
            response.kind = kind
            setattr(response, kind, decode(_as_view(wt, value)))
    return response
