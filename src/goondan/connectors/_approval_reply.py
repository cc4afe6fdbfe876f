"""Approvals from a chat: a connector message ``approve ID`` or ``deny ID [note]`` (a leading ``/``
is allowed) decides a paused tool call instead of starting a turn, and the reply to a turn that
pauses says what waits and how to answer. A message can only decide an approval of the agent
instance it is routed to, so one conversation never approves another's calls."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ..errors import GoondanError

_COMMAND = re.compile(r"^\s*/?(approve|deny)\s+(appr_[0-9A-Za-z]+)(?:\s+(.*?))?\s*$", re.S | re.I)


def parse_decision(text: Any) -> tuple[bool, str, str | None] | None:
    """``(approved, approval_id, note)`` for an ``approve ID`` / ``deny ID note`` message, else None."""
    if not isinstance(text, str):
        return None
    match = _COMMAND.match(text)
    if match is None:
        return None
    note = match.group(3) or None
    return match.group(1).lower() == "approve", match.group(2), note


async def decide(
    runtime: Any,
    agent: str,
    instance_key: str,
    parsed: tuple[bool, str, str | None],
    by: str,
    on_trace: Callable[[str], None] | None = None,
) -> Any:
    """Apply a chat decision to an approval of (agent, instance_key) and return the turn's result.

    ``on_trace`` is called, before the turn resumes, with the trace id the resumed turn runs under
    (the paused turn's own): what a streamed decision needs to pick that turn's text deltas."""
    approved, approval_id, note = parsed
    waiting = await runtime.pending_approvals(agent, instance_key)
    if all(item.approval_id != approval_id for item in waiting):
        from ..engine import approvals

        workspace = runtime.workspace  # decided a moment ago (someone else in the chat): say so
        here = [workspace.instance(agent, instance_key)] if workspace is not None else []
        earlier = approvals.earlier_decision(here, approval_id)
        if earlier is not None:
            raise approvals.already_decided(approval_id, earlier)
        raise GoondanError(
            "E_APPROVAL_NOT_FOUND",
            f"no pending approval {approval_id!r} in this conversation",
            suggestion="Answer with the id the waiting message named (approve ID or deny ID reason).",
        )
    if on_trace is not None:
        trace = _paused_trace(runtime, agent, instance_key, approval_id)
        if trace is not None:
            on_trace(trace)
    return await runtime.approve(approval_id, approved, note, by=by)


def _paused_trace(runtime: Any, agent: str, instance_key: str, approval_id: str) -> str | None:
    """The trace id of the paused turn that waits for ``approval_id``: resuming keeps it."""
    from ..engine import approvals
    from ..runtime._approvals import approval_records  # what Runtime.approve itself searches

    for _agent, _key, record in approval_records(runtime, agent, instance_key):
        if approvals.find(record, approval_id) is not None:
            trace = record.get("traceId")
            return trace if isinstance(trace, str) else None
    return None


def reply_text(result: Any) -> str | None:
    """The text sent back for a turn's result; a paused turn also lists what waits and how to answer."""
    if getattr(result, "finish_reason", None) != "awaiting_approval":
        return result.text  # type: ignore[no-any-return]
    lines = [result.text] if result.text else []
    for item in result.pending_approvals:
        reason = f" ({item.reason})" if item.reason else ""
        lines.append(f"Waiting for approval: {item.tool_name} {json.dumps(item.args, ensure_ascii=False)}{reason}")
        lines.append(f"Reply `approve {item.approval_id}` or `deny {item.approval_id} <reason>`.")
    return "\n".join(lines)


__all__ = ["decide", "parse_decision", "reply_text"]
