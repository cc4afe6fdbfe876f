"""How goondan supervises a child process, whatever runs in it: agent instances (forked by the fork
server, supervised by the orchestrator) and connector hosts (started with ``python -m``, supervised
by ``gdn run``'s connector supervisor) share this code, and the wire protocol of ``_ipc``.

- Spawn: a child gets one end of a ``SOCK_STREAM`` socketpair as its message stream; its exit code
  is reported to an ``on_exit(pid, code)`` callback (``code`` < 0: killed by that signal). The fork
  server (``_spawner.ForkServer``) forks agent processes; :class:`ExecSpawner` starts a module with
  ``sys.executable -m``; both offer ``spawn``, ``kill(pid, sig)``, ``children`` and ``close``.
- Crash backoff (:class:`BackoffPolicy`, :class:`CrashBackoff`): after ``threshold`` tolerated
  crashes in a row, the next start waits ``initial · 2^(crashes − threshold − 1)`` ms, capped at
  ``max``. The count resets after a stable uptime (and, for agents, after a completed turn); after
  ``give_up_after`` crashes in a row the child is given up.
- Graceful shutdown (:func:`graceful_stop`): send ``shutdown``; wait for ``shutdown_ack``, the exit,
  or the grace period. Acknowledged: the child has ``EXIT_MS`` to exit on its own, then SIGTERM
  (SIGKILL for an interrupt, whose child has nothing left to save) and 5 s later SIGKILL. Not
  acknowledged within the grace period: SIGKILL, with a warning unless the stop was an interrupt
  (Ctrl+C: the kill is the outcome the user asked for, an INFO line).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from typing import Any

from ._clock import Clock, RealClock
from ._ipc import Connection

log = logging.getLogger("goondan.executors.process")

ExitCallback = Callable[[int, int], None]
# After an acknowledged shutdown the child exits by itself; this long is waited before a signal.
EXIT_MS = 500
TERM_WAIT_S = 5.0
FINAL_WAIT_S = 10.0


@dataclasses.dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """When a crashed child may start again (see the module docstring)."""

    initial_ms: float
    max_ms: float
    threshold: int = 0
    stable_ms: float | None = None
    give_up_after: int | None = None

    def delay_ms(self, crashes: int) -> float:
        """The wait before the next start after ``crashes`` crashes in a row (0 while tolerated)."""
        if crashes <= self.threshold:
            return 0.0
        return float(min(self.initial_ms * 2 ** (crashes - self.threshold - 1), self.max_ms))


class CrashBackoff:
    """One child's consecutive crashes under a :class:`BackoffPolicy`, timed by an injectable clock."""

    def __init__(self, policy: BackoffPolicy, clock: Clock | None = None) -> None:
        self.policy = policy
        self.clock: Clock = clock or RealClock()
        self.crashes = 0
        self.started_at: float | None = None

    def started(self) -> None:
        self.started_at = self.clock.now_ms()

    def reset(self) -> None:
        self.crashes = 0

    def crashed(self) -> float | None:
        """Count a crash; the delay before the next start in ms, or ``None`` to give up. A child
        that ran for ``stable_ms`` before crashing starts a new count."""
        now = self.clock.now_ms()
        stable = self.policy.stable_ms
        if stable is not None and self.started_at is not None and now - self.started_at >= stable:
            self.crashes = 0
        self.crashes += 1
        if self.policy.give_up_after is not None and self.crashes > self.policy.give_up_after:
            return None
        return self.policy.delay_ms(self.crashes)


async def graceful_stop(
    *,
    name: str,
    send_shutdown: Callable[[], Any],
    acked: asyncio.Future[None],
    exited: asyncio.Future[int],
    kill: Callable[[int], None],
    grace_ms: float,
    clock: Clock,
    interrupt: bool = False,
) -> None:
    """Stop one child: shutdown message → ack → grace period → signals (see the module docstring).
    Returns once the child exited (or ``FINAL_WAIT_S`` after the last signal)."""
    if exited.done():
        return
    send_shutdown()
    loop = asyncio.get_running_loop()
    timer = loop.create_task(clock.sleep_ms(grace_ms))
    waiters: set[asyncio.Future[Any]] = {acked, exited, timer}
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
    if not exited.done():
        if acked.done():
            # everything is saved once it acked: a child slow to exit is not waited for long
            try:
                await asyncio.wait_for(asyncio.shield(exited), EXIT_MS / 1000)
            except TimeoutError:
                if interrupt:
                    kill(signal.SIGKILL)
                else:
                    kill(signal.SIGTERM)
                    try:
                        await asyncio.wait_for(asyncio.shield(exited), TERM_WAIT_S)
                    except TimeoutError:
                        kill(signal.SIGKILL)
        elif interrupt:
            # what the user's Ctrl+C asked for (a child whose turn blocks its event loop cannot even
            # read the message): said with -v, not warned about
            log.info("%s did not stop its turn within %d ms of the interrupt: SIGKILL", name, int(grace_ms))
            kill(signal.SIGKILL)
        else:
            log.warning("%s did not acknowledge shutdown within %d ms: SIGKILL", name, int(grace_ms))
            kill(signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(exited), FINAL_WAIT_S)


class ExecSpawner:
    """Children started as ``sys.executable -m <module> --fd N <args>``: a fresh interpreter each
    (what a connector host needs: its own imports, its own terminal), with the message stream on
    fd ``N``. Keeps stdin, stdout and stderr (the ``cli`` connector reads the terminal)."""

    def __init__(self, on_exit: ExitCallback) -> None:
        self._on_exit = on_exit
        self._procs: dict[int, asyncio.subprocess.Process] = {}
        self._watchers: set[asyncio.Task[None]] = set()
        self.children: set[int] = set()

    async def start(self) -> None:
        return None

    async def spawn(self, module: str, args: list[str]) -> tuple[int, Connection]:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                module,
                "--fd",
                str(theirs.fileno()),
                *args,
                pass_fds=(theirs.fileno(),),
                env={**os.environ},
            )
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        self._procs[proc.pid] = proc
        self.children.add(proc.pid)
        watcher = asyncio.get_running_loop().create_task(self._watch(proc))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)
        reader, writer = await asyncio.open_unix_connection(sock=mine, limit=64 * 1024 * 1024)
        return proc.pid, Connection(reader, writer)

    async def _watch(self, proc: asyncio.subprocess.Process) -> None:
        code = await proc.wait()
        self._procs.pop(proc.pid, None)
        self.children.discard(proc.pid)
        self._on_exit(proc.pid, code)

    def kill(self, pid: int, sig: int) -> None:
        proc = self._procs.get(pid)
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)

    async def close(self) -> None:
        """SIGKILL whatever is still running and wait for it."""
        for pid in list(self._procs):
            self.kill(pid, signal.SIGKILL)
        if self._watchers:
            await asyncio.wait(set(self._watchers), timeout=FINAL_WAIT_S)


__all__ = ["BackoffPolicy", "CrashBackoff", "ExecSpawner", "graceful_stop"]
