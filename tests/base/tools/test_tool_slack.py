"""slack tool: each export is the exact Web API call, checked against a loopback fake Slack API."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from tools_testkit import FakeCtx, calls_then_text, last_results, output_value, run, tools_bundle

import goondan
import kit
from connectors.cn_testkit import FakeApi
from goondan.base.tools import slack
from goondan.base.tools._common import ToolExecutionError, ToolInputError
from goondan.errors import GoondanError

TOKEN = "xoxb-secret-token"


@pytest.fixture
def ctx(tmp_path: Path, api: FakeApi, monkeypatch: pytest.MonkeyPatch) -> FakeCtx:
    for name in slack.TOKEN_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
    return FakeCtx(workdir=tmp_path, config={"apiBase": api.url})


def _form(record: dict[str, Any]) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(record["raw"].decode()).items()}


def _query(record: dict[str, Any]) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(record["path"]).query).items()}


def test_send_is_chat_post_message_with_the_bearer_token(ctx: FakeCtx, api: FakeApi) -> None:
    api.routes["/chat.postMessage"] = lambda record: (200, {"ok": True, "channel": "C1", "ts": "1700.0001"})
    out = run(slack.send, ctx, {"channel": "C1", "text": "hello", "threadTs": "1699.0009"})
    assert out == {"ok": True, "channel": "C1", "ts": "1700.0001", "threadTs": "1699.0009"}
    [record] = api.requests
    assert record["method"] == "POST" and record["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert record["body"] == {"channel": "C1", "text": "hello", "thread_ts": "1699.0009"}


def test_read_is_conversations_history_or_replies_for_a_thread(ctx: FakeCtx, api: FakeApi) -> None:
    page = {
        "ok": True,
        "messages": [
            {
                "type": "message",
                "ts": "2.0",
                "user": "U1",
                "text": "hi",
                "files": [
                    {
                        "id": "F1",
                        "name": "a.png",
                        "mimetype": "image/png",
                        "size": 3,
                        "url_private": "https://files.slack.com/a.png",
                    }
                ],
            },
            {"type": "message", "ts": "1.0", "bot_id": "B1", "text": "yo", "thread_ts": "1.0", "reply_count": 2},
        ],
        "has_more": True,
        "response_metadata": {"next_cursor": "dGVhbTpD"},
    }
    api.routes["/conversations.history"] = lambda record: (200, page)
    api.routes["/conversations.replies"] = lambda record: (200, {"ok": True, "messages": [], "has_more": False})
    out = run(slack.read, ctx, {"channel": "C1", "limit": 2, "oldest": "0.5"})
    assert out["count"] == 2 and out["hasMore"] is True and out["nextCursor"] == "dGVhbTpD"
    assert out["messages"][0] == {
        "ts": "2.0",
        "user": "U1",
        "text": "hi",
        "files": [
            {
                "id": "F1",
                "name": "a.png",
                "mimetype": "image/png",
                "size": 3,
                "urlPrivate": "https://files.slack.com/a.png",
            }
        ],
    }
    assert out["messages"][1] == {"ts": "1.0", "botId": "B1", "text": "yo", "threadTs": "1.0", "replyCount": 2}
    thread = run(slack.read, ctx, {"channel": "C1", "threadTs": "1.0"})
    assert thread["count"] == 0 and thread["nextCursor"] is None
    history, replies = api.requests
    assert history["method"] == "GET" and _query(history) == {"channel": "C1", "limit": "2", "oldest": "0.5"}
    assert replies["path"].startswith("/conversations.replies?") and _query(replies)["ts"] == "1.0"


def test_edit_delete_and_react_are_their_web_api_methods(ctx: FakeCtx, api: FakeApi) -> None:
    api.routes["/chat.update"] = lambda record: (200, {"ok": True, "channel": "C1", "ts": "5.0"})
    reactions = iter([{"ok": True}, {"ok": False, "error": "already_reacted"}])
    api.routes["/reactions.add"] = lambda record: (200, next(reactions))
    assert run(slack.edit, ctx, {"channel": "C1", "ts": "5.0", "text": "fixed"})["edited"] is True
    assert run(slack.delete, ctx, {"channel": "C1", "ts": "5.0"})["deleted"] is True
    out = run(slack.react, ctx, {"channel": "C1", "ts": "5.0", "emoji": ":eyes:", "emojis": ["tada"]})
    assert out["emojis"] == ["eyes", "tada"] and out["alreadyReacted"] == ["tada"]
    assert [(r["path"], r["body"]) for r in api.requests] == [
        ("/chat.update", {"channel": "C1", "ts": "5.0", "text": "fixed"}),
        ("/chat.delete", {"channel": "C1", "ts": "5.0"}),
        ("/reactions.add", {"channel": "C1", "timestamp": "5.0", "name": "eyes"}),
        ("/reactions.add", {"channel": "C1", "timestamp": "5.0", "name": "tada"}),
    ]


def test_upload_gets_an_upload_url_posts_the_bytes_then_completes_into_the_channel(ctx: FakeCtx, api: FakeApi) -> None:
    (ctx.workdir / "notes.txt").write_bytes(b"twelve bytes")
    api.routes["/files.getUploadURLExternal"] = lambda record: (
        200,
        {"ok": True, "upload_url": f"{api.url}/upload/v1/abc", "file_id": "F123"},
    )
    api.routes["/upload/v1/abc"] = lambda record: (200, b"OK - 12")
    api.routes["/files.completeUploadExternal"] = lambda record: (
        200,
        {"ok": True, "files": [{"id": "F123", "permalink": "https://x.slack.com/files/F123"}]},
    )
    out = run(slack.upload, ctx, {"channel": "C1", "path": "notes.txt", "threadTs": "9.0", "initialComment": "fyi"})
    assert out == {
        "ok": True,
        "channel": "C1",
        "fileId": "F123",
        "name": "notes.txt",
        "size": 12,
        "permalink": "https://x.slack.com/files/F123",
    }
    ticket, upload, done = api.requests
    assert _form(ticket) == {"filename": "notes.txt", "length": "12"}
    assert ticket["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert upload["raw"] == b"twelve bytes" and "Authorization" not in upload["headers"]  # the URL is the credential
    form = _form(done)
    assert json.loads(form.pop("files")) == [{"id": "F123", "title": "notes.txt"}]
    assert form == {"channel_id": "C1", "thread_ts": "9.0", "initial_comment": "fyi"}


def test_download_file_sends_the_token_only_to_slack_hosts(ctx: FakeCtx, api: FakeApi) -> None:
    api.routes["/files-pri/T1-F1/report.csv"] = lambda record: (200, b"a,b\n1,2\n")
    out = run(slack.download_file, ctx, {"url": f"{api.url}/files-pri/T1-F1/report.csv", "path": "dl/r.csv"})
    assert out == {"ok": True, "path": "dl/r.csv", "size": 8, "mediaType": "text/csv"}
    assert (ctx.workdir / "dl" / "r.csv").read_bytes() == b"a,b\n1,2\n"
    assert api.requests[0]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    with pytest.raises(ToolExecutionError) as info:
        run(slack.download_file, ctx, {"url": "https://attacker.example/steal", "path": "x"})
    assert info.value.code == "E_SLACK_FILE_HOST"
    assert len(api.requests) == 1


def test_an_api_refusal_is_an_error_with_slacks_error_and_a_suggestion(ctx: FakeCtx, api: FakeApi) -> None:
    api.routes["/chat.postMessage"] = lambda record: (200, {"ok": False, "error": "not_in_channel"})
    with pytest.raises(ToolExecutionError) as info:
        run(slack.send, ctx, {"channel": "C1", "text": "x"})
    assert info.value.code == "E_SLACK_API" and "chat.postMessage failed: not_in_channel" in info.value.message
    assert info.value.suggestion == "Invite the bot to the channel first."
    assert TOKEN not in info.value.message


def test_a_rate_limited_call_honours_retry_after_and_is_sent_again(ctx: FakeCtx, api: FakeApi) -> None:
    answers = [(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "1"}), (200, {"ok": True, "ts": "1.0"})]
    api.routes["/chat.postMessage"] = lambda record: answers.pop(0)
    started = time.monotonic()
    assert run(slack.send, ctx, {"channel": "C1", "text": "once"})["ts"] == "1.0"
    assert time.monotonic() - started >= 0.9
    assert len(api.requests) == 2


def test_missing_token_and_bad_arguments_fail_before_any_call(
    tmp_path: Path, api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in slack.TOKEN_ENV:
        monkeypatch.delenv(name, raising=False)
    bare = FakeCtx(workdir=tmp_path, config={"apiBase": api.url})
    with pytest.raises(ToolExecutionError) as info:
        run(slack.send, bare, {"channel": "C1", "text": "x"})
    assert info.value.code == "E_TOOL_TOKEN_MISSING"
    with pytest.raises(ToolInputError, match="'channel' must be a non-empty string"):
        run(slack.send, bare, {"channel": "", "text": "x"})
    with pytest.raises(GoondanError) as bad_config:
        run(slack.send, FakeCtx(workdir=tmp_path, config={"tokn": "x"}), {"channel": "C1", "text": "x"})
    assert bad_config.value.code == "E_TOOL_CONFIG_INVALID"
    assert api.requests == []


def test_slack_and_telegram_tools_run_through_a_bundle_and_the_runtime(
    tmp_path: Path, api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:

    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "42:tg")
    api.routes["/chat.postMessage"] = lambda record: (200, {"ok": True, "channel": "C1", "ts": "3.0"})
    api.routes["/bot42:tg/sendMessage"] = lambda record: (200, {"ok": True, "result": {"message_id": 8}})
    config = {"slack": {"apiBase": api.url}, "telegram": {"apiBase": api.url}}
    root = tools_bundle(tmp_path / "b", {"a": ["slack", "telegram"]}, tool_config=config)
    kit.MODEL = calls_then_text(
        ("slack__send", {"channel": "C1", "text": "from the agent"}),
        ("telegram__send", {"chatId": 1001, "text": "from the agent"}),
        ("telegram__send", {"chatId": 1001}),  # refused by the shipped schema before the handler
    )
    (tmp_path / "state").mkdir()

    async def main() -> Any:
        async with goondan.Runtime(root, state_root=tmp_path / "state", isolation="inline") as rt:
            return await rt.request("go")

    assert asyncio.run(main()).text == "done"
    posted, sent, refused = last_results()
    assert output_value(posted)["ts"] == "3.0" and output_value(sent)["messageId"] == 8
    assert output_value(refused)["code"] == "E_TOOL_INVALID_ARGS" and "args.text" in output_value(refused)["message"]
    assert [r["path"] for r in api.requests] == ["/chat.postMessage", "/bot42:tg/sendMessage"]
