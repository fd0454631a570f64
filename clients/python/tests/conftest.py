"""Test harness: a real rlimitd (path in $RLIMITD) on a temporary socket with
a temporary config, and a scripted fake daemon for what a real one will not
do on demand (stay silent, answer late, answer garbage).

Every wait is bounded in count and time; every daemon is killed and every
temporary directory removed when its fixture ends."""
from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Callable, Iterator, List, Optional

import pytest

# The repository's tests/support: sanitizer_report, which fails a test whose
# daemon reported an ASan/LSan/UBSan/TSan error (build-asan, build-tsan).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "tests" / "support"))
from sanitizer_report import assert_no_sanitizer_report  # noqa: E402

CONFIG = """
[daemon]
socket = "{socket}"
log_level = "warn"
max_checks_per_frame = 64
shutdown_grace = "1s"
allow_reset = {allow_reset}

# 5 at once per user, then one a second.
[[rule]]
name = "per-user"
match = {{ user = {{ each = true }} }}
limit = 60
period = "1m"
burst = 5

# At most 2 jobs in flight per job key.
[[rule]]
name = "jobs"
match = {{ job = {{ each = true }} }}
algorithm = "concurrency"
limit = 2
lease_ttl = "1m"

# 10 a second, no burst: a reservation waits 100 ms per token.
[[rule]]
name = "paced"
match = {{ paced = {{ each = true }} }}
limit = 10
period = "1s"
burst = 1

# A shaper: plain checks are delayed to 10 a second.
[[rule]]
name = "shaped"
match = {{ shaped = {{ each = true }} }}
algorithm = "leaky_bucket"
shaper = true
limit = 10
period = "1s"
burst = 5
max_delay = "10s"

[[exempt]]
match = {{ user = "healthcheck" }}
"""


def rlimitd_path() -> str:
    path = os.environ.get("RLIMITD", "")
    if not path:
        pytest.fail("RLIMITD is not set: point it at the rlimitd binary", pytrace=False)
    if not os.access(path, os.X_OK):
        pytest.fail(f"RLIMITD={path} is not an executable file", pytrace=False)
    return path


def can_connect(path: str) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(0.5)
        sock.connect(path)
        return True
    except OSError:
        return False
    finally:
        sock.close()


class Daemon:
    """One rlimitd process on `directory`/`name`.sock."""

    def __init__(self, binary: str, directory: str, name: str = "rlimitd", allow_reset: bool = True):
        self.binary = binary
        self.socket = os.path.join(directory, name + ".sock")
        self.config = os.path.join(directory, name + ".toml")
        self.log = os.path.join(directory, name + ".log")
        with open(self.config, "w") as out:
            out.write(
                CONFIG.format(socket=self.socket, allow_reset="true" if allow_reset else "false")
            )
        self.process: Optional[subprocess.Popen] = None

    def start(self, timeout: float = 10.0) -> None:
        assert self.process is None or self.process.poll() is not None
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [self.binary, "--config", self.config], stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        for _ in range(int(timeout / 0.01) + 1):
            if self.process.poll() is not None:
                raise RuntimeError(f"rlimitd exited with {self.process.returncode}: {self.log_text()}")
            if can_connect(self.socket):
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        self.kill()
        raise RuntimeError(f"rlimitd did not listen within {timeout} s: {self.log_text()}")

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL if it has not exited within `timeout`."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        return self.process.returncode

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)

    def log_text(self) -> str:
        try:
            with open(self.log, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""


@pytest.fixture(scope="session")
def workdir() -> Iterator[str]:
    # Unix socket paths are limited to 107 bytes: keep the directory short.
    directory = tempfile.mkdtemp(prefix="rlimit-py.", dir="/tmp")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon(workdir: str) -> Iterator[Daemon]:
    """One rlimitd shared by the tests that do not stop it (each uses keys of its own)."""
    d = Daemon(rlimitd_path(), workdir, "shared")
    d.start()
    yield d
    code = d.stop()
    assert_no_sanitizer_report([d.log])
    assert code == 0, f"rlimitd exited with {code}: {d.log_text()}"


@pytest.fixture
def own_daemon(workdir: str) -> Iterator[Callable[..., Daemon]]:
    """Starts daemons of the test's own, stopped when the test ends (SIGTERM, so
    a sanitized daemon runs its exit-time leak check; SIGKILL after 10 s)."""
    started: List[Daemon] = []

    def make(**kwargs: object) -> Daemon:
        d = Daemon(rlimitd_path(), workdir, f"own-{uuid.uuid4().hex[:8]}", **kwargs)  # type: ignore[arg-type]
        d.start()
        started.append(d)
        return d

    yield make
    for d in started:
        d.stop()
    assert_no_sanitizer_report(d.log for d in started)


@pytest.fixture
def key() -> str:
    """A descriptor value no other test uses."""
    return uuid.uuid4().hex


@pytest.fixture
def missing_socket(workdir: str) -> str:
    return os.path.join(workdir, f"nobody-{uuid.uuid4().hex[:8]}.sock")


# ---------------------------------------------------------------- fake daemon


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _len_field(number: int, body: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(body)) + body


def check_reply(request_id: int, allowed: bool) -> bytes:
    """A framed Response{id, check{results{allowed}}} (no rules)."""
    result = (_varint(1 << 3) + _varint(1)) if allowed else b""
    payload = _varint(1 << 3) + _varint(request_id) + _len_field(2, _len_field(1, result))
    return struct.pack(">I", len(payload)) + payload


def error_reply(request_id: int, code: int, message: str) -> bytes:
    error = _varint(1 << 3) + _varint(code) + _len_field(2, message.encode())
    payload = (_varint(1 << 3) + _varint(request_id) if request_id else b"") + _len_field(4, error)
    return struct.pack(">I", len(payload)) + payload


def read_request_id(conn: socket.socket) -> Optional[int]:
    """Reads one request frame; returns its id (field 2), None at EOF."""
    header = b""
    while len(header) < 4:
        chunk = conn.recv(4 - len(header))
        if not chunk:
            return None
        header += chunk
    (length,) = struct.unpack(">I", header)
    payload = b""
    while len(payload) < length:
        chunk = conn.recv(length - len(payload))
        if not chunk:
            return None
        payload += chunk
    # Request{version(1), id(2), ...}: both varints, first in the frame.
    pos, request_id = 0, 0
    while pos < len(payload):
        tag = payload[pos]
        pos += 1
        value, shift = 0, 0
        while True:
            byte = payload[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if tag == (2 << 3):
            request_id = value
        if tag == (1 << 3):
            continue
        if tag != (2 << 3):
            break
    return request_id


class FakeDaemon:
    """A Unix socket server whose answer to the n-th connection (0-based) is
    scripted: handler(conn, n) runs in a thread per connection. Records how
    each connection ended."""

    def __init__(self, path: str, handler: Callable[[socket.socket, int], None]):
        self.path = path
        self.handler = handler
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(path)
        self.server.listen(16)
        self.server.settimeout(0.1)
        self.connections = 0
        self.closed_by_client = threading.Event()
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []
        self._accept = threading.Thread(target=self._run, daemon=True)
        self._accept.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            n = self.connections
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn, n), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: socket.socket, n: int) -> None:
        conn.settimeout(5)
        try:
            self.handler(conn, n)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self.server.close()
        self._accept.join(5)
        for thread in self._threads:
            thread.join(5)
        try:
            os.unlink(self.path)
        except OSError:
            pass


def wait_for_eof(conn: socket.socket, event: threading.Event) -> None:
    """Reads until the client closes (bounded by the socket's timeout)."""
    while conn.recv(4096):
        pass
    event.set()


@pytest.fixture
def fake_daemon(workdir: str) -> Iterator[Callable[[Callable[[socket.socket, int], None]], FakeDaemon]]:
    made: List[FakeDaemon] = []

    def make(handler: Callable[[socket.socket, int], None]) -> FakeDaemon:
        fake = FakeDaemon(os.path.join(workdir, f"fake-{uuid.uuid4().hex[:8]}.sock"), handler)
        made.append(fake)
        return fake

    yield make
    for fake in made:
        fake.close()
