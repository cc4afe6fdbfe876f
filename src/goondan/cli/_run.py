"""``gdn run``: one request (``--input``), a chat session, or the swarm's connectors until interrupted.

Mode selection: ``--input``/``--input-file`` → one request, print the reply, exit. Otherwise, when the
swarm has Connections (and ``--interactive`` is not given) → start one connector process per Connection
and serve until Ctrl+C (exit 130) or SIGTERM (exit 0), or until every connector has finished (the
``cli`` connector at end of input). Otherwise → a session: on a terminal with line editing, history
and streamed replies; from a pipe one request per line.

A long-running ``gdn run`` registers itself under the state root and answers ``gdn restart`` on a
control socket (``_state``, ``_control``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import logging
import os
import platform
import re
import shlex
import signal
import sys
import threading
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from .._content import RequestInput
from ..errors import ConfigError, GoondanError
from ._attach import attach_command, check_attachments, request_input
from ._chat_commands import NOT_UTF8_HINT, local_reply, message_text, not_utf8
from ._env import bundle_dir, load_env
from ._interrupt import current as current_interrupts
from ._interrupt import interruptible
from ._lines import StatusLines, readline_buffer, route_logging
from ._output import (
    EXIT_CONFIG,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    ErrorView,
    Style,
    exit_code_for,
    print_error,
    unknown_agent,
)
from ._shared_workspace import warn_if_shared
from ._state import (
    active_runs,
    socket_path,
    state_root,
    state_root_arg,
    store_backend,
    store_label,
    write_run,
)


def cmd_run(args: argparse.Namespace) -> int:
    try:
        return _cmd_run(args)
    except ConfigError as exc:
        if args.json or len(exc.errors) < 2:
            raise  # one problem (or --json): the standard error output says it all
        _print_config_problems(exc, color=not args.no_color)
        return EXIT_CONFIG


def _print_config_problems(exc: ConfigError, *, color: bool) -> None:
    """Every problem of a bundle that does not load, each with its file:line, as ``gdn validate``
    shows them: fixing one at a time and re-running to find the next is the slow way."""
    for issue in exc.errors:
        print_error(issue, json_mode=False, color=color)
    sys.stderr.write(f"{len(exc.errors)} problems: the bundle was not started\n")


def _stdin_line() -> str:
    """One line of a piped stdin. Bytes that are not UTF-8 come through as lone surrogates (the chat
    refuses that line, saying so): a stdin that decodes strictly raised UnicodeDecodeError, and the
    chat ended there as at end of input, the lines after it dropped."""
    # Read through the text layer, told to pass undecodable bytes through: reading its buffer
    # directly from the reader thread made the interpreter abort at exit while that thread waited
    # in it ("could not acquire lock for <stdin> at interpreter shutdown", exit -6, seen when a chat
    # with stdin still open ends on an error).
    stdin = sys.stdin
    if getattr(stdin, "errors", "surrogateescape") != "surrogateescape" and hasattr(stdin, "reconfigure"):
        stdin.reconfigure(errors="surrogateescape")
    return stdin.readline()


def _cmd_run(args: argparse.Namespace) -> int:
    if args.input is not None and args.input_file is not None:
        raise CliError("E_INVALID_ARGUMENT", "use either --input or --input-file, not both", exit_code=EXIT_USAGE)
    text: str | None = args.input
    if text is not None and (where := not_utf8(text)) is not None:
        raise CliError(
            "E_INVALID_ARGUMENT",
            f"--input is not UTF-8 text ({where})",
            exit_code=EXIT_USAGE,
            suggestion=NOT_UTF8_HINT,
        )
    if args.input_file is not None:
        try:
            text = Path(args.input_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError("E_INVALID_ARGUMENT", f"cannot read --input-file: {exc}", exit_code=EXIT_USAGE) from None
        except UnicodeDecodeError as exc:  # a Latin-1 or UTF-16 text, or a binary file: not a traceback
            raise CliError(
                "E_INVALID_ARGUMENT",
                f"--input-file {args.input_file} is not UTF-8 text "
                f"(byte 0x{exc.object[exc.start]:02x} at offset {exc.start})",
                exit_code=EXIT_USAGE,
                suggestion=f"convert it (`iconv -f latin1 -t utf-8 {args.input_file}`), or send a binary file "
                f"with --attach {args.input_file} and the request as --input",
            ) from None
    if text is not None and not text.strip() and not getattr(args, "attach", None):
        # an unset shell variable (--input "$Q") or an empty file: the chat skips a blank line, and a
        # provider refuses an empty message (or the model answers nothing) only after a turn was stored
        given = "--input" if args.input_file is None else f"--input-file {args.input_file}"
        raise CliError(
            "E_INVALID_ARGUMENT",
            f"{given} is empty: there is no request to send",
            exit_code=EXIT_USAGE,
            suggestion="give the request's text (--input 'what is 2+3?'), attach a file with --attach, "
            "or leave --input out to chat",
        )
    check_attachments(getattr(args, "attach", None))
    env = load_env(bundle_dir(args.path), args.env_file)
    from ..bundle import load_bundle, load_bundle_for_requests

    request = request_input(text, getattr(args, "attach", None))
    # one request or an --interactive session starts no connector: the Connections' variables need
    # not be set for it
    load = load_bundle_for_requests if request is not None or args.interactive else load_bundle
    bundle = load(args.path, env=env, state_root=state_root_arg(args))
    warn_if_shared(args, bundle, env)
    _check_agent(args, bundle)
    if request is not None:
        delegated = _delegate_to_active_run(args, bundle, request, env)
        if delegated is not None:
            return delegated
        return asyncio.run(interruptible(_one_shot(args, bundle, request, env)))
    plans: list[Any] = []
    if not args.interactive:
        from ..connectors._supervisor import plan_connections

        plans = plan_connections(bundle, bundle.select_swarm(args.swarm), env)
    return asyncio.run(interruptible(_long_running(args, bundle, env, plans)))


def _check_agent(args: argparse.Namespace, bundle: Any) -> None:
    """An ``--agent`` that is not in the swarm is a usage error (exit 2, with the near name), found
    before anything starts: it used to reach the runtime and fail like a turn (exit 1), or wait for
    a running ``gdn run`` to refuse it."""
    if args.agent is None:
        return
    swarm = bundle.select_swarm(args.swarm)
    names = sorted(bundle.resolve_ref(ref, swarm, "Agent").name for ref in swarm.spec.agents)
    if args.agent not in names:
        raise unknown_agent(args.agent, swarm.name, names)


def _runtime(args: argparse.Namespace, bundle: Any, env: Mapping[str, str]) -> Any:
    from ..runtime import Runtime

    kwargs: dict[str, Any] = {
        "state_root": args.state_root,
        "swarm": args.swarm,
        "persist": not args.no_persist,
        "store": getattr(args, "store", None),
        "executor": getattr(args, "executor", None),
        "env": env,
    }
    ray_address = getattr(args, "ray_address", None)
    if ray_address:  # read by the Ray executor when it connects (docs/cluster.md)
        os.environ["GOONDAN_RAY_ADDRESS"] = ray_address
        if kwargs["executor"] is None:
            kwargs["executor"] = "ray"
    if args.watch:
        if "watch" in inspect.signature(Runtime).parameters:
            kwargs["watch"] = True
        else:
            sys.stderr.write("warning: --watch is not supported by this runtime; files are not watched\n")
    return Runtime(bundle, **kwargs)


def _delegate_to_active_run(
    args: argparse.Namespace, bundle: Any, text: RequestInput, env: Mapping[str, str]
) -> int | None:
    """Send ``--input`` through a running ``gdn run`` of the same swarm instance, if there is one.

    Two runtimes must never write the same instance directories at once; the running one owns them.
    """
    from ..storage import bundle_workspace_identity

    swarm = bundle.select_swarm(args.swarm)
    workspace = bundle_workspace_identity(bundle, swarm).workspace_id
    from ._control import control_request, run_identity

    identity = run_identity(bundle, swarm.name, swarm.spec.instance_key or swarm.name)
    runs = [r for r in active_runs(state_root(args, dict(env))) if r.get("workspace") == workspace]
    run = next((r for r in runs if r.get("identity") == identity), None)
    if run is not None and run.get("store") is not None:
        wanted = store_label(store_backend(args, dict(env)))
        if run["store"] != wanted:
            # its instances live in another store: nothing this request touches is held by it
            _verbose(
                args,
                f"the running gdn run (pid {run.get('pid')}) serves this bundle from {run['store']}, "
                f"not {wanted}: answering here",
            )
            return None
    if run is None:
        for other in runs:
            _verbose(
                args,
                f"the running gdn run (pid {other.get('pid')}) serves another bundle "
                f"({(other.get('identity') or {}).get('bundle') or other.get('bundle')!r}): answering here",
            )
        return None
    payload = {
        "op": "request",
        "input": text,
        "agent": args.agent,
        "instanceKey": args.instance_key,
        "identity": identity,
    }
    _verbose(args, f"delegating to running gdn run (pid {run.get('pid')})")
    try:
        reply = control_request(str(run["socket"]), payload, timeout=3600)
    except OSError:
        return None  # it went away meanwhile: run on our own
    if not reply.get("ok") and (reply.get("error") or {}).get("code") == "E_CONTROL_IDENTITY":
        _verbose(args, "the running gdn run serves another bundle: answering here")
        return None
    if not reply.get("ok"):
        err = reply.get("error") or {}
        code = str(err.get("code") or "E_REQUEST_FAILED")
        raise CliError(
            code,
            str(err.get("message") or "request failed"),
            exit_code=exit_code_for(code),
            suggestion=err.get("suggestion"),
        )
    result = reply.get("result") or {}
    if args.json:
        sys.stdout.write(json.dumps(result, ensure_ascii=False, default=str) + "\n")
    elif result.get("text") is not None:
        sys.stdout.write(str(result["text"]) + "\n")
    if result.get("finishReason") == "error":
        if not args.json:
            _print_turn_error(args, result.get("error"))
        return exit_code_for((result.get("error") or {}).get("code"))
    return EXIT_OK


def _verbose(args: argparse.Namespace, message: str) -> None:
    """A ``-v`` note on stderr (never on stdout, which carries the answer)."""
    if getattr(args, "verbose", 0) and not getattr(args, "quiet", False):
        sys.stderr.write(message + "\n")
        sys.stderr.flush()


_TURN_FAILED_LOG = re.compile(r"turn \S+ failed: ")


class _TurnFailureEcho(logging.Filter):
    """Drops the engine's ``turn ... failed: [CODE] message`` error record (from this process or
    forwarded from an agent process) where the command prints the turn's error itself, with its
    suggestion: without it every failed request showed its error twice. Kept with ``-v``, and for
    connector runs, where no one else reports a turn that failed."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR or not record.name.startswith("goondan.agent"):
            return True
        return _TURN_FAILED_LOG.match(record.getMessage()) is None


@contextlib.contextmanager
def _reporting_turn_errors(args: argparse.Namespace) -> Any:
    """While the command prints each request's error, the engine's echo of it is dropped."""
    if getattr(args, "verbose", 0):
        yield
        return
    echo = _TurnFailureEcho()
    handlers = list(logging.getLogger().handlers)  # stderr's, or the session's prompt-aware one
    for handler in handlers:
        handler.addFilter(echo)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(echo)


def _print_turn_error(args: argparse.Namespace, error: Any) -> None:
    """A failed turn's error; one that came with no suggestion (an exception of the user's
    middleware or tool code: E_TURN_FAILED) points at the traceback."""
    view = error if isinstance(error, ErrorView | GoondanError) else ErrorView(error or {})
    if not getattr(view, "suggestion", None) and not getattr(args, "verbose", 0):
        view = ErrorView(
            {
                "code": view.code,
                "message": view.message,
                "helpUrl": getattr(view, "help_url", None),
                "suggestion": "`gdn run -v` prints its traceback; `gdn logs -v` shows it from the turn.failed event.",
            }
        )
    print_error(view, json_mode=False, color=not args.no_color)


def _kill_on_hard_exit(rt: Any) -> None:
    """A second Ctrl+C exits at once: the agent processes are killed first and their instances
    marked idle, so that nothing is left ``processing`` for the next run or ``gdn instance list``."""
    interrupts = current_interrupts()
    kill_now = getattr(rt, "kill_now", None)
    if interrupts is not None and kill_now is not None:
        interrupts.before_exit(kill_now)


async def _request_cancellable(rt: Any, args: argparse.Namespace, text: RequestInput) -> Any:
    """``rt.request`` during which the first Ctrl+C cancels the turn (it commits with finish reason
    ``cancelled``) instead of the command (cli/_interrupt.py)."""
    interrupts = current_interrupts()
    if interrupts is None:
        return await rt.request(text, agent=args.agent, instance_key=args.instance_key)
    done = interrupts.cancel_turn_with(lambda: rt.cancel(args.agent, args.instance_key))
    try:
        return await rt.request(text, agent=args.agent, instance_key=args.instance_key)
    finally:
        done()


async def _one_shot(args: argparse.Namespace, bundle: Any, text: RequestInput, env: Mapping[str, str]) -> int:
    from ._spinner import status_line

    with _reporting_turn_errors(args):
        async with _runtime(args, bundle, env) as rt:
            _kill_on_hard_exit(rt)
            from ._approval_prompt import report_superseded, waiting_here

            where = (args.agent or rt.entry_agent, args.instance_key or rt.swarm_instance_key)
            waiting = waiting_here(rt, *where)  # a new message denies these: said below, not silently
            async with status_line(rt, args):  # a terminal's status line; nothing on pipes (cli/_spinner.py)
                result = await _request_cancellable(rt, args, text)
            report_superseded(rt, *where, waiting)
            if result.finish_reason == "cancelled":
                # Ctrl+C: what the cancelled turn was waiting on (a worker's turn it asked) stops with
                # the run as after a second Ctrl+C, instead of being waited for up to the grace period
                await rt.close(interrupt=True)
            # printed before the runtime closes: a graceful close lets the turns this request left
            # running finish (a worker whose request timed out), for up to the grace period
            code = _print_answer(args, result)
            if result.finish_reason != "cancelled":
                await _close_saying_what_it_waits_for(rt)
            return code


async def _close_saying_what_it_waits_for(rt: Any) -> None:
    """Close the runtime gracefully. Turns still running (a worker whose caller timed out or was
    cancelled, the target of a send) finish first, for up to the grace period: stderr names them
    and how to stop them, or the run would seem to hang. Once per run, at its end."""
    executor = getattr(rt, "executor", None)
    try:
        live = await executor.instances() if executor is not None else []
    except Exception:  # only improves the output
        live = []
    running = [f"{i.agent_name}@{i.instance_key}" for i in live if i.status == "processing"]
    if running:
        ctx = getattr(rt, "_ctx", None)
        grace_s = (ctx.grace_period_ms if ctx is not None else 30_000) / 1000
        turns, them = ("turns", "them") if len(running) > 1 else ("turn", "it")
        sys.stderr.write(
            f"waiting for the {turns} still running to finish ({', '.join(running)}; at most {grace_s:g} s): "
            f"Ctrl+C stops {them}\n"
        )
        sys.stderr.flush()
    await rt.close()


def _print_answer(args: argparse.Namespace, result: Any) -> int:
    """The one-shot request's answer (or error) on stdout/stderr; returns the exit code."""
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), ensure_ascii=False, default=str) + "\n")
    elif result.text is not None and result.finish_reason != "cancelled":
        sys.stdout.write(result.text + "\n")
    sys.stdout.flush()  # now, not when the process ends: the runtime may still wait for turns
    if result.finish_reason == "awaiting_approval" and not args.json:
        _report_waiting(args, result)
    if result.finish_reason == "cancelled":
        return EXIT_INTERRUPTED  # Ctrl+C cancelled the turn; it is committed as cancelled
    if result.finish_reason == "error":
        if not args.json:
            _print_turn_error(args, result.error)
        return exit_code_for((result.error or {}).get("code"))  # a python model that does not import: 3
    return EXIT_OK


def _report_waiting(args: argparse.Namespace, result: Any) -> None:
    """A turn that ends waiting for approvals is not finished, yet exits 0: the exit codes have none
    for "waiting" (docs/guides/approvals.md#in-scripts). stderr says so, names each call, how a script
    tells (``--json``) and the commands that decide, with the bundle and state root of this run so
    that they can be pasted as they are."""
    from ._approvals import approval_line

    pending = result.pending_approvals
    for item in pending:
        sys.stderr.write("waiting for approval: " + approval_line(item.to_dict()) + "\n")
    calls = "a tool call" if len(pending) == 1 else f"{len(pending)} tool calls"
    sys.stderr.write(
        f"the turn is not finished: it waits until {calls} {'is' if len(pending) == 1 else 'are'} approved or "
        'denied (exit status 0; with --json, finishReason is "awaiting_approval" and pendingApprovals '
        "lists the calls)\n"
    )
    where = "" if args.path == "." else f" {shlex.quote(str(args.path))}"
    for option, value in (("--swarm", args.swarm), ("--state-root", getattr(args, "state_root", None))):
        if value:
            where += f" {option} {shlex.quote(str(value))}"
    if getattr(args, "store", None):  # not the URL itself: it may hold a password
        where += " --store URL"
    ident = pending[0].approval_id if len(pending) == 1 else "ID"
    sys.stderr.write(
        f"decide with `gdn approvals approve {ident}{where}` or `gdn approvals deny {ident}{where} --note TEXT`"
        + (f" (`gdn approvals list{where}` shows them)" if len(pending) > 1 else "")
        + "\n"
    )


async def _long_running(args: argparse.Namespace, bundle: Any, env: Mapping[str, str], plans: list[Any]) -> int:
    from ..storage import bundle_workspace_identity

    root = state_root(args, dict(env))
    swarm = bundle.select_swarm(args.swarm)
    instance_key = swarm.spec.instance_key or swarm.name
    workspace = bundle_workspace_identity(bundle, swarm).workspace_id
    # checked before the runtime starts: two runtimes must never own the same instance files
    for run in active_runs(root):
        if run.get("workspace") == workspace:
            raise _run_active(args, bundle, instance_key, run)
    claim = _claim_service(args, env, workspace)
    stop = asyncio.Event()
    lost = _keep_claim(claim, stop)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with _routed_lines(args) as lines, _runtime(args, bundle, env) as rt:
        _kill_on_hard_exit(rt)
        supervisor = None
        server = None
        record: Path | None = None
        off_events = None
        sock = socket_path(root, workspace)
        try:
            if plans:
                from ..connectors._supervisor import ConnectorSupervisor

                level = "DEBUG" if args.verbose >= 2 else "INFO" if args.verbose else "WARNING"
                supervisor = ConnectorSupervisor(rt, plans, entry_agent=rt.entry_agent, log_level=level)
                if not args.quiet:
                    sys.stderr.write(f"Starting {len(plans)} connector(s)...\n")
                    sys.stderr.flush()
                await supervisor.start()
            from ._control import run_identity, serve_control

            identity = run_identity(bundle, swarm.name, instance_key)
            server = await serve_control(sock, _Control(rt, supervisor, identity).handle)
            record = write_run(
                root,
                workspace,
                {
                    "pid": os.getpid(),
                    "workspace": workspace,
                    "instanceKey": rt.swarm_instance_key,
                    "swarm": rt.swarm_name,
                    "bundle": identity["bundle"],
                    "identity": identity,
                    "socket": str(sock),
                    "store": store_label(rt.store),  # a request for another store is not its to answer
                    "mode": "connectors" if supervisor else "session",
                    "connectors": [{"connection": p.name, "connector": p.connector} for p in plans],
                },
            )
            if supervisor is None:
                with _reporting_turn_errors(args):
                    code = await _session(rt, args, stop, lines)
                if lost:
                    raise lost[0]
                await _close_saying_what_it_waits_for(rt)
                return code
            if args.verbose and not args.quiet:
                off_events = rt.on_runtime_event(_turn_printer(args))
            if not args.quiet:
                names = ", ".join(f"{p.name} ({p.connector})" for p in plans)
                sys.stderr.write(
                    f"Orchestrator started (instanceKey={rt.swarm_instance_key}, pid={os.getpid()})\n"
                    f"  connectors: {names}\n  logs: gdn logs {args.path} --state-root {root} --follow\n"
                )
                sys.stderr.flush()
            done = asyncio.create_task(supervisor.wait())
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({done, stopping}, return_when=asyncio.FIRST_COMPLETED)
            finished = done.done()
            for task in (done, stopping):
                task.cancel()
            failed = supervisor.failed() if finished else []
            if lost:
                raise lost[0]
            if failed:
                names = ", ".join(f"Connection/{name}" for name in failed)
                raise CliError(
                    "E_CONNECTOR_FAILED",
                    f"the connector of {names} stopped with an error",
                    suggestion=(
                        "Its error is logged above (the traceback of a connector's own code too; "
                        "gdn run -v for more); fix it and start gdn run again."
                    ),
                )
            return EXIT_OK
        finally:
            if off_events is not None:
                off_events()
            if supervisor is not None:
                if stop.is_set():  # SIGTERM: the replies of turns already running reach their connectors
                    await _drain_turns(rt)
                await asyncio.shield(supervisor.stop())
            if server is not None:
                server.close()
            if record is not None:
                with contextlib.suppress(OSError):
                    record.unlink()
            with contextlib.suppress(OSError):
                sock.unlink()
            if claim is not None:
                claim.release()


def _run_active(args: argparse.Namespace, bundle: Any, instance_key: str, run: Mapping[str, Any]) -> CliError:
    """E_RUN_ACTIVE for a session that serves this workspace already. When it serves another
    directory (a copied bundle: the workspace follows the Package name), that process refuses this
    bundle's ``--input``, so the way on is a Package name of its own, not a request through it."""
    message = f"swarm instance {instance_key!r} is already running (pid {run['pid']}, bundle {run.get('bundle')!r})"
    other = run.get("bundle")
    if isinstance(other, str) and other != str(Path(bundle.root).resolve()):
        manifest = Path(bundle.root) / "goondan.yaml"
        return CliError(
            "E_RUN_ACTIVE",
            f"{message}: that bundle has this one's Package name "
            f"({getattr(bundle, 'package_name', None)!r}), so both use one workspace",
            suggestion=f"To run this bundle on its own, give it a Package name of its own (metadata.name "
            f"in {manifest}); otherwise stop the gdn run of {other} first.",
        )
    return CliError(
        "E_RUN_ACTIVE",
        message,
        suggestion=f"Send it one request with `gdn run {args.path} --input TEXT` (that process "
        "answers), restart it with `gdn restart`, or stop it first.",
    )


def _claim_service(args: argparse.Namespace, env: Mapping[str, str], workspace: str) -> Any:
    """A PostgreSQL store is shared by machines whose state roots differ, so the check above cannot
    see a service on another machine: the workspace is claimed in the store too, else E_RUN_ACTIVE
    (storage/_postgres/_service.py). Other stores have nothing to claim (None)."""
    backend = store_backend(args, dict(env))
    claim = getattr(backend, "claim_service", None)
    if claim is None:
        return None
    return claim(workspace, f"pid {os.getpid()} on {platform.node()} ({args.path})")


def _keep_claim(claim: Any, stop: asyncio.Event) -> list[Exception]:
    """The store's claim is kept across a server restart (storage/_postgres/_service.py). If another
    service took the workspace meanwhile, this one stops serving (``stop``) and fails with the
    claim's error, found in the returned list, rather than have both accept work."""
    lost: list[Exception] = []
    watch = getattr(claim, "watch", None)
    if watch is None:
        return lost
    loop = asyncio.get_running_loop()

    def note(exc: Exception) -> None:
        lost.append(exc)
        stop.set()

    def on_lost(exc: Exception) -> None:  # on the claim's watcher thread
        with contextlib.suppress(RuntimeError):  # the loop already closed: nothing left to stop
            loop.call_soon_threadsafe(note, exc)

    watch(on_lost)
    return lost


async def _drain_turns(rt: Any) -> None:
    """Before the connectors stop on SIGTERM, let the turns already running finish (within the
    swarm's ``policy.shutdown.gracePeriodSeconds``): a connector stopped first could not deliver
    their replies (the github connector's PR comment was lost although its turn completed)."""
    ctx = getattr(rt, "_ctx", None)
    grace_s = (ctx.grace_period_ms if ctx is not None else 30_000) / 1000
    try:
        await asyncio.wait_for(rt.wait_idle(), grace_s)
    except Exception:
        # the grace period is spent: stop what still runs now (as Ctrl+C does: what it made durable
        # stays) rather than give it a second grace period in the runtime's own close
        with contextlib.suppress(Exception):
            await rt.close(interrupt=True)


@contextlib.asynccontextmanager
async def _routed_lines(args: argparse.Namespace) -> AsyncIterator[StatusLines]:
    """Log records and ``--watch`` reports of a long-running run go through one prompt-aware printer."""
    lines = StatusLines()
    undo = route_logging(args, lines)
    try:
        yield lines
    finally:
        undo()


def _turn_printer(args: argparse.Namespace) -> Any:
    """A runtime-event listener printing one line per finished turn (``gdn run -v`` with connectors)."""
    from ._logs import render_record

    style = Style(sys.stderr, not args.no_color)

    def show(record: dict[str, Any]) -> None:
        if str(record.get("type", "")).startswith("turn."):
            sys.stderr.write(render_record(record, style) + "\n")

    return show


class _Control:
    """Answers control requests of ``gdn restart`` / ``gdn instance restart`` for this process."""

    def __init__(self, rt: Any, supervisor: Any, identity: dict[str, Any]) -> None:
        self.rt = rt
        self.supervisor = supervisor
        self.identity = identity

    async def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        from ._control import identity_mismatch

        op = request.get("op")
        if op == "hello":
            return {"ok": True, "pid": os.getpid(), "identity": self.identity}
        if op == "status":
            return {
                "ok": True,
                "pid": os.getpid(),
                "swarm": self.rt.swarm_name,
                "instanceKey": self.rt.swarm_instance_key,
                "identity": self.identity,
                "agents": sorted(self.rt.agent_names),
                "connectors": [
                    {"connection": p.plan.name, "connector": p.plan.connector, "pid": p.pid}
                    for p in (self.supervisor.processes if self.supervisor else [])
                ],
            }
        if op == "request":
            refused = identity_mismatch(self.identity, request)
            if refused is not None:
                return refused
            given = request.get("input", "")
            result = await self.rt.request(
                given if isinstance(given, list) else str(given),  # a list: text and --attach parts
                agent=request.get("agent"),
                instance_key=request.get("instanceKey"),
                source={"kind": "connector", "name": "cli"},
            )
            return {"ok": True, "result": result.to_dict()}
        if op in ("approvals", "approve"):
            refused = identity_mismatch(self.identity, request)
            if refused is not None:
                return refused
            from ._approvals import control_op

            return await control_op(self.rt, request)
        if op != "restart":
            return {"ok": False, "error": {"code": "E_CONTROL_REQUEST", "message": f"unknown op {op!r}"}}
        agent = request.get("agent")
        fresh = bool(request.get("fresh"))
        if agent is not None and agent not in self.rt.agent_names:
            error = unknown_agent(str(agent), self.rt.swarm_name, self.rt.agent_names)
            fields = {"code": error.code, "message": error.message, "suggestion": error.suggestion}
            return {"ok": False, "error": fields}
        restart = getattr(self.rt, "restart", None)
        if restart is None:
            return {
                "ok": False,
                "error": {
                    "code": "E_RESTART_UNSUPPORTED",
                    "message": "this runtime version cannot restart agents in place",
                    "suggestion": "Stop `gdn run` (Ctrl+C) and start it again.",
                },
            }
        await restart(agent, fresh=fresh)
        if agent is None and self.supervisor is not None:
            await self.supervisor.restart()
        return {"ok": True, "agent": agent, "fresh": fresh}


# --- the session ------------------------------------------------------------------------------


class _LineReader:
    """Reads lines in a daemon thread so the event loop (control socket, Ctrl+C) stays responsive.

    On a terminal, ``input()`` gives readline line editing; history lives in ``<state_root>/history``.
    The next prompt is shown only after the previous reply has been printed. While the prompt is on
    screen (:meth:`prompting`), status lines are printed above it and the prompt is redrawn.
    """

    prompt = "> "

    def __init__(self, loop: asyncio.AbstractEventLoop, tty: bool, history: Path | None, *, start: bool = True) -> None:
        self.loop = loop
        self.tty = tty
        self.history = history
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.go = threading.Event()
        if start:  # else the first line is asked for by a prompt of its own (an approval left waiting)
            self.go.set()
        self._waiting = False
        self._readline: Any = None
        if tty:
            try:
                import readline

                self._readline = readline
                if history is not None and history.is_file():
                    readline.read_history_file(str(history))
            except (ImportError, OSError):
                pass
        threading.Thread(target=self._run, name="gdn-input", daemon=True).start()

    def _run(self) -> None:
        while True:
            self.go.wait()
            self.go.clear()
            self._waiting = self.tty
            try:
                line: str | None = input(self.prompt) if self.tty else _stdin_line()
                if not self.tty and line == "":
                    line = None
            except EOFError:
                line = None
            except UnicodeDecodeError as exc:  # a terminal decoding strictly: the chat says the line is not UTF-8
                raw = exc.object if isinstance(exc.object, bytes) else b"\xff"
                line = raw.decode("utf-8", "surrogateescape").rstrip("\n")
            except Exception:
                line = None
            finally:
                self._waiting = False
            self.loop.call_soon_threadsafe(self.queue.put_nowait, line)
            if line is None:
                return

    def prompting(self) -> bool:
        return self._waiting

    def typed(self) -> str:
        return readline_buffer(self._readline)

    def save_history(self) -> None:
        if self._readline is not None and self.history is not None:
            from ..storage._atomic import FILE_MODE, ensure_private_dirs

            with contextlib.suppress(OSError):
                ensure_private_dirs(self.history.parent)
                self._readline.set_history_length(1000)
                self._readline.write_history_file(str(self.history))
                os.chmod(self.history, FILE_MODE)  # typed lines are as private as the conversations


async def _session(rt: Any, args: argparse.Namespace, stop: asyncio.Event, lines: StatusLines) -> int:
    """A chat: one request per line until /quit, end of input, Ctrl+C or SIGTERM.

    A request that fails (a failed turn, or an error raised before the turn could start, such as a
    tool file that no longer imports after a ``--watch`` reload) is reported and the session goes on.
    Exit code: an interactive session ends with 0; read from a pipe it ends with 1 when any request
    failed, so a script notices a failure even though every line was answered.
    """
    tty = sys.stdin.isatty()
    agent = args.agent or rt.entry_agent
    key = args.instance_key or rt.swarm_instance_key
    history = (Path(rt.state_root) / "history") if tty and rt.state_root is not None else None
    saved_termios = _save_termios() if tty else None
    interrupts = current_interrupts()
    # a second Ctrl+C ends the process at once: the terminal is restored first
    unregister = interrupts.before_exit(lambda: _restore_termios(saved_termios)) if interrupts and tty else None
    if tty:  # before the reader thread starts, so the banner never lands after its first prompt
        sys.stderr.write(f"Chatting with {agent} (swarm {rt.swarm_name}). /quit to exit. /help lists the commands.\n")
        sys.stderr.flush()
    from ._approval_prompt import waiting_from_before

    # calls an earlier session left waiting are asked about first: the next message would deny them
    earlier = await waiting_from_before(rt, agent, key) if tty else None
    reader = _LineReader(asyncio.get_running_loop(), tty, history, start=earlier is None)
    style = Style(sys.stdout, not args.no_color)
    streamed = {"any": False, "step": -1}
    thinking = _Thinking(asyncio.get_running_loop(), Style(sys.stderr, tty and not args.no_color).enabled)
    if tty:
        lines.source = reader
        lines.transient = thinking.text_on_screen
    failures = 0
    attached: list[str] = []  # files queued with /attach for the next message

    def on_delta(record: dict[str, Any]) -> None:
        if record.get("agentName") != agent or record.get("instanceKey", key) != key:
            return
        thinking.clear()
        step = record.get("stepIndex", 0)
        if streamed["any"] and step != streamed["step"]:
            sys.stdout.write("\n")
        streamed["any"] = True
        streamed["step"] = step
        sys.stdout.write(str(record.get("delta", "")))
        sys.stdout.flush()

    off = rt.on_text_delta(on_delta) if tty else None
    try:
        if earlier is not None:
            resumed = await _approvals_prompt(rt, earlier, reader, streamed, style)
            if resumed is not earlier:  # decided: the resumed turn's reply, as any other
                _show_reply(args, resumed, None, streamed, style)
            reader.go.set()
        while True:
            get = asyncio.create_task(reader.queue.get())
            stopping = asyncio.create_task(stop.wait())
            await asyncio.wait({get, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not get.done():
                get.cancel()
                return EXIT_OK
            line = get.result()
            if line is None:
                if tty:
                    sys.stdout.write("\n")
                return EXIT_INTERNAL if failures and not tty else EXIT_OK
            line = line.strip()
            if line in ("/quit", "/exit"):
                return EXIT_INTERNAL if failures and not tty else EXIT_OK
            if line == "/attach" or line.startswith("/attach "):
                sys.stderr.write(attach_command(line, attached))
                sys.stderr.flush()
                reader.go.set()
                continue
            reply = local_reply(line)  # /help, a mistyped command: answered here, never sent
            if reply is not None:
                sys.stderr.write(reply)
                sys.stderr.flush()
                reader.go.set()
                continue
            line = message_text(line)
            if line:
                streamed.update({"any": False, "step": -1})
                thinking.start()
                try:
                    request, attached = request_input(line, attached) or line, []
                    result = await _request_cancellable(rt, args, request)
                except GoondanError as exc:
                    result = None
                    error: Any = exc
                finally:
                    thinking.clear()
                if result is not None and result.finish_reason == "awaiting_approval":
                    result = await _approvals_prompt(rt, result, reader, streamed, style if tty else None)
                failures += _show_reply(
                    args, result, error if result is None else None, streamed, style if tty else None
                )
            reader.go.set()
    finally:
        lines.source = lines.transient = None
        if off is not None:
            off()
        reader.save_history()
        _restore_termios(saved_termios)
        if unregister is not None:
            unregister()


def _show_reply(args: argparse.Namespace, result: Any, error: Any, streamed: dict[str, Any], style: Any) -> int:
    """A chat turn's outcome: its error, "cancelled", or its text (unless it streamed); 1 when it failed."""
    if result is None or result.finish_reason == "error":
        if streamed["any"]:
            sys.stdout.write("\n")
        sys.stdout.flush()
        _print_turn_error(args, ErrorView(result.error or {}) if result is not None else error)
        return 1
    if result.finish_reason == "cancelled":
        sys.stdout.write("\n" if streamed["any"] else "")
        sys.stdout.flush()
        sys.stderr.write("cancelled\n")
        sys.stderr.flush()
    elif streamed["any"]:
        sys.stdout.write("\n")
    elif result.text is not None:
        sys.stdout.write((style(result.text, "1") if style is not None else result.text) + "\n")
    sys.stdout.flush()
    return 0


async def _approvals_prompt(rt: Any, result: Any, reader: Any, streamed: dict[str, Any], style: Any) -> Any:
    """A turn waiting for approvals: its text so far, then a prompt per pending call (cli/_approval_prompt.py)."""
    from ._approval_prompt import decide_interactively

    if streamed["any"]:
        sys.stdout.write("\n")
    elif result.text is not None:
        sys.stdout.write((style(result.text, "1") if style is not None else result.text) + "\n")
    sys.stdout.flush()
    streamed.update({"any": False, "step": -1})
    try:
        return await decide_interactively(rt, result, reader)
    except GoondanError as exc:  # reported by the session like a failed turn
        import dataclasses

        return dataclasses.replace(result, finish_reason="error", error=exc.to_dict(), text=None)


class _Thinking:
    """A transient "thinking" line on the terminal while a reply takes a while and nothing streams."""

    DELAY_SECONDS = 0.4

    def __init__(self, loop: asyncio.AbstractEventLoop, enabled: bool) -> None:
        self.loop = loop
        self.enabled = enabled
        self.shown = False
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        if self.enabled:
            self._handle = self.loop.call_later(self.DELAY_SECONDS, self._show)

    TEXT = "\033[2m... thinking\033[0m"

    def _show(self) -> None:
        self.shown = True
        sys.stderr.write(self.TEXT)
        sys.stderr.flush()

    def text_on_screen(self) -> str:
        return self.TEXT if self.shown else ""

    def clear(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self.shown:
            self.shown = False
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _save_termios() -> Any:
    try:
        import termios

        return termios.tcgetattr(sys.stdin.fileno())
    except (ImportError, OSError, ValueError):
        return None


def _restore_termios(saved: Any) -> None:
    if saved is None:
        return
    with contextlib.suppress(ImportError, OSError, ValueError):
        import termios

        termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)


logging.getLogger("goondan.connectors").addHandler(logging.NullHandler())
