"""The built-in webhook connector under a real `gdn run`: signatures, replay, routing, metadata, replies."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from cn_testkit import connector_bundle, free_port, gdn_env, gdn_run, post, probes, wait_for

SECRET = "s3cret-value"


def connection(port: int, rules: str = "", extra_config: str = "") -> str:
    return (
        "apiVersion: goondan.ai/v1\n"
        "kind: Connection\n"
        "metadata:\n"
        "  name: hook\n"
        "spec:\n"
        '  connectorRef: { kind: Connector, name: webhook, package: "@goondan/base" }\n'
        "  config:\n"
        f'    port: {{ value: "{port}" }}\n'
        f"{extra_config}"
        "  secrets:\n"
        "    signingSecret: { valueFrom: { env: HOOK_SECRET } }\n"
        f"{rules}"
    )


ROUTES = """\
  ingress:
    rules:
      - match: { event: deploy, properties: { env: prod } }
        route: { agentRef: Agent/ops, instanceKeyProperty: service, instanceKeyPrefix: "svc:" }
      - match: { event: deploy }
        route: { agentRef: Agent/ops, instanceKey: "  staging  " }
"""


def signed(payload: dict[str, object], secret: str = SECRET) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(payload).encode()
    sig = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return body, {"X-Signature-256": f"sha256={sig}", "Content-Type": "application/json"}


def test_signed_request_gets_the_agents_reply_and_unsigned_ones_get_401(tmp_path: Path) -> None:
    port = free_port()
    bundle = connector_bundle(tmp_path / "b", connection(port, ROUTES))
    url = f"http://127.0.0.1:{port}/"
    # the default isolation (one process per agent instance): metadata crosses that boundary too
    with gdn_run(tmp_path, bundle, HOOK_SECRET=SECRET, GOONDAN_ISOLATION="process") as run:
        run.wait_ready()
        body, headers = signed({"text": "hello", "properties": {"user": "u1"}})
        assert post(url, body, headers) == (200, {"ok": True, "text": "echo: hello"})

        # replaying the exact request (same signature) is rejected and never reaches an agent
        status, reply = post(url, body, headers)
        assert status == 401 and reply["reason"] == "replayed_signature"

        bad_body, _ = signed({"text": "forged"})
        assert post(url, bad_body, {"X-Signature-256": "sha256=" + "0" * 64})[0] == 401
        assert post(url, bad_body, {})[0] == 401
        wrong_secret_body, wrong_headers = signed({"text": "forged2"}, secret="other")
        assert post(url, wrong_secret_body, wrong_headers)[0] == 401
        # a body altered after signing fails too
        assert post(url, body.replace(b"hello", b"HELLO"), headers)[0] == 401

        records = probes(run.probe_out)
        assert [r["metadata"]["properties"] for r in records] == [{"user": "u1"}]
        assert records[0]["agent"] == "front" and records[0]["instanceKey"] == "webhook:default"
        assert records[0]["sourceKind"] == "connector" and records[0]["sourceName"] == "webhook"
        assert records[0]["metadata"]["connection"] == "hook"
        assert run.stop() == 130


def test_ingress_rules_route_to_agents_and_instance_keys(tmp_path: Path) -> None:
    port = free_port()
    bundle = connector_bundle(tmp_path / "b", connection(port, ROUTES))
    url = f"http://127.0.0.1:{port}/"
    with gdn_run(tmp_path, bundle, "-v", HOOK_SECRET=SECRET) as run:
        run.wait_ready()
        cases = [
            {"text": "ship api", "event": "deploy", "properties": {"env": "prod", "service": "api"}},
            {"text": "ship web", "event": "deploy", "properties": {"env": "dev", "service": "web"}},
            {"text": "just chat", "instanceKey": "chat-7", "properties": {"env": "prod"}},
        ]
        for payload in cases:
            status, _ = post(url, *signed(payload))
            assert status == 200
        got = [(r["agent"], r["instanceKey"], r["metadata"]["event"]) for r in probes(run.probe_out)]
        assert got == [
            ("ops", "svc:api", "deploy"),
            ("ops", "staging", "deploy"),
            ("front", "chat-7", "webhook_message"),
        ]
        assert run.stop() == 130
    # -v shows each turn as it completes
    assert run.stderr.count("turn.completed") == 3
    assert "ops@svc:api" in run.stderr


def test_async_reply_mode_acknowledges_with_202_and_still_runs_the_turn(tmp_path: Path) -> None:
    port = free_port()
    conn = connection(port, extra_config='    replyMode: { value: "async" }\n')
    bundle = connector_bundle(tmp_path / "b", conn)
    with gdn_run(tmp_path, bundle, HOOK_SECRET=SECRET) as run:
        run.wait_ready()
        status, reply = post(f"http://127.0.0.1:{port}/", *signed({"text": "later"}))
        assert (status, reply) == (202, {"ok": True, "accepted": True})
        wait_for(lambda: probes(run.probe_out))
        assert post(f"http://127.0.0.1:{port}/other", *signed({"text": "x"}))[0] == 404


def test_sigterm_stops_gdn_run_and_its_connector_processes(tmp_path: Path) -> None:
    import signal

    port = free_port()
    bundle = connector_bundle(tmp_path / "b", connection(port))
    with gdn_run(tmp_path, bundle, HOOK_SECRET=SECRET) as run:
        run.wait_ready()
        assert run.stop(signal.SIGTERM) == 0
    # the connector process is gone with it: nothing listens on the port any more
    import socket

    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0
    assert not (tmp_path / "state" / "runtime" / "runs" / "default.json").exists()


def test_missing_secret_variable_is_a_config_error_before_anything_starts(tmp_path: Path) -> None:
    from cn_testkit import gdn_run_to_end

    bundle = connector_bundle(tmp_path / "b", connection(free_port()))
    proc = gdn_run_to_end(tmp_path, bundle)
    assert proc.returncode == 3
    assert "[E_CONFIG_ENV_MISSING]" in proc.stderr and "HOOK_SECRET" in proc.stderr


def test_a_busy_port_fails_the_start_with_the_connectors_error(tmp_path: Path) -> None:
    import socket

    from cn_testkit import gdn_run_to_end

    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        bundle = connector_bundle(tmp_path / "b", connection(port))
        proc = gdn_run_to_end(tmp_path, bundle, HOOK_SECRET=SECRET)
    assert proc.returncode == 1
    assert "[E_CONNECTOR_START] Connection/hook (webhook)" in proc.stderr and "in use" in proc.stderr
    assert "OSError" not in proc.stderr and "config.port" in proc.stderr  # what to change, not an errno


def test_connector_processes_exit_when_gdn_run_is_killed(tmp_path: Path) -> None:
    import signal
    import socket

    port = free_port()
    bundle = connector_bundle(tmp_path / "b", connection(port))
    with gdn_run(tmp_path, bundle, HOOK_SECRET=SECRET) as run:
        run.wait_ready()
        run.proc.send_signal(signal.SIGKILL)
        run.proc.wait(10)

        def port_closed() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) != 0

        wait_for(port_closed, timeout=10)  # the orphaned connector noticed and stopped


def test_without_a_secret_signatures_are_optional_unless_required(tmp_path: Path) -> None:
    port, strict_port = free_port(), free_port()
    open_conn = connection(port).replace("  secrets:\n    signingSecret: { valueFrom: { env: HOOK_SECRET } }\n", "")
    strict = (
        connection(strict_port, extra_config='    requireSignature: { value: "true" }\n')
        .replace("  secrets:\n    signingSecret: { valueFrom: { env: HOOK_SECRET } }\n", "")
        .replace("name: hook", "name: strict")
    )
    bundle = connector_bundle(tmp_path / "b", open_conn + "---\n" + strict)
    with gdn_run(tmp_path, bundle) as run:
        run.wait_ready()
        assert post(f"http://127.0.0.1:{port}/", b'{"text": "open"}') == (200, {"ok": True, "text": "echo: open"})
        status, reply = post(f"http://127.0.0.1:{strict_port}/", b'{"text": "closed"}')
        assert (status, reply["reason"]) == (401, "missing_signing_secret")
        big = "x" * 300_000  # larger than asyncio's default 64 KiB line limit, both ways over the channel
        status, reply = post(f"http://127.0.0.1:{port}/", json.dumps({"text": big}).encode())
        assert status == 200 and reply["text"] == "echo: " + big
        assert post(f"http://127.0.0.1:{port}/", b"not json")[0] == 400
        assert post(f"http://127.0.0.1:{port}/", b'{"text": ""}')[0] == 400
        assert [r["metadata"]["connection"] for r in probes(run.probe_out)] == ["hook", "hook"]


def _request(url: str, method: str, body: bytes | None = None) -> tuple[int, Any, Any]:
    req = urllib.request.Request(url, data=body, method=method)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=15) as resp:
            return resp.status, json.loads(resp.read()), resp.headers
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), exc.headers


def test_every_refusal_has_the_documented_shape(tmp_path: Path) -> None:
    """docs/guides/connectors.md: every refusal is ``{"ok": false, "reason": <code>, "error": <what
    was wrong>}``, with the status and reason code the guide lists; a new user got a 401 without
    ``error`` and a 404 without ``reason``."""
    port, strict_port = free_port(), free_port()
    strict = (
        connection(strict_port, extra_config='    requireSignature: { value: "true" }\n')
        .replace("  secrets:\n    signingSecret: { valueFrom: { env: HOOK_SECRET } }\n", "")
        .replace("name: hook", "name: strict")
    )
    bundle = connector_bundle(tmp_path / "b", connection(port) + "---\n" + strict)
    url = f"http://127.0.0.1:{port}/"
    guide = (Path(__file__).parents[2] / "docs" / "guides" / "connectors.md").read_text()
    with gdn_run(tmp_path, bundle, HOOK_SECRET=SECRET) as run:
        run.wait_ready()
        body, headers = signed({"text": "hello"})
        assert post(url, body, headers)[0] == 200
        answers = [
            (_request(url + "elsewhere", "POST", body), 404, "not_found"),
            (_request(url, "GET"), 405, "method_not_allowed"),
            (post(url, b'{"text": "forged"}', {"X-Signature-256": "sha256=" + "0" * 64}), 401, "invalid_signature"),
            (post(url, body, headers), 401, "replayed_signature"),
            (post(f"http://127.0.0.1:{strict_port}/", b'{"text": "x"}'), 401, "missing_signing_secret"),
            (post(url, *signed_raw(b"not json")), 400, "invalid_payload"),
            (post(url, *signed_raw(b"[1]")), 400, "invalid_payload"),
            (post(url, *signed_raw(b'{"text": ""}')), 400, "invalid_payload"),
        ]
        for answer, status, reason in answers:
            assert answer[0] == status, (answer, reason)
            reply = answer[1]
            assert set(reply) == {"ok", "reason", "error"}, (reason, reply)
            assert reply["ok"] is False and reply["reason"] == reason, reply
            assert isinstance(reply["error"], str) and reply["error"], reply
            assert f"`{reason}`" in guide, f"docs/guides/connectors.md does not list {reason}"
        assert answers[1][0][2]["Allow"] == "POST"
        assert run.stop() == 130


def signed_raw(body: bytes) -> tuple[bytes, dict[str, str]]:
    sig = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return body, {"X-Signature-256": f"sha256={sig}"}


def test_a_field_of_the_wrong_type_is_refused_not_dropped(tmp_path: Path) -> None:
    """``{"instanceKey": 42}`` (a customer id sent as a number) was dropped and the request went to
    the default conversation, every sender's history in one; ``properties`` that were not an object
    were dropped too. A wrong type is now a 400 naming the field; an integer key is its decimal string."""
    port = free_port()
    bundle = connector_bundle(tmp_path / "b", connection(port))
    url = f"http://127.0.0.1:{port}/"
    with gdn_run(tmp_path, bundle, HOOK_SECRET=SECRET) as run:
        run.wait_ready()
        assert post(url, *signed({"text": "mine", "instanceKey": 42}))[0] == 200
        refused = [
            ({"text": "x", "instanceKey": {"id": 1}}, "instanceKey must be a string (or an integer), not an object"),
            ({"text": "x", "instanceKey": True}, "instanceKey must be a string (or an integer), not a boolean"),
            ({"text": "x", "properties": "billing"}, "properties must be a JSON object, not a string"),
            ({"text": 5}, "text must be a string, not an integer"),
        ]
        for payload, error in refused:
            assert post(url, *signed(payload)) == (400, {"ok": False, "reason": "invalid_payload", "error": error})
        status, reply = post(url, *signed_raw(b'{"text": "hi"'))
        assert status == 400 and reply["error"].startswith("the body is not JSON: Expecting"), reply
        assert "line 1 column" in reply["error"]
        # [[[[... deeper than the decoder recurses: a RecursionError was a 500 internal_error
        deep = b'{"text": "x", "properties": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        assert post(url, *signed_raw(deep)) == (
            400,
            {"ok": False, "reason": "invalid_payload", "error": "the body is not JSON (it is nested too deeply)"},
        )
        assert [r["instanceKey"] for r in probes(run.probe_out)] == ["42"]
        assert run.stop() == 130


def test_a_lone_surrogate_in_the_body_is_a_400_not_an_internal_error(tmp_path: Path) -> None:
    """``"\\ud800"`` is valid JSON but not Unicode text: the event failed to encode on its way to the
    agent, a 500 internal_error with a traceback in the log. A surrogate pair (an emoji) still works."""
    port = free_port()
    bundle = connector_bundle(tmp_path / "b", connection(port))
    url = f"http://127.0.0.1:{port}/"
    with gdn_run(tmp_path, bundle, HOOK_SECRET=SECRET) as run:
        run.wait_ready()
        for body in (b'{"text": "hi \\ud800 there"}', b'{"text": "hi", "properties": {"\\udfff": "x"}}'):
            status, reply = post(url, *signed_raw(body))
            assert status == 400 and reply["reason"] == "invalid_payload", reply
            assert "lone UTF-16 surrogate" in reply["error"], reply
        status, reply = post(url, *signed_raw(b'{"text": "smile \\ud83d\\ude00", "instanceKey": "pair"}'))
        assert status == 200 and reply["ok"], reply
        assert run.stop() == 130
    assert "Traceback" not in run.stderr and "internal_error" not in run.stderr
    assert [r["instanceKey"] for r in probes(run.probe_out)] == ["pair"]


def test_a_port_that_is_no_port_fails_validate_and_a_path_without_slash_still_serves(tmp_path: Path) -> None:
    """`port: {value: "80a"}` or "70000" passed gdn validate and failed gdn run's start with Python's
    ValueError / OverflowError text (exit 1); `path: {value: "hook"}` started, then answered every
    request 404 (a request's path starts with '/')."""
    for port, problem in [
        ("80a", "config.port: expected integer but got string"),
        ("70000", "greater than the maximum"),
    ]:
        bad = connector_bundle(tmp_path / f"bad{port}", connection(port))
        result = subprocess.run(
            [sys.executable, "-m", "goondan", "validate", str(bad)],
            capture_output=True,
            text=True,
            env=gdn_env(tmp_path, HOOK_SECRET=SECRET),
            timeout=60,
        )
        assert result.returncode == 4, result.stdout
        assert "[E_CONNECTOR_CONFIG] Connection/hook: invalid config for Connector/webhook:" in result.stdout
        assert problem in result.stdout and "goondan.yaml:" in result.stdout
    port = free_port()
    bundle = connector_bundle(tmp_path / "b", connection(port, extra_config='    path: { value: "hook" }\n'))
    with gdn_run(tmp_path, bundle, HOOK_SECRET=SECRET) as run:
        run.wait_ready()
        assert post(f"http://127.0.0.1:{port}/hook", *signed({"text": "hi"})) == (200, {"ok": True, "text": "echo: hi"})
        # '/hook/' is the same path (a client or a config spells it with the slash): it was a 404
        assert post(f"http://127.0.0.1:{port}/hook/", *signed({"text": "hi2"})) == (
            200,
            {"ok": True, "text": "echo: hi2"},
        )
        assert post(f"http://127.0.0.1:{port}/hooks", *signed({"text": "hi3"}))[0] == 404
        assert run.stop() == 130


def test_a_host_that_is_not_this_machines_is_a_config_error_naming_it(tmp_path: Path) -> None:
    """`host: {value: "localhsot"}` or an address of another machine failed the start with
    'OSError: [Errno 99] Cannot assign requested address (while attempting to bind on ...)', exit 1,
    and 'Check the connector's config and secrets ... and its entry module'."""
    from cn_testkit import gdn_run_to_end

    port = free_port()
    for host, why in [
        ("192.0.2.1", "192.0.2.1 is not an address of this machine"),
        ("nohost.invalid", "the host name 'nohost.invalid' does not resolve"),
    ]:
        conn = connection(port, extra_config=f'    host: {{ value: "{host}" }}\n')
        proc = gdn_run_to_end(tmp_path, connector_bundle(tmp_path / host, conn), HOOK_SECRET=SECRET)
        assert proc.returncode == 3, proc.stderr
        assert f"[E_CONNECTOR_CONFIG] Connection/hook (webhook): cannot listen on {host}:{port}: {why}" in proc.stderr
        assert "suggestion: config.host is the address to listen on: 127.0.0.1" in proc.stderr
        assert "OSError" not in proc.stderr


def test_require_signature_that_is_not_true_or_false_is_refused(tmp_path: Path) -> None:
    """`requireSignature: {value: "yes"}` was read as not 'true': with a signing secret set, the
    signature check was off and an unsigned request reached the agent. It is a boolean now."""
    conn = connection(free_port(), extra_config='    requireSignature: { value: "yes" }\n')
    result = subprocess.run(
        [sys.executable, "-m", "goondan", "validate", str(connector_bundle(tmp_path / "b", conn))],
        capture_output=True,
        text=True,
        env=gdn_env(tmp_path, HOOK_SECRET=SECRET),
        timeout=60,
    )
    assert result.returncode == 4, result.stdout
    assert "config.requireSignature: expected boolean but got string (got 'yes')" in result.stdout


def test_two_connections_on_one_port_is_a_config_error_naming_both(tmp_path: Path) -> None:
    """A Connection copied and renamed, port unchanged: the second start failed with 'port ... is
    already in use' and 'Another program (or another gdn run ...) listens there' (exit 1)."""
    from cn_testkit import gdn_run_to_end

    port = free_port()
    twin = connection(port).replace("name: hook", "name: hook2")
    proc = gdn_run_to_end(
        tmp_path, connector_bundle(tmp_path / "b", connection(port) + "---\n" + twin), HOOK_SECRET=SECRET
    )
    assert proc.returncode == 3, proc.stderr
    assert f"[E_CONNECTOR_CONFIG] Connection/hook2 and Connection/hook both listen on port {port}" in proc.stderr
    assert "suggestion: Give Connection/hook2 another config.port" in proc.stderr
