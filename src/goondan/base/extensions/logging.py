"""logging: one log line when each turn, step and tool call starts and ends.

Turn and step lines are ``info``, tool-call lines ``debug``; a failing layer is logged at ``error``
and the exception re-raised unchanged, so observing never alters behaviour. Lines go to
``api.logger`` (the ``goondan.extension.logging`` stdlib logger) as ``event key=value ...`` so they
stay greppable; ``level`` filters them here (debug < info < warn < error) independently of how the
host configured stdlib logging.

Config: ``level`` (info), ``includeToolArgs`` (false; tool arguments may hold secrets),
``includeTurnMetadata`` (true: agent, instance and the keys middleware put into ``ctx.metadata``).
"""

from __future__ import annotations

import json
import time
from typing import Any

from goondan.types import (
    ExtensionApi,
    StepContext,
    StepResult,
    ToolCallContext,
    ToolCallResult,
    TurnContext,
    TurnResult,
)

EXTENSION_NAME = "logging"
LEVELS = {"debug": 10, "info": 20, "warn": 30, "warning": 30, "error": 40}

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "level": {"enum": ["debug", "info", "warn", "warning", "error"]},
        "includeToolArgs": {"type": "boolean"},
        "includeTurnMetadata": {"type": "boolean"},
    },
    "additionalProperties": False,
}


def _fmt(value: Any) -> str:
    if isinstance(value, str):
        return value if value and " " not in value else json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def line(event: str, **fields: Any) -> str:
    """``event k=v k=v`` with JSON for non-plain values; ``None`` fields are left out."""
    return " ".join([event, *(f"{k}={_fmt(v)}" for k, v in fields.items() if v is not None)])


def register(api: ExtensionApi, config: dict[str, Any]) -> None:
    threshold = LEVELS[str(config.get("level", "info"))]
    include_args = bool(config.get("includeToolArgs", False))
    include_meta = bool(config.get("includeTurnMetadata", True))
    logger = api.logger
    if hasattr(logger, "setLevel"):
        # the configured level is this extension's own logger's level: without it, stdlib's default
        # WARNING threshold would silently swallow every info/debug line the user asked for
        logger.setLevel(threshold)

    def log(level: str, text: str) -> None:
        if LEVELS[level] >= threshold:
            {"debug": logger.debug, "info": logger.info, "error": logger.error}[level](text)

    async def turn(ctx: TurnContext) -> TurnResult:
        started = time.perf_counter()
        meta = {"agentName": ctx.agent_name, "instanceKey": ctx.instance_key} if include_meta else {}
        event_type = ctx.input_event.get("type") if isinstance(ctx.input_event, dict) else None
        log("info", line("turn.start", turnId=ctx.turn_id, traceId=ctx.trace_id, inputType=event_type, **meta))
        try:
            result = await ctx.next()
        except Exception as exc:
            ms = int((time.perf_counter() - started) * 1000)
            log("error", line("turn.error", turnId=ctx.turn_id, durationMs=ms, error=f"{type(exc).__name__}: {exc}"))
            raise
        ms = int((time.perf_counter() - started) * 1000)
        keys = sorted(ctx.metadata) if include_meta and ctx.metadata else None
        log(
            "info",
            line(
                "turn.complete",
                turnId=ctx.turn_id,
                traceId=ctx.trace_id,
                durationMs=ms,
                finishReason=result.finish_reason,
                metadataKeys=keys,
            ),
        )
        return result

    async def step(ctx: StepContext) -> StepResult:
        started = time.perf_counter()
        log("info", line("step.start", turnId=ctx.turn_id, stepIndex=ctx.step_index, catalogSize=len(ctx.tool_catalog)))
        try:
            result = await ctx.next()
        except Exception as exc:
            ms = int((time.perf_counter() - started) * 1000)
            log(
                "error",
                line("step.error", stepIndex=ctx.step_index, durationMs=ms, error=f"{type(exc).__name__}: {exc}"),
            )
            raise
        ms = int((time.perf_counter() - started) * 1000)
        log(
            "info",
            line(
                "step.complete",
                turnId=ctx.turn_id,
                stepIndex=ctx.step_index,
                durationMs=ms,
                toolCalls=len(result.tool_calls),
                shouldContinue=result.should_continue,
            ),
        )
        return result

    async def tool_call(ctx: ToolCallContext) -> ToolCallResult:
        started = time.perf_counter()
        args = dict(ctx.args) if include_args else None
        log("debug", line("toolCall.start", toolName=ctx.tool_name, toolCallId=ctx.tool_call_id, args=args))
        try:
            result = await ctx.next()
        except Exception as exc:
            ms = int((time.perf_counter() - started) * 1000)
            log(
                "error",
                line("toolCall.error", toolName=ctx.tool_name, durationMs=ms, error=f"{type(exc).__name__}: {exc}"),
            )
            raise
        ms = int((time.perf_counter() - started) * 1000)
        log(
            "debug",
            line(
                "toolCall.complete",
                toolName=ctx.tool_name,
                toolCallId=ctx.tool_call_id,
                status=result.status,
                durationMs=ms,
            ),
        )
        return result

    api.pipeline.register("turn", turn)
    api.pipeline.register("step", step)
    api.pipeline.register("toolCall", tool_call)
