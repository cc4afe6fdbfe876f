"""Status lines of a long-running ``gdn run`` (log records, ``--watch`` reports) that respect the prompt.

Why: in a chat session the reader thread sits in ``input("> ")`` while the runtime keeps working (a
file watcher reloads, a connector logs). A line written straight to the terminal lands after ``> ``
and whatever the user has typed, and the prompt is gone. While the prompt is on screen, a status line
therefore clears the prompt line, prints itself, and shows ``> `` again with the typed text, the way
readline itself does it for completions.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol


class PromptSource(Protocol):
    """What the line printer needs to know about the chat prompt."""

    prompt: str

    def prompting(self) -> bool: ...

    def typed(self) -> str: ...


class StatusLines:
    """Prints whole lines to stderr, keeping an on-screen prompt (and a transient status) intact."""

    def __init__(self) -> None:
        self.source: PromptSource | None = None
        self.transient: Callable[[], str] | None = None  # the text of a status line now on screen
        self.lock = threading.Lock()

    def write(self, text: str) -> None:
        # the terminal itself, not goondan._usercode's proxy: a record logged while user code runs
        # (an extension's api.logger.warning in its middleware, inline) went into that code's
        # capture of what it prints, shown only with -v as "... wrote to stderr"
        stderr = getattr(sys.stderr, "_goondan_target", sys.stderr)
        stdout = getattr(sys.stdout, "_goondan_target", sys.stdout)
        with self.lock:
            source = self.source
            shown = self.transient() if self.transient is not None else ""
            if source is not None and source.prompting():
                stderr.write(self._clear() + text + "\n")
                stderr.flush()
                stdout.write(source.prompt + source.typed())
                stdout.flush()
            elif shown:
                stderr.write(self._clear() + text + "\n" + shown)
                stderr.flush()
            else:
                stderr.write(text + "\n")
                stderr.flush()

    @staticmethod
    def _clear() -> str:
        """Back to column 0 and erase the line; a terminal without cursor control gets a new line."""
        return "\n" if os.environ.get("TERM", "") in ("", "dumb") else "\r\033[K"


class LinesHandler(logging.Handler):
    """A logging handler writing each record through :class:`StatusLines`."""

    def __init__(self, lines: StatusLines, formatter: logging.Formatter | None, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self.lines = lines
        if formatter is not None:
            self.setFormatter(formatter)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.write(self.format(record))
        except Exception:
            self.handleError(record)


def route_logging(args: argparse.Namespace, lines: StatusLines) -> Callable[[], None]:
    """Send stderr log records through ``lines`` and, with ``--watch``, show the watcher's reports
    (``reloaded: ...`` at INFO, ``reload failed: ...`` at ERROR) without ``-v``. Returns the undo."""
    root = logging.getLogger()
    replaced: list[tuple[logging.Handler, logging.Handler]] = []
    for handler in list(root.handlers):
        if isinstance(handler, logging.StreamHandler) and getattr(handler, "stream", None) is sys.stderr:
            ours = LinesHandler(lines, handler.formatter, handler.level)
            root.removeHandler(handler)
            root.addHandler(ours)
            replaced.append((handler, ours))
    watch = logging.getLogger("goondan.watch")
    saved: tuple[int, bool] = (watch.level, watch.propagate)
    watch_handler: logging.Handler | None = None
    if getattr(args, "watch", False):
        watch_handler = LinesHandler(lines, logging.Formatter("%(message)s"))
        watch.addHandler(watch_handler)
        watch.setLevel(logging.ERROR if getattr(args, "quiet", False) else logging.INFO)
        watch.propagate = False

    def undo() -> None:
        for old, ours in replaced:
            root.removeHandler(ours)
            root.addHandler(old)
        if watch_handler is not None:
            watch.removeHandler(watch_handler)
            watch.setLevel(saved[0])
            watch.propagate = saved[1]

    return undo


def readline_buffer(module: Any) -> str:
    """The text typed so far at an ``input()`` prompt (empty without readline)."""
    if module is None:
        return ""
    try:
        return str(module.get_line_buffer())
    except Exception:
        return ""
