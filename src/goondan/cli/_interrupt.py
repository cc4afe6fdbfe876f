"""Ctrl+C for the commands that run a runtime (``gdn run``).

Left to asyncio, the first Ctrl+C cancels the command's task and a second one raises
``KeyboardInterrupt`` wherever the loop happens to be, after which asyncio's teardown runs the
cancelled cleanups once more. Here instead:

- while a turn the user waits for runs (``--input``, a chat line), the first Ctrl+C says
  "cancelling… (Ctrl+C again to force)" and cancels that turn (``Runtime.cancel``): it commits with
  finish reason ``cancelled``, after which ``--input`` exits 130 and a chat returns to its prompt.
  A turn that does not stop within :data:`CANCEL_BOUND_SECONDS` (an agent process whose event loop
  is blocked cannot even read the request) is handled as below;
- otherwise the first Ctrl+C cancels the command's task. The runtime is left by cancellation, which
  closes it as an interruption (running turns are cancelled, not finished: see ``Runtime.close``),
  so the command ends with exit 130 within about a second and a half instead of the grace period;
- a second Ctrl+C exits 130 at once. The agent processes and their fork server die with this
  process (each has a parent-death signal); what their turns made durable is already on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from .._usercode import never_raises
from ._output import EXIT_INTERRUPTED

_T = TypeVar("_T")

# how long a cancelled turn may take to commit before the runtime is interrupted instead
CANCEL_BOUND_SECONDS = 2.0
# how long an immediate exit waits for the runtime events the engine buffered to be written
FLUSH_BOUND_SECONDS = 0.5
CANCELLING_TEXT = "cancelling… (Ctrl+C again to force)"

_current: contextvars.ContextVar[Interrupts | None] = contextvars.ContextVar("gdn_interrupts", default=None)


class Interrupts:
    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.count = 0
        self._before_exit: list[Callable[[], None]] = []
        self._cancel: Callable[[], Awaitable[bool]] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._loop_answered = True

    def cancel_turn_with(self, cancel: Callable[[], Awaitable[bool]]) -> Callable[[], None]:
        """While a turn runs: the first Ctrl+C calls ``cancel`` (``Runtime.cancel`` of that turn,
        True when there was one to cancel) instead of cancelling the command. Returns the function
        to call once the turn is over; it makes the next Ctrl+C a first one again."""
        self._cancel = cancel

        def done() -> None:
            if self._cancel is cancel:
                self._cancel = None
            if self._watch is not None:
                self._watch.cancel()
                self._watch = None
            if self.count == 1 and not self.task.cancelling():  # not when interrupting after all
                self.count = 0

        return done

    async def _cancelling(self, cancel: Callable[[], Awaitable[bool]]) -> None:
        try:
            cancelled = await cancel()
        except Exception:
            cancelled = False
        if cancelled:
            await asyncio.sleep(CANCEL_BOUND_SECONDS)
        if not self.task.done():  # nothing to cancel, or the turn did not stop: interrupt
            self.task.cancel()

    def before_exit(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` (e.g. restore the terminal) before a second Ctrl+C ends the process;
        returns a function that unregisters it."""
        self._before_exit.append(callback)

        def undo() -> None:
            if callback in self._before_exit:
                self._before_exit.remove(callback)

        return undo

    def press(self, loop: asyncio.AbstractEventLoop) -> None:
        """The SIGINT handler proper. It runs in the main thread as soon as the signal arrives, even
        while the event loop is blocked (a synchronous tool running inline): the first press is
        answered at once and its work queued on the loop; a second one ends the process here."""
        self.count += 1
        if self.count >= 2:
            self.force_exit()
        if self._cancel is not None:
            with contextlib.suppress(Exception):
                sys.stderr.write(f"\n{CANCELLING_TEXT}\n")
                sys.stderr.flush()
        self._loop_answered = False
        loop.call_soon_threadsafe(self.fire)
        # an event loop blocked by synchronous user code (a tool or model running inline) never runs
        # fire(): end the process after the same bound a blocked agent process gets
        watchdog = threading.Timer(CANCEL_BOUND_SECONDS + 1.0, self._blocked_check)
        watchdog.daemon = True
        watchdog.start()

    def _blocked_check(self) -> None:
        if not self._loop_answered and self.count == 1:
            with contextlib.suppress(Exception):
                sys.stderr.write("\nthe event loop is blocked by synchronous code (a tool or model running inline)\n")
                sys.stderr.flush()
            self.force_exit()

    def fire(self) -> None:
        """The first press's work, on the event loop."""
        self._loop_answered = True
        if self.count != 1:  # reset meanwhile (the turn ended) or already forced
            return
        if self._cancel is not None:
            self._watch = asyncio.ensure_future(self._cancelling(self._cancel))
            return
        if not self.task.done():
            self.task.cancel()

    def force_exit(self) -> None:
        for callback in list(self._before_exit):
            with contextlib.suppress(Exception):
                callback()
        with contextlib.suppress(Exception):
            sys.stderr.write("\ninterrupted\n")
            sys.stderr.flush()
        _exit_now()


def _exit_now() -> None:
    """End the process at once, after writing the runtime events inline instances buffered (they
    wait for a flush the event loop runs when the turn suspends; a turn blocked in synchronous code,
    or interrupted mid-step, has records no one else would write). The write runs in a thread with a
    bound: the signal may have interrupted code holding a lock the store needs."""
    engine = sys.modules.get("goondan.engine")  # not imported: no instance ran in this process
    flush = getattr(engine, "flush_all_runtime_events", None)
    if flush is not None:
        writer = threading.Thread(target=flush, name="gdn-exit-flush", daemon=True)
        with contextlib.suppress(Exception):
            writer.start()
            writer.join(FLUSH_BOUND_SECONDS)
    os._exit(EXIT_INTERRUPTED)


def current() -> Interrupts | None:
    """The handler of the running command, if it installed one."""
    return _current.get()


async def interruptible(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run a command's coroutine with the Ctrl+C handling described above. An interrupted command
    raises ``KeyboardInterrupt`` (the CLI's exit 130) once its cleanups have run. Every command that
    runs user code on its own loop uses it (gdn run, eval, approvals): under Python's default handler
    a ``KeyboardInterrupt`` that a tool raises cannot be told from Ctrl+C and ends the command."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    handler = Interrupts(task)
    installed = False
    previous: Any = None
    # signal.signal rather than loop.add_signal_handler: the loop's handler only runs once the loop
    # gets control back, so presses during a blocking synchronous tool were lost. It never raises
    # KeyboardInterrupt: one that user code raises is that code's error (goondan._usercode)
    with contextlib.suppress(ValueError):  # not the main thread
        previous = signal.signal(signal.SIGINT, never_raises(lambda *_: handler.press(loop)))
        installed = True
    token = _current.set(handler)
    try:
        return await coro
    except asyncio.CancelledError:
        if handler.count == 0:
            raise
        task.uncancel()
        raise KeyboardInterrupt from None
    finally:
        _current.reset(token)
        if installed:
            if handler.count:  # still ending: a further Ctrl+C must not raise at a random point
                signal.signal(signal.SIGINT, never_raises(lambda *_: _exit_now()))
            else:
                signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


__all__ = ["Interrupts", "current", "interruptible"]
