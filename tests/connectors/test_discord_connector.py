"""The discord connector: Ed25519-signed interactions, PING, commands, components, follow-up replies."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from cn_testkit import FakeApi, connector_bundle, free_port, gdn_run, post, probes, wait_for
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

KEY = Ed25519PrivateKey.generate()
PUBLIC_HEX = KEY.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()


# a slash command `/ask q:why`, answered by a follow-up PATCH to /webhooks/app1/tok1/messages/@original
COMMAND = {
    "type": 2,
    "id": "i1",
    "application_id": "app1",
    "token": "tok1",
    "channel_id": "ch1",
    "member": {"user": {"id": "u1", "username": "ann"}},
    "data": {"name": "ask", "options": [{"name": "q", "value": "why"}]},
}


def connection(port: int, api: str) -> str:
    return (
        "apiVersion: goondan.ai/v1\n"
        "kind: Connection\n"
        "metadata:\n"
        "  name: dc\n"
        "spec:\n"
        '  connectorRef: { kind: Connector, name: discord, package: "@goondan/base" }\n'
        "  config:\n"
        f'    port: {{ value: "{port}" }}\n'
        f'    apiBase: {{ value: "{api}" }}\n'
        "  secrets:\n"
        "    publicKey: { valueFrom: { env: DISCORD_PUBLIC_KEY } }\n"
    )


def signed(
    payload: dict[str, Any], *, key: Ed25519PrivateKey = KEY, ts: int | None = None
) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(payload).encode()
    stamp = str(int(time.time()) if ts is None else ts)
    sig = key.sign(stamp.encode() + body).hex()
    return body, {"X-Signature-Ed25519": sig, "X-Signature-Timestamp": stamp, "Content-Type": "application/json"}


def test_interactions_are_verified_and_answered_through_the_interaction_webhook(
    tmp_path: Path, fake_api: FakeApi
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    bundle = connector_bundle(tmp_path / "b", connection(port, fake_api.url))
    with gdn_run(tmp_path, bundle, DISCORD_PUBLIC_KEY=PUBLIC_HEX) as run:
        run.wait_ready()
        assert post(url, *signed({"type": 1})) == (200, {"type": 1})
        body, headers = signed(COMMAND)
        assert post(url, body, headers) == (200, {"type": 5})
        assert post(url, body, headers)[0] == 401  # replay
        component = {
            "type": 3,
            "id": "i2",
            "application_id": "app1",
            "token": "tok2",
            "channel_id": "ch2",
            "user": {"id": "u2"},
            "data": {"custom_id": "approve"},
        }
        assert post(url, *signed(component)) == (200, {"type": 5})

        other = Ed25519PrivateKey.generate()
        assert post(url, *signed({"type": 1}, key=other))[0] == 401
        assert post(url, *signed({"type": 1}, ts=int(time.time()) - 3600))[0] == 401
        assert post(url, json.dumps({"type": 1}).encode(), {})[0] == 401

        patches = wait_for(
            lambda: len(fake_api.matching("/messages/@original")) >= 2 and fake_api.matching("/messages/@original")
        )
        assert run.stop() == 130
    got = sorted((p["method"], p["path"], p["body"]["content"]) for p in patches)
    assert got == [
        ("PATCH", "/webhooks/app1/tok1/messages/@original", "echo: /ask q=why"),
        ("PATCH", "/webhooks/app1/tok2/messages/@original", "echo: approve"),
    ]
    records = probes(run.probe_out)
    assert sorted((r["instanceKey"], r["metadata"]["event"]) for r in records) == [
        ("discord:ch1", "slash_command"),
        ("discord:ch2", "component_interaction"),
    ]
