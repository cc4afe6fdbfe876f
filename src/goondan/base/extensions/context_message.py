"""context-message: puts the agent's system prompt (and, if enabled, runtime context blocks) into
the conversation as one system message, once per history.

Written only against the public extension API, so it doubles as a reference extension. The runtime
attaches it implicitly to agents that have ``spec.prompt`` but do not list it, because a prompt that
silently never reaches the model is the worst possible default.

Config (all optional): ``includeAgentPrompt`` (true), ``includeSwarmCatalog``, ``includeInboundContext``,
``includeCallContext``, ``includeRouteSummary`` (false), ``swarmCatalogInstruction`` (str).
"""

from __future__ import annotations

import hashlib
from typing import Any

from goondan.messages import system_message

EXTENSION_NAME = "context-message"
MARKER = "__goondanContextMessage"
DEFAULT_CATALOG_INSTRUCTION = "Use agents__catalog to re-check which agents you can call before delegating."

CONFIG_SCHEMA = {
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
    from goondan._json import dumps_str

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
            lines.append(f"eventMetadata={dumps_str(public)}")
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
            lines.append(f"replyTo.{key}={value}")
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


def register(api: Any, config: dict[str, Any]) -> None:
    include_prompt = config.get("includeAgentPrompt", True)
    include_catalog = config.get("includeSwarmCatalog", False)
    include_inbound = config.get("includeInboundContext", False)
    include_call = config.get("includeCallContext", False)
    include_route = config.get("includeRouteSummary", False)
    instruction = config.get("swarmCatalogInstruction", DEFAULT_CATALOG_INSTRUCTION)

    async def turn(ctx: Any) -> Any:
        runtime = ctx.runtime
        diagnostics = ctx.metadata.setdefault("extension.events", [])
        segments: list[tuple[str, str | None]] = []
        prompt = runtime.agent.prompt.system if include_prompt and runtime.agent.prompt else None
        segments.append(("agent.prompt.system", prompt or None))
        segments.append(
            ("runtime.swarm.catalog", _catalog_block(runtime, instruction) if include_catalog else None)
        )
        segments.append(("runtime.inbound", _inbound_block(runtime) if include_inbound else None))
        segments.append(("runtime.call", _call_block(runtime) if include_call else None))
        route = _route_block(runtime) if include_route and (include_inbound or include_call) else None
        segments.append(("runtime.route.summary", route))
        included = [(sid, text) for sid, text in segments if text]
        for sid, text in segments:
            diagnostics.append(
                {
                    "name": "context.segment.resolved",
                    "actor": EXTENSION_NAME,
                    "data": {"id": sid, "included": bool(text)},
                }
            )
        if not included:
            diagnostics.append({"name": "context.message.empty", "actor": EXTENSION_NAME})
            return await ctx.next()
        body = "\n\n".join(text for _, text in included if text)
        digest = hashlib.sha256(body.encode()).hexdigest()
        segment_ids = [sid for sid, _ in included]
        conversation = ctx.conversation_state
        remembered = await api.state.get() or {}
        duplicate = (
            remembered.get("promptHash") == digest
            and isinstance(remembered.get("messageId"), str)
            and conversation.has_message(remembered["messageId"])
        )
        if not duplicate:
            # the remembered message is gone (or the prompt changed): look for an equal one
            for message in conversation.next_messages:
                marker = message.metadata.get(MARKER)
                if isinstance(marker, dict) and marker.get("promptHash") == digest:
                    duplicate = True
                    await api.state.set({"promptHash": digest, "messageId": message.id})
                    break
        if duplicate:
            diagnostics.append(
                {"name": "context.message.duplicate", "actor": EXTENSION_NAME, "data": {"promptHash": digest}}
            )
        else:
            message = system_message(
                body,
                {MARKER: {"promptHash": digest, "segmentIds": segment_ids}},
                source={"type": "extension", "extensionName": EXTENSION_NAME},
            )
            ctx.emit_message_event({"type": "append", "message": message})
            await api.state.set({"promptHash": digest, "messageId": message.id})
            diagnostics.append(
                {
                    "name": "context.message.appended",
                    "actor": EXTENSION_NAME,
                    "data": {"promptHash": digest, "segmentIds": segment_ids},
                }
            )
        return await ctx.next()

    api.pipeline.register("turn", turn)
