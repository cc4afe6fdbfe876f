"""telegram: the Telegram Bot API for the agent (send, edit, delete, react, chat action, files).

Each export is one Bot API method, posted to ``{apiBase}/bot<token>/<method>``: ``send`` is
``sendMessage``, ``edit`` ``editMessageText``, ``delete`` ``deleteMessage``, ``react``
``setMessageReaction``, ``setChatAction`` ``sendChatAction``, ``upload`` ``sendDocument`` or
``sendPhoto`` (multipart, the file read from the workdir), ``downloadFile`` ``getFile`` and then
``{apiBase}/file/bot<token>/<file_path>`` (written into the workdir). There is no ``read``: the Bot
API cannot list a chat's history (a bot only sees updates as they arrive, which the ``telegram``
connector receives).

Config: ``token`` (else ``TELEGRAM_BOT_TOKEN``, ``BOT_TOKEN``, ``TELEGRAM_TOKEN``), ``apiBase``
(https://api.telegram.org), ``timeoutMs`` (15000). An answer with ``ok: false`` is
``E_TELEGRAM_API`` carrying Telegram's ``description`` and ``error_code``; see
:mod:`goondan.base.tools._chat_api` for the token and retry rules.
"""

from __future__ import annotations

from typing import Any

from goondan.base.tools._chat_api import (
    MAX_FILE_BYTES,
    api_base,
    call,
    media_type,
    read_workdir_file,
    redact,
    resolve_token,
    timeout_seconds,
    write_workdir_file,
)
from goondan.base.tools._common import (
    ToolExecutionError,
    ToolInputError,
    args_dict,
    check_keys,
    opt_bool,
    opt_enum,
    opt_int,
    opt_str,
    require_str,
)
from goondan.types import ToolContext

API_ERROR = "E_TELEGRAM_API"
TOKEN_ENV = ("TELEGRAM_BOT_TOKEN", "BOT_TOKEN", "TELEGRAM_TOKEN")
DEFAULT_API = "https://api.telegram.org"
PARSE_MODES = {"markdown": "Markdown", "markdownv2": "MarkdownV2", "html": "HTML"}
CHAT_ACTIONS = (
    "typing",
    "upload_photo",
    "record_video",
    "upload_video",
    "record_voice",
    "upload_voice",
    "upload_document",
    "choose_sticker",
    "find_location",
    "record_video_note",
    "upload_video_note",
)


class _Bot:
    def __init__(self, ctx: ToolContext) -> None:
        self.token = resolve_token(ctx, "telegram", TOKEN_ENV)
        self.api = api_base(ctx, "telegram", DEFAULT_API)
        self.timeout = timeout_seconds(ctx, "telegram")

    async def method(self, name: str, payload: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        """``result`` of Bot API method ``name``; ``ok: false`` or a non-JSON answer is an error."""
        url = f"{self.api}/bot{self.token}/{name}"
        if payload is not None:
            kwargs["json_body"] = {k: v for k, v in payload.items() if v is not None}
        resp = await call(API_ERROR, f"telegram {name}", "POST", url, self.token, timeout=self.timeout, **kwargs)
        try:
            data = resp.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ToolExecutionError(
                API_ERROR,
                f"telegram {name} answered HTTP {resp.status} without a Bot API result",
                suggestion="Check the Tool config apiBase.",
            )
        if resp.status >= 400 or data.get("ok") is not True:
            code = data.get("error_code", resp.status)
            description = redact(str(data.get("description") or f"HTTP {resp.status}"), self.token)
            raise ToolExecutionError(
                API_ERROR,
                f"telegram {name} failed (code {code}): {description}",
                suggestion=_suggestion(int(code) if isinstance(code, int) else resp.status),
            )
        return data.get("result")


def _suggestion(code: int) -> str:
    if code == 401:
        return "The bot token was refused; check TELEGRAM_BOT_TOKEN."
    if code == 403:
        return "The bot cannot act in this chat (blocked, or not a member)."
    if code == 429:
        return "Telegram is rate limiting this bot; wait before sending more."
    return "Check chatId, messageId and the text; Telegram's description says what it refused."


def _chat_id(args: dict[str, Any]) -> str | int:
    value = args.get("chatId")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip():
        text = value.strip()
        return int(text) if text.lstrip("-").isdigit() else text  # @channelusername stays a string
    raise ToolInputError("'chatId' must be a non-empty string or an integer")


def _message_id(args: dict[str, Any], key: str = "messageId", required: bool = True) -> int | None:
    value = args.get(key)
    if value is None and not required:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    raise ToolInputError(f"'{key}' must be a positive integer")


def _parse_mode(args: dict[str, Any]) -> str | None:
    raw = opt_str(args, "parseMode")
    if raw is None:
        return None
    mode = PARSE_MODES.get(raw.strip().lower().replace("-", "").replace("_", ""))
    if mode is None:
        raise ToolInputError(f"'parseMode' must be one of {', '.join(PARSE_MODES.values())}")
    return mode


def _summary(result: Any) -> dict[str, Any]:
    message = result if isinstance(result, dict) else {}
    return {"messageId": message.get("message_id"), "date": message.get("date"), "text": message.get("text")}


async def send(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``telegram__send`` → ``sendMessage``."""
    args = args_dict(input)
    check_keys(args, ("chatId", "text", "parseMode", "replyToMessageId", "disableNotification"))
    chat_id, text = _chat_id(args), require_str(args, "text")
    payload = {
        "chat_id": chat_id,
        "text": text,
        "parse_mode": _parse_mode(args),
        "reply_to_message_id": _message_id(args, "replyToMessageId", required=False),
        "disable_notification": opt_bool(args, "disableNotification", False) or None,
    }
    result = await _Bot(ctx).method("sendMessage", payload)
    return {"ok": True, "chatId": chat_id, **_summary(result)}


async def edit(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``telegram__edit`` → ``editMessageText``."""
    args = args_dict(input)
    check_keys(args, ("chatId", "messageId", "text", "parseMode"))
    chat_id, message_id, text = _chat_id(args), _message_id(args), require_str(args, "text")
    payload = {"chat_id": chat_id, "message_id": message_id, "text": text, "parse_mode": _parse_mode(args)}
    result = await _Bot(ctx).method("editMessageText", payload)
    return {"ok": True, "chatId": chat_id, "messageId": _summary(result)["messageId"] or message_id, "edited": True}


async def delete(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``telegram__delete`` → ``deleteMessage``."""
    args = args_dict(input)
    check_keys(args, ("chatId", "messageId"))
    chat_id, message_id = _chat_id(args), _message_id(args)
    await _Bot(ctx).method("deleteMessage", {"chat_id": chat_id, "message_id": message_id})
    return {"ok": True, "chatId": chat_id, "messageId": message_id, "deleted": True}


async def react(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``telegram__react`` → ``setMessageReaction``; ``clear: true`` removes the bot's reactions."""
    args = args_dict(input)
    check_keys(args, ("chatId", "messageId", "emoji", "emojis", "clear", "isBig"))
    chat_id, message_id = _chat_id(args), _message_id(args)
    emojis: list[str] = []
    if not opt_bool(args, "clear", False):
        single = opt_str(args, "emoji")
        many = args.get("emojis") or []
        if not isinstance(many, list) or not all(isinstance(e, str) for e in many):
            raise ToolInputError("'emojis' must be a list of strings")
        emojis = list(dict.fromkeys(e.strip() for e in [*([single] if single else []), *many] if e.strip()))
        if not emojis:
            raise ToolInputError("give 'emoji' or 'emojis', or 'clear: true' to remove the reactions")
    payload = {
        "chat_id": chat_id,
        "message_id": message_id,
        "reaction": [{"type": "emoji", "emoji": e} for e in emojis],
        "is_big": opt_bool(args, "isBig", False) or None,
    }
    await _Bot(ctx).method("setMessageReaction", payload)
    return {"ok": True, "chatId": chat_id, "messageId": message_id, "emojis": emojis, "cleared": not emojis}


async def set_chat_action(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``telegram__setChatAction`` → ``sendChatAction`` (``typing`` by default)."""
    args = args_dict(input)
    check_keys(args, ("chatId", "action"))
    chat_id = _chat_id(args)
    action = opt_enum(args, "action", CHAT_ACTIONS, "typing")
    await _Bot(ctx).method("sendChatAction", {"chat_id": chat_id, "action": action})
    return {"ok": True, "chatId": chat_id, "action": action}


async def upload(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``telegram__upload`` → ``sendDocument`` (or ``sendPhoto`` with ``as: photo``), multipart."""
    args = args_dict(input)
    check_keys(args, ("chatId", "path", "as", "caption", "filename", "replyToMessageId"))
    chat_id, raw = _chat_id(args), require_str(args, "path")
    kind = opt_enum(args, "as", ("document", "photo"), "document")
    data, name = read_workdir_file(ctx, raw)
    name = opt_str(args, "filename") or name
    fields = {"chat_id": str(chat_id)}
    caption = opt_str(args, "caption")
    if caption:
        fields["caption"] = caption
    reply_to = _message_id(args, "replyToMessageId", required=False)
    if reply_to is not None:
        fields["reply_to_message_id"] = str(reply_to)
    method = "sendPhoto" if kind == "photo" else "sendDocument"
    files = {kind: (name, data, media_type(name))}
    result = await _Bot(ctx).method(method, None, data=fields, files=files)
    message = result if isinstance(result, dict) else {}
    sent = message.get("document") or (message.get("photo") or [{}])[-1]
    return {
        "ok": True,
        "chatId": chat_id,
        "messageId": message.get("message_id"),
        "fileId": sent.get("file_id") if isinstance(sent, dict) else None,
        "name": name,
        "size": len(data),
    }


async def download_file(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``telegram__downloadFile``: ``getFile`` for ``fileId``, then the file into ``path``."""
    args = args_dict(input)
    check_keys(args, ("fileId", "path", "maxBytes"))
    file_id, raw = require_str(args, "fileId"), require_str(args, "path")
    limit = opt_int(args, "maxBytes", MAX_FILE_BYTES, minimum=1, maximum=MAX_FILE_BYTES)
    assert limit is not None
    bot = _Bot(ctx)
    info = await bot.method("getFile", {"file_id": file_id})
    file_path = info.get("file_path") if isinstance(info, dict) else None
    if not isinstance(file_path, str) or not file_path:
        raise ToolExecutionError(
            API_ERROR,
            f"telegram getFile gave no file_path for {file_id}",
            suggestion="Bots can download files up to 20 MB; larger ones have no file_path.",
        )
    url = f"{bot.api}/file/bot{bot.token}/{file_path}"
    what = "telegram file download"
    resp = await call(API_ERROR, what, "GET", url, bot.token, timeout=bot.timeout, max_bytes=limit)
    if resp.status >= 400:
        raise ToolExecutionError(API_ERROR, f"{what} answered HTTP {resp.status}", suggestion="Retry later.")
    shown = write_workdir_file(ctx, raw, resp.body)
    declared = resp.headers.get("content-type", "").split(";", 1)[0].strip() or None
    return {
        "ok": True,
        "fileId": file_id,
        "path": shown,
        "size": len(resp.body),
        "mediaType": media_type(file_path, declared),
        "filePath": file_path,
    }


handlers = {
    "send": send,
    "edit": edit,
    "delete": delete,
    "react": react,
    "setChatAction": set_chat_action,
    "upload": upload,
    "downloadFile": download_file,
}

__all__ = ["handlers"]
