"""WSGI middleware: asks rlimitd about every request, answers 429 on a
denial, and adds the IETF RateLimit header fields (and Retry-After) to every
response.

    python3 wsgi_middleware.py /path/to/rlimitd.sock      # serves on :8000

Descriptors here are the client address and the path; adapt `descriptors`.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import rlimit

Environ = Dict[str, object]
StartResponse = Callable[..., object]
WsgiApp = Callable[[Environ, StartResponse], Iterable[bytes]]


def default_descriptors(environ: Environ) -> Dict[str, str]:
    return {"ip": str(environ.get("REMOTE_ADDR", "")), "path": str(environ.get("PATH_INFO", "/"))}


class RateLimitMiddleware:
    def __init__(
        self,
        app: WsgiApp,
        socket_path: Optional[str] = None,
        descriptors: Callable[[Environ], Dict[str, str]] = default_descriptors,
        timeout: float = 0.005,
        fail_mode: str = "open",
    ) -> None:
        self.app = app
        self.descriptors = descriptors
        self._options = dict(socket_path=socket_path, timeout=timeout, fail_mode=fail_mode)
        # A Client is not thread-safe; WSGI servers often are threaded.
        self._local = threading.local()

    def _client(self) -> rlimit.Client:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = rlimit.Client(**self._options)  # type: ignore[arg-type]
        return client

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        decision = self._client().check(self.descriptors(environ))
        headers = rlimit.ietf_headers(decision)
        if not decision.allowed:
            body = b"Too Many Requests\n"
            start_response(
                "429 Too Many Requests",
                [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))] + headers,
            )
            return [body]
        if decision.delay_us > 0:  # a shaper asked us to wait
            time.sleep(decision.delay_us / 1_000_000)

        def start(status: str, response_headers: List[Tuple[str, str]], exc_info=None):  # type: ignore[no-untyped-def]
            return start_response(status, list(response_headers) + headers, exc_info)

        return self.app(environ, start)


def hello(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello\n"]


if __name__ == "__main__":
    from wsgiref.simple_server import make_server

    app = RateLimitMiddleware(hello, sys.argv[1] if len(sys.argv) > 1 else None)
    make_server("127.0.0.1", 8000, app).serve_forever()
