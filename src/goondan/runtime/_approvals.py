"""``Runtime.approve`` and ``Runtime.pending_approvals``: find a paused call in the workspace's
store, turn a decision into the inbound event that resumes its turn, and deny calls whose expiry
passed (docs/architecture.md#approvals).

Nothing here waits for a person. A paused turn is a record in its instance's store; the runtime
only reads it, so approvals can be listed and decided by a runtime started long after the turn
paused (``gdn approvals``). A runtime that is running when an approval expires decides it then
(a timer); one started later decides it the first time it lists or decides approvals.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from .._ids import utc_now
from .._json import json_problem
from ..engine import approvals
from ..errors import GoondanError
from ..results import PendingApproval, TurnResult

if TYPE_CHECKING:
    from ._runtime import Runtime

log = logging.getLogger("goondan.runtime")

# how many of the most recently written instances an unknown approval id is looked for in, as
# decided already (their runtime events are read: bounded, since a typo in a big workspace pays it)
RECENT_INSTANCES = 32


def approval_records(rt: Runtime, agent: str | None, instance_key: str | None) -> list[tuple[str, str, dict[str, Any]]]:
    """Every paused-turn record of this swarm's workspace: (agent, instance key, record)."""
    workspace = rt.workspace
    if workspace is None:
        return []
    out = []
    for info in workspace.list_instances():
        if agent is not None and info.agent_name != agent:
            continue
        if instance_key is not None and info.instance_key != instance_key:
            continue
        record = workspace.instance(info.agent_name, info.instance_key).read_paused_turn()
        if record is not None:
            out.append((info.agent_name, info.instance_key, record))
    return out


def _decision_event(rt: Runtime, key: str, record: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    event = rt._event(
        "",
        event_type=approvals.APPROVAL_EVENT_TYPE,
        instance_key=key,
        metadata=None,
        trace_id=record.get("traceId") if isinstance(record.get("traceId"), str) else None,
        source={"kind": "approval", "name": str(body.get("by") or "api")},
        auth=None,
    )
    event["approval"] = body
    return event


async def pending(rt: Runtime, agent: str | None, instance_key: str | None) -> list[PendingApproval]:
    """What waits, oldest first; approvals past their expiry are decided (denied) on the way."""
    out: list[PendingApproval] = []
    for name, key, record in approval_records(rt, agent, instance_key):
        waiting = approvals.undecided(record)
        if name in rt.agent_names and any(approvals.is_expired(a) for a in waiting):
            result = await submit(rt, name, key, _decision_event(rt, key, record, {"by": "expiry"}))
            out.extend(result.pending_approvals)
            continue
        out.extend(approvals.pending_list(record, name, key))
    out.sort(key=lambda p: (p.requested_at or "", p.approval_id))
    return out


def _check(approval_id: Any, approved: Any, note: Any, args: Any) -> None:
    if not isinstance(approval_id, str) or not approval_id:
        raise GoondanError(
            "E_APPROVAL_INVALID",
            f"approval_id must be a non-empty string, got {approval_id!r}",
            suggestion="Pass an approval_id from TurnResult.pending_approvals or `gdn approvals list`.",
        )
    if not isinstance(approved, bool):
        raise GoondanError(
            "E_APPROVAL_INVALID",
            f"approved must be True or False, got {approved!r}",
            suggestion="Pass approved=True to run the call or approved=False (with a note) to deny it.",
        )
    if note is not None and not isinstance(note, str):
        raise GoondanError(
            "E_APPROVAL_INVALID",
            f"note must be a string, got {type(note).__name__}",
            suggestion="Pass note= the text the model reads with the decision, or leave it out.",
        )
    if args is None:
        return
    if not approved:
        raise GoondanError(
            "E_APPROVAL_INVALID",
            "args can only be given with an approval (a denied call does not run)",
            suggestion="Drop args, or approve the call with the edited args.",
        )
    problem = json_problem(args, "args") if isinstance(args, dict) else f"args must be a JSON object, got {args!r}"
    if problem:
        raise GoondanError(
            "E_APPROVAL_INVALID",
            problem,
            suggestion='Pass the tool\'s arguments as a JSON object, e.g. {"cmd": "ls"}.',
        )


async def approve(
    rt: Runtime, approval_id: str, approved: bool, note: str | None, args: dict[str, Any] | None, by: str
) -> TurnResult:
    _check(approval_id, approved, note, args)
    for name, key, record in approval_records(rt, None, None):
        approval = approvals.find(record, approval_id)
        if approval is None:
            continue
        if approval.get("decision") is not None:
            raise approvals.decided_in_record(approval_id, approval)
        rt._resolve_target(name, key)  # an agent of another swarm of the workspace is refused here
        if args is not None:
            problem = approvals.edited_args_problem(rt.bundle.agent_plan(name), str(approval.get("toolName")), args)
            if problem is not None:
                raise problem
        body: dict[str, Any] = {"approvalId": approval_id, "approved": approved, "note": note, "by": by}
        if args is not None:
            body["args"] = args
        return await submit(rt, name, key, _decision_event(rt, key, record, body))
    workspace = rt.workspace
    if workspace is not None:  # decided a moment ago (another terminal): say so, not "no such id"
        # the instances written to last, where a decision just made is: a typo need not read them all
        recent = sorted(workspace.list_instances(), key=lambda i: i.updated_at, reverse=True)[:RECENT_INSTANCES]
        stores = (workspace.instance(i.agent_name, i.instance_key) for i in recent)
        earlier = approvals.earlier_decision(stores, approval_id)
        if earlier is not None:
            raise approvals.already_decided(approval_id, earlier)
    raise GoondanError(
        "E_APPROVAL_NOT_FOUND",
        f"no pending approval {approval_id!r} in this swarm's workspace",
        suggestion="List what waits with `gdn approvals list` (or Runtime.pending_approvals()).",
    )


async def submit(rt: Runtime, agent: str, key: str, event: dict[str, Any]) -> TurnResult:
    result = await rt.executor.submit(agent, key, event)
    watch_expiry(rt, agent, key, result)
    return result


def watch_expiry(rt: Runtime, agent: str, key: str, result: TurnResult) -> None:
    """While this runtime runs, an approval is denied when it expires (a timer per paused turn);
    a runtime started later does it when it first lists or decides approvals."""
    if result.finish_reason != "awaiting_approval":
        return
    when = approvals.earliest_expiry(result.pending_approvals)
    if when is None:
        return
    delay = max(0.0, (when - utc_now()).total_seconds())
    task = asyncio.get_running_loop().create_task(_expire_later(rt, agent, key, delay))
    rt._approval_timers.add(task)
    task.add_done_callback(rt._approval_timers.discard)


async def _expire_later(rt: Runtime, agent: str, key: str, delay: float) -> None:
    await asyncio.sleep(delay + 0.01)
    try:
        # once deciding has begun, closing the runtime lets the resumed turn finish like any other
        await asyncio.shield(pending(rt, agent, key))
    except GoondanError as exc:
        log.warning("deciding expired approvals of %s:%s failed: [%s] %s", agent, key, exc.code, exc.message)


__all__ = ["approval_records", "approve", "pending", "submit", "watch_expiry"]
