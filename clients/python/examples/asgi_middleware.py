"""ASGI middleware: asks rlimitd (through one shared AsyncClient) about every
HTTP request, answers 429 on a denial, and adds the IETF RateLimit header
fields (and Retry-After) to every response.

    uvicorn asgi_middleware:app     # with RLIMIT_SOCKET=/path/to/rlimitd.sock

Descriptors here are the client address and the path; adapt `descriptors`.
"""
from __future__ import annotations

import asyncio
import os
from typing import Any, Awaitable, Callable, Dict, MutableMapping, Optional

import rlimit

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def default_descriptors(scope: Scope) -> Dict[str, str]:
    client = scope.get("client") or ("", 0)
    return {"ip": str(client[0]), "path": str(scope.get("path", "/"))}


class RateLimitMiddleware:
    def __init__(
        self,
        app: AsgiApp,
        socket_path: Optional[str] = None,
        descriptors: Callable[[Scope], Dict[str, str]] = default_descriptors,
        timeout: float = 0.005,
        fail_mode: str = "open",
    ) -> None:
        self.app = app
        self.descriptors = descriptors
        # One client for every request of the event loop: their checks share
        # one connection, in flight together.
        self.client = rlimit.AsyncClient(socket_path, timeout=timeout, fail_mode=fail_mode)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        decision = await self.client.check(self.descriptors(scope))
        headers = [(k.lower().encode(), v.encode()) for k, v in rlimit.ietf_headers(decision)]
        if not decision.allowed:
            body = b"Too Many Requests\n"
            await send({
                "type": "http.response.start",
                "status": 429,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", str(len(body)).encode())] + headers,
            })
            await send({"type": "http.response.body", "body": body})
            return
        if decision.delay_us > 0:  # a shaper asked us to wait
            await asyncio.sleep(decision.delay_us / 1_000_000)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def hello(scope: Scope, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello\n"})


app = RateLimitMiddleware(hello, os.environ.get("RLIMIT_SOCKET"))
