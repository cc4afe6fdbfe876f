"""Connectors: processes that turn outside traffic (stdin, webhooks, chat platforms) into agent turns.

A connector is a Python file with ``async def run(ctx)``. It runs in its own process
(:mod:`goondan.connectors.host`) under ``gdn run``; ``ctx.emit(event)`` sends a ConnectorEvent
``{name, message, properties, instanceKey}`` and returns a future of the agent's :class:`Reply`, which
is how replies go back out through the connector that received the event; ``ctx.stream(event)`` also
yields the reply's text as the model writes it (:class:`ReplyStream`). Connections route events to
agents (:func:`route_event`). The helpers below are what the built-in connectors use: ``serve_http``
(webhooks on uvicorn + Starlette, with the limits of :mod:`goondan.connectors._http`),
``http_request`` (the shared pooled client, :mod:`goondan._http_client`) and signature checks.
"""

from ._attachments import download_part
from ._context import ConnectorContext, Reply, ReplyDelta, ReplyStream, check_event, message_text, request_input
from ._http import ClientResponse, HttpRequest, HttpResponse, HttpServer, http_request, serve_http, wrong_route
from ._routing import RouteDecision, Rule, route_event, rule_matches, rules_from_ingress, stringify_properties
from ._signatures import (
    ReplayGuard,
    content_key,
    hmac_sha256_hex,
    slack_signature,
    verify_ed25519,
    verify_hmac_sha256,
    verify_slack,
    within_window,
)

__all__ = [
    "ClientResponse",
    "ConnectorContext",
    "HttpRequest",
    "HttpResponse",
    "HttpServer",
    "ReplayGuard",
    "Reply",
    "ReplyDelta",
    "ReplyStream",
    "RouteDecision",
    "Rule",
    "check_event",
    "content_key",
    "download_part",
    "hmac_sha256_hex",
    "http_request",
    "message_text",
    "request_input",
    "route_event",
    "rule_matches",
    "rules_from_ingress",
    "serve_http",
    "slack_signature",
    "stringify_properties",
    "verify_ed25519",
    "verify_hmac_sha256",
    "verify_slack",
    "within_window",
    "wrong_route",
]
