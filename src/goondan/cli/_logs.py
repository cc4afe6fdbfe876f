"""``gdn logs``: the runtime events of instances (``messages/runtime-events.jsonl``), filtered and followed.

Filters combine with AND: ``--instance`` (instance key), ``--agent``, ``--trace``, ``--workspace``.
Records of all matching instances are merged by timestamp; ``--follow`` keeps polling the files
(appends are line-atomic, so a partial last line is simply read on the next poll).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import StorageError
from ._output import EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, CliError, Style
from ._state import store_backend, store_label

_STANDARD = {"type", "timestamp", "agentName", "instanceKey", "traceId", "spanId", "parentSpanId", "turnId"}
_COLORS = {
    "failed": "31",
    "loadFailed": "31",
    "completed": "32",
    "started": "36",
    "called": "35",
    "requested": "33",
    "decided": "33",
}
POLL_SECONDS = 0.25


def _event_files(root: Path, workspace: str | None, only: set[str] | None = None) -> list[Path]:
    base = root / "workspaces"
    if not base.is_dir():
        return []
    pattern = (
        f"{workspace}/instances/*/messages/runtime-events.jsonl"
        if workspace
        else "*/instances/*/messages/runtime-events.jsonl"
    )
    return sorted(p for p in base.glob(pattern) if only is None or p.relative_to(base).parts[0] in only)


def _bundle_workspaces(backend: Any, args: argparse.Namespace) -> set[str] | None:
    """The workspaces ``gdn logs`` reads, scoped as ``gdn instance list`` scopes them: the bundle in
    PATH, else the current directory's when it holds a goondan.yaml; None (every bundle's) without
    either, or with ``-A`` / ``-w ID``. A user reaches for ``gdn logs my-bot`` as for ``gdn run my-bot``."""
    from ._manage import _scope

    try:
        scope = _scope(args)
    except CliError as exc:
        exc.suggestion = "Pass a bundle directory (one with a goondan.yaml), or -A for every bundle's events."
        raise
    if scope is None:
        return None
    args.scope_label = scope.package or scope.bundle
    return {ws for ws in backend.list_workspaces() if scope.owns(backend.workspace(ws).record())}


def _keep(record: dict[str, Any], args: argparse.Namespace) -> bool:
    if args.instance is not None and record.get("instanceKey") != args.instance:
        return False
    if args.agent is not None and record.get("agentName") != args.agent:
        return False
    return args.trace is None or _trace_matches(record.get("traceId"), args.trace, getattr(args, "trace_prefix", False))


MIN_TRACE_PREFIX = 8


def _trace_matches(trace: object, wanted: str, prefix: bool) -> bool:
    """Exactly ``wanted``, or (for a prefix still unresolved under ``--follow``) starting with it."""
    if not isinstance(trace, str):
        return False
    return trace == wanted or (prefix and trace.lower().startswith(wanted.lower()))


def resolve_trace(given: str, known: set[str], *, follow: bool) -> str | None:
    """The trace id ``--trace`` means: an exact id, else the one id starting with ``given``.

    Why prefixes: ``gdn logs`` prints ``trace=`` with the first 12 characters, and that is what a user
    copies. A prefix must be at least 8 characters (a shorter one matches by accident as logs grow),
    and must name one trace; ``None`` means "not seen yet" (only with ``--follow``, where it may come).
    """
    wanted = given.strip()
    if wanted in known:
        return wanted
    if len(wanted) < MIN_TRACE_PREFIX:
        raise CliError(
            "E_LOGS_TRACE_SHORT",
            f"--trace {given!r} is too short to name a trace",
            exit_code=EXIT_USAGE,
            suggestion=f"Give the full trace id or at least {MIN_TRACE_PREFIX} of its first characters.",
        )
    matches = sorted(t for t in known if t.lower().startswith(wanted.lower()))
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        listed = ", ".join(t[:16] for t in matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise CliError(
            "E_LOGS_TRACE_AMBIGUOUS",
            f"--trace {given!r} matches {len(matches)} traces: {listed}",
            exit_code=EXIT_USAGE,
            suggestion="Give more characters of the trace id.",
        )
    if follow:
        return None
    raise CliError(
        "E_LOGS_TRACE_NOT_FOUND",
        f"no runtime event has a trace id starting with {given!r}",
        suggestion="Run `gdn logs` without --trace to see the trace ids (trace=...), or check --state-root.",
    )


MAX_LISTED_NAMES = 8


def near_names(given: str, known: Iterable[str], noun: str) -> str:
    """``did you mean 'x'?`` for the closest known name, else the known names, else that there are none.

    Why: a typo in ``--agent``/``--instance`` used to read like an instance with no events yet; saying
    what exists turns that into a one-keystroke fix."""
    from ..bundle._issues import did_you_mean  # only on the error path

    names = sorted(set(known))
    close = did_you_mean(given, names)
    if close:
        return close.capitalize()
    if not names:
        return f"No {noun} has been stored yet: `gdn run` creates one (or check --state-root / --store)."
    listed = ", ".join(repr(n) for n in names[:MAX_LISTED_NAMES]) + (", ..." if len(names) > MAX_LISTED_NAMES else "")
    return f"Known {noun}s: {listed}."


def _stored_names(backend: Any, workspace: str | None) -> tuple[set[str], set[str]]:
    """The agent names and instance keys of every stored instance (of ``workspace`` when given)."""
    agents: set[str] = set()
    keys: set[str] = set()
    for ws in backend.list_workspaces():
        if workspace is not None and ws != workspace:
            continue
        for info in backend.workspace(ws).list_instances():
            agents.add(info.agent_name)
            keys.add(info.instance_key)
    return agents, keys


def check_names(backend: Any, args: argparse.Namespace) -> None:
    """Refuse an ``--agent``/``--instance`` that names nothing in the store (``E_AGENT_NOT_FOUND`` /
    ``E_INSTANCE_NOT_FOUND``, with the near name); under ``--follow`` only warn, since it may appear.

    A name that exists but has no events yet is not an error (the caller prints "no runtime events
    match"). Called only when nothing matched, so a normal ``gdn logs -a NAME`` reads no metadata."""
    agents, keys = _stored_names(backend, args.workspace)
    where = f"under {store_label(backend)}" + (f" in workspace {args.workspace!r}" if args.workspace else "")
    for given, known, code, what, noun in (
        (args.agent, agents, "E_AGENT_NOT_FOUND", "agent", "agent"),
        (args.instance, keys, "E_INSTANCE_NOT_FOUND", "instance key", "instance key"),
    ):
        if given is None or given in known:
            continue
        # an agent name on the command line that names no agent is a usage error (exit 2), as for
        # `gdn run --agent`; an instance key is looked up data (exit 1), as for `gdn instance ...`
        error = CliError(
            code,
            f"no stored instance has {what} {given!r} {where}",
            exit_code=EXIT_USAGE if code == "E_AGENT_NOT_FOUND" else EXIT_INTERNAL,
            suggestion=near_names(given, known, noun),
        )
        if not args.follow:
            raise error
        sys.stderr.write(f"warning: [{code}] {error.message}; following in case it appears\n")
        sys.stderr.write(f"  suggestion: {error.suggestion}\n")


def render_record(record: dict[str, Any], style: Style, *, verbose: bool = False) -> str:
    """One record as one line; an ``error.traceback`` (a user's tool, extension or model raised)
    follows it, indented, with ``verbose`` (``gdn logs -v``). Without ``verbose`` the line ends with
    the traceback's last line (the exception's type, which the error's message alone often hides:
    a ``KeyError`` reads ``'b'``) and the ``-v`` that shows the rest."""
    trace = None
    error = record.get("error")
    if isinstance(error, dict) and "traceback" in error:
        trace = error.get("traceback")
        record = {**record, "error": {k: v for k, v in error.items() if k != "traceback"}}
    line = _render_line(record, style)
    if isinstance(trace, str) and trace:
        if verbose:
            line += "\n" + "\n".join("    " + t for t in trace.splitlines())
        else:
            last = next((t.strip() for t in reversed(trace.splitlines()) if t.strip()), "")
            if len(last) > 120:
                last = last[:117] + "..."
            line += "  " + style(f"({last}; gdn logs -v for the traceback)", "2")
    return line


def _render_line(record: dict[str, Any], style: Style) -> str:
    ts = str(record.get("timestamp", ""))
    clock = ts[11:23] if len(ts) >= 23 else ts
    etype = str(record.get("type", "?"))
    color = _COLORS.get(etype.rsplit(".", 1)[-1], "0")
    where = f"{record.get('agentName', '?')}@{record.get('instanceKey', '?')}"
    parts = [clock, where.ljust(24), style(etype.ljust(16), color)]
    for key, value in record.items():
        if key in _STANDARD or value is None:
            continue
        if key == "duration":
            parts.append(f"{value}ms")
        elif key == "model" and isinstance(value, dict):  # a step's model call: name, time, why it stopped
            took = value.get("duration")
            took_text = f" {took:.1f}ms" if isinstance(took, int | float) else ""
            parts.append(f"model={value.get('name')}{took_text} {value.get('finishReason') or ''}".rstrip())
        elif isinstance(value, dict | list):
            parts.append(f"{key}={json.dumps(value, ensure_ascii=False)}")
        else:
            parts.append(f"{key}={value}")
    trace = str(record.get("traceId", ""))
    if trace:
        parts.append(style(f"trace={trace[:12]}", "2"))
    return "  ".join(parts)


class _Tail:
    def __init__(self) -> None:
        self.offsets: dict[Path, int] = {}

    def read_new(self, files: list[Path]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for path in files:
            start = self.offsets.get(path, 0)
            try:
                with path.open("rb") as fh:
                    fh.seek(start)
                    data = fh.read()
            except OSError:
                continue
            end = data.rfind(b"\n")
            if end < 0:
                continue
            self.offsets[path] = start + end + 1
            for line in data[: end + 1].splitlines():
                try:
                    value = json.loads(line)
                except ValueError:
                    continue
                if isinstance(value, dict):
                    out.append(value)
        out.sort(key=lambda r: str(r.get("timestamp", "")))
        return out


class _StoreTail:
    """``_Tail`` for stores without files (PostgreSQL): each instance's read-only reader, tailed
    from its cursor; instances that appear while following are picked up on the next poll."""

    def __init__(self, backend: Any, workspace: str | None, only: set[str] | None = None) -> None:
        self.backend = backend
        self.workspace = workspace
        self.only = only
        self.readers: dict[tuple[str, str, str], Any] = {}
        self.cursors: dict[tuple[str, str, str], int] = {}

    def read_new(self) -> list[dict[str, Any]]:
        """What came since the last call; the cursors move only when everything was read (a store
        that fails half-way is read again from where the last complete call left off)."""
        out: list[dict[str, Any]] = []
        cursors = dict(self.cursors)
        for ws in self.backend.list_workspaces():
            if (self.workspace is not None and ws != self.workspace) or (self.only is not None and ws not in self.only):
                continue
            store = self.backend.workspace(ws)
            for info in store.list_instances():
                key = (ws, info.agent_name, info.instance_key)
                reader = self.readers.get(key)
                if reader is None:
                    reader = self.readers[key] = store.reader(info.agent_name, info.instance_key)
                records, cursors[key] = reader.runtime_events(cursors.get(key, 0))
                out.extend(records)
        self.cursors = cursors
        out.sort(key=lambda r: str(r.get("timestamp", "")))
        return out


def cmd_logs(args: argparse.Namespace) -> int:
    from ..storage import FileStoreBackend

    backend = store_backend(args)
    files = isinstance(backend, FileStoreBackend)
    root = backend.root if files else None
    style = Style(sys.stdout, not args.no_color)
    out = sys.stdout

    def emit(records: list[dict[str, Any]]) -> None:
        for record in records:
            if not _keep(record, args):
                continue
            out.write(
                (
                    json.dumps(record, ensure_ascii=False)
                    if args.json
                    else render_record(record, style, verbose=bool(args.verbose))
                )
                + "\n"
            )
        out.flush()

    only = _bundle_workspaces(backend, args)
    tail = _Tail()
    store_tail = None if files else _StoreTail(backend, args.workspace, only)

    def read_new() -> list[dict[str, Any]]:
        if store_tail is not None:
            return store_tail.read_new()
        assert root is not None
        return tail.read_new(_event_files(root, args.workspace, only))

    records = read_new()
    if args.trace is not None:
        known = {t for t in (r.get("traceId") for r in records) if isinstance(t, str)}
        resolved = resolve_trace(args.trace, known, follow=args.follow)
        args.trace_prefix = resolved is None
        args.trace = resolved or args.trace.strip()
    first = [r for r in records if _keep(r, args)]
    if not first and (args.agent is not None or args.instance is not None):
        check_names(backend, args)
    if not args.json and not args.quiet:
        filters = " ".join(
            f"{name}={value}"
            for name, value in (
                ("bundle", getattr(args, "scope_label", None)),
                ("instance", args.instance),
                ("agent", args.agent),
                ("trace", args.trace),
            )
            if value is not None
        )
        sys.stderr.write(f"Logs {store_label(backend)}" + (f" {filters}" if filters else "") + "\n")
        if not first and not args.follow:
            label = getattr(args, "scope_label", None)
            sys.stderr.write(
                f"(no runtime events of bundle {label} match; -A for every bundle's)\n"
                if label
                else "(no runtime events match)\n"
            )
    emit(first[-args.lines :] if args.lines > 0 else first)
    down = False
    while args.follow:
        time.sleep(POLL_SECONDS)
        try:
            records = read_new()
        except StorageError as exc:  # a PostgreSQL server restarting: say so once, follow on after it
            if exc.code != "E_STORE_UNAVAILABLE":
                raise
            if not down:
                sys.stderr.write(f"warning: [{exc.code}] {exc.message}; following on once it answers\n")
            down = True
            continue
        down = False
        emit(records)
    return EXIT_OK
