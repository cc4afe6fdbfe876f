"""Approvals from a connector: the reply to a turn that pauses names the waiting call and how to
answer; a message ``approve ID`` / ``deny ID reason`` routed to the same conversation decides it
and gets the resumed turn's reply; a conversation cannot decide another one's calls."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
from cn_testkit import free_port, gdn_run, post

from goondan.connectors._approval_reply import parse_decision
from kit.approvals import approval_bundle, ran


def webhook(port: int, reply_mode: str = "sync") -> str:
    return (
        "apiVersion: goondan.ai/v1\nkind: Connection\nmetadata:\n  name: hook\nspec:\n"
        '  connectorRef: { kind: Connector, name: webhook, package: "@goondan/base" }\n'
        f'  config:\n    port: {{ value: "{port}" }}\n    replyMode: {{ value: "{reply_mode}" }}\n'
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
        # another conversation cannot decide it: the sender's mistake, 404 (was 500, a failed turn)
        status, other = post(
            f"http://127.0.0.1:{port}/",
            json.dumps({"text": f"approve {approval_id}", "properties": {"chat": "c2"}}).encode(),
        )
        assert status == 404 and other["error"]["code"] == "E_APPROVAL_NOT_FOUND", (status, other)
        assert ran(log) == []
        assert "ran rm x" in say(port, f"approve {approval_id}")
        assert ran(log) == ["rm x"]
        second = re.search(r"approve (appr_\w+)`", say(port, "one")).group(1)  # type: ignore[union-attr]
        denied = say(port, f"/deny {second} not today")
        assert "E_TOOL_DENIED" in denied and "not today" in denied
    assert ran(log) == ["rm x"]


# asks for the guarded call; once it has the tool's result, streams its answer in pieces
STREAMING_MODEL = """\
async def generate(request):
    if request.messages[-1]["role"] == "tool":
        pieces = ["resumed, ", "approved ", "and streamed"]
        for piece in pieces:
            if request.on_text_delta is not None:
                request.on_text_delta(piece)
        return {"text": "".join(pieces)}
    return {"text": "I will run it.", "toolCalls": [{"id": "c1", "name": "shell__run", "args": {"cmd": "rm x"}}]}
"""


def say_streamed(port: int, text: str, chat: str = "c1") -> list[tuple[str, Any]]:
    """The Server-Sent Events of a streamed answer, as (event, data)."""
    out: list[tuple[str, Any]] = []
    body = {"text": text, "properties": {"chat": chat}}
    url = f"http://127.0.0.1:{port}/"
    with httpx.Client(trust_env=False) as client, client.stream("POST", url, json=body, timeout=30) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        name = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                out.append((name, json.loads(line[6:])))
    return out


def test_a_streamed_approve_reply_gets_the_resumed_turns_deltas_before_done(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "ran.log"
    bundle = approval_bundle(tmp_path / "b", log, extra=webhook(port, "stream"))
    (bundle / "model.py").write_text(STREAMING_MODEL)
    with gdn_run(tmp_path, bundle) as run:
        run.wait_ready()
        paused = say_streamed(port, "one")
        assert paused[-1][0] == "done"
        approval_id = re.search(r"approve (appr_\w+)`", paused[-1][1]["text"]).group(1)  # type: ignore[union-attr]
        events = say_streamed(port, f"approve {approval_id}")
    assert ran(log) == ["rm x"]
    deltas = [data["text"] for event, data in events if event == "delta"]
    assert "".join(deltas) == "resumed, approved and streamed", events
    assert events[-1] == (
        "done",
        {"ok": True, "text": "resumed, approved and streamed", "finishReason": "text_response"},
    )


def test_only_approve_or_deny_with_an_approval_id_is_a_decision() -> None:
    assert parse_decision("approve appr_1a2b") == (True, "appr_1a2b", None)
    assert parse_decision("/Deny appr_9 too risky\nreally") == (False, "appr_9", "too risky\nreally")
    for text in ("approve", "approve it", "please approve appr_1", "deny appr_", "approve appr_1; rm", None, 3):
        assert parse_decision(text) is None


def test_a_chat_reply_deciding_an_approval_again_is_told_who_decided_it(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "ran.log"
    bundle = approval_bundle(tmp_path / "b", log, extra=webhook(port))
    with gdn_run(tmp_path, bundle) as run:
        run.wait_ready()
        approval_id = re.search(r"approve (appr_\w+)`", say(port, "one")).group(1)  # type: ignore[union-attr]
        assert "ran rm x" in say(port, f"approve {approval_id}")
        status, late = post(
            f"http://127.0.0.1:{port}/",
            json.dumps({"text": f"deny {approval_id} too late", "properties": {"chat": "c1"}}).encode(),
        )
        assert status == 409, late  # a conflict with the earlier decision (was 500)
        error = late["error"]
        assert error["code"] == "E_APPROVAL_DECIDED", late
        assert "already approved by connector:" in error["message"] and "runs once" in error["message"]
    assert ran(log) == ["rm x"]
