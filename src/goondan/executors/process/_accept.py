"""Accept slots: how an agent process tells its host that a turn is accepted without waking it.

A turn is *accepted* once its user message is durable and before any user code of the turn runs
(middleware, model, tools): from then on a death of the process fails the turn instead of handing
its event to the next process, which could repeat a tool's side effects. The host only needs that
fact when the process has died. Sent as a ``turn_accepted`` frame it cost the host a wake-up, a
read, a decode and a dispatch on every turn (and the process a ``write``) for a fact read almost
never.

So each agent process gets a *slot*: a 64-byte file the host creates (on ``/dev/shm`` where there
is one) and names in the spawn spec (``acceptSlot``). The process maps it and, when a turn is
accepted, stores the turn's ticket in it: a plain memory write, no system call, visible to the
host through the file's shared page even after the process was SIGKILLed. When the process exits
the host reads the slot: the dispatched turn is accepted if the slot holds its ticket (tickets
never repeat within an orchestrator). A process that cannot map the slot (an actor on another
machine, where the path does not exist) sends ``turn_accepted`` frames as before; so do agents
whose turns take steered messages, which accept several tickets at once.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import tempfile

SLOT_SIZE = 64


class AcceptSlot:
    """The agent process's end: the mapped slot."""

    __slots__ = ("_map",)

    def __init__(self, mapped: mmap.mmap) -> None:
        self._map = mapped

    @classmethod
    def open(cls, path: object) -> AcceptSlot | None:
        """The slot at ``path``, or ``None`` (no path given, or not reachable from here)."""
        if not isinstance(path, str) or not path:
            return None
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return cls(mmap.mmap(fd, SLOT_SIZE))
        except (OSError, ValueError):
            return None
        finally:
            os.close(fd)

    def mark(self, ticket: str) -> bool:
        """Record ``ticket`` as accepted; ``False`` when it does not fit (the caller sends a frame)."""
        data = ticket.encode()
        if not data or len(data) >= SLOT_SIZE:
            return False
        self._map[:SLOT_SIZE] = data.ljust(SLOT_SIZE, b"\0")
        return True


class AcceptSlots:
    """The host's end: one directory of slot files, one file per agent process."""

    __slots__ = ("_count", "_dir")

    def __init__(self) -> None:
        self._dir: str | None = None
        self._count = 0

    def create(self) -> str | None:
        """A new empty slot file's path, or ``None`` when none can be made (the process then sends
        ``turn_accepted`` frames)."""
        try:
            if self._dir is None:
                shm = "/dev/shm"
                base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
                self._dir = tempfile.mkdtemp(prefix="goondan-accept-", dir=base)
            self._count += 1
            path = os.path.join(self._dir, str(self._count))
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                os.ftruncate(fd, SLOT_SIZE)
            finally:
                os.close(fd)
        except OSError:
            return None
        return path

    @staticmethod
    def read(path: str) -> str:
        """The ticket last accepted through the slot ("" when none or unreadable)."""
        try:
            with open(path, "rb") as fh:
                data = fh.read(SLOT_SIZE)
        except OSError:
            return ""
        return data.split(b"\0", 1)[0].decode(errors="replace")

    @staticmethod
    def remove(path: str | None) -> None:
        if path:
            with contextlib.suppress(OSError):
                os.unlink(path)

    def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


__all__ = ["SLOT_SIZE", "AcceptSlot", "AcceptSlots"]
