"""``gdn approvals list|approve ID|deny ID``: tool calls waiting for a person.

A paused turn lives in its instance's store, so no runtime needs to be running: the command starts
one in this process (inline executor), decides, and lets the resumed turn run to its end (or to its
next pause). When a ``gdn run`` of the same bundle is running it owns the instances, so the command
asks it over its control socket instead (ops ``approvals`` and ``approve``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping
from typing import Any

from ._env import bundle_dir, load_env
from ._output import EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, CliError, ErrorView, print_error
from ._state import active_runs, state_root, state_root_arg

ARGS_PREVIEW = 80


def cmd_approvals_list(args: argparse.Namespace) -> int:
    reply = _run(args, {"op": "approvals", "agent": args.agent, "instanceKey": args.instance_key})
    items = [i for i in reply.get("approvals") or () if isinstance(i, dict)]
    if args.json:
        sys.stdout.write(json.dumps(items, ensure_ascii=False) + "\n")
        return EXIT_OK
    for item in reply.get("expired") or ():  # denied just now, by this listing: nobody decided in time
        if isinstance(item, dict):
            sys.stderr.write("expired, denied: " + approval_line(item) + "\n")
    if not items:
        sys.stdout.write("no pending approvals\n")
        return EXIT_OK
    for item in items:
        sys.stdout.write(approval_line(item) + "\n")
    return EXIT_OK


def cmd_approvals_approve(args: argparse.Namespace) -> int:
    edited = _parse_args(args.args) if args.args is not None else None
    return _decide(args, True, edited)


def cmd_approvals_deny(args: argparse.Namespace) -> int:
    return _decide(args, False, None)


def approval_line(item: Mapping[str, Any]) -> str:
    """One pending approval on one line: id, where, tool, arguments (clipped), reason, expiry."""
    shown = json.dumps(item.get("args"), ensure_ascii=False)
    if len(shown) > ARGS_PREVIEW:
        shown = shown[: ARGS_PREVIEW - 3] + "..."
    line = (
        f"{item.get('approvalId')}  {item.get('agentName')}:{item.get('instanceKey')}  {item.get('toolName')} {shown}"
    )
    if item.get("reason"):
        line += f"  ({item['reason']})"
    if item.get("expiresAt"):
        line += f"  expires {item['expiresAt']}"
    return line


def _parse_args(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            "E_INVALID_ARGUMENT",
            f"--args is not valid JSON: {exc}",
            suggestion='Pass the edited arguments as a JSON object, e.g. --args \'{"cmd": "ls"}\'.',
            exit_code=EXIT_USAGE,
        ) from None
    if not isinstance(value, dict):
        raise CliError(
            "E_INVALID_ARGUMENT",
            f"--args must be a JSON object, got {type(value).__name__}",
            suggestion='Pass the edited arguments as a JSON object, e.g. --args \'{"cmd": "ls"}\'.',
            exit_code=EXIT_USAGE,
        )
    return value


def _decide(args: argparse.Namespace, approved: bool, edited: dict[str, Any] | None) -> int:
    request = {"op": "approve", "approvalId": args.id, "approved": approved, "note": args.note, "args": edited}
    result = _run(args, request).get("result") or {}
    if args.json:
        sys.stdout.write(json.dumps(result, ensure_ascii=False, default=str) + "\n")
    else:
        if result.get("text") is not None:
            sys.stdout.write(str(result["text"]) + "\n")
        for item in result.get("pendingApprovals") or ():
            sys.stdout.write("waiting for approval: " + approval_line(item) + "\n")
    if result.get("finishReason") == "error":
        if not args.json:
            print_error(ErrorView(result.get("error") or {}), json_mode=False, color=not args.no_color)
        return EXIT_INTERNAL
    return EXIT_OK


def _run(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any]:
    """Answer ``request`` through the running ``gdn run`` of this bundle, or in this process."""
    env = load_env(bundle_dir(args.path), args.env_file)
    from ..bundle import load_bundle_for_requests  # starts no connector: Connections' variables not needed

    bundle = load_bundle_for_requests(args.path, env=env, state_root=state_root_arg(args))
    reply = _delegate(args, bundle, request, env)
    if reply is None:
        reply = _local_while_locked(args, bundle, request, env)
    assert isinstance(reply, dict)
    if not reply.get("ok"):
        err = reply.get("error") or {}
        code = str(err.get("code") or "E_REQUEST_FAILED")
        raise CliError(
            code,
            str(err.get("message") or "the request failed"),
            suggestion=err.get("suggestion"),
            # what was typed (--args that do not fit the tool) is a usage error, as --args '[1]' is
            exit_code=EXIT_USAGE if code == "E_APPROVAL_INVALID" else EXIT_INTERNAL,
        )
    return reply


def _delegate(args: argparse.Namespace, bundle: Any, request: dict[str, Any], env: Mapping[str, str]) -> Any:
    from ..storage import bundle_workspace_identity
    from ._control import control_request, run_identity

    swarm = bundle.select_swarm(args.swarm)
    workspace = bundle_workspace_identity(bundle, swarm).workspace_id
    identity = run_identity(bundle, swarm.name, swarm.spec.instance_key or swarm.name)
    run = next(
        (
            r
            for r in active_runs(state_root(args, dict(env)))
            if r.get("workspace") == workspace and r.get("identity") == identity
        ),
        None,
    )
    if run is None:
        return None
    try:
        reply = control_request(str(run["socket"]), {**request, "identity": identity}, timeout=3600)
    except OSError:
        return None  # it went away meanwhile: answer here
    if not reply.get("ok") and (reply.get("error") or {}).get("code") in ("E_CONTROL_IDENTITY", "E_CONTROL_REQUEST"):
        return None  # another bundle, or a run too old to know approvals
    return reply


# how long a decision waits for another process that holds the conversation (another terminal
# deciding the same turn, which then runs the calls it approved), and how often it looks again
LOCKED_WAIT_SECONDS = 15.0
LOCKED_POLL_SECONDS = 0.2


def _locked(reply: Any) -> bool:
    """Whether ``reply`` failed only because another process holds the instance's lease."""
    if not isinstance(reply, dict):
        return False
    error = reply.get("error") if not reply.get("ok") else (reply.get("result") or {}).get("error")
    return isinstance(error, dict) and error.get("code") == "E_INSTANCE_LOCKED"


def _local_while_locked(args: argparse.Namespace, bundle: Any, request: dict[str, Any], env: Mapping[str, str]) -> Any:
    """Answer ``request`` in this process; while another process holds the conversation, look again.

    Two people deciding the same paused turn at once (two terminals) is the common way to meet
    that: the first resumes the turn and holds its conversation while the approved calls and the
    model run. A refused attempt decided nothing, so asking again is safe, and the answer it then
    gets is the true one (``E_APPROVAL_DECIDED`` naming who decided first) instead of a lock error.
    A holder that keeps it longer (a program of its own using goondan.Runtime) still ends in
    ``E_INSTANCE_LOCKED``, naming it."""
    import time

    deadline = time.monotonic() + LOCKED_WAIT_SECONDS
    told = False
    while True:
        from ._interrupt import interruptible  # asyncio: not on gdn --help's path

        reply = asyncio.run(interruptible(_local(args, bundle, request, env)))
        if not _locked(reply) or time.monotonic() >= deadline:
            return reply
        if not told and not args.quiet:
            sys.stderr.write("another process holds this conversation (it may be deciding it); waiting...\n")
            sys.stderr.flush()
            told = True
        time.sleep(LOCKED_POLL_SECONDS)


async def _local(args: argparse.Namespace, bundle: Any, request: dict[str, Any], env: Mapping[str, str]) -> Any:
    from ..runtime import Runtime

    runtime = Runtime(
        bundle,
        state_root=args.state_root,
        swarm=args.swarm,
        store=getattr(args, "store", None),
        executor="inline",
        env=env,
    )
    async with runtime as rt:
        return await control_op(rt, request)


def _expired(rt: Any, agent: Any, key: Any) -> list[dict[str, Any]]:
    """The approvals past their expiry that listing is about to deny (Runtime.pending_approvals
    decides them first), shown as list items: the list says so instead of just not showing them."""
    from ..engine import approvals
    from ..runtime._approvals import approval_records

    out: list[dict[str, Any]] = []
    for name, instance_key, record in approval_records(rt, agent, key):
        for item in approvals.pending_list(record, name, instance_key):
            if item.expires_at and approvals.is_expired({"expiresAt": item.expires_at}):
                out.append(item.to_dict())
    return out


async def control_op(rt: Any, request: Mapping[str, Any]) -> dict[str, Any]:
    """The ``approvals`` and ``approve`` ops, shared by this command and a running ``gdn run``'s
    control socket; decision errors come back as ``{"ok": false, "error"}``."""
    from ..errors import GoondanError

    try:
        if request.get("op") == "approvals":
            expired = _expired(rt, request.get("agent"), request.get("instanceKey"))
            items = await rt.pending_approvals(request.get("agent"), request.get("instanceKey"))
            return {"ok": True, "approvals": [i.to_dict() for i in items], "expired": expired}
        result = await rt.approve(
            request.get("approvalId"),
            request.get("approved", True),
            request.get("note"),
            request.get("args"),
            by="cli",
        )
        return {"ok": True, "result": result.to_dict()}
    except GoondanError as exc:
        return {"ok": False, "error": exc.to_dict()}


__all__ = ["approval_line", "cmd_approvals_approve", "cmd_approvals_deny", "cmd_approvals_list", "control_op"]
