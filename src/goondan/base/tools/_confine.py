"""Reaching model-supplied paths inside the instance workdir, and nowhere else, even under attack.

Checking a path and then opening it is a race: between the two, another process (a ``bash`` call
of the same agent, or anything sharing the directory) can swap a checked directory for a symlink
that points outside, and the open follows it. So nothing here checks a path string. A
:class:`Walk` opens the workdir once and then descends one component at a time with
``openat(..., O_NOFOLLOW)`` relative to the directory it already holds open. No symlink is ever
followed by the kernel: when a component is a link, the walk reads the link and continues with its
target itself, under the same rules. ``..`` pops back to the directory fd the walk came from, so it
can never climb above the workdir's fd. The final operation (open, stat, mkdir, unlink, ...) is then
done relative to the parent directory's fd on the last name, again with ``O_NOFOLLOW``: if that
name became a symlink after the walk looked at it, the open fails and the walk follows the link
under the rules instead of letting the kernel do it.

Three escapes are refused with ``E_FS_OUTSIDE_WORKDIR``: ``..`` above the workdir, absolute paths
elsewhere, and symlinks (inside the workdir) whose target leaves it, even if they would come back
in. Symlinks that stay inside are followed, and results name the real location (``alias/f.txt``
is reported as ``real/f.txt``).

Names that do not exist, are files, or loop are kept literally, as ``realpath`` does, so
``missing/../x`` is ``x`` and the error for ``missing/x`` is decided by the operation (an ``OSError``
with that errno, which callers already map to their codes).
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat as stat_mod
from collections import deque
from pathlib import Path
from types import TracebackType

from goondan.base.tools._common import ToolExecutionError, ToolInputError

OUTSIDE = "E_FS_OUTSIDE_WORKDIR"
CHANGED = "E_FS_PATH_CHANGED"
MAX_HOPS = 40  # symlinks followed per component of the given path (the kernel's MAXSYMLINKS)
_RETRIES = 64  # a name that keeps changing kind between two system calls is given up on

# O_PATH (Linux) opens a directory for use as dir_fd without needing read permission on it, so a
# walk passes through search-only (--x) directories exactly where a path lookup would.
DIR_FLAGS = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)
# errnos of an O_NOFOLLOW open that can mean "this name is a symlink (now)"
_LINKISH = frozenset({errno.ELOOP, errno.EMLINK, errno.ENOTDIR})


def _given(parts: list[str]) -> deque[tuple[str, bool]]:
    return deque((part, True) for part in parts)


def workdir_root(workdir: Path) -> Path:
    return Path(os.path.realpath(workdir))


def _os_error(code: int) -> OSError:
    # OSError(errno, ...) builds the matching subclass (FileNotFoundError, NotADirectoryError, ...)
    return OSError(code, os.strerror(code))


class _Gone:
    """A component the walk cannot enter: missing, not a directory, or not searchable."""

    def __init__(self, code: int) -> None:
        self.code = code


class Walk:
    """``raw`` walked from the workdir's fd to its last component, with every fd it holds.

    After construction the walk stands in the directory that holds the last component
    (:attr:`leaf`); the workdir itself is the leaf ``.`` of the workdir. Use it as a context
    manager: it owns the descriptors and closes them all.

    With ``follow_last=False`` the last component is never followed (to delete or describe a link
    itself), and ``..`` before it is collapsed lexically first (``a/link/../x`` is ``a/x``).
    """

    def __init__(self, root: Path, raw: str, *, follow_last: bool = True) -> None:
        if "\x00" in raw:
            raise ToolInputError("'path' must not contain NUL characters")
        self.root = root
        self.raw = raw
        self.follow_last = follow_last
        self._dirs: list[tuple[str, int]] = []  # directories entered below the root, fds owned
        self._virtual: list[str] = []  # names below the last real directory that could not be entered
        self._why = 0  # errno of the first virtual name
        self._hops = 0
        self.leaf = "."
        self._parts = self._initial_parts()
        self._root_fd = os.open(root, DIR_FLAGS)
        try:
            self._run(_given(self._parts))
        except BaseException:
            self.close()
            raise

    # --- lifetime -------------------------------------------------------------------------------

    def close(self) -> None:
        self._drop_dirs()
        if self._root_fd >= 0:
            os.close(self._root_fd)
            self._root_fd = -1

    def __enter__(self) -> Walk:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _drop_dirs(self) -> None:
        while self._dirs:
            os.close(self._dirs.pop()[1])

    # --- where the walk stands ------------------------------------------------------------------

    @property
    def parts(self) -> list[str]:
        """The workdir-relative components of the location reached (the real names walked)."""
        names = [name for name, _ in self._dirs] + self._virtual
        return [*names, self.leaf] if self.leaf != "." else names

    @property
    def display(self) -> str:
        """The workdir-relative POSIX form shown to the model (``.`` for the workdir itself)."""
        return "/".join(self.parts) or "."

    @property
    def path(self) -> Path:
        return self.root.joinpath(*self.parts)

    @property
    def is_root(self) -> bool:
        return self.leaf == "." and not self._dirs and not self._virtual

    @property
    def parent_is_not_a_directory(self) -> bool:
        """The leaf's own parent exists but cannot hold entries (``file.txt/new``, ``loop/new``)."""
        return len(self._virtual) == 1 and self._why in (errno.ENOTDIR, errno.ELOOP)

    def _top(self) -> int:
        return self._dirs[-1][1] if self._dirs else self._root_fd

    def here(self) -> tuple[str, int]:
        """``(name, dir_fd)`` of the leaf, or the errno of why it cannot be reached."""
        if self._virtual:
            raise _os_error(self._why)
        return self.leaf, self._top()

    # --- operations on the leaf -----------------------------------------------------------------

    def stat(self) -> os.stat_result:
        """The leaf's status; a symlink leaf is followed (within the workdir) unless ``follow_last`` is off."""
        for _ in range(_RETRIES):
            name, fd = self.here()
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not (self.follow_last and stat_mod.S_ISLNK(info.st_mode)):
                return info
            self._follow_leaf(name, fd)
        raise self._changed()

    def open(self, flags: int, mode: int = 0o666) -> int:
        """``os.open`` of the leaf relative to its directory's fd, never letting the kernel follow a link."""
        for _ in range(_RETRIES):
            name, fd = self.here()
            try:
                return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in _LINKISH:
                    raise
                try:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    raise exc from None
                if stat_mod.S_ISLNK(info.st_mode):
                    if not self.follow_last:
                        raise
                    self._follow_leaf(name, fd)
                elif exc.errno == errno.ENOTDIR and not stat_mod.S_ISDIR(info.st_mode):
                    raise  # a file where a directory was asked for
                # else: it changed kind between the two calls; look again
        raise self._changed()

    def mkdir(self) -> None:
        name, fd = self.here()
        os.mkdir(name, 0o777, dir_fd=fd)

    def make_parents(self) -> None:
        """Create the missing directories above the leaf (``mkdir -p`` of its parent), then walk again.

        Raises ``NotADirectoryError`` (or the errno that stopped the walk) when a parent exists but
        cannot hold entries.
        """
        for _ in range(len(self._parts) + MAX_HOPS + _RETRIES):
            if not self._virtual:
                return
            if self._why != errno.ENOENT:
                raise _os_error(self._why)
            try:
                os.mkdir(self._virtual[0], 0o777, dir_fd=self._top())
            except FileExistsError:
                pass  # created meanwhile (maybe as a link): the new walk decides what it is
            self._restart()
        raise self._changed()

    def is_empty_dir(self) -> bool:
        try:
            fd = self.open(os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return False
        try:
            with os.scandir(fd) as entries:
                return next(entries, None) is None
        finally:
            os.close(fd)

    # --- the walk -------------------------------------------------------------------------------

    def _initial_parts(self) -> list[str]:
        raw = self.raw
        if self.follow_last:
            if not raw.startswith("/"):
                return raw.split("/")
            inside = self._inside_parts(raw)
            if inside is None:
                raise self._refusal()
            return inside
        # The last name is the entry itself, so ``..`` before it is taken lexically. A path that
        # collapses to the workdir (``a/..``) has no last name: it is walked like any other path,
        # so ``link/..`` is the directory holding the link's target, as the OS would see it.
        lexical = posixpath.normpath(raw)
        if not raw.startswith("/"):
            if lexical == ".":
                return raw.split("/")
            if lexical.split("/")[0] == "..":
                raise self._refusal()
            return lexical.split("/")
        if Path(lexical) == self.root:
            inside = self._inside_parts(raw)
        else:
            head, name = posixpath.split(lexical)
            inside = self._inside_parts(head) if name else None
            if inside is not None:
                return [*inside, name]
            if Path(os.path.realpath(lexical)) == self.root:
                return []
        if inside is None:
            raise self._refusal()
        return inside

    def _inside_parts(self, absolute: str) -> list[str] | None:
        """Workdir-relative components for an absolute path, or ``None`` if it does not lead in.

        The shortest prefix that resolves to the workdir (or into it) is the path's way in; that
        prefix is outside the model's reach (it is where the runtime put the workdir, ``/tmp`` vs
        ``/private/tmp`` and the like), and everything after it is walked like a relative path.
        Prefixes are resolved incrementally (``realpath`` only where a component is a link, at
        most ``MAX_HOPS`` times), so a very long absolute path costs one ``lstat`` per component.
        """
        root = str(self.root)
        parts = absolute.split("/")
        real = "/"
        links = 0
        for i, part in enumerate(parts):
            if part == "..":
                real = posixpath.dirname(real)
            elif part not in ("", "."):
                candidate = posixpath.join(real, part)
                try:
                    is_link = stat_mod.S_ISLNK(os.lstat(candidate).st_mode)
                except OSError:
                    is_link = False  # missing (or unreachable): kept literally, as realpath does
                if is_link:
                    links += 1
                    if links > MAX_HOPS:
                        return None
                    candidate = os.path.realpath(candidate)
                real = candidate
            if real == root or real.startswith(root.rstrip("/") + "/"):
                return [*Path(real).relative_to(self.root).parts, *parts[i + 1 :]]
        return None

    def _restart(self) -> None:
        self._drop_dirs()
        self._virtual.clear()
        self._why = 0
        self._hops = 0
        self._run(_given(self._parts))

    def _run(self, pending: deque[tuple[str, bool]]) -> None:
        self.leaf = "."
        while pending:
            name, given = pending.popleft()
            if given:
                # The budget is per component the caller wrote: a loop gives up on its own link
                # (kept literally, like realpath) without starving the links after it, and the
                # walk still ends because each written component can add at most MAX_HOPS links.
                self._hops = 0
            if name in ("", "."):
                continue
            if name == "..":
                self._up()
                continue
            last = all(rest in ("", ".") for rest, _ in pending)
            if self._virtual:
                if last:
                    self.leaf = name
                    return
                self._virtual.append(name)
                continue
            if last:
                target = self._link_target(name) if self.follow_last and self._hops < MAX_HOPS else None
                if target is None:
                    self.leaf = name  # a file, a directory, nothing, or a loop: the operation decides
                    return
                self._hops += 1
                self._expand(target, pending)
                continue
            entered = self._enter(name)
            if isinstance(entered, int):
                self._dirs.append((name, entered))
            elif isinstance(entered, _Gone):
                self._sink(name, entered.code)
            elif self._hops >= MAX_HOPS:
                self._sink(name, errno.ELOOP)
            else:
                self._hops += 1
                self._expand(entered, pending)
        # the path ended on a directory (``a/..``, ``.``, a link to a directory): it is the leaf
        if self._virtual:
            self.leaf = self._virtual.pop()
            if not self._virtual:
                self._why = 0
        elif self._dirs:
            self.leaf, fd = self._dirs.pop()
            os.close(fd)

    def _up(self) -> None:
        if self._virtual:
            self._virtual.pop()
            if not self._virtual:
                self._why = 0
        elif self._dirs:
            os.close(self._dirs.pop()[1])
        else:
            raise self._refusal()

    def _sink(self, name: str, code: int) -> None:
        self._virtual.append(name)
        self._why = code

    def _enter(self, name: str) -> int | str | _Gone:
        """Open directory ``name`` of the current directory: its fd, its link target, or why not."""
        fd = self._top()
        for _ in range(_RETRIES):
            try:
                return os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                failure = exc
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError as exc:
                return _Gone(exc.errno or errno.EIO)
            if stat_mod.S_ISLNK(info.st_mode):
                try:
                    return os.readlink(name, dir_fd=fd)
                except OSError:
                    continue  # replaced between the two calls
            if not stat_mod.S_ISDIR(info.st_mode):
                return _Gone(errno.ENOTDIR)
            if failure.errno not in (*_LINKISH, errno.ENOENT):
                return _Gone(failure.errno or errno.EIO)  # e.g. a directory we may not search
            # it was a link or missing a moment ago and is a directory now: try again
        raise self._changed()

    def _link_target(self, name: str) -> str | None:
        fd = self._top()
        try:
            if not stat_mod.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                return None
            return os.readlink(name, dir_fd=fd)
        except OSError:
            return None  # gone or changed: the operation on the leaf sees what is there now

    def _follow_leaf(self, name: str, fd: int) -> None:
        """The leaf is a symlink (perhaps only since the walk looked): continue the walk into it."""
        if self._hops >= MAX_HOPS:
            raise _os_error(errno.ELOOP)
        try:
            target = os.readlink(name, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                return  # no longer a link; the caller looks again
            raise
        self._hops += 1
        pending: deque[tuple[str, bool]] = deque()
        self._expand(target, pending)
        self._run(pending)

    def _expand(self, target: str, pending: deque[tuple[str, bool]]) -> None:
        """Continue with a link's target in place of the link."""
        if not target:
            raise _os_error(errno.ENOENT)  # an empty link names nothing
        if target.startswith("/"):
            inside = self._inside_parts(target)
            if inside is None:
                raise self._refusal()
            self._drop_dirs()  # absolute: start again from the workdir
            parts = inside
        else:
            parts = target.split("/")
        pending.extendleft((part, False) for part in reversed(parts))

    # --- errors ---------------------------------------------------------------------------------

    def _refusal(self) -> ToolExecutionError:
        raw = self.raw
        if raw.startswith("/"):
            why = "is an absolute path outside the workdir"
        elif posixpath.normpath(raw).split("/")[0] == "..":
            why = "climbs out of the workdir with '..'"
        else:
            why = "goes through a symlink that points outside the workdir"
        return ToolExecutionError(
            OUTSIDE,
            f"path '{raw}' {why}; file-system tools only work inside the instance workdir",
            suggestion="Use a path relative to the workdir (e.g. 'notes/todo.md') without '..' segments.",
        )

    def _changed(self) -> ToolExecutionError:
        return ToolExecutionError(
            CHANGED,
            f"path '{self.raw}' kept changing (renamed or replaced by another process) while it was being opened",
            suggestion="Try again once whatever is rearranging that directory has finished.",
        )


def resolve(root: Path, raw: str, *, follow_last: bool = True) -> Path:
    """The real path ``raw`` names right now, which is ``root`` or inside it.

    Only for showing or comparing paths: operating on the returned path would reopen the
    check-then-use race; operate through a :class:`Walk` instead.
    """
    with Walk(root, raw, follow_last=follow_last) as walk:
        return walk.path


__all__ = ["CHANGED", "DIR_FLAGS", "MAX_HOPS", "OUTSIDE", "Walk", "resolve", "workdir_root"]
