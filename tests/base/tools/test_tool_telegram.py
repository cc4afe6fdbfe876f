"""telegram tool: each export is the exact Bot API call, checked against a loopback fake Bot API."""

from __future__ import annotations

import email.parser
import email.policy
import time
from pathlib import Path
from typing import Any

import pytest
from tools_testkit import FakeCtx, run

from connectors.cn_testkit import FakeApi
from goondan.base.tools import telegram
from goondan.base.tools._common import ToolExecutionError, ToolInputError

TOKEN = "123456:SECRET-token"


@pytest.fixture
def ctx(tmp_path: Path, api: FakeApi, monkeypatch: pytest.MonkeyPatch) -> FakeCtx:
    for name in telegram.TOKEN_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TOKEN)
    return FakeCtx(workdir=tmp_path, config={"apiBase": api.url})


def _ok(result: Any) -> Any:
    return lambda record: (200, {"ok": True, "result": result})


def multipart(record: dict[str, Any]) -> dict[str, tuple[str | None, bytes]]:
    """The form fields of a multipart request: name -> (filename, bytes)."""
    head = f"Content-Type: {record['headers']['Content-Type']}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + record["raw"])
    return {
        part.get_param("name", header="content-disposition"): (part.get_filename(), part.get_payload(decode=True))
        for part in message.iter_parts()
    }


def test_send_posts_send_message_with_the_token_in_the_path(ctx: FakeCtx, api: FakeApi) -> None:
    api.routes[f"/bot{TOKEN}/sendMessage"] = _ok({"message_id": 77, "date": 1700000000, "text": "hi"})
    out = run(telegram.send, ctx, {"chatId": "-100123", "text": "hi", "parseMode": "markdownv2", "replyToMessageId": 5})
    assert out == {"ok": True, "chatId": -100123, "messageId": 77, "date": 1700000000, "text": "hi"}
    [record] = api.requests
    assert record["method"] == "POST" and record["path"] == f"/bot{TOKEN}/sendMessage"
    assert record["body"] == {"chat_id": -100123, "text": "hi", "parse_mode": "MarkdownV2", "reply_to_message_id": 5}
    assert TOKEN not in str(out)


def test_edit_delete_react_and_chat_action_are_their_bot_api_methods(ctx: FakeCtx, api: FakeApi) -> None:
    api.routes[f"/bot{TOKEN}/editMessageText"] = _ok({"message_id": 9, "text": "new"})
    assert run(telegram.edit, ctx, {"chatId": 42, "messageId": 9, "text": "new"})["edited"] is True
    assert run(telegram.delete, ctx, {"chatId": 42, "messageId": 9})["deleted"] is True
    out = run(telegram.react, ctx, {"chatId": 42, "messageId": 9, "emoji": "👍", "emojis": ["🔥", "👍"]})
    assert out["emojis"] == ["👍", "🔥"]
    assert run(telegram.react, ctx, {"chatId": 42, "messageId": 9, "clear": True})["cleared"] is True
    assert run(telegram.set_chat_action, ctx, {"chatId": "@chan"})["action"] == "typing"
    calls = [(r["path"].rsplit("/", 1)[1], r["body"]) for r in api.requests]
    assert calls == [
        ("editMessageText", {"chat_id": 42, "message_id": 9, "text": "new"}),
        ("deleteMessage", {"chat_id": 42, "message_id": 9}),
        (
            "setMessageReaction",
            {
                "chat_id": 42,
                "message_id": 9,
                "reaction": [{"type": "emoji", "emoji": "👍"}, {"type": "emoji", "emoji": "🔥"}],
            },
        ),
        ("setMessageReaction", {"chat_id": 42, "message_id": 9, "reaction": []}),
        ("sendChatAction", {"chat_id": "@chan", "action": "typing"}),
    ]


def test_upload_sends_the_workdir_file_as_multipart_document_or_photo(ctx: FakeCtx, api: FakeApi) -> None:
    (ctx.workdir / "report.pdf").write_bytes(b"%PDF-1.4 fake")
    (ctx.workdir / "cat.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    api.routes[f"/bot{TOKEN}/sendDocument"] = _ok({"message_id": 3, "document": {"file_id": "DOC1"}})
    api.routes[f"/bot{TOKEN}/sendPhoto"] = _ok({"message_id": 4, "photo": [{"file_id": "S"}, {"file_id": "L"}]})
    doc = run(telegram.upload, ctx, {"chatId": 42, "path": "report.pdf", "caption": "Q3"})
    photo = run(telegram.upload, ctx, {"chatId": 42, "path": "cat.png", "as": "photo"})
    assert doc == {"ok": True, "chatId": 42, "messageId": 3, "fileId": "DOC1", "name": "report.pdf", "size": 13}
    assert photo["fileId"] == "L"  # the largest size
    doc_form, photo_form = multipart(api.requests[0]), multipart(api.requests[1])
    assert doc_form == {
        "chat_id": (None, b"42"),
        "caption": (None, b"Q3"),
        "document": ("report.pdf", b"%PDF-1.4 fake"),
    }
    assert photo_form["photo"] == ("cat.png", b"\x89PNG\r\n\x1a\nfake")


def test_upload_reads_only_inside_the_workdir(ctx: FakeCtx, api: FakeApi) -> None:
    with pytest.raises(ToolExecutionError) as info:
        run(telegram.upload, ctx, {"chatId": 42, "path": "../../etc/passwd"})
    assert info.value.code == "E_FS_OUTSIDE_WORKDIR"
    assert api.requests == []


def test_download_file_uses_get_file_then_the_file_url(ctx: FakeCtx, api: FakeApi) -> None:
    api.routes[f"/bot{TOKEN}/getFile"] = _ok({"file_id": "F1", "file_path": "documents/file_7.pdf"})
    api.routes[f"/file/bot{TOKEN}/documents/file_7.pdf"] = lambda record: (200, b"%PDF data")
    out = run(telegram.download_file, ctx, {"fileId": "F1", "path": "in/a.pdf"})
    assert out == {
        "ok": True,
        "fileId": "F1",
        "path": "in/a.pdf",
        "size": 9,
        "mediaType": "application/pdf",
        "filePath": "documents/file_7.pdf",
    }
    assert (ctx.workdir / "in" / "a.pdf").read_bytes() == b"%PDF data"
    assert [r["body"] for r in api.requests[:1]] == [{"file_id": "F1"}]
    with pytest.raises(ToolExecutionError) as info:
        run(telegram.download_file, ctx, {"fileId": "F1", "path": "x.pdf", "maxBytes": 4})
    assert info.value.code == "E_TELEGRAM_API" and TOKEN not in info.value.message


def test_an_api_refusal_is_an_error_with_telegrams_description_and_no_token(ctx: FakeCtx, api: FakeApi) -> None:
    api.routes[f"/bot{TOKEN}/sendMessage"] = lambda record: (
        400,
        {"ok": False, "error_code": 400, "description": f"Bad Request: chat not found for bot{TOKEN}"},
    )
    with pytest.raises(ToolExecutionError) as info:
        run(telegram.send, ctx, {"chatId": 1, "text": "x"})
    assert info.value.code == "E_TELEGRAM_API"
    assert "sendMessage failed (code 400): Bad Request: chat not found" in info.value.message
    assert TOKEN not in info.value.message and info.value.suggestion


def test_a_rate_limited_call_waits_retry_after_and_is_sent_again(ctx: FakeCtx, api: FakeApi) -> None:
    answers = [(429, {"ok": False, "error_code": 429, "parameters": {"retry_after": 1}}), (200, {"ok": True})]
    api.routes[f"/bot{TOKEN}/sendMessage"] = lambda record: answers.pop(0)
    started = time.monotonic()
    run(telegram.send, ctx, {"chatId": 1, "text": "once"})
    assert time.monotonic() - started >= 0.9
    assert [r["body"]["text"] for r in api.requests] == ["once", "once"]


def test_the_token_comes_from_config_value_from_or_the_environment(
    tmp_path: Path, api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in telegram.TOKEN_ENV:
        monkeypatch.delenv(name, raising=False)
    bare = FakeCtx(workdir=tmp_path, config={"apiBase": api.url})
    with pytest.raises(ToolExecutionError) as info:
        run(telegram.send, bare, {"chatId": 1, "text": "x"})
    assert info.value.code == "E_TOOL_TOKEN_MISSING" and "TELEGRAM_BOT_TOKEN" in (info.value.suggestion or "")
    monkeypatch.setenv("MY_BOT", "999:other")
    configured = FakeCtx(workdir=tmp_path, config={"apiBase": api.url, "token": {"valueFrom": {"env": "MY_BOT"}}})
    run(telegram.send, configured, {"chatId": 1, "text": "x"})
    assert api.requests[-1]["path"] == "/bot999:other/sendMessage"


@pytest.mark.parametrize(
    ("export", "args", "message"),
    [
        (telegram.send, {"chatId": "", "text": "x"}, "'chatId' must be a non-empty string or an integer"),
        (telegram.send, {"chatId": 1, "text": ""}, "'text' must be a non-empty string"),
        (telegram.edit, {"chatId": 1, "messageId": 0, "text": "x"}, "'messageId' must be a positive integer"),
        (telegram.react, {"chatId": 1, "messageId": 2}, "give 'emoji' or 'emojis'"),
        (telegram.send, {"chatId": 1, "text": "x", "parseMode": "rtf"}, "'parseMode' must be one of"),
        (telegram.send, {"chatId": 1, "text": "x", "token": "t"}, "unexpected argument(s) 'token'"),
    ],
)
def test_bad_arguments_are_input_errors_before_any_call(
    ctx: FakeCtx, api: FakeApi, export: Any, args: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run(export, ctx, args)
    assert api.requests == []
