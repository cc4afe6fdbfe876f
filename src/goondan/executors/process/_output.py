"""Where an agent process's raw output goes: its file descriptors 1 and 2 are one pipe whose read end
the host drains into a bounded per-instance log file.

Why a pipe read by the host, not a file the child writes: tools write to fds 1 and 2 from C code and
from subprocesses, which no Python-level capture sees and no size check can stop. The host reads what
they write at its own pace and keeps at most ``2 × limit`` bytes per instance (the file is rotated to
``<name>.1`` at ``limit``), so 100 MB of prints neither reach the host's stdout (where they would mix
into ``answer=$(gdn run … --input …)``) nor fill the disk. The pipe is always drained, also when
nothing is kept (``path is None``), so a writer never blocks on a full pipe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

log = logging.getLogger("goondan.executors.process")

OUTPUT_FILE = "agent-output.log"
OUTPUT_LIMIT = 1024 * 1024
_READ = 64 * 1024


class OutputSink:
    """Drains one agent process's output pipe into ``path`` (rotated at ``limit`` bytes)."""

    def __init__(self, fd: int, path: Path | None, name: str, limit: int = OUTPUT_LIMIT) -> None:
        self.fd = fd
        self.path = path
        self.name = name
        self.limit = limit
        self.written = 0
        self.total = 0
        self._file: IO[bytes] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._announced = False
        self.on_close: Callable[[OutputSink], object] | None = None
        os.set_blocking(fd, False)

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.fd, self._on_readable)

    def _on_readable(self) -> None:
        try:
            data = os.read(self.fd, _READ)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.close()
            return
        self.total += len(data)
        self._keep(data)

    def _keep(self, data: bytes) -> None:
        if self.path is None:
            return
        try:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                self._file = os.fdopen(fd, "ab", buffering=0)
                self.written = self._file.tell()
            if self.written + len(data) > self.limit:
                self._rotate()
            assert self._file is not None
            self._file.write(data[-self.limit :])
            self.written += min(len(data), self.limit)
        except OSError as exc:
            log.warning("output of %s cannot be kept in %s: %s", self.name, self.path, exc)
            self.path = None
            return
        if not self._announced:
            self._announced = True
            log.info("output of agent process %s goes to %s", self.name, self.path)

    def _rotate(self) -> None:
        assert self.path is not None
        if self._file is not None:
            self._file.close()
        os.replace(self.path, self.path.with_name(self.path.name + ".1"))
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        self._file = os.fdopen(fd, "ab", buffering=0)
        self.written = 0

    def drain(self) -> None:
        """Keep what is in the pipe now (before the host lets go of it)."""
        while self.fd >= 0:
            try:
                data = os.read(self.fd, _READ)
            except OSError:
                return
            if not data:
                return
            self.total += len(data)
            self._keep(data)

    def close(self) -> None:
        if self.fd < 0:
            return
        if self.on_close is not None:
            self.on_close(self)
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self.fd)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = -1
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None


__all__ = ["OUTPUT_FILE", "OUTPUT_LIMIT", "OutputSink"]
