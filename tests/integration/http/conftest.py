"""Harness for the HTTP face's tests: a real rlimitd (path in $RLIMITD) with an
[http] listener on a free loopback port and its Unix socket in a temporary
directory; a real nginx (path in $NGINX) where a test asks for one.

Every wait is bounded in count and time; every process is killed and every
temporary directory removed when its fixture ends."""
from __future__ import annotations

import http.client
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Dict, Iterator, Optional, Tuple

import pytest

# tests/support: sanitizer_report, which fails a test whose daemon reported
# an ASan/LSan/UBSan/TSan error (build-asan, build-tsan).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "support"))
from sanitizer_report import assert_no_sanitizer_report  # noqa: E402
from free_port import free_port  # noqa: E402

START_TIMEOUT_S = 10.0


def wait_for_port(port: int, process: subprocess.Popen, log_path: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            with open(log_path, encoding="utf-8", errors="replace") as log:
                raise RuntimeError(f"process exited with {process.returncode}:\n{log.read()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {START_TIMEOUT_S} s")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


class Daemon:
    """A running rlimitd with an HTTP listener."""

    def __init__(self, directory: str, rules: str, http_extra: str = "") -> None:
        self.directory = directory
        self.http_port = free_port()
        self.socket = os.path.join(directory, "rlimitd.sock")
        self.config = os.path.join(directory, "rlimitd.toml")
        self.log = os.path.join(directory, "rlimitd.log")
        with open(self.config, "w", encoding="utf-8") as f:
            f.write(
                f'[daemon]\nsocket = "{self.socket}"\nlog_level = "info"\n'
                f'shutdown_grace = "1s"\n\n'
                f'[http]\nlisten = "127.0.0.1:{self.http_port}"\n{http_extra}\n\n{rules}\n'
            )
        self.process = subprocess.Popen(
            [os.environ["RLIMITD"], "--config", self.config],
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        wait_for_port(self.http_port, self.process, self.log)

    def request(self, method: str, target: str, body: Optional[str] = None,
                headers: Optional[Dict[str, str]] = None) -> Tuple[int, Dict[str, str], str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=5)
        try:
            connection.request(method, target, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read().decode()
        finally:
            connection.close()

    def counters(self) -> Dict[str, int]:
        """The daemon's status counters, through rlimitctl."""
        import json
        out = subprocess.run([os.environ["RLIMITCTL"], "--socket", self.socket, "status",
                              "--json"], capture_output=True, text=True, timeout=10, check=True)
        status = json.loads(out.stdout)
        return {entry["name"]: int(entry["value"]) for entry in status["counters"]}


@pytest.fixture
def tmpdir_clean() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="rlimit-http-")
    os.chmod(directory, 0o755)  # nginx workers read and write below it
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def start_daemon(tmpdir_clean: str):
    daemons = []

    def start(rules: str, http_extra: str = "") -> Daemon:
        directory = os.path.join(tmpdir_clean, f"d{len(daemons)}")
        os.mkdir(directory)
        daemon = Daemon(directory, rules, http_extra)
        daemons.append(daemon)
        return daemon

    yield start
    for daemon in daemons:
        stop(daemon.process)
    assert_no_sanitizer_report(daemon.log for daemon in daemons)
