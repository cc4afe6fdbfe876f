"""Replay protection is keyed on what was verified, never on how a header happens to be spelled.

Each built-in connector runs in-process behind its real HTTP server on 127.0.0.1; an attacker who
captured one signed request re-sends it with the signature header re-spelled (prefix dropped, hex
upper-cased, spaces between bytes) or with a different delivery id. None of it may reach an agent
twice.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from typing import Any

from cn_testkit import FakeApi, post, wait_for
from connector_harness import running_connector
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from goondan.connectors import slack_signature

SECRET = "s3cret"


def _hex(body: bytes) -> str:
    return hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


def test_webhook_replay_is_refused_however_the_signature_is_spelled() -> None:
    body = json.dumps({"text": "pay invoice 7"}).encode()
    good = _hex(body)
    with running_connector("webhook", secrets={"signingSecret": SECRET}) as conn:
        assert post(conn.url, body, {"X-Signature-256": "sha256=" + good}) == (
            200,
            {"ok": True, "text": "echo: pay invoice 7"},
        )
        for spelling in (good, good.upper(), "sha256=" + good.upper(), f"  sha256={good} "):
            status, reply = post(conn.url, body, {"X-Signature-256": spelling})
            assert (status, reply["reason"]) == (401, "replayed_signature"), spelling
        # the same content under another accepted signature header is the same request
        assert post(conn.url, body, {"X-Hub-Signature-256": good})[0] == 401
        assert len(conn.events) == 1


def _gh(body: bytes, delivery: str | None, *, prefix: str = "sha256=") -> dict[str, str]:
    headers = {"X-Hub-Signature-256": prefix + _hex(body), "X-GitHub-Event": "issues"}
    if delivery is not None:
        headers["X-GitHub-Delivery"] = delivery
    return headers


def test_github_replay_with_a_changed_or_missing_delivery_id_is_refused() -> None:
    payload = {"action": "opened", "issue": {"title": "Crash", "number": 3}, "repository": {"full_name": "a/b"}}
    body = json.dumps(payload).encode()
    with running_connector("github", secrets={"webhookSecret": SECRET}) as conn:
        assert post(conn.url, body, _gh(body, "d-1"))[0] == 202
        assert post(conn.url, body, _gh(body, "d-1"))[0] == 409
        assert post(conn.url, body, _gh(body, "d-2"))[0] == 409  # new delivery id, same signed content
        assert post(conn.url, body, _gh(body, "d-3", prefix=""))[0] == 409
        status, reply = post(conn.url, body, _gh(body, None))
        assert status == 400 and reply["reason"] == "missing_delivery_id"
        fresh = json.dumps({**payload, "issue": {"title": "Other", "number": 4}}).encode()
        assert post(conn.url, fresh, _gh(fresh, None))[0] == 400  # a delivery id is required, fresh or not
        assert post(conn.url, fresh, _gh(fresh, "d-4"))[0] == 202
        wait_for(lambda: len(conn.events) >= 2)
        time.sleep(0.1)
        assert [e["message"]["text"] for e in conn.events] == ["Crash", "Other"]


def test_slack_replay_is_refused_however_the_signature_is_spelled() -> None:
    payload = {
        "type": "event_callback",
        "event": {"type": "app_mention", "text": "hi", "channel": "C1", "ts": "1.0"},
    }
    body = json.dumps(payload).encode()
    ts = str(int(time.time()))
    sig = slack_signature(SECRET, ts, body)
    with running_connector("slack", secrets={"signingSecret": SECRET}) as conn:
        assert post(conn.url, body, {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig})[0] == 200
        for spelling in (sig, sig.upper(), "v0=" + sig[3:].upper(), f" {sig} "):
            headers = {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": spelling}
            assert post(conn.url, body, headers)[0] == 401, spelling
        time.sleep(0.1)
        assert len(conn.events) == 1


def test_discord_replay_is_refused_however_the_signature_is_spelled() -> None:
    key = Ed25519PrivateKey.generate()
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
    payload = {"type": 2, "id": "i1", "token": "t", "application_id": "a", "channel_id": "c", "data": {"name": "go"}}
    body = json.dumps(payload).encode()
    ts = str(int(time.time()))
    sig = key.sign(ts.encode() + body).hex()
    with running_connector("discord", secrets={"publicKey": public}, config={"apiBase": "http://127.0.0.1:9"}) as conn:
        headers = {"X-Signature-Ed25519": sig, "X-Signature-Timestamp": ts}
        assert post(conn.url, body, headers) == (200, {"type": 5})
        spaced = " ".join(sig[i : i + 2] for i in range(0, len(sig), 2))
        for spelling in (sig, sig.upper(), spaced, f" {sig.upper()} "):
            headers = {"X-Signature-Ed25519": spelling, "X-Signature-Timestamp": ts}
            assert post(conn.url, body, headers)[0] == 401, spelling
        time.sleep(0.1)
        assert len(conn.events) == 1


def test_telegram_update_served_again_is_not_handled_twice(fake_api: FakeApi) -> None:
    """A Bot API (or proxy) that ignores ``offset`` and re-serves old updates must not replay them."""
    token = "42:tok"
    calls = {"n": 0}
    lock = threading.Lock()

    def updates(record: dict[str, Any]) -> tuple[int, Any]:
        with lock:
            calls["n"] += 1
            n = calls["n"]
        first = {"update_id": 7, "message": {"message_id": 1, "chat": {"id": 5}, "from": {"id": 1}, "text": "one"}}
        older = {"update_id": 6, "message": {"message_id": 0, "chat": {"id": 5}, "from": {"id": 1}, "text": "zero"}}
        time.sleep(0.02)
        return 200, {"ok": True, "result": [first] if n == 1 else [older, first]}

    fake_api.routes[f"/bot{token}/getUpdates"] = updates
    config = {"apiBase": fake_api.url, "pollTimeout": "1", "retryDelay": "0.05"}
    with running_connector("telegram", secrets={"botToken": token}, config=config) as conn:
        wait_for(lambda: calls["n"] >= 5)
        assert [e["message"]["text"] for e in conn.events] == ["one"]
