"""agents: talk to the other agents of the swarm (docs/architecture.md#inter-agent-calls).

Everything goes through ``ctx.runtime`` (the runtime's inter-agent router), so the rules are the
runtime's: unknown targets, timeouts and call cycles (A→B→A) fail with ``AgentRequestError`` and
its code (``AGENT_NOT_FOUND``, ``AGENT_REQUEST_TIMEOUT``, ``CIRCULAR_CALL_DETECTED``), which the
tool executor turns into an error result the model can read. ``instanceKey`` defaults to the
caller's own instance key, so agents of one conversation share one instance of their helpers.
"""

from __future__ import annotations

import inspect
from typing import Any

from goondan._hints import did_you_mean, join_hints
from goondan.base.tools._common import (
    ToolExecutionError,
    args_dict,
    check_keys,
    opt_bool,
    opt_int,
    opt_object,
    opt_str,
    require_str,
)
from goondan.errors import GoondanError
from goondan.types import ToolContext, ToolRuntimeApi

MAX_TIMEOUT_MS = 3_600_000
DEFAULT_TIMEOUT_MS = 60_000


def _runtime(ctx: ToolContext) -> ToolRuntimeApi:
    try:
        runtime: ToolRuntimeApi | None = getattr(ctx, "runtime", None)
    except GoondanError:  # a ToolContext built without one (E_TOOL_RUNTIME_UNAVAILABLE)
        runtime = None
    if runtime is None:
        raise ToolExecutionError(
            "E_AGENTS_RUNTIME_UNAVAILABLE",
            "the agents tool needs the inter-agent runtime (ctx.runtime), which is not available here",
            suggestion="Run the agent inside a goondan Runtime with a Swarm.",
        )
    return runtime


async def _call(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _instance_key(args: dict[str, Any]) -> str | None:
    return opt_str(args, "instanceKey") or None


async def request(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``agents__request``: ask another agent and (unless ``async``) wait for its reply."""
    args = args_dict(input)
    check_keys(args, ("target", "input", "instanceKey", "timeoutMs", "async", "metadata"))
    target = require_str(args, "target")
    text = require_str(args, "input")
    timeout = opt_int(args, "timeoutMs", DEFAULT_TIMEOUT_MS, minimum=1, maximum=MAX_TIMEOUT_MS)
    is_async = opt_bool(args, "async", False)
    metadata = opt_object(args, "metadata")
    result = await _call(
        _runtime(ctx).request(
            target,
            text,
            instance_key=_instance_key(args),
            timeout_ms=timeout,
            async_=is_async,
            metadata=metadata,
        )
    )
    is_async = bool(getattr(result, "async_", is_async))
    reply = {
        "target": getattr(result, "target", target),
        "instanceKey": getattr(result, "instance_key", None) or _instance_key(args) or ctx.instance_key,
        "eventId": getattr(result, "event_id", None),
        "correlationId": getattr(result, "correlation_id", None),
        "accepted": bool(getattr(result, "accepted", True)),
        "async": is_async,
        "response": None if is_async else getattr(result, "response", None),
    }
    # a target with a structured output (Agent.spec.output) answers with JSON: the value, parsed
    output = None if is_async else getattr(result, "output", None)
    if output is not None:
        reply["output"] = output
    return reply


async def send(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``agents__send``: fire-and-forget message to another agent."""
    args = args_dict(input)
    check_keys(args, ("target", "input", "instanceKey", "metadata"))
    target = require_str(args, "target")
    text = require_str(args, "input")
    metadata = opt_object(args, "metadata")
    runtime = _runtime(ctx)
    result = await _call(runtime.send(target, text, instance_key=_instance_key(args), metadata=metadata))
    accepted = bool(getattr(result, "accepted", False))
    if not accepted:
        available: list[str] = []
        try:
            available = list((await _call(runtime.catalog())).get("availableAgents") or [])
        except Exception:  # the catalog only improves the message
            available = []
        if available and target not in available:
            raise ToolExecutionError(
                "AGENT_NOT_FOUND",
                f"agent '{target}' is not part of this swarm",
                suggestion=join_hints(did_you_mean(target, available), f"Send to one of: {', '.join(available)}."),
            )
        raise ToolExecutionError(
            "AGENT_SEND_REJECTED",
            f"the runtime did not accept the message for '{target}'",
            suggestion="Check agents__catalog for the agents you can reach, then send again.",
        )
    return {
        "target": getattr(result, "target", None) or target,
        "eventId": getattr(result, "event_id", None),
        "accepted": True,
    }


async def spawn(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``agents__spawn``: make sure an instance of ``target`` exists (optionally under ``instanceKey``)."""
    args = args_dict(input)
    check_keys(args, ("target", "instanceKey", "cwd"))
    target = require_str(args, "target")
    cwd = opt_str(args, "cwd") or None
    result = dict(await _call(_runtime(ctx).spawn(target, instance_key=_instance_key(args), cwd=cwd)))
    result.setdefault("cwd", cwd)
    return result


async def list_agents(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``agents__list``: instances this agent spawned (``includeAll``: spawned by anyone)."""
    args = args_dict(input)
    check_keys(args, ("includeAll",))
    include_all = opt_bool(args, "includeAll", False)
    result = await _call(_runtime(ctx).list(include_all=include_all))
    agents = list(result.get("agents") or [])
    return {"count": len(agents), "agents": agents}


async def catalog(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``agents__catalog``: the swarm's agents and which ones this agent may call."""
    args = args_dict(input)
    check_keys(args, ())
    result = dict(await _call(_runtime(ctx).catalog()))
    available = list(result.get("availableAgents") or [])
    callable_agents = list(result.get("callableAgents") or [])
    return {
        "swarmName": result.get("swarmName"),
        "entryAgent": result.get("entryAgent"),
        "selfAgent": result.get("selfAgent", ctx.agent_name),
        "availableCount": len(available),
        "callableCount": len(callable_agents),
        "availableAgents": available,
        "callableAgents": callable_agents,
    }


handlers = {"request": request, "send": send, "spawn": spawn, "list": list_agents, "catalog": catalog}
