"""context-message: puts the agent's system prompt (and, if enabled, runtime context blocks) into
the conversation as one system message, once per history.

Before a turn runs (turn middleware, so after the turn's inbound user message) it resolves five
segments in a fixed order — ``agent.prompt.system``, ``runtime.swarm.catalog`` (``[runtime_catalog]``
block from ``ctx.runtime.swarm``), ``runtime.inbound`` (``[runtime_inbound]``), ``runtime.call``
(``[runtime_call]``, omitted when nothing is known about a caller) and ``runtime.route.summary``
(``[runtime_route]``: who is talking to the agent, a caller beating the inbound source; only when the
inbound or call segment is enabled) — joins the included ones with blank lines and hashes the result
(sha256). If a message already carries that ``promptHash`` in its ``__goondanContextMessage`` marker
(or is an identical system message from this extension) nothing is emitted; otherwise one ``system``
message is appended with source ``extension/context-message`` and the marker ``{promptHash,
segmentIds}``. So a static prompt is injected once per history, and comes back by itself if a window
or compaction ever drops it.

Diagnostics go to ``ctx.metadata["extension.events"]`` as ``{name, actor, at, data?}``:
``context.segment.resolved {id, included}`` per segment, then one of ``context.message.appended
{promptHash, segmentIds}``, ``context.message.duplicate {promptHash}`` or ``context.message.empty``.

Written only against the public extension API, so it doubles as a reference extension. The runtime
attaches it implicitly to agents that have ``spec.prompt`` but do not list it, because a prompt that
silently never reaches the model is the worst possible default.

Config (all optional): ``includeAgentPrompt`` (true), ``includeSwarmCatalog``, ``includeInboundContext``,
``includeCallContext``, ``includeRouteSummary`` (false), ``swarmCatalogInstruction`` (str, the line
after the catalog block; empty string for none).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from goondan.messages import system_message
from goondan.types import ExtensionApi, TurnContext, TurnResult

EXTENSION_NAME = "context-message"
MARKER = "__goondanContextMessage"
DEFAULT_CATALOG_INSTRUCTION = "Use agents__catalog to re-check which agents you can call before delegating."

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "includeAgentPrompt": {"type": "boolean"},
        "includeSwarmCatalog": {"type": "boolean"},
        "includeInboundContext": {"type": "boolean"},
        "includeCallContext": {"type": "boolean"},
        "includeRouteSummary": {"type": "boolean"},
        "swarmCatalogInstruction": {"type": "string"},
    },
    "additionalProperties": False,
}


def _catalog_block(runtime: Any, instruction: str) -> str:
    swarm = runtime.swarm
    lines = [
        "[runtime_catalog]",
        f"swarm={swarm.swarm_name}",
        f"entryAgent={swarm.entry_agent}",
        f"selfAgent={swarm.self_agent}",
        f"availableAgents={', '.join(swarm.available_agents)}",
        f"callableAgents={', '.join(swarm.callable_agents)}",
        "[/runtime_catalog]",
    ]
    if instruction:
        lines.append(instruction)
    return "\n".join(lines)


def _inbound_block(runtime: Any) -> str:
    inbound = runtime.inbound
    lines = [
        "[runtime_inbound]",
        f"eventId={inbound.event_id}",
        f"eventType={inbound.event_type}",
        f"sourceKind={inbound.source_kind}",
        f"sourceName={inbound.source_name}",
        f"createdAt={inbound.created_at}",
    ]
    if inbound.instance_key:
        lines.append(f"instanceKey={inbound.instance_key}")
    if inbound.event_metadata:
        public = {k: v for k, v in inbound.event_metadata.items() if not k.startswith("__")}
        if public:
            lines.append(f"eventMetadata={json.dumps(public, ensure_ascii=False, sort_keys=True)}")
    lines.append("[/runtime_inbound]")
    return "\n".join(lines)


def _call_block(runtime: Any) -> str | None:
    call = runtime.call
    if call is None:
        return None
    lines = ["[runtime_call]"]
    for key, value in (
        ("callerAgent", call.caller_agent),
        ("callerInstanceKey", call.caller_instance_key),
        ("callerTurnId", call.caller_turn_id),
        ("callSource", call.call_source),
    ):
        if value:
            lines.append(f"{key}={value}")
    if call.call_stack:
        lines.append(f"callStack={' -> '.join(call.call_stack)}")
    if call.reply_to:
        for key, value in call.reply_to.items():
            if value not in (None, ""):
                lines.append(f"replyTo.{key}={value}")
    if len(lines) == 1:
        return None  # nothing known about the caller: omit the block
    lines.append("[/runtime_call]")
    return "\n".join(lines)


def _route_block(runtime: Any) -> str:
    lines = ["[runtime_route]", "precedence=call>inbound"]
    call = runtime.call
    inbound = runtime.inbound
    if call is not None and call.caller_agent:
        lines += ["senderKind=agent", f"senderName={call.caller_agent}"]
        lines.append(f"eventType={inbound.event_type}")
        lines.append(f"eventId={inbound.event_id}")
        if call.caller_instance_key:
            lines.append(f"senderInstanceKey={call.caller_instance_key}")
        if call.caller_turn_id:
            lines.append(f"senderTurnId={call.caller_turn_id}")
        if call.call_source:
            lines.append(f"senderSource={call.call_source}")
    else:
        lines += [f"senderKind={inbound.source_kind}", f"senderName={inbound.source_name}"]
        lines.append(f"eventType={inbound.event_type}")
        lines.append(f"eventId={inbound.event_id}")
        if inbound.instance_key:
            lines.append(f"senderInstanceKey={inbound.instance_key}")
    lines.append("[/runtime_route]")
    return "\n".join(lines)


def _diag(name: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "actor": EXTENSION_NAME,
        "at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
    }
    if data is not None:
        entry["data"] = data
    return entry


def resolve_segments(runtime: Any, config: dict[str, Any]) -> list[tuple[str, str | None]]:
    """The five segments in their fixed order, each with its text or ``None`` when excluded."""
    include_inbound = config.get("includeInboundContext", False)
    include_call = config.get("includeCallContext", False)
    prompt = runtime.agent.prompt.system if runtime.agent.prompt else None
    catalog = config.get("includeSwarmCatalog", False)
    instruction = config.get("swarmCatalogInstruction", DEFAULT_CATALOG_INSTRUCTION)
    route = config.get("includeRouteSummary", False) and (include_inbound or include_call)
    return [
        ("agent.prompt.system", prompt if config.get("includeAgentPrompt", True) and prompt else None),
        ("runtime.swarm.catalog", _catalog_block(runtime, instruction) if catalog else None),
        ("runtime.inbound", _inbound_block(runtime) if include_inbound else None),
        ("runtime.call", _call_block(runtime) if include_call else None),
        ("runtime.route.summary", _route_block(runtime) if route else None),
    ]


def _is_duplicate(message: Any, digest: str, body: str) -> bool:
    marker = message.metadata.get(MARKER)
    if isinstance(marker, dict) and marker.get("promptHash") == digest:
        return True
    source = message.source
    return bool(
        message.role == "system"
        and source.get("type") == "extension"
        and source.get("extensionName") == EXTENSION_NAME
        and message.text == body
    )


def register(api: ExtensionApi, config: dict[str, Any]) -> None:
    settings = dict(config)

    async def turn(ctx: TurnContext) -> TurnResult:
        diagnostics = ctx.metadata.setdefault("extension.events", [])
        segments = resolve_segments(ctx.runtime, settings)
        for sid, text in segments:
            diagnostics.append(_diag("context.segment.resolved", {"id": sid, "included": text is not None}))
        included = [(sid, text) for sid, text in segments if text is not None]
        if not included:
            diagnostics.append(_diag("context.message.empty"))
            return await ctx.next()
        body = "\n\n".join(text for _, text in included)
        digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
        segment_ids = [sid for sid, _ in included]
        if any(_is_duplicate(m, digest, body) for m in ctx.conversation_state.next_messages):
            diagnostics.append(_diag("context.message.duplicate", {"promptHash": digest}))
            return await ctx.next()
        message = system_message(
            body,
            {MARKER: {"promptHash": digest, "segmentIds": segment_ids}},
            source={"type": "extension", "extensionName": EXTENSION_NAME},
        )
        ctx.emit_message_event({"type": "append", "message": message})
        diagnostics.append(_diag("context.message.appended", {"promptHash": digest, "segmentIds": segment_ids}))
        return await ctx.next()

    api.pipeline.register("turn", turn)
