"""The single-writer lease of one agent instance directory.

Two runtimes writing the same instance would each fold only their own turns into ``base.jsonl`` and
silently lose the other's (a rewrite commit replaces the whole file). So whoever opens an instance for
writing first takes its lease:

* **A kernel lock** - ``flock(LOCK_EX | LOCK_NB)`` on ``lease.lock`` in the instance directory, opened
  ``O_CLOEXEC``. The kernel drops it when the holder's last descriptor closes, in particular when the
  process dies in any way (SIGKILL included), so a crashed holder never leaves a stale lease. flock
  locks belong to the *open file description*: a second ``open`` in the same process conflicts too.
* **Holder info** - ``lease.json`` ``{pid, host, since, token, owner}`` written after the lock is
  taken, so that a refused opener can name the holder (``E_INSTANCE_LOCKED``).
* **A fencing token** - ``token`` counts acquisitions of this instance (read from the previous
  ``lease.json`` and incremented). Every commit re-reads ``lease.json`` and refuses to write
  (``E_INSTANCE_LEASE_LOST``) when the token or owner is no longer its own: that happens only when
  the lock stopped protecting the files (the instance was deleted and recreated under a running
  holder, a filesystem without working ``flock``), and a stale writer must then fail rather than
  overwrite the new holder's history.

Fork: a descriptor inherited by ``fork()`` keeps the lock alive for as long as the child lives. Agent
processes open (and lock) their instance themselves after being forked, and the fork server never
opens one; as a safety net, every lease descriptor is closed in the child right after any ``fork()``
(``os.register_at_fork``), so a child can never hold its parent's lease. Closing the inherited copy
does not unlock the parent's (the description stays open in the parent).
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import time
import weakref
from pathlib import Path
from typing import Any

import orjson

from .._ids import now_iso
from ..errors import GoondanError, StorageError
from ._atomic import ensure_dir, open_private, replace_atomically

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no kernel lock, the token still fences
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = "lease.lock"
HOLDER_FILE = "lease.json"

CODE_LOCKED = "E_INSTANCE_LOCKED"
CODE_LOST = "E_INSTANCE_LEASE_LOST"

#: How long an opener waits when the recorded holder is a process of this host that no longer
#: exists: its descriptors are being closed by the kernel right now (a crashed agent process being
#: restarted by the orchestrator), so the lock is about to be free.
DEAD_HOLDER_WAIT_S = 3.0

_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)

# Every open lease of this process, so that a forked child can close their descriptors.
_OPEN: weakref.WeakSet[InstanceLease] = weakref.WeakSet()


def _close_in_child() -> None:
    for lease in list(_OPEN):
        lease._forget_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_in_child)


def _host() -> str:
    return socket.gethostname()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def os_error_suggestion(exc: OSError) -> str:
    """What to do about an OSError on the state root's files, by its errno."""
    if exc.errno == errno.EROFS:
        return (
            "The state root is on a read-only file system: give a writable directory with --state-root "
            "or GOONDAN_STATE_ROOT (a container's volume mounted read-only, a read-only remount after "
            "disk errors)."
        )
    if exc.errno in (errno.EEXIST, errno.ENOTDIR):  # a directory the state root needs is a file
        return (
            f"{exc.filename or 'A part of the path'} is a file, not a directory: give a directory with "
            "--state-root or GOONDAN_STATE_ROOT."
        )
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "The disk (or quota) of the state root is full: free space, or use another --state-root."
    return "Check permissions of the state root (--state-root / GOONDAN_STATE_ROOT)."


def read_holder(directory: Path) -> dict[str, Any] | None:
    """``lease.json`` of an instance directory (``None`` if missing or unreadable)."""
    try:
        value = orjson.loads((directory / HOLDER_FILE).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def describe_holder(holder: dict[str, Any] | None) -> str:
    if not holder:
        return "another process (holder unknown)"
    return f"pid {holder.get('pid', '?')} on {holder.get('host', '?')} since {holder.get('since', '?')}"


def locked_error(
    directory: Path | str, holder: dict[str, Any] | None, *, elsewhere: str = "another --instance-key or --state-root"
) -> GoondanError:
    """``E_INSTANCE_LOCKED`` for the instance ``directory`` (a path, or a name for stores without one).
    ``elsewhere``: what keeps the conversations apart in this store (a state root does nothing for
    a PostgreSQL store, whose workspaces live in the database)."""
    name = directory.name if isinstance(directory, Path) else directory
    return GoondanError(
        CODE_LOCKED,
        f"agent instance {name} is in use by {describe_holder(holder)}",
        suggestion=(
            "Another runtime (a `gdn run`, a program using goondan.Runtime) is writing this conversation. "
            f"Send the request through it, stop it first, or use {elsewhere}."
        ),
    )


# what keeps two runtimes' conversations apart in a PostgreSQL store (see locked_error)
POSTGRES_ELSEWHERE = "another --instance-key, or another database (--store URL / GOONDAN_STORE)"


def lost_error(
    name: str, token: int, holder: dict[str, Any] | None, *, file: str | None = None, deleted: bool = False
) -> StorageError:
    """``E_INSTANCE_LEASE_LOST``: a writer whose lease was taken over must not write. ``deleted``:
    nobody took it over, the instance's files are gone (``gdn instance delete --force`` under a
    running ``gdn run``); that is said instead of a holder nobody can find."""
    if deleted:
        return StorageError(
            CODE_LOST,
            f"{name} was deleted while this runtime held it (gdn instance delete --force, or its files "
            "were removed). Nothing was written",
            file=file,
            suggestion=(
                "Start the conversation over inside the running gdn run: gdn restart --fresh (with "
                "--agent and --instance-key for this instance only), or restart gdn run. The refused "
                "turn is not kept."
            ),
        )
    return StorageError(
        CODE_LOST,
        f"lost the lease of {name} (token {token}); it is now held by {describe_holder(holder)}. Nothing was written",
        file=file,
        suggestion=(
            "Another runtime took over this conversation (or it was deleted). Stop one of "
            "them; the turn that was refused is kept only in the runtime that produced it."
        ),
    )


class InstanceLease:
    """A held lease; :meth:`acquire` takes one, :meth:`release` (or process exit) gives it back."""

    directory: Path
    token: int

    def __init__(self, directory: Path, fd: int, token: int, owner: str) -> None:
        self.directory = directory
        self.token = token
        self._fd: int | None = fd
        self._owner = owner
        self._holder_path = directory / HOLDER_FILE
        # lease.json as this lease wrote it, kept open so that its inode number cannot be reused:
        # while the path still names this inode, unchanged, nobody took over (a new holder renames
        # its own file into place), and check() needs one stat instead of reading the file.
        self._holder_fd: int | None = None
        self._holder_key: tuple[int, int, int, int] | None = None
        with contextlib.suppress(OSError):
            holder_fd = os.open(self._holder_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            self._holder_fd = holder_fd
            if self._holder_is_ours():
                st = os.fstat(holder_fd)
                self._holder_key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        _OPEN.add(self)

    @classmethod
    def acquire(cls, directory: Path, *, wait_for_dead_holder: float = DEAD_HOLDER_WAIT_S) -> InstanceLease:
        """Take the lease of ``directory`` (created if missing) or raise ``E_INSTANCE_LOCKED``."""
        ensure_dir(directory)
        fd = open_private(directory / LOCK_FILE, _LOCK_FLAGS)
        try:
            cls._lock(directory, fd, wait_for_dead_holder)
            previous = read_holder(directory) or {}
            last = previous.get("token")
            token = (last if isinstance(last, int) and last >= 0 else 0) + 1
            owner = os.urandom(8).hex()
            record = {"pid": os.getpid(), "host": _host(), "since": now_iso(), "token": token, "owner": owner}
            # Not fsynced: after a power loss every holder is gone anyway, and the kernel lock (not
            # this file) is what keeps two live holders apart.
            replace_atomically(directory / HOLDER_FILE, orjson.dumps(record), durable=False)
        except BaseException:
            os.close(fd)
            raise
        return cls(directory, fd, token, owner)

    @staticmethod
    def _lock(directory: Path, fd: int, wait_for_dead_holder: float) -> None:
        if fcntl is None:  # pragma: no cover
            return
        deadline: float | None = None
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise StorageError(
                        "E_STORAGE_WRITE",
                        f"could not lock {directory / LOCK_FILE}: {exc}",
                        file=str(directory / LOCK_FILE),
                    ) from exc
            holder = read_holder(directory)
            pid = holder.get("pid") if holder else None
            dead = isinstance(pid, int) and holder is not None and holder.get("host") == _host()
            dead = dead and not _pid_alive(int(pid))  # type: ignore[arg-type]
            if not dead or wait_for_dead_holder <= 0:
                raise locked_error(directory, holder)
            now = time.monotonic()
            if deadline is None:
                deadline = now + wait_for_dead_holder
            elif now >= deadline:
                raise locked_error(directory, holder)
            time.sleep(0.02)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def check(self) -> None:
        """Fencing: fail unless ``lease.json`` still names this lease (called before every commit)."""
        if self._fd is None:
            raise StorageError(
                CODE_LOST,
                f"the lease of {self.directory} was released; this store may no longer write",
                file=str(self.directory),
                suggestion="Open the instance again (load()) before writing.",
            )
        key = self._holder_key
        if key is not None:
            try:
                st = os.stat(self._holder_path)
            except OSError:
                st = None
            if st is not None and (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size) == key:
                return
        if self._holder_is_ours():
            return
        holder = read_holder(self.directory)
        deleted = holder is None and not os.path.lexists(self._holder_path)
        raise lost_error(self.directory.name, self.token, holder, file=str(self.directory), deleted=deleted)

    def _holder_is_ours(self) -> bool:
        holder = read_holder(self.directory)
        return holder is not None and holder.get("token") == self.token and holder.get("owner") == self._owner

    def _close_holder_fd(self) -> None:
        fd, self._holder_fd, self._holder_key = self._holder_fd, None, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def release(self) -> None:
        fd, self._fd = self._fd, None
        _OPEN.discard(self)
        self._close_holder_fd()
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the description drops the flock

    def _forget_after_fork(self) -> None:
        """In a forked child: close the inherited descriptor without unlocking the parent's lease."""
        fd, self._fd = self._fd, None
        self._close_holder_fd()
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()


def shown_status(info: Any) -> str:
    """The status an instance listing shows (``gdn instance list``, Studio): ``processing`` as
    stored, unless the process that held the instance is gone: a ``gdn run`` killed mid-turn
    (SIGKILL, a crash, an inline tool blocking past Ctrl+C) cannot write ``idle``, and the list said
    ``processing`` for a turn no one runs. Shown as ``interrupted``; the next run recovers the turn.
    For instance directories of this host's file store (the holder's pid), and for a store that
    lists whether a lease is held (PostgreSQL, any machine)."""
    if info.status == "processing" and getattr(info, "held", None) is False:
        return "interrupted"  # a store that knows its leases (PostgreSQL): nobody runs that turn
    if info.status != "processing" or info.path == Path():
        return str(info.status)
    holder = read_holder(Path(info.path))
    pid = holder.get("pid") if holder else None
    if not isinstance(pid, int) or (holder or {}).get("host") != socket.gethostname():
        return str(info.status)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "interrupted"
    except OSError:
        pass
    return str(info.status)


__all__ = [
    "CODE_LOCKED",
    "CODE_LOST",
    "HOLDER_FILE",
    "LOCK_FILE",
    "InstanceLease",
    "describe_holder",
    "locked_error",
    "lost_error",
    "read_holder",
    "shown_status",
]
