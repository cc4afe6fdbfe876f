"""Built-in ``webhook`` connector: a generic JSON webhook over HTTP.

Config: ``host`` (127.0.0.1), ``port`` (8080), ``path`` (/), ``replyMode`` ``sync`` (answer with the
agent's reply, the default), ``async`` (202 at once) or ``stream`` (Server-Sent Events as the model
writes, see below), ``requireSignature`` (``true`` when a secret is set). Secret ``signingSecret``
(or ``WEBHOOK_SECRET``/``SIGNING_SECRET``): the ``X-Signature-256`` (or ``X-Hub-Signature-256``/
``X-Signature``) header must be the hex HMAC-SHA256 of the raw body, ``sha256=`` prefix and
upper-case hex allowed. Rejected requests get 401 and are never emitted; a
body whose signature was already accepted within 10 minutes is a replay and is rejected the same way,
however its signature header is spelled (the guard remembers the verified content, not the header).

Body: ``{"text"|"message": ..., "name"|"event": ..., "instanceKey": ..., "properties": {...}}``.

``replyMode: stream`` answers an accepted request with ``200`` ``text/event-stream``: an
``event: delta`` per piece of text (``{"text", "step"}``; ``step`` counts the turn's model calls),
then one ``event: done`` (``{"ok": true, "text": <the whole reply>, "finishReason"}``) or ``event:
error`` (``{"ok": false, "error": {"code", "message", ...}}``), and the response ends. A ``: keep-alive``
comment goes out after :data:`KEEPALIVE_SECONDS` without an event (proxies close silent
connections). Pieces a slow client has not read yet are joined, so memory stays bounded by the
reply. A client that hangs up does not cancel the turn: it runs to its end and is kept in the
conversation. A request whose ``Accept`` names JSON and not ``text/event-stream`` gets the ``sync``
answer, so one Connection serves both kinds of client. Refusals (401, 400, ...) stay JSON.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson

from goondan._json import json_type_name
from goondan.connectors import (
    HttpRequest,
    HttpResponse,
    ReplayGuard,
    Reply,
    ReplyDelta,
    ReplyStream,
    content_key,
    serve_http,
    verify_hmac_sha256,
    wrong_route,
)
from goondan.errors import GoondanError

# The Connection secrets this connector reads: another name under spec.secrets fails the start
# (E_CONNECTOR_CONFIG), instead of leaving the secret unset.
SECRETS = ("signingSecret", "WEBHOOK_SECRET", "SIGNING_SECRET")

_SIG_HEADERS = ("x-signature-256", "x-hub-signature-256", "x-signature")
_INVALID_SIGNATURE = "missing or wrong signature: X-Signature-256 must be the hex HMAC-SHA256 of the body"
REPLY_MODES = ("sync", "async", "stream")
KEEPALIVE_SECONDS = 15.0
# The Connection's config and secrets (all strings: they are ValueSources), for the reference page.
CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "host": {"type": "string", "default": "127.0.0.1", "description": "Address to listen on."},
        # an integer in range, checked by gdn validate: "80a" or "70000" failed only when gdn run
        # started the connector, with Python's ValueError / OverflowError as the message
        "port": {
            "type": "integer",
            "minimum": 0,
            "maximum": 65535,
            "default": 8080,
            "description": "Port to listen on (0: a free one).",
        },
        "path": {
            "type": "string",
            "default": "/",
            "description": "The one path that takes events (others: 404); 'hook' and '/hook/' are '/hook'.",
        },
        "replyMode": {
            "enum": list(REPLY_MODES),
            "default": "sync",
            "description": "sync: the response carries the reply; async: 202 at once; stream: Server-Sent Events "
            "(delta, then done or error) while the model writes. Anything else fails the start (E_CONNECTOR_CONFIG).",
        },
        "requireSignature": {
            # boolean, so that gdn validate refuses "yes" or "1": read as not 'true', they turned the
            # signature check off although a signing secret was set
            "type": "boolean",
            "description": "true: refuse unsigned requests (401). Default: true when a signing secret is set.",
        },
        "defaultInstanceKey": {
            "type": "string",
            "default": "webhook:default",
            "description": "Conversation of a request without instanceKey.",
        },
        "signingSecret": {
            "type": "string",
            "description": "Secret (or WEBHOOK_SECRET / SIGNING_SECRET): X-Signature-256 must be the body's "
            "HMAC-SHA256.",
        },
    },
}


# an `approve ID` / `deny ID` message the sender got wrong is the client's error, not a failed turn
_DECISION_STATUS = {"E_APPROVAL_NOT_FOUND": 404, "E_APPROVAL_DECIDED": 409, "E_APPROVAL_INVALID": 400}


def reply_mode(ctx: Any) -> str:
    """``config.replyMode``, checked: a misspelt mode fails the start instead of answering some
    other way than the author meant."""
    mode = str(ctx.setting("replyMode", "sync")).strip().lower()
    if mode not in REPLY_MODES:
        # imported here: only a misspelt mode pays for the bundle package in the connector process
        from goondan.bundle._issues import did_you_mean

        hint = did_you_mean(mode, REPLY_MODES)
        # no "Connection/<name>" here: the supervisor puts it (and the connector) before the message
        raise GoondanError(
            "E_CONNECTOR_CONFIG",
            f"webhook replyMode {mode!r} is not one of {', '.join(REPLY_MODES)}" + (f"; {hint}" if hint else ""),
            suggestion="Set config.replyMode to sync (answer with the reply), async (202 at once) or stream "
            "(Server-Sent Events while the model writes).",
        )
    return mode


def _sse(event: bytes, data: Any) -> bytes:
    return b"event: " + event + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def _failure(reply: Reply) -> dict[str, Any]:
    error = dict(reply.error or {})
    error.setdefault("code", "E_CONNECTOR_EVENT")
    error.setdefault("message", "the turn failed")
    return error


def _delta_event(delta: ReplyDelta) -> bytes:
    return _sse(b"delta", {"text": delta.text, "step": delta.step})


async def _events(ctx: Any, stream: ReplyStream) -> AsyncIterator[bytes]:
    """The SSE body of one streamed reply (see the module docstring)."""
    finished = False
    stream.heartbeat(KEEPALIVE_SECONDS)
    try:
        async for delta in stream:
            if not delta.text:  # the stream's heartbeat: nothing new for a while
                yield b": keep-alive\n\n"
                continue
            yield _delta_event(delta)
        reply = await stream.reply
        finished = True
        if reply.ok:
            yield _sse(b"done", {"ok": True, "text": reply.text, "finishReason": reply.finish_reason})
        else:
            yield _sse(b"error", {"ok": False, "error": _failure(reply)})
    finally:
        stream.close()
        if not finished:
            ctx.logger.info("a streaming client hung up; its turn runs on")


def _wants_stream(req: HttpRequest) -> bool:
    accept = (req.header("accept") or "").lower()
    return "json" not in accept or "text/event-stream" in accept or "*/*" in accept


def _payload_problem(data: dict[str, Any]) -> str | None:
    """What is wrong with a JSON object as a webhook request, or None.

    A field of the wrong type is refused rather than dropped: an ``instanceKey`` sent as a number
    (``{"instanceKey": 42}``, a customer id) was ignored, so every such request went to the one
    default conversation, mixing every sender's history, and ``properties`` that were not an object
    were dropped, so ingress rules matching them routed the request elsewhere. An integer key is the
    same conversation as its decimal string.
    """
    text = data.get("text", data.get("message"))
    if text is None:
        return "text is required"
    if not isinstance(text, str):
        return f"text must be a string, not {_a(text)}"
    if not text.strip():
        return "text is required (it is empty)"
    key = data.get("instanceKey")
    if key is not None and (isinstance(key, bool) or not isinstance(key, str | int)):
        return f"instanceKey must be a string (or an integer), not {_a(key)}"
    props = data.get("properties")
    if props is not None and not isinstance(props, dict):
        return f"properties must be a JSON object, not {_a(props)}"
    return None


def _a(value: Any) -> str:
    """``an object``, ``a number``: the JSON type of a decoded value, for messages to the sender."""
    name = json_type_name(value)
    return f"an {name}" if name[0] in "aeio" else f"a {name}"


def _loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    import ipaddress

    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a hostname: it may resolve to any interface


async def run(ctx: Any) -> None:
    secret = ctx.secret("signingSecret", "WEBHOOK_SECRET", "SIGNING_SECRET")
    required = str(ctx.setting("requireSignature", "true" if secret else "false")).strip().lower()
    if required not in ("true", "false"):  # gdn validate says so first; never read a typo as "false"
        raise GoondanError(
            "E_CONNECTOR_CONFIG",
            f"webhook requireSignature {required!r} is not true or false",
            suggestion='write requireSignature: {value: "true"} (or "false")',
        )
    require = required == "true"
    # `path: hook` means /hook: a request's path always starts with '/', so every one was a 404
    path = "/" + str(ctx.setting("path", "/")).strip().lstrip("/")
    mode = reply_mode(ctx)
    replays = ReplayGuard()

    async def handle(req: HttpRequest) -> HttpResponse:
        refused = wrong_route(req, path)
        if refused is not None:
            return refused
        if require:
            if not secret:
                ctx.logger.warning("rejected: requireSignature is set but no signingSecret is configured")
                return HttpResponse.refusal(
                    401, "missing_signing_secret", "a signature is required but no signing secret is configured"
                )
            signature = next((req.header(h) for h in _SIG_HEADERS if req.header(h)), None)
            if not verify_hmac_sha256(secret, req.body, signature):
                ctx.logger.warning("rejected: invalid signature")
                return HttpResponse.refusal(401, "invalid_signature", _INVALID_SIGNATURE)
            if replays.seen_before(content_key(req.body)):
                ctx.logger.warning("rejected: replayed signature")
                return HttpResponse.refusal(
                    401, "replayed_signature", "this body was already accepted in the last 10 minutes"
                )
        try:
            data = req.json()
        except ValueError as exc:
            # where the JSON breaks (json.JSONDecodeError: "Expecting ',' delimiter: line 1 column 17")
            where = f" ({'not UTF-8' if isinstance(exc, UnicodeDecodeError) else exc})"
            where = f": {exc}" if isinstance(exc, json.JSONDecodeError) else where
            return HttpResponse.refusal(400, "invalid_payload", f"the body is not JSON{where}")
        if not isinstance(data, dict):
            return HttpResponse.refusal(400, "invalid_payload", "the body must be a JSON object")
        problem = _payload_problem(data)
        if problem is not None:
            return HttpResponse.refusal(400, "invalid_payload", problem)
        text = data.get("text", data.get("message"))
        name = data.get("name") or data.get("event") or "webhook_message"
        raw_key = data.get("instanceKey")
        key = str(raw_key) if raw_key is not None else None
        raw_props = data.get("properties")
        props: dict[str, Any] = raw_props if isinstance(raw_props, dict) else {}
        event = {
            "name": str(name),
            "message": {"type": "text", "text": text},
            "properties": {k: v for k, v in props.items() if isinstance(v, str | int | float | bool)},
            "instanceKey": key or ctx.setting("defaultInstanceKey", "webhook:default"),
        }
        if mode == "stream" and _wants_stream(req):
            stream = ctx.stream(event)

            def on_open(write: Callable[[bytes], bool]) -> None:
                # a delta is written in the callback that reads it off the connector channel while
                # the client keeps up (one loop iteration less per delta); else _events sends it
                stream.write_through(lambda delta: write(_delta_event(delta)))

            return HttpResponse.event_stream(_events(ctx, stream), on_open=on_open)
        pending = ctx.emit(event)
        if mode == "async":
            return HttpResponse.json(202, {"ok": True, "accepted": True})
        reply = await pending
        if not reply.ok:
            error = dict(reply.error or {})
            status = _DECISION_STATUS.get(str(error.get("code")), 500)
            return HttpResponse.json(status, {"ok": False, "error": error})
        return HttpResponse.json(200, {"ok": True, "text": reply.text})

    host = ctx.setting("host", "127.0.0.1")
    server = await serve_http(handle, host, int(ctx.setting("port", "8080")))
    ctx.logger.info("webhook listening on %s", server.sockets[0].getsockname())
    if not secret and "requireSignature" not in ctx.config and not _loopback(host):
        # an operator who opened the port to the network and forgot the secret: say so once, loudly
        ctx.logger.warning(
            "webhook on %s:%s accepts unsigned requests from anyone who can reach it (no signingSecret): "
            'set signingSecret: {valueFrom: {env: WEBHOOK_SECRET}}, or requireSignature: {value: "false"} '
            "if a proxy in front of it authenticates the callers",
            host,
            server.port,
        )
    ctx.ready()
    async with server:
        await asyncio.Event().wait()
