"""Low-level durable-write helpers and the private crash-injection hook used by the crash tests.

Everything here is plain POSIX: ``os.write`` loops, ``fsync`` of files *and* of their directory (a
rename or a new directory entry is only durable once the directory itself is fsynced), and the classic
"write a temporary file, fsync it, rename it over the target, fsync the directory" replacement, which
guarantees a reader sees either the old or the new content, never a mix or an empty file.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from pathlib import Path

#: Crash-injection point, read once at import (tests run a child process with
#: ``GOONDAN_STORAGE_CRASH_AT=<point>``). ``None`` in production, so each check costs one comparison.
CRASH_AT: str | None = os.environ.get("GOONDAN_STORAGE_CRASH_AT") or None

_O_BINARY = getattr(os, "O_BINARY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _O_BINARY | _O_CLOEXEC
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_BINARY | _O_CLOEXEC
READ_FLAGS = os.O_RDONLY | _O_BINARY | _O_CLOEXEC

#: Conversations, tool results and extension state are private to the user who runs the runtime:
#: every directory and file created under the state root gets these modes, set explicitly so that
#: the result does not depend on the process umask.
DIR_MODE = 0o700
FILE_MODE = 0o600


def open_private(path: str | os.PathLike[str], flags: int) -> int:
    """``os.open`` whose created file is ``FILE_MODE`` whatever the umask. An existing file this
    process writes to is tightened too (state written by older versions was 0644)."""
    fd = os.open(path, flags, FILE_MODE)
    if flags & os.O_CREAT:
        try:
            if os.fstat(fd).st_mode & 0o777 != FILE_MODE:
                os.fchmod(fd, FILE_MODE)
        except OSError:
            os.close(fd)
            raise
    return fd


def make_private_dir(path: str | os.PathLike[str]) -> None:
    """``mkdir`` with ``DIR_MODE`` whatever the umask (``FileExistsError`` if it exists)."""
    os.mkdir(path, DIR_MODE)
    os.chmod(path, DIR_MODE)


def ensure_private_dirs(path: Path) -> None:
    """``mkdir -p`` (without fsync) whose created directories are ``DIR_MODE``; existing ones are
    left as they are."""
    missing: list[Path] = []
    current = path
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            make_private_dir(directory)
        except FileExistsError:
            if not directory.is_dir():
                raise


def die() -> None:
    """Kill this process the hard way: no ``finally``, no atexit, no buffered flush."""
    os.kill(os.getpid(), signal.SIGKILL)


def crash_point(name: str) -> None:
    """Die here if the crash tests asked for this point (no-op otherwise)."""
    if name == CRASH_AT:
        die()


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data``; a single ``os.write`` in practice (regular files rarely write short)."""
    n = os.write(fd, data)
    if n == len(data):
        return
    view = memoryview(data)[n:]
    while view:
        n = os.write(fd, view)
        view = view[n:]


def fsync_dir(path: Path) -> None:
    """Make the directory entries of ``path`` (creations, renames, unlinks) durable."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _O_CLOEXEC
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path) -> None:
    """``mkdir -p`` whose new directories survive a power loss: each created directory's parent is
    fsynced, otherwise a freshly created instance (and the turn committed into it) could vanish."""
    if path.is_dir():
        return
    missing: list[Path] = []
    current = path
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            make_private_dir(directory)
        except FileExistsError:
            if not directory.is_dir():
                raise
            continue
        fsync_dir(directory.parent)


def write_file_durably(path: Path, data: bytes | Iterable[bytes]) -> int:
    """Create/overwrite ``path`` with ``data`` (bytes, or chunks written in order) and fsync it (not
    its directory). Returns its inode."""
    fd = open_private(path, WRITE_FLAGS)
    try:
        if isinstance(data, bytes):
            write_all(fd, data)
        else:
            for chunk in data:
                write_all(fd, chunk)
        os.fsync(fd)
        return os.fstat(fd).st_ino
    finally:
        os.close(fd)


def replace_atomically(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Atomically replace ``path`` with ``data`` (tmp + fsync + rename + directory fsync).

    ``durable=False`` skips both fsyncs: the replacement is still atomic for readers and across a
    process crash, just not guaranteed to survive power loss (used for the idle/processing status
    flips of ``metadata.json``, which happen twice per turn and carry no data).

    The temporary name starts with ``.`` and carries the pid, so concurrent writers never share a
    temporary file and directory listings that skip dot-files never see it.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if durable:
            write_file_durably(tmp, data)
        else:
            fd = open_private(tmp, WRITE_FLAGS)
            try:
                write_all(fd, data)
            finally:
                os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    if durable:
        fsync_dir(path.parent)


def unlink_if_exists(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


__all__ = [
    "APPEND_FLAGS",
    "CRASH_AT",
    "DIR_MODE",
    "FILE_MODE",
    "READ_FLAGS",
    "WRITE_FLAGS",
    "crash_point",
    "die",
    "ensure_dir",
    "ensure_private_dirs",
    "fsync_dir",
    "make_private_dir",
    "open_private",
    "replace_atomically",
    "unlink_if_exists",
    "write_all",
    "write_file_durably",
]
