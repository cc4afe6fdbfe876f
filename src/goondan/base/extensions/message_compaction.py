"""message-compaction: shrink a long history before a turn runs, leaving a summary in its place.

Triggered when the history has more than ``maxMessages`` messages or more than ``maxCharacters``
characters (text plus tool-call inputs and tool-result outputs). Two modes:

- ``remove`` (default): protect pinned messages (``metadata.pinned: true``), the agent's prompt
  (the newest context-message message), the last ``retainLastMessages`` messages and always the
  current input (the last message), then drop the oldest unprotected messages until both limits
  hold. The summary message *replaces* the newest dropped message, so it sits where the dropped
  history ended (after the prompt, before the retained tail), and every other dropped message gets a
  ``remove`` event.
- ``truncate``: one ``truncate`` event, then the protected messages re-appended in history order
  with the summary in the same place: after the kept messages older than the dropped history (the
  prompt), before the retained tail. (Upstream truncated everything, the current user input
  included; we keep it.)

Why the prompt is protected and the summary follows it: the prompt is the stable prefix a provider
caches (Anthropic reads every system message, in order, into its one ``system`` slot ahead of the
messages). Dropped, it would come back from context-message *after* the summary, so every
compaction would change the request from its first system block and read nothing from the cache;
kept first, a compaction request still reads tools + prompt from it.

When the protected messages alone exceed the limits, both modes end as a ``truncate`` that keeps the
pins, the current input and the newest whole units that still fit (and log a warning if even that is
over the limits).

The tool-call integrity rule (``_integrity``) governs every choice: a call and its results are one
unit, protected or dropped together, and broken units already in the history are dropped (even when
compaction is not triggered). All changes are message events, so they are in ``events.jsonl``.

Summary message (``appendSummary``, default true): a ``system`` message ``"<summaryPrefix>
mode=<m> removed=<n> chars=<c>"`` with metadata ``compaction.summary/mode/removedCount/
removedCharacters`` and source ``extension/message-compaction``. With ``summaryModel`` set, the
dropped messages (a previous summary included, so summaries roll forward) are sent to that model and
its answer follows the header line; see ``_summarizer`` for the inline model config. If the model
fails, the static header is used and ``compaction.summaryError`` records why.
"""

from __future__ import annotations

from typing import Any

from goondan.base.extensions._compaction_plan import (
    Limits,
    Mode,
    Plan,
    plan_compaction,
    tail_never_fits,
    tail_never_fits_message,
)
from goondan.base.extensions._summarizer import DEFAULT_INSTRUCTION, MODEL_SCHEMA, Summarizer
from goondan.messages import system_message
from goondan.types import ExtensionApi, Message, TurnContext, TurnResult

EXTENSION_NAME = "message-compaction"
DEFAULTS: dict[str, Any] = {
    "maxMessages": 40,
    "maxCharacters": 12000,
    "retainLastMessages": 8,
    "mode": "remove",
    "appendSummary": True,
    "summaryPrefix": "[message-compaction]",
    "summaryInstruction": DEFAULT_INSTRUCTION,
    "summaryMaxInputCharacters": 48000,
    "summaryTimeoutSeconds": 120,
}

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "maxMessages": {"type": "integer", "minimum": 1},
        "maxCharacters": {"type": "integer", "minimum": 1},
        "retainLastMessages": {"type": "integer", "minimum": 0},
        "mode": {"enum": ["remove", "truncate"]},
        "appendSummary": {"type": "boolean"},
        "summaryPrefix": {"type": "string"},
        "summaryModel": MODEL_SCHEMA,
        "summaryInstruction": {"type": "string", "minLength": 1},
        "summaryMaxInputCharacters": {"type": "integer", "minimum": 1},
        "summaryTimeoutSeconds": {"type": "number", "exclusiveMinimum": 0},
    },
    "additionalProperties": False,
}


def summary_header(prefix: str, plan: Plan) -> str:
    return f"{prefix} mode={plan.mode} removed={plan.removed_count} chars={plan.removed_characters}"


def register(api: ExtensionApi, config: dict[str, Any]) -> None:
    cfg = {**DEFAULTS, **config}
    mode: Mode = cfg["mode"]
    append_summary = bool(cfg["appendSummary"])
    prefix = str(cfg["summaryPrefix"])
    limits = Limits(
        max_messages=int(cfg["maxMessages"]),
        max_characters=int(cfg["maxCharacters"]),
        retain_last=int(cfg["retainLastMessages"]),
        summary_slot=append_summary,
    )
    if tail_never_fits(limits):  # gdn validate reports the same (bundle/_extension_checks.py)
        api.logger.warning("message-compaction: %s", tail_never_fits_message(limits))
    summarizer: Summarizer | None = None
    if cfg.get("summaryModel") is not None:
        summarizer = Summarizer(
            cfg["summaryModel"],
            str(cfg["summaryInstruction"]),
            int(cfg["summaryMaxInputCharacters"]),
            float(cfg["summaryTimeoutSeconds"]),
        )

    async def build_summary(ctx: TurnContext, plan: Plan, dropped: list[Message]) -> Message:
        header = summary_header(prefix, plan)
        metadata: dict[str, Any] = {
            "compaction.summary": True,
            "compaction.mode": plan.mode,
            "compaction.removedCount": plan.removed_count,
            "compaction.removedCharacters": plan.removed_characters,
        }
        text = header
        if summarizer is not None:
            try:
                summary = await summarizer.summarize(
                    dropped,
                    bundle_root=ctx.runtime.agent.bundle_root,
                    agent=ctx.agent_name,
                    instance=ctx.instance_key,
                )
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
                api.logger.error("message-compaction: summary model failed, using the static summary: %s", reason)
                if exc.__cause__ is not None:  # -v: where a python summary model's own code failed
                    api.logger.info("message-compaction: traceback of the summary model:", exc_info=exc.__cause__)
                metadata["compaction.summarySource"] = "static"
                metadata["compaction.summaryError"] = reason[:500]
            else:
                text = f"{header}\n{summary}"
                metadata["compaction.summarySource"] = "model"
        return system_message(text, metadata, source={"type": "extension", "extensionName": EXTENSION_NAME})

    async def turn(ctx: TurnContext) -> TurnResult:
        messages = list(ctx.conversation_state.next_messages)  # a snapshot: the view follows the events
        plan = plan_compaction(messages, mode, limits)
        if plan is None:
            return await ctx.next()
        if not plan.removed:
            # over the limits, but everything is pinned or is the current input: nothing may go
            api.logger.warning(
                "message-compaction: history is over the limits but every message is protected; nothing removed"
            )
            return await ctx.next()
        by_id = {m.id: m for m in messages}
        dropped = [by_id[i] for i in plan.removed]
        summary = await build_summary(ctx, plan, dropped) if plan.triggered and append_summary else None
        emit = ctx.emit_message_event
        if plan.mode == "truncate":
            emit({"type": "truncate"})
            position = {m.id: i for i, m in enumerate(messages)}
            anchor = position.get(plan.summary_anchor or "", -1)
            for message_id in plan.kept:
                if summary is not None and position[message_id] > anchor:
                    emit({"type": "append", "message": summary})
                    summary = None
                emit({"type": "append", "message": by_id[message_id]})
            if summary is not None:
                emit({"type": "append", "message": summary})
        else:
            for message_id in plan.removed:
                if summary is not None and message_id == plan.summary_anchor:
                    emit({"type": "replace", "targetId": message_id, "message": summary})
                else:
                    emit({"type": "remove", "targetId": message_id})
        if plan.triggered:
            log = api.logger.info if plan.within_limits else api.logger.warning
            log(
                "message-compaction %s: removed %d message(s) (%d chars), %d kept%s",
                plan.mode,
                plan.removed_count,
                plan.removed_characters,
                len(plan.kept),
                "" if plan.within_limits else "; pinned messages and the current input alone exceed the limits",
            )
        else:
            api.logger.warning(
                "message-compaction removed %d message(s) that broke tool-call/result pairing", plan.removed_count
            )
        return await ctx.next()

    api.pipeline.register("turn", turn)
