"""A status line on the terminal while a one-shot ``gdn run --input`` waits for its reply.

A request can take many seconds (several model calls, slow tools); a silent terminal looks hung. The
line shows a spinner, what the agent is doing (thinking, step N, running a tool, from the runtime
events) and the elapsed time, redrawn in place on stderr and erased before the reply is printed.

It appears only when stderr is a terminal and nothing machine-read is asked for: never on a pipe or
a file, never with ``--json`` or ``-q``, never with ``TERM=dumb``; ``GOONDAN_NO_SPINNER=1`` turns it
off. The reply on stdout is therefore byte-identical with or without it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import AsyncIterator
from typing import Any, TextIO

FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
INTERVAL_SECONDS = 0.1


def wanted(args: argparse.Namespace, stream: TextIO | None = None) -> bool:
    stream = stream or sys.stderr
    return (
        stream.isatty()
        and not getattr(args, "json", False)
        and not getattr(args, "quiet", False)
        and os.environ.get("TERM") != "dumb"
        and not os.environ.get("GOONDAN_NO_SPINNER")
    )


class StatusLine:
    """The line itself: ``⠹ step 2 · running bash · 3.4s``, updated from runtime event records.

    ``lock`` is held while the line is drawn or erased and while a log record is written (see
    :class:`_ClearingHandler`), so a warning never lands in the middle of the spinner's line."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.status = "starting"
        self.started = time.monotonic()
        self.frame = 0
        self.drawn = False
        self.lock = threading.Lock()

    def on_event(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind == "turn.started":
            self.status = "thinking"
        elif kind == "step.started":
            self.status = f"step {int(record.get('stepIndex', 0)) + 1} · thinking"
        elif kind == "tool.called":
            step = self.status.split(" · ", 1)[0] if self.status.startswith("step") else "step"
            self.status = f"{step} · running {record.get('toolName', 'a tool')}"
        elif kind == "approval.requested":
            self.status = "waiting for approval"

    def draw(self) -> None:
        elapsed = time.monotonic() - self.started
        glyph = FRAMES[self.frame % len(FRAMES)]
        self.frame += 1
        with self.lock:
            self.stream.write(f"\r\033[K{glyph} {self.status} · {elapsed:.1f}s")
            self.stream.flush()
            self.drawn = True

    def clear(self) -> None:
        with self.lock:
            self._erase()

    def _erase(self) -> None:
        if self.drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.drawn = False


class _ClearingHandler(logging.Handler):
    """Stands in for a stderr log handler while the status line shows: erases the line, lets the
    real handler write the record on a line of its own, and the spinner redraws below it on its
    next tick (a log record used to be written after the spinner's glyph and status, on its line)."""

    def __init__(self, inner: logging.Handler, line: StatusLine) -> None:
        super().__init__(inner.level)
        self.inner = inner
        self.line = line

    def emit(self, record: logging.LogRecord) -> None:
        with self.line.lock:
            self.line._erase()
            self.inner.handle(record)


def _route_logging(line: StatusLine) -> list[tuple[logging.Handler, logging.Handler]]:
    root = logging.getLogger()
    replaced: list[tuple[logging.Handler, logging.Handler]] = []
    for handler in list(root.handlers):
        if isinstance(handler, logging.StreamHandler) and getattr(handler, "stream", None) is line.stream:
            ours = _ClearingHandler(handler, line)
            root.removeHandler(handler)
            root.addHandler(ours)
            replaced.append((handler, ours))
    return replaced


@contextlib.asynccontextmanager
async def status_line(rt: Any, args: argparse.Namespace) -> AsyncIterator[None]:
    """Show the line while the body runs (only where :func:`wanted` says so)."""
    if not wanted(args):
        yield
        return
    line = StatusLine(sys.stderr)
    subscribe = getattr(rt, "on_runtime_event", None)
    off = subscribe(line.on_event) if subscribe is not None else None

    stop = threading.Event()

    def spin() -> None:
        # a thread, not a task: an inline executor may keep the event loop busy for a whole step
        while not stop.is_set():
            line.draw()
            stop.wait(INTERVAL_SECONDS)

    replaced = _route_logging(line)
    thread = threading.Thread(target=spin, name="gdn-status-line", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if off is not None:
            off()
        line.clear()
        root = logging.getLogger()
        for handler, ours in replaced:
            root.removeHandler(ours)
            root.addHandler(handler)
