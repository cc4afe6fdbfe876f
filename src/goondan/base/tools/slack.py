"""slack: the Slack Web API for the agent (send, read, edit, delete, react, files).

Each export is the Web API method of the same purpose, called with the bot token as a Bearer
header: ``send`` is ``chat.postMessage``, ``read`` ``conversations.history`` (or
``conversations.replies`` for a thread), ``edit`` ``chat.update``, ``delete`` ``chat.delete``,
``react`` ``reactions.add`` (one call per emoji), ``upload`` the external upload flow
(``files.getUploadURLExternal``, the bytes posted to the returned URL, then
``files.completeUploadExternal`` sharing the file into the channel), ``downloadFile`` a ``GET`` of
a file's ``url_private`` with the token, written into the workdir.

The token goes only to Slack: ``downloadFile`` refuses URLs on hosts other than
``files.slack.com`` (or the configured ``apiBase``'s host), since a model could otherwise be led to
send the bot token to any server (``E_SLACK_FILE_HOST``).

Config: ``token`` (else ``SLACK_BOT_TOKEN``, ``SLACK_TOKEN``), ``apiBase``
(https://slack.com/api), ``timeoutMs`` (15000). An answer with ``ok: false`` is ``E_SLACK_API``
carrying Slack's ``error`` string; see :mod:`goondan.base.tools._chat_api` for the token and retry
rules.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

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
    opt_int,
    opt_str,
    require_str,
)
from goondan.types import ToolContext

API_ERROR = "E_SLACK_API"
FILE_HOST_REFUSED = "E_SLACK_FILE_HOST"
TOKEN_ENV = ("SLACK_BOT_TOKEN", "SLACK_TOKEN")
DEFAULT_API = "https://slack.com/api"
FILE_HOSTS = ("files.slack.com",)
_SUGGESTIONS = {
    "not_authed": "Set the bot token (SLACK_BOT_TOKEN).",
    "invalid_auth": "The bot token was refused; check SLACK_BOT_TOKEN.",
    "channel_not_found": "Check the channel id (C..., D..., G...); the bot must be able to see the channel.",
    "not_in_channel": "Invite the bot to the channel first.",
    "missing_scope": "Add the OAuth scope Slack names in 'needed' to the app and reinstall it.",
    "message_not_found": "Check channel and ts: they name the message.",
    "cant_update_message": "A bot can only edit its own messages.",
    "cant_delete_message": "A bot can only delete its own messages.",
    "ratelimited": "Slack is rate limiting this app; wait before calling again.",
}


class _Slack:
    def __init__(self, ctx: ToolContext) -> None:
        self.token = resolve_token(ctx, "slack", TOKEN_ENV)
        self.api = api_base(ctx, "slack", DEFAULT_API)
        self.timeout = timeout_seconds(ctx, "slack")

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def method(self, name: str, http_method: str = "POST", **kwargs: Any) -> dict[str, Any]:
        """The JSON answer of Web API method ``name``; ``ok: false`` is :data:`API_ERROR`."""
        url = f"{self.api}/{name}"
        resp = await call(
            API_ERROR, f"slack {name}", http_method, url, self.token, timeout=self.timeout, headers=self.auth, **kwargs
        )
        try:
            data = resp.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise ToolExecutionError(
                API_ERROR,
                f"slack {name} answered HTTP {resp.status} without a Web API result",
                suggestion="Check the Tool config apiBase.",
            )
        if data.get("ok") is not True:
            error = redact(str(data.get("error") or f"http_{resp.status}"), self.token)
            needed = f" (needed: {data['needed']})" if isinstance(data.get("needed"), str) else ""
            raise ToolExecutionError(
                API_ERROR,
                f"slack {name} failed: {error}{needed}",
                suggestion=_SUGGESTIONS.get(error, "Slack's error string says what it refused."),
            )
        return data


def _message(raw: Any) -> dict[str, Any]:
    msg = raw if isinstance(raw, dict) else {}
    files = [
        {
            "id": f.get("id"),
            "name": f.get("name"),
            "mimetype": f.get("mimetype"),
            "size": f.get("size"),
            "urlPrivate": f.get("url_private_download") or f.get("url_private"),
        }
        for f in msg.get("files") or []
        if isinstance(f, dict)
    ]
    out = {
        "ts": msg.get("ts"),
        "user": msg.get("user"),
        "botId": msg.get("bot_id"),
        "text": msg.get("text", ""),
        "threadTs": msg.get("thread_ts"),
        "replyCount": msg.get("reply_count"),
        "files": files,
    }
    return {k: v for k, v in out.items() if v is not None and v != []}


async def send(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``slack__send`` → ``chat.postMessage``."""
    args = args_dict(input)
    check_keys(args, ("channel", "text", "threadTs", "replyBroadcast", "unfurlLinks"))
    channel, text = require_str(args, "channel"), require_str(args, "text")
    body: dict[str, Any] = {"channel": channel, "text": text}
    if (thread := opt_str(args, "threadTs")) is not None:
        body["thread_ts"] = thread
    if opt_bool(args, "replyBroadcast", False):
        body["reply_broadcast"] = True
    if args.get("unfurlLinks") is not None:
        body["unfurl_links"] = opt_bool(args, "unfurlLinks", True)
    data = await _Slack(ctx).method("chat.postMessage", json_body=body)
    return {"ok": True, "channel": data.get("channel", channel), "ts": data.get("ts"), "threadTs": thread}


async def read(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``slack__read`` → ``conversations.history``, or ``conversations.replies`` with ``threadTs``."""
    args = args_dict(input)
    check_keys(args, ("channel", "threadTs", "limit", "cursor", "oldest", "latest", "inclusive"))
    channel = require_str(args, "channel")
    limit = opt_int(args, "limit", 20, minimum=1, maximum=1000)
    params: dict[str, str | int] = {"channel": channel, "limit": limit or 20}
    for key, name in (("cursor", "cursor"), ("oldest", "oldest"), ("latest", "latest")):
        if (value := opt_str(args, key)) is not None:
            params[name] = value
    if opt_bool(args, "inclusive", False):
        params["inclusive"] = "true"
    thread = opt_str(args, "threadTs")
    method = "conversations.history"
    if thread is not None:
        method, params["ts"] = "conversations.replies", thread
    data = await _Slack(ctx).method(method, "GET", params=params)
    messages = [_message(m) for m in data.get("messages") or []]
    cursor = (data.get("response_metadata") or {}).get("next_cursor") or None
    return {
        "ok": True,
        "channel": channel,
        "threadTs": thread,
        "count": len(messages),
        "messages": messages,
        "hasMore": bool(data.get("has_more")),
        "nextCursor": cursor,
    }


async def edit(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``slack__edit`` → ``chat.update``."""
    args = args_dict(input)
    check_keys(args, ("channel", "ts", "text"))
    channel, ts, text = require_str(args, "channel"), require_str(args, "ts"), require_str(args, "text")
    data = await _Slack(ctx).method("chat.update", json_body={"channel": channel, "ts": ts, "text": text})
    return {"ok": True, "channel": data.get("channel", channel), "ts": data.get("ts", ts), "edited": True}


async def delete(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``slack__delete`` → ``chat.delete``."""
    args = args_dict(input)
    check_keys(args, ("channel", "ts"))
    channel, ts = require_str(args, "channel"), require_str(args, "ts")
    await _Slack(ctx).method("chat.delete", json_body={"channel": channel, "ts": ts})
    return {"ok": True, "channel": channel, "ts": ts, "deleted": True}


async def react(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``slack__react`` → ``reactions.add`` once per emoji name (``thumbsup`` or ``:thumbsup:``)."""
    args = args_dict(input)
    check_keys(args, ("channel", "ts", "emoji", "emojis"))
    channel, ts = require_str(args, "channel"), require_str(args, "ts")
    single, many = opt_str(args, "emoji"), args.get("emojis") or []
    if not isinstance(many, list) or not all(isinstance(e, str) for e in many):
        raise ToolInputError("'emojis' must be a list of emoji names")
    names = list(dict.fromkeys(e.strip().strip(":") for e in [*([single] if single else []), *many] if e.strip(":")))
    if not names:
        raise ToolInputError("give 'emoji' or 'emojis' (names like thumbsup)")
    slack = _Slack(ctx)
    already: list[str] = []
    for name in names:
        try:
            await slack.method("reactions.add", json_body={"channel": channel, "timestamp": ts, "name": name})
        except ToolExecutionError as exc:
            if "already_reacted" not in exc.message:
                raise
            already.append(name)  # the reaction is there: what the call was for
    return {"ok": True, "channel": channel, "ts": ts, "emojis": names, "alreadyReacted": already}


async def upload(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``slack__upload``: ``files.getUploadURLExternal``, the bytes to the upload URL, then
    ``files.completeUploadExternal`` into ``channel`` (optionally a thread, with a comment)."""
    args = args_dict(input)
    check_keys(args, ("channel", "path", "filename", "title", "threadTs", "initialComment"))
    channel, raw = require_str(args, "channel"), require_str(args, "path")
    data, name = read_workdir_file(ctx, raw)
    name = opt_str(args, "filename") or name
    slack = _Slack(ctx)
    ticket = await slack.method("files.getUploadURLExternal", data={"filename": name, "length": str(len(data))})
    upload_url, file_id = ticket.get("upload_url"), ticket.get("file_id")
    if not isinstance(upload_url, str) or not isinstance(file_id, str):
        raise ToolExecutionError(API_ERROR, "slack files.getUploadURLExternal gave no upload_url", suggestion="Retry.")
    sent = await call(
        API_ERROR,
        "slack file upload",
        "POST",
        upload_url,
        slack.token,
        timeout=max(slack.timeout, 60.0),
        content=data,
        headers={"Content-Type": media_type(name)},
    )
    if sent.status >= 400:
        raise ToolExecutionError(API_ERROR, f"slack file upload answered HTTP {sent.status}", suggestion="Retry.")
    form = {"files": json.dumps([{"id": file_id, "title": opt_str(args, "title") or name}]), "channel_id": channel}
    if (thread := opt_str(args, "threadTs")) is not None:
        form["thread_ts"] = thread
    if (comment := opt_str(args, "initialComment")) is not None:
        form["initial_comment"] = comment
    done = await slack.method("files.completeUploadExternal", data=form)
    shared = (done.get("files") or [{}])[0]
    return {
        "ok": True,
        "channel": channel,
        "fileId": file_id,
        "name": name,
        "size": len(data),
        "permalink": shared.get("permalink") if isinstance(shared, dict) else None,
    }


async def download_file(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``slack__downloadFile``: ``GET url`` (a file's ``url_private``) with the token, into ``path``."""
    args = args_dict(input)
    check_keys(args, ("url", "path", "maxBytes"))
    url, raw = require_str(args, "url"), require_str(args, "path")
    limit = opt_int(args, "maxBytes", MAX_FILE_BYTES, minimum=1, maximum=MAX_FILE_BYTES)
    assert limit is not None
    slack = _Slack(ctx)
    parts = urlsplit(url)
    allowed = {*FILE_HOSTS, urlsplit(slack.api).hostname or ""}
    if parts.scheme not in ("https", "http") or parts.hostname not in allowed:
        raise ToolExecutionError(
            FILE_HOST_REFUSED,
            f"refused to send the Slack token to {parts.hostname or url}",
            suggestion="Pass a Slack file's url_private (https://files.slack.com/...) as 'url'.",
        )
    what = "slack file download"
    resp = await call(
        API_ERROR, what, "GET", url, slack.token, timeout=slack.timeout, max_bytes=limit, headers=slack.auth
    )
    if resp.status >= 400:
        raise ToolExecutionError(API_ERROR, f"{what} answered HTTP {resp.status}", suggestion="Check the URL.")
    declared = resp.headers.get("content-type", "").split(";", 1)[0].strip() or None
    if declared == "text/html":
        # Slack answers a login page, not the file, when the token lacks files:read
        raise ToolExecutionError(
            API_ERROR, f"{what} got an HTML page instead of the file", suggestion="Add the files:read scope."
        )
    shown = write_workdir_file(ctx, raw, resp.body)
    return {"ok": True, "path": shown, "size": len(resp.body), "mediaType": media_type(parts.path, declared)}


handlers = {
    "send": send,
    "read": read,
    "edit": edit,
    "delete": delete,
    "react": react,
    "upload": upload,
    "downloadFile": download_file,
}

__all__ = ["handlers"]
