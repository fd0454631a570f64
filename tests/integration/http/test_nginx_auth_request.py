"""A real nginx with auth_request in front of an upstream, asking a real
rlimitd through config/examples/nginx-auth-request.conf (the file the docs
tell users to copy): the limit holds through nginx, denials reach the client
as 429 with Retry-After, and the IETF fields arrive on both answers."""
from __future__ import annotations

import http.client
import os
import subprocess

from conftest import free_port, stop, wait_for_port

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "..", "config", "examples", "nginx-auth-request.conf")

RULES = """
[[rule]]
name = "per-user-api"
match = { route = "api", user = { each = true } }
limit = 4
period = "1m"
"""


def nginx_config(directory: str, front: int, upstream: int, rlimit: int) -> str:
    with open(EXAMPLE, encoding="utf-8") as f:
        server = (f.read().replace("@FRONT_PORT@", str(front))
                  .replace("@UPSTREAM_PORT@", str(upstream))
                  .replace("@RLIMIT_PORT@", str(rlimit)))
    user = "user root;\n" if os.geteuid() == 0 else ""
    temp = "\n".join(f"    {name}_temp_path {directory}/{name};"
                     for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""{user}worker_processes 1;
error_log {directory}/error.log info;
pid {directory}/nginx.pid;
events {{ worker_connections 64; }}
http {{
    access_log off;
{temp}
    server {{
        listen 127.0.0.1:{upstream};
        location / {{ return 200 "hello from upstream\\n"; }}
    }}
{server}
}}
"""


def get(port: int, path: str, user: str):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", path, headers={"X-User": user} if user else {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        connection.close()


def test_nginx_auth_request_holds_the_limit(start_daemon, tmpdir_clean):
    daemon = start_daemon(RULES)
    front, upstream = free_port(), free_port()
    directory = os.path.join(tmpdir_clean, "nginx")
    os.mkdir(directory)
    os.chmod(directory, 0o755)
    config = os.path.join(directory, "nginx.conf")
    with open(config, "w", encoding="utf-8") as f:
        f.write(nginx_config(directory, front, upstream, daemon.http_port))
    log = os.path.join(directory, "stdout.log")
    # nginx reads $NGINX as a list of inherited sockets: hence NGINX_BIN, and
    # an environment without NGINX.
    environment = {k: v for k, v in os.environ.items() if k != "NGINX"}
    nginx = subprocess.Popen(
        [os.environ["NGINX_BIN"], "-p", directory, "-e", os.path.join(directory, "error.log"),
         "-c", config, "-g", "daemon off;"],
        stdout=open(log, "w"), stderr=subprocess.STDOUT, env=environment)
    try:
        wait_for_port(front, nginx, os.path.join(directory, "error.log"))
        answers = [get(front, "/orders", "alice") for _ in range(6)]
        assert [status for status, _, _ in answers] == [200] * 4 + [429] * 2
        status, headers, body = answers[0]
        assert body == "hello from upstream\n"
        assert headers["RateLimit-Policy"] == '"per-user-api";q=4;w=60'
        assert headers["RateLimit"].startswith('"per-user-api";r=3;t=')
        status, headers, body = answers[-1]
        assert body == "rate limited\n"
        assert headers["RateLimit"].startswith('"per-user-api";r=0;t=')
        assert 1 <= int(headers["Retry-After"]) <= 15
        # Another user has a bucket of their own; a request with no user
        # matches no per-user rule (the header is optional in the config).
        assert get(front, "/orders", "bob")[0] == 200
        assert get(front, "/orders", "")[0] == 200
        counters = daemon.counters()
        assert counters["http_checks"] == 8
        assert counters["http_denied"] == 2
    finally:
        stop(nginx)
        with open(os.path.join(directory, "error.log"), encoding="utf-8",
                  errors="replace") as f:
            errors = [line for line in f if "[emerg]" in line or "[alert]" in line]
        assert errors == []
