"""Approvals from a connector: the reply to a turn that pauses names the waiting call and how to
answer; a message ``approve ID`` / ``deny ID reason`` routed to the same conversation decides it
and gets the resumed turn's reply; a conversation cannot decide another one's calls."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cn_testkit import free_port, gdn_run, post

from goondan.connectors._approval_reply import parse_decision
from kit.approvals import approval_bundle, ran


def webhook(port: int) -> str:
    return (
        "apiVersion: goondan.ai/v1\nkind: Connection\nmetadata:\n  name: hook\nspec:\n"
        '  connectorRef: { kind: Connector, name: webhook, package: "@goondan/base" }\n'
        f'  config:\n    port: {{ value: "{port}" }}\n'
        "  ingress:\n    rules:\n      - route: { instanceKeyProperty: chat }\n"
    )


def say(port: int, text: str, chat: str = "c1") -> str:
    status, reply = post(f"http://127.0.0.1:{port}/", json.dumps({"text": text, "properties": {"chat": chat}}).encode())
    assert status == 200, reply
    return str(reply.get("text") or reply)


def test_a_chat_reply_approves_or_denies_the_call_its_conversation_waits_for(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "ran.log"
    bundle = approval_bundle(tmp_path / "b", log, extra=webhook(port))
    with gdn_run(tmp_path, bundle) as run:
        run.wait_ready()
        waiting = say(port, "one")
        assert 'Waiting for approval: shell__run {"cmd": "rm x"}' in waiting
        approval_id = re.search(r"approve (appr_\w+)`", waiting).group(1)  # type: ignore[union-attr]
        # another conversation cannot decide it
        assert "E_APPROVAL_NOT_FOUND" in json.dumps(
            post(
                f"http://127.0.0.1:{port}/",
                json.dumps({"text": f"approve {approval_id}", "properties": {"chat": "c2"}}).encode(),
            )[1]
        )
        assert ran(log) == []
        assert "ran rm x" in say(port, f"approve {approval_id}")
        assert ran(log) == ["rm x"]
        second = re.search(r"approve (appr_\w+)`", say(port, "one")).group(1)  # type: ignore[union-attr]
        denied = say(port, f"/deny {second} not today")
        assert "E_TOOL_DENIED" in denied and "not today" in denied
    assert ran(log) == ["rm x"]


def test_only_approve_or_deny_with_an_approval_id_is_a_decision() -> None:
    assert parse_decision("approve appr_1a2b") == (True, "appr_1a2b", None)
    assert parse_decision("/Deny appr_9 too risky\nreally") == (False, "appr_9", "too risky\nreally")
    for text in ("approve", "approve it", "please approve appr_1", "deny appr_", "approve appr_1; rm", None, 3):
        assert parse_decision(text) is None
