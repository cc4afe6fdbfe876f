"""Built-in ``discord`` connector: Discord interactions over HTTP with Ed25519 signature checks.

Config: ``host`` (127.0.0.1), ``port`` (8788), ``path`` (/), ``apiBase`` (https://discord.com/api/v10).
Secret ``publicKey`` (or ``DISCORD_PUBLIC_KEY``): the application's hex public key. Every request must
carry ``X-Signature-Ed25519`` over ``X-Signature-Timestamp + body``, the timestamp within ±300 s, and a
signed timestamp+body is accepted once (however the hex signature is spelled); anything else gets 401
and is never emitted. PING (type 1) is answered
``{"type": 1}``. A slash command (type 2) becomes ``slash_command`` with text ``/<name> <options>``; a
component (type 3) becomes ``component_interaction`` with text = ``custom_id``. Both are answered with a
deferred response (type 5) and the agent's reply is written into it through the interaction webhook.
Instance key ``discord:<channelId>``. Files given to ATTACHMENT options of a slash command are
downloaded and sent as image or file parts.
"""

from __future__ import annotations

import asyncio
from typing import Any

from goondan.connectors import (
    HttpRequest,
    HttpResponse,
    ReplayGuard,
    content_key,
    download_part,
    http_request,
    serve_http,
    verify_ed25519,
    within_window,
    wrong_route,
)

# The Connection secrets this connector reads: another name under spec.secrets fails the start
# (E_CONNECTOR_CONFIG), instead of leaving the secret unset.
SECRETS = ("publicKey", "DISCORD_PUBLIC_KEY")

# The Connection's config (all strings: ValueSources), checked by gdn validate and gdn run's load:
# a misspelt key (`prot`) was ignored and the connector listened on its default port. A literal, like
# the other connectors' (whose host/port/path entries it repeats): gdn validate reads it from the
# syntax tree without importing the connector runtime (bundle/_code.py).
CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "host": {"type": "string", "default": "127.0.0.1", "description": "Address to listen on."},
        "port": {
            "type": "integer",
            "minimum": 0,
            "maximum": 65535,
            "default": 8788,
            "description": "Port to listen on (0: a free one).",
        },
        "path": {
            "type": "string",
            "default": "/",
            "description": "The one path that takes events (others: 404); 'hook' and '/hook/' are '/hook'.",
        },
        "apiBase": {
            "type": "string",
            "default": "https://discord.com/api/v10",
            "description": "Base URL of the platform's API.",
        },
    },
}

ATTACHMENT_OPTION = 11  # an application command option of type ATTACHMENT: its value is an attachment id


def _command_text(data: dict[str, Any]) -> str:
    parts = ["/" + str(data.get("name", ""))]
    resolved = (data.get("resolved") or {}).get("attachments") or {}
    for opt in data.get("options") or []:
        if isinstance(opt, dict) and "value" in opt:
            value = opt["value"]
            if opt.get("type") == ATTACHMENT_OPTION and isinstance(resolved.get(str(value)), dict):
                value = resolved[str(value)].get("filename", value)
            parts.append(f"{opt.get('name')}={value}")
    return " ".join(parts)


def _files(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The attachments of a slash command's ATTACHMENT options (``data.resolved.attachments``)."""
    resolved = (data.get("resolved") or {}).get("attachments") or {}
    out: list[dict[str, Any]] = []
    for opt in data.get("options") or []:
        if isinstance(opt, dict) and opt.get("type") == ATTACHMENT_OPTION:
            item = resolved.get(str(opt.get("value")))
            if isinstance(item, dict) and isinstance(item.get("url"), str):
                out.append(item)
    return out


async def _attach(event: dict[str, Any], files: list[dict[str, Any]], logger: Any) -> dict[str, Any]:
    """Download the command's attachments from Discord's CDN into ``attachments``; one that cannot be
    downloaded is mentioned in the text as ``[file:NAME] URL``."""
    parts: list[dict[str, Any]] = []
    text = event["message"]["text"]
    for item in files:
        name = str(item.get("filename") or "attachment")
        try:
            parts.append(await download_part(item["url"], name=name, media_type=item.get("content_type")))
        except (OSError, ValueError) as exc:
            logger.warning("discord attachment %s not downloaded: %s", name, exc)
            text += f"\n[file:{name}] {item['url']}"
    event["message"] = {"type": "text", "text": text}
    if parts:
        event["attachments"] = parts
    return event


def _event(body: dict[str, Any]) -> dict[str, Any] | None:
    itype = body.get("type")
    data = body.get("data") or {}
    if itype == 2:
        name, text = "slash_command", _command_text(data)
    elif itype == 3:
        name, text = "component_interaction", str(data.get("custom_id", ""))
    else:
        return None
    channel = str(body.get("channel_id") or (body.get("channel") or {}).get("id") or "")
    member = body.get("member") or {}
    user = member.get("user") or body.get("user") or {}
    props = {
        "channel_id": channel,
        "guild_id": str(body.get("guild_id") or ""),
        "user_id": str(user.get("id") or ""),
        "username": str(user.get("username") or ""),
        "interaction_id": str(body.get("id") or ""),
        "command": str(data.get("name") or data.get("custom_id") or ""),
    }
    return {
        "name": name,
        "message": {"type": "text", "text": text},
        "properties": props,
        "instanceKey": f"discord:{channel}",
    }


async def run(ctx: Any) -> None:
    public_key = ctx.secret("publicKey", "DISCORD_PUBLIC_KEY")
    if not public_key:
        raise ValueError("the discord connector needs secret publicKey (or DISCORD_PUBLIC_KEY)")
    verify_ed25519(public_key, b"", "00" * 64)  # fail at start, not per request, when Ed25519 is missing
    api = ctx.setting("apiBase", "https://discord.com/api/v10").rstrip("/")
    path = ctx.setting("path", "/")
    replays = ReplayGuard()
    tasks: set[asyncio.Task[None]] = set()

    async def follow_up(app_id: str, token: str, pending: Any) -> None:
        reply = await pending
        content = reply.text if reply.ok and reply.text is not None else "Sorry, something went wrong."
        try:
            resp = await http_request(
                "PATCH",
                f"{api}/webhooks/{app_id}/{token}/messages/@original",
                json_body={"content": content},
                safe=True,
            )
            if resp.status >= 400:
                ctx.logger.warning("interaction follow-up failed: %s %s", resp.status, resp.body[:200])
        except OSError as exc:
            ctx.logger.warning("interaction follow-up failed: %s", exc)

    async def deliver(body: dict[str, Any], event: dict[str, Any]) -> None:
        # attachments are downloaded after the deferred response (Discord wants an answer within 3 s)
        files = _files(body.get("data") or {}) if body.get("type") == 2 else []
        if files:
            event = await _attach(event, files, ctx.logger)
        await follow_up(str(body.get("application_id", "")), str(body.get("token", "")), ctx.emit(event))

    async def handle(req: HttpRequest) -> HttpResponse:
        refused = wrong_route(req, path)
        if refused is not None:
            return refused
        ts = req.header("x-signature-timestamp") or ""
        sig = req.header("x-signature-ed25519")
        if not within_window(ts) or not verify_ed25519(public_key, ts.encode("utf-8") + req.body, sig):
            ctx.logger.warning("rejected: invalid Discord signature")
            return HttpResponse.refusal(401, "invalid_signature", "invalid request signature")
        if replays.seen_before(content_key(ts.encode("utf-8"), req.body)):
            ctx.logger.warning("rejected: replayed Discord interaction")
            return HttpResponse.refusal(401, "replayed_request", "this interaction was already handled")
        try:
            body = req.json()
        except ValueError:
            return HttpResponse.refusal(400, "invalid_payload", "the body is not JSON")
        if not isinstance(body, dict):
            return HttpResponse.refusal(400, "invalid_payload", "the body must be a JSON object")
        if body.get("type") == 1:
            return HttpResponse.json(200, {"type": 1})
        event = _event(body)
        if event is None:
            return HttpResponse.refusal(400, "unsupported_interaction", "unsupported interaction type")
        task = asyncio.create_task(deliver(body, event))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return HttpResponse.json(200, {"type": 5})

    server = await serve_http(handle, ctx.setting("host", "127.0.0.1"), int(ctx.setting("port", "8788")))
    ctx.ready()
    async with server:
        try:
            await asyncio.Event().wait()
        finally:  # stopping: follow-ups of turns that just finished are still being posted (as slack)
            if tasks:
                await asyncio.wait(set(tasks), timeout=2.0)
