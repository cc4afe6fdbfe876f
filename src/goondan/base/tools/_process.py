"""Running a command as its own process group, with a deadline and bounded output capture.

The command runs in a new session (``start_new_session``), so its process-group id is its pid and
a timeout can kill everything it started — ``sh -c 'sleep 100 & wait'`` must not leave a ``sleep``
behind holding the pipes open. On timeout the group gets SIGTERM, then SIGKILL after a short grace.

Output is consumed as it arrives, through protocol callbacks (a child blocked on a full pipe would
otherwise never exit), and only the first and last ``limit/2`` bytes of each stream are kept, with a marker saying
how much was dropped: a model needs the beginning (what ran) and the end (how it failed), never
megabytes in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

KILL_GRACE_S = 0.1
# after the command exits, background children may still hold the pipes; read them this long more
DRAIN_GRACE_S = 0.25
DEFAULT_OUTPUT_LIMIT = 200_000


@dataclass(slots=True)
class ProcessOutcome:
    stdout: str
    stderr: str
    exit_code: int
    signal: str | None
    timed_out: bool
    duration_ms: int
    stdout_truncated: bool
    stderr_truncated: bool


class _Capture:
    """Keeps the head and the tail of a byte stream, counting what falls in between."""

    __slots__ = ("dropped", "head", "head_limit", "tail", "tail_limit")

    def __init__(self, limit: int) -> None:
        self.head_limit = limit - limit // 2
        self.tail_limit = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        excess = len(self.tail) - self.tail_limit
        if excess > 0:
            self.dropped += excess
            del self.tail[:excess]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n... [{self.dropped} bytes omitted] ...\n{tail}"


class _Protocol(asyncio.SubprocessProtocol):
    """Feeds the captures as data arrives and reports exit and pipe closure separately.

    ``Process.wait()`` of asyncio (3.11) only returns once every pipe is closed, so a background
    child that inherited stdout would make it hang; the protocol's ``process_exited`` does not.
    """

    def __init__(self, out: _Capture, err: _Capture, loop: asyncio.AbstractEventLoop) -> None:
        self.out = out
        self.err = err
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        chunk = data.encode() if isinstance(data, str) else data
        (self.out if fd == 1 else self.err).feed(chunk)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _within(fut: asyncio.Future[None], seconds: float) -> bool:
    """Wait for ``fut`` up to ``seconds``; ``True`` if it completed."""
    try:
        await asyncio.wait_for(asyncio.shield(fut), seconds)
    except TimeoutError:
        return False
    return True


async def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_ms: int,
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
) -> ProcessOutcome:
    """Run ``argv`` and return its outcome; never leaves its process group running past the deadline.

    Raises ``OSError`` (e.g. ``FileNotFoundError``) when the program cannot be started.
    """
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    out, err = _Capture(output_limit), _Capture(output_limit)
    transport, proto = await loop.subprocess_exec(
        lambda: _Protocol(out, err, loop),
        *argv,
        cwd=str(cwd),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    pid = transport.get_pid()
    timed_out = False
    try:
        if not await _within(proto.exited, timeout_ms / 1000):
            timed_out = True
            _signal_group(pid, signal.SIGTERM)
            await _within(proto.exited, KILL_GRACE_S)
            # the leader may be gone while its children ignore SIGTERM: always finish the group off
            _signal_group(pid, signal.SIGKILL)
            await proto.exited
        # background children may still hold the pipes: read a little longer, then stop listening
        await _within(proto.closed, DRAIN_GRACE_S)
    except BaseException:
        # cancelled (turn aborted, runtime closing): the command must not outlive its caller
        _signal_group(pid, signal.SIGKILL)
        raise
    finally:
        transport.close()
    code = transport.get_returncode()
    code = -1 if code is None else code
    sig_name: str | None = None
    if code < 0:
        try:
            sig_name = signal.Signals(-code).name
        except ValueError:
            sig_name = f"SIG{-code}"
        code = -1
    elif timed_out:
        code = -1
    return ProcessOutcome(
        stdout=out.text(),
        stderr=err.text(),
        exit_code=code,
        signal=sig_name,
        timed_out=timed_out,
        duration_ms=int((time.monotonic() - started) * 1000),
        stdout_truncated=out.dropped > 0,
        stderr_truncated=err.dropped > 0,
    )


__all__ = ["DEFAULT_OUTPUT_LIMIT", "ProcessOutcome", "run_process"]
