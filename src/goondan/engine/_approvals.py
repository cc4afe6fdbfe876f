"""Durable tool-call approvals: the records a paused turn leaves in its instance's store, and the
pure helpers the turn loop uses to pause, decide and resume (docs/architecture.md#approvals).

A turn that reaches a call needing approval does not wait in memory: the step's other calls run,
the paused ones keep no result, and ``paused-turn.json`` (``InstanceStore.write_paused_turn``)
records everything resuming needs (turn and trace ids, the step, the inbound event, each pending
call with its arguments). A decision arrives as an inbound event of type
:data:`APPROVAL_EVENT_TYPE`, so every executor carries it like any other turn; once every call
of the step is decided the same turn continues from that step.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from typing import Any

from .._ids import iso, new_id, now_iso, parse_iso, utc_now
from ..errors import GoondanError
from ..messages import Message
from ..results import PendingApproval, ToolCall, ToolCallResult

# the inbound event type that carries a decision (``Runtime.approve``) to the instance
APPROVAL_EVENT_TYPE = "approval.decision"
RECORD_VERSION = 1
SUPERSEDED_NOTE = "A new message arrived before anyone decided; the call was not run."
EXPIRED_NOTE = "Nobody decided within {seconds:g} s; the call was not run."


class ApprovalPolicy:
    """Which calls need approval for one agent: exports with ``approval: required`` plus the
    agent's ``spec.approval.tools``; and how long an approval may wait."""

    __slots__ = ("timeout", "tools")

    def __init__(self, tools: set[str], timeout: float | None) -> None:
        self.tools = tools
        self.timeout = timeout

    @classmethod
    def of_plan(cls, plan: Any) -> ApprovalPolicy:
        spec = getattr(getattr(plan, "agent", None), "spec", None)
        cfg = getattr(spec, "approval", None)
        tools = set(getattr(cfg, "tools", None) or ())
        for res in getattr(plan, "tools", None) or ():
            for export in getattr(res.spec, "exports", None) or ():
                if getattr(export, "approval", None) == "required":
                    tools.add(f"{res.name}__{export.name}")
        return cls(tools, getattr(cfg, "timeout_seconds", None))

    def requires(self, tool_name: str) -> bool:
        return tool_name in self.tools


def new_request(call: ToolCall, reason: str | None, timeout: float | None, step_index: int) -> dict[str, Any]:
    """One pending approval as the paused-turn record keeps it."""
    now = utc_now()
    record: dict[str, Any] = {
        "approvalId": new_id("appr"),
        "toolCallId": call.id,
        "toolName": call.name,
        "args": call.args,
        "reason": reason,
        "stepIndex": step_index,
        "requestedAt": now_iso(),
        "decision": None,
    }
    if timeout is not None:
        record["expiresAt"] = iso(now + _dt.timedelta(seconds=timeout))
        record["timeoutSeconds"] = timeout
    return record


def undecided(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in record.get("approvals") or () if isinstance(a, dict) and a.get("decision") is None]


def find(record: dict[str, Any] | None, approval_id: str) -> dict[str, Any] | None:
    for approval in (record or {}).get("approvals") or ():
        if isinstance(approval, dict) and approval.get("approvalId") == approval_id:
            return approval
    return None


def is_expired(approval: dict[str, Any], now: _dt.datetime | None = None) -> bool:
    expires = approval.get("expiresAt")
    if not isinstance(expires, str):
        return False
    try:
        return parse_iso(expires) <= (now or utc_now())
    except ValueError:
        return False


def earliest_expiry(pending: list[PendingApproval]) -> _dt.datetime | None:
    """When the first of ``pending`` expires (the runtime decides it then), or None."""
    times = []
    for item in pending:
        if item.expires_at:
            try:
                times.append(parse_iso(item.expires_at))
            except ValueError:
                continue
    return min(times) if times else None


def pending_list(record: dict[str, Any] | None, agent_name: str, instance_key: str) -> list[PendingApproval]:
    """The undecided approvals of a paused-turn record, as the public type."""
    if not record:
        return []
    return [
        PendingApproval(
            approval_id=str(a.get("approvalId")),
            tool_call_id=str(a.get("toolCallId")),
            tool_name=str(a.get("toolName")),
            args=dict(a.get("args") or {}),
            agent_name=agent_name,
            instance_key=instance_key,
            reason=a.get("reason") if isinstance(a.get("reason"), str) else None,
            requested_at=a.get("requestedAt") if isinstance(a.get("requestedAt"), str) else None,
            expires_at=a.get("expiresAt") if isinstance(a.get("expiresAt"), str) else None,
        )
        for a in undecided(record)
    ]


def decision(approved: bool, note: str | None, args: dict[str, Any] | None, by: str) -> dict[str, Any]:
    out: dict[str, Any] = {"approved": approved, "note": note, "decidedAt": now_iso(), "decidedBy": by}
    if args is not None:
        out["args"] = args
    return out


def answers(record: dict[str, Any], assistant: Message | None = None) -> list[dict[str, Any]]:
    """The paused step's calls that wait for an answer, in the order the model made them (the
    order of ``assistant``'s tool-call parts): its pending approvals and its held results (calls
    made after the first paused one ran, and their result messages wait in the record so the
    history keeps that order)."""
    items = [a for a in record.get("approvals") or () if isinstance(a, dict)]
    items += [h for h in record.get("held") or () if isinstance(h, dict) and isinstance(h.get("message"), dict)]
    content = assistant.data.get("content") if assistant is not None else None
    if isinstance(content, list):
        order = {p.get("toolCallId"): i for i, p in enumerate(content) if isinstance(p, dict)}
        items.sort(key=lambda a: order.get(a.get("toolCallId"), len(order)))
    return items


def held_messages(record: dict[str, Any]) -> dict[str, Message]:
    """The held result messages of a paused-turn record, by tool call id (unreadable ones are
    skipped: their calls are answered as interrupted)."""
    out: dict[str, Message] = {}
    for held in record.get("held") or ():
        if isinstance(held, dict):
            try:
                out[str(held.get("toolCallId"))] = Message.from_record(held.get("message"))
            except GoondanError:
                continue
    return out


def inbox_messages(record: dict[str, Any]) -> list[Message]:
    """The inter-agent responses that arrived while the record's calls waited (unreadable ones,
    which only a damaged file could hold, are skipped)."""
    out: list[Message] = []
    for item in record.get("inbox") or ():
        try:
            out.append(Message.from_record(item))
        except GoondanError:
            continue
    return out


def denied_result(approval: dict[str, Any]) -> ToolCallResult:
    """The error result a denied call gives the model: ``E_TOOL_DENIED`` with the person's note."""
    dec = approval.get("decision") or {}
    note = dec.get("note")
    name = str(approval.get("toolName"))
    message = f"A person denied the call to '{name}'; it was not run."
    if isinstance(note, str) and note.strip():
        message += f" Note: {note.strip()}"
    return ToolCallResult(
        str(approval.get("toolCallId")),
        name,
        None,
        "error",
        {
            "name": "ToolDeniedError",
            "code": "E_TOOL_DENIED",
            "message": message,
            "suggestion": "Do not retry the same call unchanged; follow the note or ask the user how to go on.",
        },
    )


def decision_record(approval: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The ``approval.decided`` runtime event of one decided approval."""
    dec = approval.get("decision") or {}
    record = {
        **base,
        "approvalId": approval.get("approvalId"),
        "toolCallId": approval.get("toolCallId"),
        "toolName": approval.get("toolName"),
        "approved": bool(dec.get("approved")),
        "decidedBy": dec.get("decidedBy"),
        "argsEdited": "args" in dec,
    }
    if isinstance(dec.get("note"), str):
        record["note"] = dec["note"]
    return record


def request_record(approval: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The ``approval.requested`` runtime event of one pending approval."""
    record = {
        **base,
        "approvalId": approval.get("approvalId"),
        "toolCallId": approval.get("toolCallId"),
        "toolName": approval.get("toolName"),
        "args": approval.get("args"),
        "stepIndex": approval.get("stepIndex"),
    }
    for key in ("reason", "expiresAt"):
        if approval.get(key) is not None:
            record[key] = approval[key]
    return record


def edited_args_problem(plan: Any, tool_name: str, args: dict[str, Any]) -> GoondanError | None:
    """``E_APPROVAL_INVALID`` when a person's edited arguments do not fit the tool's parameters.

    Checked before the decision is recorded: a typo in ``--args`` used to be approved, run into
    ``E_TOOL_INVALID_ARGS`` and reach the model as a failed call, the approval used up, while the
    person saw exit 0. Refused here, nothing is decided and the same approval can be answered again.
    Tools whose schema the plan does not hold (registered by extensions at run time) are not checked."""
    from .. import _argcheck

    schema: dict[str, Any] | None = None
    for res in getattr(plan, "tools", None) or ():
        for export in getattr(res.spec, "exports", None) or ():
            if f"{res.name}__{export.name}" == tool_name:
                schema = export.parameters
    if schema is None:
        return None
    issues = _argcheck.check_args(schema, args)
    if not issues:
        return None
    required = ", ".join(map(str, schema.get("required") or [])) or "none"
    allowed = ", ".join(map(str, schema.get("properties") or {})) or "any"
    return GoondanError(
        "E_APPROVAL_INVALID",
        _argcheck.invalid_args_message(tool_name, issues) + "; nothing was decided",
        suggestion=f"Fix the edited arguments (required: {required}; allowed: {allowed}) and answer again, "
        "or approve without editing them.",
    )


def earlier_decision(stores: Iterable[Any], approval_id: str) -> dict[str, Any] | None:
    """The ``approval.decided`` runtime event of ``approval_id`` in one of ``stores``, or None.

    Once every call of a paused step is decided its record is gone, so an id decided a moment ago
    (a second terminal, a repeated chat reply) is no longer pending; this is how such a late answer
    learns that, who decided and when, instead of reading as an id that never existed. Only an
    answer that found nothing pending pays for the read."""
    for store in stores:
        try:
            events: list[dict[str, Any]] = store.read_runtime_events()
        except (GoondanError, OSError):
            continue
        for event in reversed(events):
            if event.get("type") == "approval.decided" and event.get("approvalId") == approval_id:
                return dict(event)
    return None


def decided_in_record(approval_id: str, approval: dict[str, Any]) -> GoondanError:
    """``E_APPROVAL_DECIDED`` for an approval whose decision is in its paused-turn record (the
    step's other calls still wait), worded as :func:`already_decided`."""
    dec = approval.get("decision") or {}
    event = {
        "approved": dec.get("approved"),
        "decidedBy": dec.get("decidedBy"),
        "timestamp": dec.get("decidedAt"),
        "toolName": approval.get("toolName"),
    }
    return already_decided(approval_id, event)


_DECIDED_BY = {"superseded": "because a new message arrived first", "expiry": "because nobody decided in time"}


def already_decided(approval_id: str, event: dict[str, Any]) -> GoondanError:
    """``E_APPROVAL_DECIDED`` for an approval an earlier answer decided (``event`` is its
    ``approval.decided`` runtime event): the verdict, by whom, when, and that the call ran or not."""
    approved = event.get("approved") is True
    by = str(event.get("decidedBy") or "someone")
    who = _DECIDED_BY.get(by, f"by {by}")
    when = f" at {event['timestamp']}" if isinstance(event.get("timestamp"), str) else ""
    outcome = "its call runs once, in the turn that decision resumed" if approved else "its call was not run"
    return GoondanError(
        "E_APPROVAL_DECIDED",
        f"approval {approval_id!r} ({event.get('toolName')}) was already {'approved' if approved else 'denied'} "
        f"{who}{when}; {outcome}",
        suggestion="Each approval is decided once: `gdn logs` shows what the resumed turn did, "
        "`gdn approvals list` what still waits.",
    )


__all__ = [
    "APPROVAL_EVENT_TYPE",
    "EXPIRED_NOTE",
    "RECORD_VERSION",
    "SUPERSEDED_NOTE",
    "ApprovalPolicy",
    "already_decided",
    "answers",
    "decided_in_record",
    "decision",
    "decision_record",
    "denied_result",
    "earlier_decision",
    "earliest_expiry",
    "edited_args_problem",
    "find",
    "held_messages",
    "inbox_messages",
    "is_expired",
    "new_request",
    "pending_list",
    "request_record",
    "undecided",
]
