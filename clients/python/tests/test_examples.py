"""The WSGI and ASGI middleware examples (clients/python/examples) against a
real rlimitd: the per-ip rule there is replaced by the test config's
per-user rule through the descriptors hook."""
from __future__ import annotations

import asyncio
import importlib.util
import os

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def load(name):
    spec = importlib.util.spec_from_file_location(f"rlimit_example_{name}",
                                                  os.path.join(EXAMPLES, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wsgi_middleware(daemon, key):
    wsgi = load("wsgi_middleware")
    app = wsgi.RateLimitMiddleware(wsgi.hello, daemon.socket, descriptors=lambda env: {
        "user": env["HTTP_X_USER"]}, timeout=5.0)
    answers = []
    for _ in range(6):
        seen = {}

        def start_response(status, headers, exc_info=None):
            seen["status"], seen["headers"] = status, dict(headers)

        body = b"".join(app({"HTTP_X_USER": key, "PATH_INFO": "/"}, start_response))
        answers.append((seen["status"], seen["headers"], body))
    assert [a[0] for a in answers] == ["200 OK"] * 5 + ["429 Too Many Requests"]
    status, headers, body = answers[0]
    assert body == b"hello\n" and headers["Content-Type"] == "text/plain"
    assert headers["RateLimit-Policy"] == '"per-user";q=60;w=60'
    assert headers["RateLimit"] == '"per-user";r=4;t=1'
    assert "Retry-After" not in headers
    status, headers, body = answers[5]
    assert headers["RateLimit"].startswith('"per-user";r=0;t=')
    assert headers["Retry-After"] == "1"


def test_asgi_middleware(daemon, key):
    asgi = load("asgi_middleware")

    async def main():
        app = asgi.RateLimitMiddleware(asgi.hello, daemon.socket, descriptors=lambda scope: {
            "user": dict(scope["headers"])[b"x-user"].decode()}, timeout=5.0)
        answers = []
        for _ in range(6):
            sent = []

            async def send(message):
                sent.append(message)

            async def receive():
                return {"type": "http.request", "body": b"", "more_body": False}

            scope = {"type": "http", "path": "/", "headers": [(b"x-user", key.encode())]}
            await app(scope, receive, send)
            answers.append((sent[0]["status"], dict(sent[0]["headers"]), sent[1]["body"]))
        await app.client.close()
        return answers

    answers = asyncio.run(asyncio.wait_for(main(), 30))
    assert [a[0] for a in answers] == [200] * 5 + [429]
    status, headers, body = answers[0]
    assert body == b"hello\n"
    assert headers[b"ratelimit-policy"] == b'"per-user";q=60;w=60'
    assert headers[b"ratelimit"] == b'"per-user";r=4;t=1'
    assert b"retry-after" not in headers
    status, headers, body = answers[5]
    assert headers[b"retry-after"] == b"1"
