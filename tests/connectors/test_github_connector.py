"""The github connector: sha256= signatures, delivery-id replay protection, event mapping, PR comments."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

from cn_testkit import FakeApi, connector_bundle, free_port, gdn_run, post, probes, wait_for

SECRET = "gh-hook-secret"


def connection(port: int, api: str) -> str:
    return (
        "apiVersion: goondan.ai/v1\n"
        "kind: Connection\n"
        "metadata:\n"
        "  name: gh\n"
        "spec:\n"
        '  connectorRef: { kind: Connector, name: github, package: "@goondan/base" }\n'
        "  config:\n"
        f'    port: {{ value: "{port}" }}\n'
        f'    apiBase: {{ value: "{api}" }}\n'
        "  secrets:\n"
        "    webhookSecret: { valueFrom: { env: GH_SECRET } }\n"
        "    token: { value: ghp-test }\n"
        "  ingress:\n"
        "    rules:\n"
        "      - match: { event: github_push }\n"
        "        route: { agentRef: Agent/ops }\n"
    )


def signed(kind: str, payload: dict[str, Any], delivery: str, secret: str = SECRET) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(payload).encode()
    sig = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return body, {"X-Hub-Signature-256": sig, "X-GitHub-Event": kind, "X-GitHub-Delivery": delivery}


REPO = {"full_name": "acme/app"}
SENDER = {"login": "octo"}


def test_github_webhooks_are_verified_mapped_and_answered_on_the_pull_request(
    tmp_path: Path, fake_api: FakeApi
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    bundle = connector_bundle(tmp_path / "b", connection(port, fake_api.url))
    with gdn_run(tmp_path, bundle, GH_SECRET=SECRET) as run:
        run.wait_ready()
        assert post(url, *signed("ping", {"zen": "hi"}, "d0")) == (200, {"ok": True, "pong": True})
        pr = {
            "action": "opened",
            "pull_request": {"title": "Fix login", "number": 12},
            "repository": REPO,
            "sender": SENDER,
        }
        body, headers = signed("pull_request", pr, "d1")
        assert post(url, body, headers)[0] == 202
        assert post(url, body, headers)[0] == 409  # the same delivery again is not handled twice
        push = {
            "ref": "refs/heads/main",
            "head_commit": {"message": "bump version"},
            "repository": REPO,
            "sender": SENDER,
        }
        assert post(url, *signed("push", push, "d2"))[0] == 202
        comment = {
            "action": "created",
            "comment": {"body": "please rebase"},
            "issue": {"number": 5},
            "repository": REPO,
            "sender": SENDER,
        }
        assert post(url, *signed("issue_comment", comment, "d3"))[0] == 202

        assert post(url, *signed("push", push, "d4", secret="wrong"))[0] == 401
        assert post(url, json.dumps(push).encode(), {"X-GitHub-Event": "push", "X-GitHub-Delivery": "d5"})[0] == 401
        comments = wait_for(lambda: len(fake_api.matching("/comments")) >= 2 and fake_api.matching("/comments"))
        wait_for(lambda: len(probes(run.probe_out)) >= 3)
        assert run.stop() == 130
    got = sorted((c["path"], c["body"]["body"]) for c in comments)
    assert got == [
        ("/repos/acme/app/issues/12/comments", "echo: Fix login"),
        ("/repos/acme/app/issues/5/comments", "echo: please rebase"),
    ]
    assert all(c["headers"]["Authorization"] == "Bearer ghp-test" for c in comments)
    records = sorted(probes(run.probe_out), key=lambda r: r["metadata"]["event"])
    assert [(r["agent"], r["instanceKey"], r["metadata"]["event"]) for r in records] == [
        ("front", "github:acme/app", "github_issue_comment"),
        ("front", "github:acme/app", "github_pull_request"),
        ("ops", "github:acme/app", "github_push"),
    ]
    push_props = records[2]["metadata"]["properties"]
    assert push_props == {
        "event": "push",
        "action": "",
        "repo": "acme/app",
        "sender": "octo",
        "number": "",
        "ref": "refs/heads/main",
    }


def test_a_form_encoded_delivery_is_refused_naming_the_content_type_to_set(tmp_path: Path, fake_api: FakeApi) -> None:
    # GitHub sends application/x-www-form-urlencoded (payload=...) unless the webhook says JSON; the
    # refusal said only "the body is not JSON"
    from urllib.parse import urlencode

    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    bundle = connector_bundle(tmp_path / "b", connection(port, fake_api.url))
    pr = {"action": "opened", "pull_request": {"title": "x", "number": 1}, "repository": REPO, "sender": SENDER}
    body = urlencode({"payload": json.dumps(pr)}).encode()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": "d1",
    }
    with gdn_run(tmp_path, bundle, GH_SECRET=SECRET) as run:
        run.wait_ready()
        status, answer = post(url, body, headers)
        assert status == 400 and answer["reason"] == "invalid_payload", answer
        assert "set the webhook's content type to application/json" in answer["error"]
        json_body, json_headers = signed("pull_request", pr, "d2")
        assert post(url, json_body, {**json_headers, "Content-Type": "application/json"})[0] == 202
        run.stop()


def test_a_comment_github_refuses_is_logged_with_its_answer_and_what_to_check(
    tmp_path: Path, fake_api: FakeApi
) -> None:
    # it logged "posting the comment failed: 401 b'{...}'", bytes and no hint at the token
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    fake_api.routes["/repos/acme/app/issues/12/comments"] = lambda r: (401, {"message": "Bad credentials"})
    bundle = connector_bundle(tmp_path / "b", connection(port, fake_api.url))
    pr = {"action": "opened", "pull_request": {"title": "x", "number": 12}, "repository": REPO, "sender": SENDER}
    with gdn_run(tmp_path, bundle, GH_SECRET=SECRET) as run:
        run.wait_ready()
        assert post(url, *signed("pull_request", pr, "d1"))[0] == 202
        line = wait_for(lambda: next((x for x in run.stderr_lines if "posting the comment" in x), None))
        run.stop()
    assert 'acme/app#12 failed: HTTP 401 {"message": "Bad credentials"}' in line, line
    assert "token must be a GitHub token allowed to comment on acme/app" in line
    assert "b'" not in line


def test_a_path_without_its_leading_slash_is_served(tmp_path: Path, fake_api: FakeApi) -> None:
    # `path: hook` (as the webhook connector already took it) made every delivery a 404
    port = free_port()
    conn = connection(port, fake_api.url).replace("  config:\n", '  config:\n    path: { value: "hook" }\n', 1)
    bundle = connector_bundle(tmp_path / "b", conn)
    pr = {"action": "opened", "pull_request": {"title": "x", "number": 3}, "repository": REPO, "sender": SENDER}
    with gdn_run(tmp_path, bundle, GH_SECRET=SECRET) as run:
        run.wait_ready()
        assert post(f"http://127.0.0.1:{port}/hook", *signed("pull_request", pr, "d1"))[0] == 202
        assert post(f"http://127.0.0.1:{port}/hook/", *signed("pull_request", {**pr, "x": 1}, "d2"))[0] == 202
        assert post(f"http://127.0.0.1:{port}/other", *signed("pull_request", {**pr, "x": 2}, "d3"))[0] == 404
        run.stop()


def test_a_misspelt_or_bad_config_key_is_reported_by_validate_at_its_line(tmp_path: Path) -> None:
    # `prot` was ignored (the connector listened on 8789) and `port: 80a` failed the start with
    # "ValueError: invalid literal for int() with base 10"
    import subprocess
    import sys

    from cn_testkit import gdn_env

    for wrong, said in (
        ('    prot: { value: "8800" }\n', "config.prot: unexpected property"),
        ('    port: { value: "80a" }\n', "config.port: expected integer but got string (got '80a')"),
    ):
        conn = connection(8800, "http://127.0.0.1:1").replace('    port: { value: "8800" }\n', wrong, 1)
        bundle = connector_bundle(tmp_path / "b", conn)
        checked = subprocess.run(
            [sys.executable, "-m", "goondan", "validate", str(bundle)],
            capture_output=True,
            text=True,
            timeout=120,
            env=gdn_env(tmp_path, GH_SECRET=SECRET),
        )
        assert checked.returncode == 4, checked.stdout + checked.stderr
        assert "[E_CONNECTOR_CONFIG]" in checked.stdout and said in checked.stdout, checked.stdout
