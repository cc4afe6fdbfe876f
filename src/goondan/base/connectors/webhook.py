"""Built-in ``webhook`` connector: a generic JSON webhook over HTTP.

Config: ``host`` (127.0.0.1), ``port`` (8080), ``path`` (/), ``replyMode`` ``sync`` (answer with the
agent's reply, the default) or ``async`` (202 at once), ``requireSignature`` (``true`` when a secret
is set). Secret ``signingSecret`` (or ``WEBHOOK_SECRET``/``SIGNING_SECRET``): the ``X-Signature-256``
(or ``X-Hub-Signature-256``/``X-Signature``) header must be the hex HMAC-SHA256 of the raw body,
``sha256=`` prefix and upper-case hex allowed. Rejected requests get 401 and are never emitted; a
body whose signature was already accepted within 10 minutes is a replay and is rejected the same way,
however its signature header is spelled (the guard remembers the verified content, not the header).

Body: ``{"text"|"message": ..., "name"|"event": ..., "instanceKey": ..., "properties": {...}}``.
"""

from __future__ import annotations

from typing import Any

from goondan.connectors import (
    HttpRequest,
    HttpResponse,
    ReplayGuard,
    content_key,
    serve_http,
    verify_hmac_sha256,
)

_SIG_HEADERS = ("x-signature-256", "x-hub-signature-256", "x-signature")


async def run(ctx: Any) -> None:
    import asyncio

    secret = ctx.secret("signingSecret", "WEBHOOK_SECRET", "SIGNING_SECRET")
    require = ctx.setting("requireSignature", "true" if secret else "false").lower() == "true"
    path = ctx.setting("path", "/")
    sync = ctx.setting("replyMode", "sync") != "async"
    replays = ReplayGuard()

    async def handle(req: HttpRequest) -> HttpResponse:
        if req.path != path:
            return HttpResponse.json(404, {"ok": False, "error": "not found"})
        if req.method != "POST":
            return HttpResponse.json(405, {"ok": False, "error": "use POST"})
        if require:
            if not secret:
                ctx.logger.warning("rejected: requireSignature is set but no signingSecret is configured")
                return HttpResponse.json(401, {"ok": False, "reason": "missing_signing_secret"})
            signature = next((req.header(h) for h in _SIG_HEADERS if req.header(h)), None)
            if not verify_hmac_sha256(secret, req.body, signature):
                ctx.logger.warning("rejected: invalid signature")
                return HttpResponse.json(401, {"ok": False, "reason": "invalid_signature"})
            if replays.seen_before(content_key(req.body)):
                ctx.logger.warning("rejected: replayed signature")
                return HttpResponse.json(401, {"ok": False, "reason": "replayed_signature"})
        try:
            data = req.json()
        except ValueError:
            return HttpResponse.json(400, {"ok": False, "reason": "invalid_payload"})
        if not isinstance(data, dict):
            return HttpResponse.json(400, {"ok": False, "reason": "invalid_payload"})
        text = data.get("text", data.get("message"))
        if not isinstance(text, str) or not text.strip():
            return HttpResponse.json(400, {"ok": False, "reason": "invalid_payload", "error": "text is required"})
        name = data.get("name") or data.get("event") or "webhook_message"
        key = data.get("instanceKey") if isinstance(data.get("instanceKey"), str) else None
        raw_props = data.get("properties")
        props: dict[str, Any] = raw_props if isinstance(raw_props, dict) else {}
        event = {
            "name": str(name),
            "message": {"type": "text", "text": text},
            "properties": {k: v for k, v in props.items() if isinstance(v, str | int | float | bool)},
            "instanceKey": key or ctx.setting("defaultInstanceKey", "webhook:default"),
        }
        pending = ctx.emit(event)
        if not sync:
            return HttpResponse.json(202, {"ok": True, "accepted": True})
        reply = await pending
        if not reply.ok:
            return HttpResponse.json(500, {"ok": False, "error": dict(reply.error or {})})
        return HttpResponse.json(200, {"ok": True, "text": reply.text})

    server = await serve_http(handle, ctx.setting("host", "127.0.0.1"), int(ctx.setting("port", "8080")))
    ctx.logger.info("webhook listening on %s", server.sockets[0].getsockname())
    ctx.ready()
    async with server:
        await asyncio.Event().wait()
