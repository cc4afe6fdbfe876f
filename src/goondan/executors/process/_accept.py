"""Accept slots: how an agent process tells its host that a turn is accepted without waking it.

A turn is *accepted* once its user message is durable and before any user code of the turn runs
(middleware, model, tools): from then on a death of the process fails the turn instead of handing
its event to the next process, which could repeat a tool's side effects. The host only needs that
fact when the process has died. Sent as a ``turn_accepted`` frame it cost the host a wake-up, a
read, a decode and a dispatch on every turn (and the process a ``write``) for a fact read almost
never.

So each agent process gets a *slot*: a 64-byte file the host creates and maps (on ``/dev/shm``
where there is one) and names in the spawn spec (``acceptSlot``). The process maps it and, when a turn is
accepted, stores the turn's ticket in it: a plain memory write, no system call, visible to the
host through the file's shared page even after the process was SIGKILLed. When the process exits
the host reads the slot (through its own mapping: the file itself is unlinked as soon as the
process has mapped it): the dispatched turn is accepted if the slot holds its ticket (tickets never
repeat within an orchestrator). A process that cannot map the slot (an actor on another
machine, where the path does not exist) sends ``turn_accepted`` frames as before; so do agents
whose turns take steered messages, which accept several tickets at once.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import secrets
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


class HostSlot:
    """The host's end of one slot: its own mapping of the file, and the file's path until the
    process has mapped it too. Then the path is unlinked (:meth:`unlink`): the shared page lives on
    in the two mappings, and a host that is killed leaves nothing behind on ``/dev/shm``."""

    __slots__ = ("_map", "path")

    def __init__(self, path: str, mapped: mmap.mmap) -> None:
        self.path: str | None = path
        self._map = mapped

    def read(self) -> str:
        """The ticket last accepted through the slot ("" when none, or after :meth:`close`)."""
        if self._map.closed:
            return ""
        return self._map[:SLOT_SIZE].split(b"\0", 1)[0].decode(errors="replace")

    def unlink(self) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            self.path = None

    def close(self) -> None:
        self.unlink()
        with contextlib.suppress(Exception):
            self._map.close()


class AcceptSlots:
    """The host's slot maker. Slot files live directly on ``/dev/shm`` (else the temporary
    directory) under unguessable names, and each is unlinked as soon as its process has mapped it,
    so a host that is killed leaves at most the files of processes that were still starting."""

    __slots__ = ("_live",)

    def __init__(self) -> None:
        self._live: list[HostSlot] = []  # slots whose file still exists

    def create(self) -> HostSlot | None:
        """A new empty slot, or ``None`` when none can be made (the process then sends
        ``turn_accepted`` frames)."""
        self._live = [slot for slot in self._live if slot.path is not None]
        shm = "/dev/shm"
        base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else tempfile.gettempdir()
        path = os.path.join(base, f"goondan-accept-{os.getpid()}-{secrets.token_hex(8)}")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError:
            return None
        try:
            # written, not just sized: the page exists now, so the process's store into its mapping
            # never has to allocate one (on a full /dev/shm that would be a SIGBUS, not an error)
            if os.write(fd, bytes(SLOT_SIZE)) != SLOT_SIZE:
                raise OSError("short write")
            slot = HostSlot(path, mmap.mmap(fd, SLOT_SIZE))
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                os.unlink(path)
            return None
        finally:
            os.close(fd)
        self._live.append(slot)
        return slot

    def close(self) -> None:
        """Unlink the files of slots whose process never got to map them."""
        for slot in self._live:
            slot.unlink()
        self._live.clear()


__all__ = ["SLOT_SIZE", "AcceptSlot", "AcceptSlots", "HostSlot"]
