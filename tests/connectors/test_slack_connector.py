"""The slack connector: v0 signatures with a ±300 s window, URL verification, ignores, threads, replies."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

from cn_testkit import FakeApi, connector_bundle, free_port, gdn_run, post, probes, wait_for

SECRET = "slack-signing"


def connection(port: int, api: str) -> str:
    return (
        "apiVersion: goondan.ai/v1\n"
        "kind: Connection\n"
        "metadata:\n"
        "  name: sl\n"
        "spec:\n"
        '  connectorRef: { kind: Connector, name: slack, package: "@goondan/base" }\n'
        "  config:\n"
        f'    port: {{ value: "{port}" }}\n'
        '    path: { value: "/slack/events" }\n'
        f'    apiBase: {{ value: "{api}" }}\n'
        "  secrets:\n"
        "    signingSecret: { valueFrom: { env: SLACK_SIGNING_SECRET } }\n"
        "    botToken: { value: xoxb-test }\n"
    )


def signed(payload: dict[str, Any], *, ts: int | None = None, secret: str = SECRET) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(payload).encode()
    stamp = str(int(time.time()) if ts is None else ts)
    sig = "v0=" + hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return body, {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": sig, "Content-Type": "application/json"}


def callback(event: dict[str, Any], event_id: str) -> dict[str, Any]:
    return {"type": "event_callback", "event_id": event_id, "event": event}


def test_slack_events_are_verified_routed_to_threads_and_answered(tmp_path: Path, fake_api: FakeApi) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/slack/events"
    bundle = connector_bundle(tmp_path / "b", connection(port, fake_api.url))
    with gdn_run(tmp_path, bundle, SLACK_SIGNING_SECRET=SECRET) as run:
        run.wait_ready()
        assert post(url, *signed({"type": "url_verification", "challenge": "c-123"})) == (200, {"challenge": "c-123"})

        mention = {"type": "app_mention", "channel": "C1", "user": "U1", "ts": "100.1", "text": "<@B> status?"}
        body, headers = signed(callback(mention, "Ev1"))
        assert post(url, body, headers) == (200, {"ok": True})
        # the same request again (replayed signature) is refused
        assert post(url, body, headers)[0] == 401
        # Slack retrying the same event id with a fresh signature is acknowledged, not handled twice
        assert post(url, *signed(callback(mention, "Ev1"), ts=int(time.time()) - 5)) == (
            200,
            {"ok": True, "duplicate": True},
        )

        reply_in_thread = {
            "type": "message",
            "channel_type": "im",
            "channel": "D9",
            "user": "U2",
            "ts": "200.2",
            "thread_ts": "150.0",
            "text": "hi in thread",
        }
        assert post(url, *signed(callback(reply_in_thread, "Ev2")))[0] == 200
        bot = {"type": "app_mention", "channel": "C1", "bot_id": "B1", "ts": "1.1", "text": "loop"}
        assert post(url, *signed(callback(bot, "Ev3"))) == (200, {"ok": True, "ignored": True})
        empty = {"type": "app_mention", "channel": "C1", "user": "U1", "ts": "1.2", "text": "  "}
        assert post(url, *signed(callback(empty, "Ev4"))) == (200, {"ok": True, "ignored": True})

        # stale timestamp (a captured request replayed 10 minutes later), bad and missing signatures
        assert post(url, *signed(callback(mention, "Ev5"), ts=int(time.time()) - 600))[0] == 401
        assert post(url, *signed(callback(mention, "Ev6"), ts=int(time.time()) + 600))[0] == 401
        assert post(url, *signed(callback(mention, "Ev7"), secret="wrong"))[0] == 401
        assert post(url, json.dumps(callback(mention, "Ev8")).encode(), {})[0] == 401
        assert post(f"http://127.0.0.1:{port}/other", *signed({"type": "url_verification"}))[0] == 404

        posts = wait_for(
            lambda: len(fake_api.matching("/chat.postMessage")) >= 2 and fake_api.matching("/chat.postMessage")
        )
        assert run.stop() == 130
    sent = sorted((p["body"]["channel"], p["body"]["thread_ts"], p["body"]["text"]) for p in posts)
    assert sent == [("C1", "100.1", "echo: <@B> status?"), ("D9", "150.0", "echo: hi in thread")]
    assert all(p["headers"]["Authorization"] == "Bearer xoxb-test" for p in posts)
    records = probes(run.probe_out)
    assert sorted((r["instanceKey"], r["metadata"]["event"]) for r in records) == [
        ("slack:C1:100.1", "app_mention"),
        ("slack:D9:150.0", "message_im"),
    ]
