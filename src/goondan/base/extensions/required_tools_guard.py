"""required-tools-guard: a turn may not end before one of ``requiredTools`` has succeeded.

Three middlewares cooperate. ``turn`` starts a fresh record for every turn invocation (never keyed
by turn id, so a repeated id cannot inherit an earlier turn's success). ``toolCall`` records each
tool whose call came back ``ok``. ``step`` looks at the step result: when the model wants to stop
(``should_continue`` false) and none of the required tools succeeded in this turn, it appends a
reminder as a **user** message (source ``extension/required-tools-guard``) and returns the result
with ``should_continue=True``, so the model gets another step. Any one required tool satisfies the
guard; the turn's ``maxStepsPerTurn`` still ends a turn whose model never complies.

If none of the required tools is in the step's tool catalog the guard lets the turn end (and
warns): demanding a tool the model cannot call would only burn steps.

Config: ``requiredTools`` (list of ``<tool>__<export>`` names, default empty = no-op),
``errorMessage`` (the reminder text; blank uses a default naming the tools).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from goondan.messages import user_message
from goondan.types import (
    ExtensionApi,
    StepContext,
    StepResult,
    ToolCallContext,
    ToolCallResult,
    TurnContext,
    TurnResult,
)

EXTENSION_NAME = "required-tools-guard"
DEFAULT_MESSAGE = "Before you finish, you must call at least one of these tools: {tools}"
MARKER = "__goondanRequiredToolsGuard"

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "requiredTools": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "errorMessage": {"type": "string"},
    },
    "additionalProperties": False,
}


def reminder_text(required: list[str], error_message: str) -> str:
    if error_message.strip():
        return error_message
    return DEFAULT_MESSAGE.format(tools=", ".join(required))


def register(api: ExtensionApi, config: dict[str, Any]) -> None:
    required: list[str] = list(dict.fromkeys(config.get("requiredTools") or []))
    text = reminder_text(required, str(config.get("errorMessage") or ""))
    if not required:
        return
    wanted = set(required)
    # the tools that succeeded in the running turn; turns of one instance never overlap
    succeeded: set[str] = set()

    async def turn(ctx: TurnContext) -> TurnResult:
        succeeded.clear()
        try:
            return await ctx.next()
        finally:
            succeeded.clear()

    async def tool_call(ctx: ToolCallContext) -> ToolCallResult:
        result = await ctx.next()
        if result.status == "ok":
            succeeded.add(ctx.tool_name)
        return result

    async def step(ctx: StepContext) -> StepResult:
        result = await ctx.next()
        succeeded.update(r.tool_name for r in result.tool_results if r.status == "ok")
        if result.should_continue or wanted & succeeded:
            return result
        available = {item.get("name") for item in ctx.tool_catalog if isinstance(item, dict)}
        if not wanted & available:
            api.logger.warning(
                "required-tools-guard: none of %s is in this step's tool catalog; letting the turn end",
                ", ".join(required),
            )
            return result
        reminder = user_message(
            text,
            {MARKER: {"requiredTools": required, "stepIndex": ctx.step_index}},
            source={"type": "extension", "extensionName": EXTENSION_NAME},
        )
        ctx.emit_message_event({"type": "append", "message": reminder})
        return dataclasses.replace(result, should_continue=True)

    api.pipeline.register("turn", turn)
    api.pipeline.register("toolCall", tool_call)
    api.pipeline.register("step", step)
