"""Built-in ``slack`` connector: Slack Events API over HTTP, replies with ``chat.postMessage``.

Config: ``host`` (127.0.0.1), ``port`` (8787), ``path`` (/), ``apiBase`` (https://slack.com/api).
Secrets: ``signingSecret`` (or ``SLACK_SIGNING_SECRET``; required: unsigned traffic is refused),
``botToken`` (or ``SLACK_BOT_TOKEN``) to post replies. Each request must carry a valid ``v0`` signature
with a timestamp within ±300 s, and a signed timestamp+body is accepted once (replays get 401). ``url_verification``
echoes the challenge. Bot messages and empty messages are acknowledged and ignored; Slack's retries of
an event id already handled are acknowledged and not emitted again. Events ``app_mention`` and
``message_im``; instance key ``slack:<channel>:<thread_ts or ts>``; replies go to the same thread.
Files of a message are downloaded with the bot token and sent as image or file parts (stored with the
conversation); one that cannot be downloaded is mentioned in the text as ``[file:NAME] URL``.
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
    verify_slack,
    wrong_route,
)

# The Connection secrets this connector reads: another name under spec.secrets fails the start
# (E_CONNECTOR_CONFIG), instead of leaving the secret unset.
SECRETS = ("signingSecret", "SLACK_SIGNING_SECRET", "SIGNING_SECRET", "botToken", "SLACK_BOT_TOKEN")

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
            "default": 8787,
            "description": "Port to listen on (0: a free one).",
        },
        "path": {
            "type": "string",
            "default": "/",
            "description": "The one path that takes events (others: 404); 'hook' and '/hook/' are '/hook'.",
        },
        "apiBase": {
            "type": "string",
            "default": "https://slack.com/api",
            "description": "Base URL of the platform's API.",
        },
    },
}


def _event(ev: dict[str, Any]) -> dict[str, Any] | None:
    etype = ev.get("type")
    if etype == "app_mention":
        name = "app_mention"
    elif etype == "message" and ev.get("channel_type") == "im":
        name = "message_im"
    else:
        return None
    if ev.get("bot_id") or ev.get("subtype") in ("bot_message", "message_changed", "message_deleted"):
        return None
    text = str(ev.get("text") or "")
    files = [item for item in ev.get("files") or [] if isinstance(item, dict) and item.get("url_private")]
    if not text.strip() and not files:
        return None
    thread = ev.get("thread_ts") or ev.get("ts") or ""
    props = {k: ev.get(k) for k in ("channel", "user", "ts", "thread_ts", "team") if ev.get(k) is not None}
    return {
        "name": name,
        "message": {"type": "text", "text": text.strip()},
        "properties": props,
        "instanceKey": f"slack:{ev.get('channel', '')}:{thread}",
        "files": files,  # downloaded by _attach before the event is emitted
    }


async def _attach(event: dict[str, Any], token: str | None, logger: Any) -> dict[str, Any]:
    """Download the message's files (``url_private`` needs the bot token) into ``attachments``; a
    file that cannot be downloaded is mentioned in the text instead, as ``[file:NAME] URL``."""
    files = event.pop("files")
    parts: list[dict[str, Any]] = []
    text = event["message"]["text"]
    for item in files:
        name, url = str(item.get("name") or ""), str(item["url_private"])
        try:
            if not token:
                raise ValueError("no botToken to download Slack files with")
            auth = {"Authorization": f"Bearer {token}"}
            parts.append(await download_part(url, name=name, media_type=item.get("mimetype"), headers=auth))
        except (OSError, ValueError) as exc:
            logger.warning("slack file %s not downloaded: %s", name, exc)
            text += f"\n[file:{name}] {url}"
    event["message"] = {"type": "text", "text": text.strip()}
    if parts:
        event["attachments"] = parts
    return event


async def run(ctx: Any) -> None:
    secret = ctx.secret("signingSecret", "SLACK_SIGNING_SECRET", "SIGNING_SECRET")
    if not secret:
        raise ValueError("the slack connector needs secret signingSecret (or SLACK_SIGNING_SECRET)")
    token = ctx.secret("botToken", "SLACK_BOT_TOKEN")
    api = ctx.setting("apiBase", "https://slack.com/api").rstrip("/")
    path = ctx.setting("path", "/")
    signatures = ReplayGuard()
    event_ids = ReplayGuard(ttl=3600)
    tasks: set[asyncio.Task[None]] = set()

    async def post(ev: dict[str, Any], pending: Any) -> None:
        reply = await pending
        if reply.text is None or not token:
            if not token:
                ctx.logger.warning("no botToken: cannot post the reply to Slack")
            return
        body = {"channel": ev["properties"].get("channel"), "text": reply.text}
        body["thread_ts"] = ev["properties"].get("thread_ts") or ev["properties"].get("ts")
        try:
            resp = await http_request(
                "POST",
                f"{api}/chat.postMessage",
                json_body=body,
                headers={"Authorization": f"Bearer {token}"},
                safe=True,  # Slack answers 429 (Retry-After) without posting
            )
            if resp.status >= 400 or not (resp.json() or {}).get("ok", False):
                ctx.logger.warning("chat.postMessage failed: %s %s", resp.status, resp.body[:200])
        except (OSError, ValueError) as exc:
            ctx.logger.warning("chat.postMessage failed: %s", exc)

    async def handle(req: HttpRequest) -> HttpResponse:
        refused = wrong_route(req, path)
        if refused is not None:
            return refused
        ts = req.header("x-slack-request-timestamp")
        sig = req.header("x-slack-signature")
        if not verify_slack(secret, ts, req.body, sig):
            ctx.logger.warning("rejected: invalid or expired Slack signature")
            return HttpResponse.refusal(401, "invalid_signature", "invalid or expired Slack signature")
        if signatures.seen_before(content_key(str(ts).strip().encode("utf-8"), req.body)):
            ctx.logger.warning("rejected: replayed Slack request")
            return HttpResponse.refusal(401, "replayed_request", "this request was already handled")
        try:
            data = req.json()
        except ValueError:
            return HttpResponse.refusal(400, "invalid_payload", "the body is not JSON")
        if not isinstance(data, dict):
            return HttpResponse.refusal(400, "invalid_payload", "the body must be a JSON object")
        if data.get("type") == "url_verification":
            return HttpResponse.json(200, {"challenge": data.get("challenge", "")})
        ev = data.get("event")
        if data.get("type") != "event_callback" or not isinstance(ev, dict):
            return HttpResponse.json(200, {"ok": True, "ignored": True})
        event = _event(ev)
        if event is None:
            return HttpResponse.json(200, {"ok": True, "ignored": True})
        event_id = data.get("event_id")
        if isinstance(event_id, str) and event_ids.seen_before(event_id):
            return HttpResponse.json(200, {"ok": True, "duplicate": True})
        task = asyncio.create_task(deliver(event))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return HttpResponse.json(200, {"ok": True})

    async def deliver(event: dict[str, Any]) -> None:
        # files are downloaded after Slack got its 200 (it retries events not acknowledged in 3 s)
        event = await _attach(event, token, ctx.logger)
        await post(event, ctx.emit(event))

    server = await serve_http(handle, ctx.setting("host", "127.0.0.1"), int(ctx.setting("port", "8787")))
    ctx.ready()
    async with server:
        try:
            await asyncio.Event().wait()
        finally:  # stopping: replies of turns that just finished are still being posted
            if tasks:
                await asyncio.wait(set(tasks), timeout=2.0)
