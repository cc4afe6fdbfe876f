"""Built-in ``telegram`` connector: Bot API long polling, replies with ``sendMessage``.

Secret ``botToken`` (or ``TELEGRAM_BOT_TOKEN``/``BOT_TOKEN``/``TELEGRAM_TOKEN``). Config: ``apiBase``
(https://api.telegram.org), ``pollTimeout`` seconds (30), ``retryDelay`` seconds (1, doubled up to
``maxRetryDelay``, 30). ``offset`` is the last seen ``update_id + 1``, so an update is handled once even
across failed polls; an update below the offset (served again by a proxy or a misbehaving API) is
skipped. A 429 waits ``parameters.retry_after`` seconds, as the Bot API asks (replies are retried
by the shared HTTP client, :mod:`goondan._http_client`). Messages from
bots and empty messages are skipped. Event ``telegram_message``; instance key ``telegram:<chatId>``.
A message's photo (largest size) and document are downloaded and sent as image or file parts.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

from goondan.connectors import download_part, http_request

# The Connection secrets this connector reads: another name under spec.secrets fails the start
# (E_CONNECTOR_CONFIG), instead of leaving the secret unset.
SECRETS = ("botToken", "TELEGRAM_BOT_TOKEN", "BOT_TOKEN", "TELEGRAM_TOKEN")

# The Connection's config (all strings: ValueSources), checked by gdn validate and gdn run's load:
# a misspelt key was ignored, and `pollTimeout: 30s` failed at start with Python's ValueError.
CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiBase": {"type": "string", "default": "https://api.telegram.org", "description": "Bot API base URL."},
        "pollTimeout": {
            "type": "integer",
            "minimum": 0,
            "default": 30,
            "description": "Seconds a getUpdates long poll waits.",
        },
        "retryDelay": {
            "type": "number",
            "minimum": 0,
            "default": 1,
            "description": "Seconds before retrying a failed poll (doubled up to maxRetryDelay).",
        },
        "maxRetryDelay": {"type": "number", "minimum": 0, "default": 30, "description": "Longest retry delay."},
    },
}


def _files(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The message's photo (its largest size) and document, as ``{file_id, name, mime_type}``."""
    out: list[dict[str, Any]] = []
    photos = message.get("photo")
    if isinstance(photos, list) and photos and isinstance(photos[-1], dict) and photos[-1].get("file_id"):
        out.append({"file_id": photos[-1]["file_id"], "name": "photo.jpg", "mime_type": "image/jpeg"})
    doc = message.get("document")
    if isinstance(doc, dict) and doc.get("file_id"):
        out.append(
            {"file_id": doc["file_id"], "name": doc.get("file_name") or "document", "mime_type": doc.get("mime_type")}
        )
    return out


def _event(message: dict[str, Any]) -> dict[str, Any] | None:
    sender = message.get("from") or {}
    if sender.get("is_bot"):
        return None
    text = str(message.get("text") or message.get("caption") or "").strip()
    chat = message.get("chat") or {}
    files = _files(message)
    if (not text and not files) or "id" not in chat:
        return None
    props: dict[str, Any] = {
        "chat_id": chat["id"],
        "chat_type": chat.get("type", ""),
        "message_id": message.get("message_id", ""),
        "from_id": sender.get("id", ""),
        "username": sender.get("username", ""),
    }
    return {
        "name": "telegram_message",
        "message": {"type": "text", "text": text},
        "properties": props,
        "instanceKey": f"telegram:{chat['id']}",
        "files": files,  # downloaded by _attach before the event is emitted
    }


async def _attach(event: dict[str, Any], api: str, base: str, token: str, logger: Any) -> dict[str, Any]:
    """Download the message's files (``getFile``, then ``/file/bot<token>/<file_path>``) into
    ``attachments``; one that cannot be downloaded is mentioned as ``[telegram_file:NAME] file_id=ID``."""
    parts: list[dict[str, Any]] = []
    text = event["message"]["text"]
    for item in event.pop("files"):
        try:
            resp = await http_request("GET", f"{base}/getFile?file_id={quote(str(item['file_id']))}", timeout=30)
            path = ((resp.json() or {}).get("result") or {}).get("file_path") if resp.status == 200 else None
            if not isinstance(path, str) or not path:
                raise ValueError(f"getFile answered {resp.status}")
            url = f"{api}/file/bot{token}/{path}"
            parts.append(await download_part(url, name=item["name"], media_type=item.get("mime_type")))
        except (OSError, ValueError) as exc:
            logger.warning("telegram file %s not downloaded: %s", item["name"], exc)
            text = (text + "\n" if text else "") + f"[telegram_file:{item['name']}] file_id={item['file_id']}"
    event["message"] = {"type": "text", "text": text}
    if parts:
        event["attachments"] = parts
    return event


async def run(ctx: Any) -> None:
    token = ctx.secret("botToken", "TELEGRAM_BOT_TOKEN", "BOT_TOKEN", "TELEGRAM_TOKEN")
    if not token:
        raise ValueError("the telegram connector needs secret botToken (or TELEGRAM_BOT_TOKEN)")
    api = ctx.setting("apiBase", "https://api.telegram.org").rstrip("/")
    base = api + f"/bot{token}"
    poll_timeout = int(ctx.setting("pollTimeout", "30"))
    first_delay = float(ctx.setting("retryDelay", "1"))
    max_delay = float(ctx.setting("maxRetryDelay", "30"))
    offset: int | None = None
    delay = first_delay
    replies: set[asyncio.Task[None]] = set()

    async def answer(chat_id: Any, message_id: Any, pending: Any) -> None:
        reply = await pending
        if reply.text is None:
            return
        body = {"chat_id": chat_id, "text": reply.text, "reply_to_message_id": message_id}
        try:
            # a 429 (parameters.retry_after) means the message was not sent: the client retries it
            resp = await http_request("POST", f"{base}/sendMessage", json_body=body, timeout=30, safe=True)
        except OSError as exc:
            ctx.logger.warning("sendMessage failed: %s", exc)
            return
        if resp.status >= 400:
            ctx.logger.warning("sendMessage answered %s: %s", resp.status, resp.body[:200])

    ctx.ready()
    while True:
        params = f"timeout={poll_timeout}" + (f"&offset={offset}" if offset is not None else "")
        try:
            resp = await http_request("GET", f"{base}/getUpdates?{params}", timeout=poll_timeout + 10)
        except OSError as exc:
            ctx.logger.warning("getUpdates failed: %s (retrying in %.1fs)", exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_delay)
            continue
        if resp.status == 429:
            try:
                wait = float(((resp.json() or {}).get("parameters") or {}).get("retry_after", delay))
            except ValueError:
                wait = delay
            ctx.logger.warning("rate limited by Telegram: waiting %.1fs", wait)
            await asyncio.sleep(wait)
            continue
        if resp.status in (401, 404):
            raise PermissionError(f"Telegram rejected the bot token (HTTP {resp.status})")
        try:
            data = resp.json() if resp.status == 200 else None
        except ValueError:
            data = None
        if not isinstance(data, dict) or not data.get("ok"):
            ctx.logger.warning("getUpdates answered %s (retrying in %.1fs)", resp.status, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_delay)
            continue
        delay = first_delay
        for update in data.get("result") or []:
            if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
                continue
            if offset is not None and update["update_id"] < offset:
                continue
            offset = update["update_id"] + 1
            message = update.get("message") or update.get("edited_message")
            event = _event(message) if isinstance(message, dict) else None
            if event is None:
                continue
            # downloaded here, in update order, so a chat's messages still reach the agent in order
            event = await _attach(event, api, base, token, ctx.logger)
            if not event["message"]["text"] and not event.get("attachments"):
                continue
            task = asyncio.create_task(
                answer(event["properties"]["chat_id"], event["properties"]["message_id"], ctx.emit(event))
            )
            replies.add(task)
            task.add_done_callback(replies.discard)
