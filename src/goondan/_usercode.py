"""Running a user's own code (tool handlers, extension middleware and ``register()``, python models)
so that it can neither end nor pollute the host.

* ``sys.exit()`` in user code raises :class:`SystemExit`, which would end an inline host (or an agent
  process) with it. :func:`exit_error` turns it into an ordinary error that the caller handles like
  any other failure of that code.
* ``KeyboardInterrupt`` from user code (``raise KeyboardInterrupt``, a library that raises it) ended
  ``gdn run`` inline and the agent process with the process executor. :func:`interrupt_error` turns
  it into an ordinary error too, but only where no real Ctrl+C can have raised it: in an agent
  process (SIGINT is ignored there), under ``gdn run`` (its SIGINT handler, marked with
  :func:`never_raises`, cancels instead of raising), off the main thread. Elsewhere (the Python API
  with Python's default handler, where a Ctrl+C raises wherever the main thread is) it propagates:
  user code cannot be told apart from the terminal there, and a Ctrl+C must stop the program.
* What user code prints goes to ``sys.stdout``/``sys.stderr``, i.e. straight into the answer stream
  of ``answer=$(gdn run --input ...)``. :func:`install` replaces both with proxies that, while a
  :func:`captured` block runs in the current context (a ``contextvars`` value, so concurrent turns
  and threads started with the context keep apart), keep the text instead and hand it to the logger
  afterwards — bounded: the first :data:`KEEP_CHARS` characters per block are kept, the rest counted.
  Outside such a block the proxies write through unchanged. Writes to the raw file descriptors
  (``os.write(1, ...)``, child processes) are not Python-level and not seen here.
"""

from __future__ import annotations

import contextvars
import logging
import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from .errors import GoondanError

KEEP_CHARS = 64 * 1024
TRACEBACK_CHARS = 16 * 1024


class _Capture:
    __slots__ = ("dropped", "kept", "label", "logger", "parts")

    def __init__(self, label: str, logger: logging.Logger) -> None:
        self.label = label
        self.logger = logger
        self.parts: dict[str, list[str]] | None = None  # made by the first write: most code prints nothing
        self.kept = 0
        self.dropped = 0

    def add(self, stream: str, text: str) -> None:
        room = KEEP_CHARS - self.kept
        if room <= 0:
            self.dropped += len(text)
            return
        if len(text) > room:
            self.dropped += len(text) - room
            text = text[:room]
        self.kept += len(text)
        parts = self.parts
        if parts is None:
            parts = self.parts = {}
        parts.setdefault(stream, []).append(text)

    def clear(self) -> None:
        self.parts = None
        self.kept = self.dropped = 0

    def report(self) -> None:
        for stream, chunks in (self.parts or {}).items():
            text = "".join(chunks).rstrip("\n")
            if text:
                self.logger.info("%s wrote to %s:\n%s", self.label, stream, text)
        if self.dropped:
            self.logger.info(
                "%s wrote %d more characters to stdout/stderr (not kept; the first %d are logged)",
                self.label,
                self.dropped,
                KEEP_CHARS,
            )


_current: contextvars.ContextVar[_Capture | None] = contextvars.ContextVar("goondan_user_output", default=None)
# for the hot call sites (a tool call, a python model call) that spell ``with captured(...)`` out:
# ``install(); token = user_output.set(capture)``, then ``user_output.reset(token)`` and report as
# :meth:`captured.__exit__` does
user_output = _current


class _Proxy:
    """Stands in for ``sys.stdout``/``sys.stderr``: writes go to the current capture, if any, else to
    the stream it replaced. Everything else (``fileno``, ``encoding``, ``buffer``...) is the original's."""

    def __init__(self, name: str, target: TextIO) -> None:
        self._goondan_name = name
        self._goondan_target = target

    def write(self, text: str) -> int:
        capture = _current.get()
        if capture is None:
            return self._goondan_target.write(text)
        capture.add(self._goondan_name, str(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if _current.get() is None:
            self._goondan_target.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._goondan_target, name)


def install() -> None:
    """Put the proxies in place (again, if something replaced them since). Cheap to repeat."""
    if not isinstance(sys.stdout, _Proxy) and sys.stdout is not None:
        sys.stdout = _Proxy("stdout", sys.stdout)
    if not isinstance(sys.stderr, _Proxy) and sys.stderr is not None:
        sys.stderr = _Proxy("stderr", sys.stderr)


class captured(_Capture):  # lower case: used like the function it replaced, ``with captured(label, logger):``
    """Keep what the code inside prints (see the module docstring) and log it when it ends.

    A capture that is its own context manager, rather than a ``@contextmanager`` generator around
    one: it is entered around every tool and python model call, and this is one object per use."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        install()
        self._token = _current.set(self)

    def __exit__(self, *exc_info: object) -> None:
        _current.reset(self._token)
        if self.parts or self.dropped:
            self.report()


@contextmanager
def released() -> Iterator[None]:
    """Let the runtime's own output (streamed answer text, progress lines) through while it runs
    inside a :func:`captured` block, e.g. ``ctx.next()`` of a middleware or a delta callback."""
    token = _current.set(None)
    try:
        yield
    finally:
        _current.reset(token)


class UserCodeExit(GoondanError):
    """User code called ``sys.exit()``; raised in place of :class:`SystemExit` so it fails only
    that code's work (a tool call, a middleware, a model call), never the host."""


def exit_error(where: str, exc: SystemExit) -> UserCodeExit:
    error = UserCodeExit(
        "E_USER_CODE_EXIT",
        f"{where} called sys.exit({exc.code!r}); exiting is not allowed in user code",
        suggestion="Raise an exception (or return an error value) instead of calling sys.exit().",
    )
    error.__cause__ = exc
    return error


_NEVER_RAISES = "_goondan_never_raises"


def never_raises(handler: Any) -> Any:
    """Mark a SIGINT handler that never raises ``KeyboardInterrupt`` (``gdn run``'s): under it, a
    ``KeyboardInterrupt`` can only come from code, so user code's is an error of that code."""
    setattr(handler, _NEVER_RAISES, True)
    return handler


def interrupt_error(where: str, exc: KeyboardInterrupt) -> GoondanError | None:
    """The error for a ``KeyboardInterrupt`` that user code raised, or None when a real Ctrl+C may
    have raised it here (then it must propagate: see the module docstring)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():  # only the main thread gets signals
        handler = signal.getsignal(signal.SIGINT)
        if handler not in (signal.SIG_IGN, signal.SIG_DFL, None) and not getattr(handler, _NEVER_RAISES, False):
            return None
    error = GoondanError(
        "E_USER_CODE_INTERRUPT",
        f"{where} raised KeyboardInterrupt, but nothing interrupted the process",
        suggestion="Raise another exception: KeyboardInterrupt is how Ctrl+C stops a program, so user code "
        "must not raise it (nor let one it catches from a library escape).",
    )
    error.__cause__ = exc
    return error


def stray_cancel(where: str, code: str, exc: BaseException) -> GoondanError | None:
    """The error for an ``asyncio.CancelledError`` that user code raised while nothing cancelled
    the task running it (``task.cancel(); await task`` of its own work, a ``raise CancelledError``),
    or None when the task really is being cancelled (then it must propagate).

    Left alone, such an exception looked like a cancellation of the turn: inline, ``gdn run`` died
    with the runtime's traceback; in an agent process the turn never answered and the run hung."""
    import asyncio

    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop
        task = None
    if task is None or task.cancelling():
        return None
    error = GoondanError(
        code,
        f"{where} raised asyncio.CancelledError, but nothing cancelled it",
        suggestion="Catch the CancelledError of work you cancel yourself (`except asyncio.CancelledError:` "
        "around its `await`), or raise another exception: CancelledError is how a turn is cancelled.",
    )
    error.__cause__ = exc
    return error


def format_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` (with its causes) as text, bounded, for runtime events and -v."""
    text = "".join(traceback.format_exception(exc)).rstrip("\n")
    if len(text) > TRACEBACK_CHARS:
        text = text[: TRACEBACK_CHARS // 2] + "\n...\n" + text[-TRACEBACK_CHARS // 2 :]
    return text


def import_failure(what: str, entry: Path, exc: BaseException) -> str:
    """The message of a user module that failed to import: ``Tool/calc: importing calc.py failed at
    calc.py:2: ModuleNotFoundError: ...``. The line is the deepest one of the user's own files (under
    the bundle root, :func:`~goondan._modules.bundle_root_of`) the traceback passes, or where a
    ``SyntaxError`` is; the exception's own text alone does not say which of the module's lines (or
    which module it imports) failed. The exception's traceback is made to start at the first of
    those frames, for the -v log and the runtime event."""
    from ._modules import bundle_root_of

    root = bundle_root_of(entry.resolve())
    found: tuple[str, int] | None = None
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if _under(filename, root):
            if found is None:  # the frames before (Goondan's loader, importlib) say nothing to the user
                exc.__traceback__ = tb
            found = (filename, tb.tb_lineno)
        tb = tb.tb_next
    detail = str(exc)
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno and _under(exc.filename, root):
        found = (exc.filename, exc.lineno)
        detail = exc.msg  # its str() repeats the file and line
    at = ""
    if found is not None:
        at = f" at {Path(found[0]).resolve().relative_to(root).as_posix()}:{found[1]}"
    return f"{what}: importing {entry.name} failed{at}: {type(exc).__name__}: {detail}"


def _under(filename: str, root: Path) -> bool:
    if not os.path.isabs(filename):  # "<frozen importlib._bootstrap>", "<string>"
        return False
    try:
        Path(filename).resolve().relative_to(root)
    except (ValueError, OSError):
        return False
    return True


def user_traceback(exc: BaseException) -> str | None:
    """The traceback worth keeping for a failure: always for an unexpected exception, and for a
    Goondan error only when it wraps one (user code raised; the wrapper's own frames say little)."""
    if isinstance(exc, GoondanError):
        cause = exc.__cause__
        return format_traceback(cause) if cause is not None else None
    return format_traceback(exc)


__all__ = [
    "UserCodeExit",
    "captured",
    "exit_error",
    "format_traceback",
    "import_failure",
    "install",
    "interrupt_error",
    "never_raises",
    "released",
    "user_output",
    "user_traceback",
]
