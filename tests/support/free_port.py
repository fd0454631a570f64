"""Loopback ports for the Python tests, chosen as tests/support/daemon_process.cc's
free_port() chooses them: below the kernel's ephemeral range, so no socket bound
to port 0 and no outgoing connection of any process (another test's client)
takes one between the choice and the daemon's bind, and never the same port
twice in one process. Another test process may still pick it, rarely."""

from __future__ import annotations

import random
import socket
import threading

TEST_PORT_FLOOR = 20_000  # the range's floor; its top is the ephemeral floor
ATTEMPTS = 50

_lock = threading.Lock()
_next = None


def _ephemeral_floor() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
            return low if low > 0 else 32_768
    except (OSError, ValueError, IndexError):
        return 32_768


def _bindable(port: int) -> bool:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A loopback port free a moment ago for both TCP and UDP (`kind` is
    accepted for the callers that name the one they use)."""
    del kind
    global _next
    top = _ephemeral_floor()
    span = top - TEST_PORT_FLOOR
    if span < 1_000:  # no room below the ephemeral range: the kernel's choice
        for _ in range(ATTEMPTS):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if _bindable(port):
                return port
        raise RuntimeError("no free loopback port")
    with _lock:
        if _next is None:
            _next = random.SystemRandom().randrange(span)
        for _ in range(ATTEMPTS):
            port = TEST_PORT_FLOOR + _next
            _next = (_next + 1) % span
            if _bindable(port):
                return port
    raise RuntimeError(f"no free loopback port in {TEST_PORT_FLOOR}..{top - 1}")
