"""Built-in ``github`` connector: GitHub webhooks (push, pull_request, issues, issue_comment).

Config: ``host`` (127.0.0.1), ``port`` (8789), ``path`` (/), ``apiBase`` (https://api.github.com).
Secrets: ``webhookSecret`` (or ``signingSecret``/``GITHUB_WEBHOOK_SECRET``; required) and optionally
``token`` (or ``GITHUB_TOKEN``) to post the agent's reply as an issue/PR comment. ``X-Hub-Signature-256``
must be ``sha256=<hex HMAC of the body>``, else 401; a request without ``X-GitHub-Delivery`` gets 400.
A delivery id already handled, or a signed body already handled under another delivery id, is a
replay and gets 409 without an event (both are remembered for 24 hours). ``ping`` is answered ``pong``. Events
``github_push``, ``github_pull_request``, ``github_issue``, ``github_issue_comment``; text is the head
commit message, the title or the comment body; instance key ``github:<owner/repo>``. Files a comment
links to on GitHub's upload hosts (config ``attachmentPrefixes``, comma-separated URL prefixes) are
downloaded (with the token, when there is one) and sent as image or file parts; no other URL is fetched.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from goondan.connectors import (
    HttpRequest,
    HttpResponse,
    ReplayGuard,
    content_key,
    download_part,
    http_request,
    serve_http,
    verify_hmac_sha256,
    wrong_route,
)

# The Connection secrets this connector reads: another name under spec.secrets fails the start
# (E_CONNECTOR_CONFIG), instead of leaving the secret unset.
SECRETS = ("webhookSecret", "signingSecret", "GITHUB_WEBHOOK_SECRET", "WEBHOOK_SECRET", "token", "GITHUB_TOKEN")

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
            "default": 8789,
            "description": "Port to listen on (0: a free one).",
        },
        "path": {
            "type": "string",
            "default": "/",
            "description": "The one path that takes events (others: 404); 'hook' and '/hook/' are '/hook'.",
        },
        "apiBase": {
            "type": "string",
            "default": "https://api.github.com",
            "description": "Base URL of the platform's API.",
        },
        "attachmentPrefixes": {
            "type": "string",
            "description": "Comma-separated URL prefixes of the files a comment links to that are downloaded "
            "(default: GitHub's upload hosts).",
        },
    },
}

_NAMES = {
    "push": "github_push",
    "pull_request": "github_pull_request",
    "issues": "github_issue",
    "issue_comment": "github_issue_comment",
}


# Markdown links and images in a comment body: ``[name](url)`` / ``![alt](url)``.
_LINK = re.compile(r"!?\[([^\]]*)\]\((https?://[^)\s]+)\)")
DEFAULT_ATTACHMENT_PREFIXES = (
    "https://github.com/user-attachments/",
    "https://user-images.githubusercontent.com/",
    "https://private-user-images.githubusercontent.com/",
)


def _linked_files(text: str, prefixes: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(name, url)`` of the files a comment links to under GitHub's upload hosts. Only those: a URL
    written by a commenter must never make the connector fetch anything else (an internal address)."""
    out: list[tuple[str, str]] = []
    for match in _LINK.finditer(text):
        name, url = match.group(1), match.group(2)
        if url.startswith(prefixes) and (name, url) not in out:
            out.append((name or url.rsplit("/", 1)[-1], url))
    return out


async def _attach(event: dict[str, Any], prefixes: tuple[str, ...], token: str | None, logger: Any) -> dict[str, Any]:
    """Download the files a comment links to (see :func:`_linked_files`) into ``attachments``; the
    links stay in the text, so one that cannot be downloaded is still visible to the agent."""
    parts: list[dict[str, Any]] = []
    for name, url in _linked_files(event["message"]["text"], prefixes):
        headers = {"Authorization": f"Bearer {token}"} if token else None
        try:
            parts.append(await download_part(url, name=name, headers=headers))
        except (OSError, ValueError) as exc:
            logger.warning("github attachment %s not downloaded: %s", name, exc)
    if parts:
        event["attachments"] = parts
    return event


def _event(kind: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    name = _NAMES.get(kind)
    if name is None:
        return None
    repo = str((payload.get("repository") or {}).get("full_name") or "")
    number: Any = ""
    if kind == "push":
        head = payload.get("head_commit") or {}
        text = str(head.get("message") or "")
    elif kind == "pull_request":
        pr = payload.get("pull_request") or {}
        text, number = str(pr.get("title") or ""), pr.get("number", "")
    elif kind == "issues":
        issue = payload.get("issue") or {}
        text, number = str(issue.get("title") or ""), issue.get("number", "")
    else:
        text = str((payload.get("comment") or {}).get("body") or "")
        number = (payload.get("issue") or {}).get("number", "")
    if not text.strip():
        return None
    props = {
        "event": kind,
        "action": str(payload.get("action") or ""),
        "repo": repo,
        "sender": str((payload.get("sender") or {}).get("login") or ""),
        "number": str(number),
        "ref": str(payload.get("ref") or ""),
    }
    return {
        "name": name,
        "message": {"type": "text", "text": text},
        "properties": props,
        "instanceKey": f"github:{repo}",
    }


async def run(ctx: Any) -> None:
    secret = ctx.secret("webhookSecret", "signingSecret", "GITHUB_WEBHOOK_SECRET", "WEBHOOK_SECRET")
    if not secret:
        raise ValueError("the github connector needs secret webhookSecret (or GITHUB_WEBHOOK_SECRET)")
    token = ctx.secret("token", "GITHUB_TOKEN")
    api = ctx.setting("apiBase", "https://api.github.com").rstrip("/")
    path = ctx.setting("path", "/")
    deliveries = ReplayGuard(ttl=24 * 3600)
    configured = ctx.setting("attachmentPrefixes", "")
    prefixes = tuple(p.strip() for p in configured.split(",") if p.strip()) or DEFAULT_ATTACHMENT_PREFIXES
    tasks: set[asyncio.Task[None]] = set()

    async def comment(event: dict[str, Any], pending: Any) -> None:
        reply = await pending
        props = event["properties"]
        if reply.text is None or not token or not props["number"]:
            return
        try:
            resp = await http_request(
                "POST",
                f"{api}/repos/{props['repo']}/issues/{props['number']}/comments",
                json_body={"body": reply.text},
                headers={"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json"},
                safe=True,  # a 429 / 503 from GitHub means the comment was not created
            )
            if resp.status >= 400:
                hint = (
                    f"; the Connection's token must be a GitHub token allowed to comment on {props['repo']}"
                    if resp.status in (401, 403, 404)
                    else ""
                )
                ctx.logger.warning(
                    "posting the comment on %s#%s failed: HTTP %s %s%s (the reply stays in the conversation)",
                    props["repo"],
                    props["number"],
                    resp.status,
                    resp.body[:200].decode("utf-8", "replace"),
                    hint,
                )
        except OSError as exc:
            ctx.logger.warning("posting the comment failed: %s", exc)

    async def deliver(event: dict[str, Any]) -> None:
        # linked files are downloaded after GitHub got its 202 (it wants an answer within 10 s)
        if event["name"] == "github_issue_comment":
            event = await _attach(event, prefixes, token, ctx.logger)
        await comment(event, ctx.emit(event))

    async def handle(req: HttpRequest) -> HttpResponse:
        refused = wrong_route(req, path)
        if refused is not None:
            return refused
        if not verify_hmac_sha256(secret, req.body, req.header("x-hub-signature-256")):
            ctx.logger.warning("rejected: invalid GitHub signature")
            return HttpResponse.refusal(
                401, "invalid_signature", "X-Hub-Signature-256 is missing or not the HMAC-SHA256 of the body"
            )
        delivery = (req.header("x-github-delivery") or "").strip()
        if not delivery:
            ctx.logger.warning("rejected: no X-GitHub-Delivery header")
            return HttpResponse.refusal(400, "missing_delivery_id", "no X-GitHub-Delivery header")
        # GitHub signs the body only, so the delivery id is attacker-controlled: the body decides too
        seen_id = deliveries.seen_before("id:" + delivery)
        seen_body = deliveries.seen_before("body:" + content_key(req.body))
        if seen_id or seen_body:
            ctx.logger.warning("rejected: delivery %s was already handled", delivery[:80])
            return HttpResponse.refusal(409, "duplicate_delivery", "this delivery was already handled")
        kind = req.header("x-github-event") or ""
        if kind == "ping":
            return HttpResponse.json(200, {"ok": True, "pong": True})
        try:
            payload = req.json()
        except ValueError:
            if (req.header("content-type") or "").startswith("application/x-www-form-urlencoded"):
                # GitHub's default content type for a new webhook: the most likely mistake
                ctx.logger.warning("rejected: a form-encoded delivery; the webhook's content type must be JSON")
                return HttpResponse.refusal(
                    400,
                    "invalid_payload",
                    "the body is form-encoded, not JSON: set the webhook's content type to application/json "
                    "(Settings -> Webhooks)",
                )
            return HttpResponse.refusal(400, "invalid_payload", "the body is not JSON")
        event = _event(kind, payload) if isinstance(payload, dict) else None
        if event is None:
            return HttpResponse.json(200, {"ok": True, "ignored": True})
        task = asyncio.create_task(deliver(event))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return HttpResponse.json(202, {"ok": True, "accepted": True})

    server = await serve_http(handle, ctx.setting("host", "127.0.0.1"), int(ctx.setting("port", "8789")))
    ctx.ready()
    async with server:
        try:
            await asyncio.Event().wait()
        finally:  # stopping: comments of turns that just finished are still being posted
            if tasks:
                await asyncio.wait(set(tasks), timeout=2.0)
