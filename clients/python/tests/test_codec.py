"""The hand-written codec against the documented bytes and against protobuf
itself: client.proto compiled by protoc at test time and loaded with
python3-protobuf (nothing generated is committed)."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tempfile

import pytest

from rlimit import CheckRequest, InlineLimit, Mode
from rlimit import _wire

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PROTO_DIR = os.path.join(REPO, "proto")


@pytest.fixture(scope="module")
def pb():
    protoc = os.environ.get("PROTOC") or shutil.which("protoc")
    if not protoc:
        pytest.fail("protoc not found (set PROTOC)", pytrace=False)
    out = tempfile.mkdtemp(prefix="rlimit-pb.")
    try:
        subprocess.run(
            [protoc, f"-I{PROTO_DIR}", f"--python_out={out}", "rlimit/v1/client.proto"],
            check=True,
            timeout=60,
        )
        # Loaded by path under a name of its own: "rlimit" is this package.
        path = os.path.join(out, "rlimit", "v1", "client_pb2.py")
        spec = importlib.util.spec_from_file_location("rlimit_test_client_pb2", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_the_worked_example_of_docs_protocol_md():
    payload = _wire.encode_check_request(7, [CheckRequest.of({"user": "alice"})])
    assert payload == bytes.fromhex("08 01 10 07 1a 11 0a 0f 0a 0d 0a 04 75 73 65 72 12 05 61 6c 69 63 65")
    assert _wire.frame(payload)[:4] == bytes.fromhex("00 00 00 17")


CHECKS = [
    CheckRequest.of({}),
    CheckRequest.of({"user": "alice", "path": "/api/é"}),
    CheckRequest.of({"user": "bob"}, cost=0),
    CheckRequest.of({"user": "bob"}, cost=(1 << 50)),
    CheckRequest.of({"k": ""}, mode=Mode.PEEK),
    CheckRequest.of({"k": "v"}, mode=Mode.RESERVE, max_wait_us=0),
    CheckRequest.of({"k": "v"}, max_wait_us=-1),
    CheckRequest.of({"k": "v"}, max_wait_us=1 << 60),
    CheckRequest.of({}, inline_limit=InlineLimit("i", 10, 250, 3)),
    CheckRequest.of({}, inline_limit=InlineLimit("i", 0, 0, 0)),
]


@pytest.mark.parametrize("check", CHECKS)
def test_requests_are_the_bytes_protobuf_writes(pb, check):
    mine = _wire.encode_check_request(12345678901, [check, check])
    theirs = pb.Request()
    theirs.ParseFromString(mine)
    assert theirs.version == pb.VERSION_1 and theirs.id == 12345678901
    assert theirs.WhichOneof("body") == "check" and len(theirs.check.checks) == 2
    parsed = theirs.check.checks[0]
    assert [(d.key, d.value) for d in parsed.descriptors] == list(check.descriptors)
    assert parsed.HasField("cost") == (check.cost != 1)
    assert (parsed.cost if parsed.HasField("cost") else 1) == check.cost
    assert parsed.mode == int(check.mode)
    assert parsed.HasField("max_wait_us") == (check.max_wait_us is not None)
    if check.max_wait_us is not None:
        assert parsed.max_wait_us == check.max_wait_us
    if check.inline_limit is not None:
        limit = check.inline_limit
        assert (parsed.inline_limit.key, parsed.inline_limit.limit, parsed.inline_limit.period_ms,
                parsed.inline_limit.burst) == (limit.key, limit.limit, limit.period_ms, limit.burst)
    # Byte for byte: protobuf writes fields in number order, as the codec does.
    assert theirs.SerializeToString() == mine


def test_other_requests_are_the_bytes_protobuf_writes(pb):
    status = pb.Request(version=pb.VERSION_1, id=3)
    status.status.SetInParent()
    assert _wire.encode_status_request(3) == status.SerializeToString()
    members = pb.Request(version=pb.VERSION_1, id=4)
    members.members.SetInParent()
    assert _wire.encode_members_request(4) == members.SerializeToString()
    release = pb.Request(version=pb.VERSION_1, id=5)
    release.release.leases.extend([b"\x00\xff", b""])
    release.release.extend = True
    assert _wire.encode_release_request(5, [b"\x00\xff", b""], True) == release.SerializeToString()
    reset = pb.Request(version=pb.VERSION_1, id=6)
    reset.reset.descriptors.add(key="user", value="alice")
    reset.reset.inline_limit.key = "i"
    reset.reset.inline_limit.limit = 2
    assert (
        _wire.encode_reset_request(6, [("user", "alice")], InlineLimit("i", 2, 0, 0))
        == reset.SerializeToString()
    )


def test_check_responses_decode_as_protobuf_wrote_them(pb):
    response = pb.Response(id=(1 << 64) - 1)
    result = response.check.results.add(allowed=True, status=pb.CheckResult.KEY_TABLE_FULL,
                                         error="e", delay_us=(1 << 62))
    result.rules.add(name="r", allowed=True, limit=1 << 50, period_ms=1, burst=2, remaining=3,
                     retry_after_us=-1, reset_after_us=-1, algorithm="gcra", delay_us=-2,
                     lease=b"\x00\x01lease", over_limit=True)
    response.check.results.add()  # all defaults
    decoded = _wire.decode_response(response.SerializeToString())
    assert decoded.id == (1 << 64) - 1 and decoded.kind == "check"
    first, second = decoded.check
    assert (first.allowed, first.status, first.error, first.delay_us) == (True, 3, "e", 1 << 62)
    rule = first.rules[0]
    assert (rule.name, rule.allowed, rule.limit, rule.period_ms, rule.burst, rule.remaining) == (
        "r", True, 1 << 50, 1, 2, 3)
    assert (rule.retry_after_us, rule.reset_after_us, rule.delay_us) == (-1, -1, -2)
    assert (rule.algorithm, rule.lease, rule.over_limit) == ("gcra", b"\x00\x01lease", True)
    assert (second.allowed, second.status, second.rules, second.error) == (False, 0, [], "")


def test_other_responses_decode_as_protobuf_wrote_them(pb):
    release = pb.Response(id=1)
    release.release.statuses.extend([0, 1, 2, 3, 7])  # proto3 packs these
    assert _wire.decode_response(release.SerializeToString()).release == [0, 1, 2, 3, 7]
    # Unpacked on the wire (as an older writer might): the same statuses.
    unpacked = bytes.fromhex("0801 3208 0800 0801 0802 0803")
    assert _wire.decode_response(unpacked).release == [0, 1, 2, 3]

    error = pb.Response(id=2)
    error.error.code = pb.Error.NOT_ALLOWED
    error.error.message = "no"
    decoded = _wire.decode_response(error.SerializeToString())
    assert decoded.kind == "error" and (decoded.error.code, decoded.error.message) == (8, "no")

    reset = pb.Response(id=3)
    reset.reset.keys_reset = 2
    reset.reset.rules.extend(["a", "b"])
    decoded = _wire.decode_response(reset.SerializeToString())
    assert (decoded.reset.keys_reset, decoded.reset.rules) == (2, ["a", "b"])

    status = pb.Response(id=4)
    s = status.status
    s.node_id, s.version, s.uptime_ms, s.keys, s.max_keys, s.config_source = "n", "v", 5, 6, 7, "c"
    s.rules.add(name="r", algorithm="token_bucket", limit=1, period_ms=2, burst=3, match="m",
                overrides=4)
    s.counters.add(name="checks", value=9)
    s.counters.add(name="allowed", value=8)
    decoded = _wire.decode_response(status.SerializeToString()).status
    assert (decoded.node_id, decoded.version, decoded.uptime_ms, decoded.keys, decoded.max_keys,
            decoded.config_source) == ("n", "v", 5, 6, 7, "c")
    r = decoded.rules[0]
    assert (r.name, r.algorithm, r.limit, r.period_ms, r.burst, r.match, r.overrides) == (
        "r", "token_bucket", 1, 2, 3, "m", 4)
    assert list(decoded.counters.items()) == [("checks", 9), ("allowed", 8)]

    members = pb.Response(id=5)
    members.members.cluster, members.members.mode = "c", "gossip"
    members.members.members.add(node_id="a", address="h:1", state="suspect", incarnation=2, seq=3,
                                last_heard_ms_ago=-1, self=True)
    decoded = _wire.decode_response(members.SerializeToString()).members
    m = decoded.members[0]
    assert (decoded.cluster, decoded.mode) == ("c", "gossip")
    assert (m.node_id, m.address, m.state, m.incarnation, m.seq, m.last_heard_ms_ago, m.self) == (
        "a", "h:1", "suspect", 2, 3, -1, True)


def test_unknown_fields_are_skipped():
    # Response{id: 9, field 15 fixed64, field 16 fixed32, field 17 varint,
    # field 18 bytes, check{results{allowed, field 99 bytes}}}
    payload = (
        bytes.fromhex("0809")
        + bytes.fromhex("79") + bytes(8)
        + bytes.fromhex("8501") + bytes(4)
        + bytes.fromhex("880101")
        + bytes.fromhex("9201") + b"\x02hi"
        + bytes.fromhex("1209 0a07 0801 9a06 0201 02")
    )
    decoded = _wire.decode_response(payload)
    assert decoded.id == 9 and decoded.kind == "check" and decoded.check[0].allowed


@pytest.mark.parametrize(
    "payload",
    [
        bytes.fromhex("08"),  # truncated varint
        bytes.fromhex("12 05 0a"),  # length beyond the payload
        bytes.fromhex("08 ff ff ff ff ff ff ff ff ff ff 01"),  # varint of 11 bytes
        bytes.fromhex("0b"),  # a group (wire type 3)
        bytes.fromhex("00 01"),  # field number 0
        bytes.fromhex("1203 0a01 80"),  # a check result that is itself truncated
        bytes.fromhex("2204 1202 ff fe"),  # an error message that is not UTF-8
    ],
)
def test_garbage_raises_decode_error(payload):
    with pytest.raises(_wire.DecodeError):
        _wire.decode_response(payload)
