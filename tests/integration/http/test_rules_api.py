"""The rules API over HTTP ([http] rules_api): GET and PUT /v1/rules, with and
without the bearer token (401, counted), located errors, and an invalid PUT
that changes nothing. A real rlimitd; see conftest.py."""
from __future__ import annotations

import json
import os

RULES = """
[[rule]]
name = "per-user"
match = { user = { each = true } }
limit = 2
period = "1h"
"""

NEW_RULES = """[[rule]]
name = "per-user"
match = { user = { each = true } }
limit = 2
period = "1h"

[[rule]]
name = "per-zone"
match = { zone = { each = true } }
limit = 1
period = "1h"
"""

BAD_RULES = """[[rule]]
name = "per-zone"
match = { zone = { each = true } }
limit = -1
period = "1h"
"""


def token_daemon(start_daemon, tmpdir_clean):
    token_file = os.path.join(tmpdir_clean, "token")
    with open(token_file, "w", encoding="utf-8") as f:
        f.write("s3cret-token\n")
    return start_daemon(RULES, f'rules_api = true\nrules_token_file = "{token_file}"\n')


def test_rules_api_is_off_unless_asked(start_daemon):
    daemon = start_daemon(RULES)
    status, _, _ = daemon.request("GET", "/v1/rules")
    assert status == 404


def test_get_and_put_with_token(start_daemon, tmpdir_clean):
    daemon = token_daemon(start_daemon, tmpdir_clean)
    auth = {"Authorization": "Bearer s3cret-token"}

    status, headers, _ = daemon.request("GET", "/v1/rules")
    assert status == 401
    assert headers.get("WWW-Authenticate") == "Bearer"
    status, _, _ = daemon.request("GET", "/v1/rules", headers={"Authorization": "Bearer wrong"})
    assert status == 401
    status, _, _ = daemon.request("PUT", "/v1/rules", body=NEW_RULES)
    assert status == 401
    assert daemon.counters()["rules_http_unauthorized"] == 3

    status, _, body = daemon.request("GET", "/v1/rules", headers=auth)
    assert status == 200
    shown = json.loads(body)
    assert shown["version"] == 0
    assert len(shown["digest"]) == 64
    assert "per-user" in shown["text"]

    # Consume the per-user limit before the apply: an unchanged rule keeps it.
    for expected in (200, 200, 429):
        status, _, _ = daemon.request("GET", "/v1/check?user=alice")
        assert status == expected

    status, _, body = daemon.request("PUT", "/v1/rules", body=NEW_RULES, headers=auth)
    assert status == 200, body
    applied = json.loads(body)
    assert applied["status"] == "ok"
    assert applied["version"] == 1
    assert applied["kept"] == 1 and applied["added"] == 1
    status, _, _ = daemon.request("GET", "/v1/check?user=alice")
    assert status == 429  # state kept
    for expected in (200, 429):
        status, _, _ = daemon.request("GET", "/v1/check?zone=eu")
        assert status == expected

    status, _, body = daemon.request("GET", "/v1/rules", headers=auth)
    shown = json.loads(body)
    assert shown["version"] == 1
    assert shown["text"] == NEW_RULES


def test_invalid_put_changes_nothing(start_daemon, tmpdir_clean):
    daemon = token_daemon(start_daemon, tmpdir_clean)
    auth = {"Authorization": "Bearer s3cret-token"}
    _, _, before = daemon.request("GET", "/v1/rules", headers=auth)
    status, _, body = daemon.request("PUT", "/v1/rules", body=BAD_RULES, headers=auth)
    assert status == 400
    answer = json.loads(body)
    assert answer["status"] == "invalid"
    assert answer["version"] == 0
    assert answer["errors"][0]["line"] == 4
    assert answer["errors"][0]["column"] > 0
    assert "limit" in answer["errors"][0]["message"]
    _, _, after = daemon.request("GET", "/v1/rules", headers=auth)
    assert json.loads(after) == json.loads(before)
    # The old rules still decide.
    status, _, _ = daemon.request("GET", "/v1/check?zone=eu")
    assert status == 200
    status, _, _ = daemon.request("GET", "/v1/check?zone=eu")
    assert status == 200


def test_no_token_file_means_no_token(start_daemon):
    daemon = start_daemon(RULES, "rules_api = true\n")
    status, _, body = daemon.request("GET", "/v1/rules")
    assert status == 200
    assert json.loads(body)["version"] == 0
    status, headers, _ = daemon.request("DELETE", "/v1/rules")
    assert status == 405
