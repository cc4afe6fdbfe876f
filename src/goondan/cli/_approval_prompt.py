"""The approval prompt of an interactive ``gdn run`` session: while a turn waits for approvals,
each pending call is shown and answered on the next line (approve, deny with an optional note, or
edit its arguments); the decided turn goes on and its reply is shown like any other."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

QUESTION = "approve? [y]es / [n]o / [e]dit args: "
NOTE = "note for the model (optional): "
ARGS = "args as a JSON object: "


async def _ask(reader: Any, prompt: str) -> str | None:
    """One line from the session's reader thread, shown with ``prompt`` (None at end of input)."""
    reader.prompt = prompt
    try:
        reader.go.set()
        line: str | None = await reader.queue.get()
    finally:
        reader.prompt = type(reader).prompt
    if line is None:
        reader.queue.put_nowait(None)  # the reader has stopped: the session must see the end of input too
    return line


async def _ask_about(reader: Any, prompt: str, approval_id: str) -> str | None:
    """:func:`_ask` for a decision on ``approval_id``: Ctrl+C while it asks (nothing decided yet)
    says where the call stays before the session ends."""
    try:
        return await _ask(reader, prompt)
    except asyncio.CancelledError:
        sys.stderr.write("\n" + left_pending(approval_id) + "\n")
        sys.stderr.flush()
        raise


def describe(item: Any) -> str:
    shown = json.dumps(item.args, ensure_ascii=False)
    reason = f" ({item.reason})" if item.reason else ""
    return f"approval needed: {item.tool_name} {shown}{reason}"


async def decide_interactively(rt: Any, result: Any, reader: Any) -> Any:
    """Ask about each pending call until the turn no longer waits (or input ends: then it stays
    pending, to be decided later with ``gdn approvals``). Returns the turn's latest result."""
    while result is not None and result.finish_reason == "awaiting_approval" and result.pending_approvals:
        item = result.pending_approvals[0]
        sys.stderr.write(describe(item) + "\n")
        sys.stderr.flush()
        answer = await _ask_about(reader, QUESTION, item.approval_id)
        if answer is None:
            sys.stderr.write(left_pending(item.approval_id) + "\n")
            return result
        choice = answer.strip().lower()
        if choice in ("y", "yes"):
            result = await rt.approve(item.approval_id, by="cli")
        elif choice in ("n", "no"):
            note = await _ask_about(reader, NOTE, item.approval_id)
            result = await rt.approve(item.approval_id, approved=False, note=(note or "").strip() or None, by="cli")
        elif choice in ("e", "edit"):
            text = await _ask_about(reader, ARGS, item.approval_id)
            try:
                edited = json.loads(text or "")
            except json.JSONDecodeError as exc:
                sys.stderr.write(f"not JSON ({exc}); asking again\n")
                continue
            if not isinstance(edited, dict):
                sys.stderr.write("the arguments must be a JSON object; asking again\n")
                continue
            from ..errors import GoondanError

            try:
                result = await rt.approve(item.approval_id, args=edited, by="cli")
            except GoondanError as exc:
                if exc.code != "E_APPROVAL_INVALID":
                    raise
                sys.stderr.write(f"{exc.message}; asking again\n")  # they do not fit the tool's parameters
        else:
            sys.stderr.write("answer y, n or e\n")
    return result


def left_pending(approval_id: str) -> str:
    return (
        f"left pending: {approval_id} (decide it with `gdn approvals approve|deny {approval_id}`, "
        "or in the next `gdn run` of this conversation, which asks again)"
    )


async def waiting_from_before(rt: Any, agent: str, key: str) -> Any:
    """The calls of this conversation that an earlier session left waiting (Ctrl+C at the question,
    input that ended), as a paused result for :func:`decide_interactively`; None when none wait.

    A new message denies what waits (``decidedBy: superseded``), so a session that started without
    asking would let the first thing typed silently deny a call someone meant to approve."""
    workspace = rt.workspace  # the instance's own record first: listing scans the whole workspace
    record = workspace.instance(agent, key).read_paused_turn() if workspace is not None else None
    if not record:
        return None
    pending = await rt.pending_approvals(agent, key)
    if not pending:
        return None
    count = f"{len(pending)} tool call(s)" if len(pending) > 1 else "a tool call"
    sys.stderr.write(f"this conversation has {count} waiting for approval from an earlier turn\n")
    sys.stderr.flush()
    from ..results import TurnResult

    return TurnResult("", finish_reason="awaiting_approval", pending_approvals=pending)


def waiting_here(rt: Any, agent: str, key: str) -> list[dict[str, Any]]:
    """The undecided approvals of this one instance, from its paused-turn record (no workspace scan)."""
    from ..engine import approvals
    from ..errors import GoondanError

    workspace = rt.workspace
    try:
        record = workspace.instance(agent, key).read_paused_turn() if workspace is not None else None
    except GoondanError:
        return []
    return approvals.undecided(record) if record else []


def report_superseded(rt: Any, agent: str, key: str, before: list[dict[str, Any]]) -> None:
    """Say which of the calls that waited ``before`` a request no longer wait, and how they were
    decided: a new message denies what waits (``superseded``), which ``gdn run --input`` used to do
    without a word, so a call someone meant to approve was dropped unseen."""
    if not before:
        return
    from ..engine import approvals

    still = {a.get("approvalId") for a in waiting_here(rt, agent, key)}
    workspace = rt.workspace
    for item in before:
        approval_id = str(item.get("approvalId"))
        if approval_id in still:
            continue
        shown = f"{approval_id} ({item.get('toolName')} {json.dumps(item.get('args'), ensure_ascii=False)})"
        event = approvals.earlier_decision([workspace.instance(agent, key)], approval_id) if workspace else None
        if event is None or event.get("decidedBy") == "superseded":
            sys.stderr.write(f"denied {shown}: this message arrived before anyone decided; the call was not run\n")
        else:
            sys.stderr.write(f"no longer waits: {approvals.already_decided(approval_id, event).message}\n")
    sys.stderr.flush()


__all__ = [
    "decide_interactively",
    "describe",
    "left_pending",
    "report_superseded",
    "waiting_from_before",
    "waiting_here",
]
