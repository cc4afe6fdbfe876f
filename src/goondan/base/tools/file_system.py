"""file-system: read, write, list and manage files inside the instance workdir.

Every path is relative to the instance workdir (``ctx.workdir``) and must stay inside it: ``..``
escapes, absolute paths elsewhere and symlinks that lead out are refused with
``E_FS_OUTSIDE_WORKDIR``. Every operation goes through a ``_confine.Walk``, which reaches the path
one directory fd at a time and acts relative to the last one, so a directory swapped for a symlink
while the tool runs cannot redirect it outside (no check-then-open race). Paths in results are
workdir-relative, so results never reveal where the runtime keeps its state.

Reads are bounded (``maxBytes``) and cut on a UTF-8 character boundary; listings are bounded
(``maxEntries``) and never follow symlinks, so a link cycle cannot make them loop.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import os
import shutil
import stat as stat_mod
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from goondan.base.tools._common import (
    ToolExecutionError,
    ToolInputError,
    args_dict,
    check_keys,
    opt_bool,
    opt_int,
    opt_str,
    require_str,
)
from goondan.base.tools._confine import DIR_FLAGS, Walk, workdir_root
from goondan.types import ToolContext

DEFAULT_READ_BYTES = 100_000
MAX_READ_BYTES = 10_000_000
DEFAULT_MAX_ENTRIES = 1000
MAX_ENTRIES = 100_000


def _root(ctx: ToolContext) -> Path:
    return workdir_root(Path(ctx.workdir))


def _not_found(raw: str, what: str = "file or directory") -> ToolExecutionError:
    return ToolExecutionError(
        "E_FS_NOT_FOUND",
        f"no {what} at '{raw}'",
        suggestion="Call file-system__list to see what exists in the workdir.",
    )


def _os_error(raw: str, exc: OSError) -> ToolExecutionError:
    reason = exc.strerror or type(exc).__name__
    return ToolExecutionError("E_FS_IO", f"'{raw}': {reason}", suggestion="Check the path and permissions.")


def _kind(st: os.stat_result) -> str:
    if stat_mod.S_ISLNK(st.st_mode):
        return "symlink"
    if stat_mod.S_ISDIR(st.st_mode):
        return "dir"
    if stat_mod.S_ISREG(st.st_mode):
        return "file"
    return "other"


def _walk(ctx: ToolContext, raw: str, *, follow_last: bool = True) -> Walk:
    """Start walking ``raw`` from the workdir; failing to open the workdir itself is an I/O error."""
    try:
        return Walk(_root(ctx), raw, follow_last=follow_last)
    except OSError as exc:
        raise _os_error(raw, exc) from None


def _is_dir(walk: Walk) -> bool:
    try:
        return stat_mod.S_ISDIR(walk.stat().st_mode)
    except OSError:
        return False


def _not_a_file(raw: str) -> ToolExecutionError:
    return ToolExecutionError(
        "E_FS_NOT_A_FILE",
        f"'{raw}' is a directory",
        suggestion="Use file-system__list to see a directory's entries.",
    )


def read(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``file-system__read``: ``{path, maxBytes?}`` → ``{path, size, truncated, content}``."""
    args = args_dict(input)
    check_keys(args, ("path", "maxBytes"))
    raw = require_str(args, "path")
    max_bytes = opt_int(args, "maxBytes", DEFAULT_READ_BYTES, minimum=1, maximum=MAX_READ_BYTES)
    assert max_bytes is not None
    with _walk(ctx, raw) as walk:
        if _is_dir(walk):
            raise _not_a_file(raw)
        try:
            fd = walk.open(os.O_RDONLY)
        except FileNotFoundError:
            raise _not_found(raw, "file") from None
        except OSError as exc:
            raise _os_error(raw, exc) from None
        with open(fd, "rb") as fh:
            info = os.fstat(fd)
            if stat_mod.S_ISDIR(info.st_mode):  # became a directory after the check above
                raise _not_a_file(raw)
            try:
                data = fh.read(max_bytes + 1)
            except OSError as exc:
                raise _os_error(raw, exc) from None
        shown = walk.display
    truncated = len(data) > max_bytes
    data = data[:max_bytes]
    # final=False drops a multi-byte character cut in half by the limit instead of garbling it
    content = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(data, final=not truncated)
    return {"path": shown, "size": max(info.st_size, len(data)), "truncated": truncated, "content": content}


def write(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``file-system__write``: ``{path, content, append?}``; parent directories are created."""
    args = args_dict(input)
    check_keys(args, ("path", "content", "append"))
    raw = require_str(args, "path")
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolInputError("'content' must be a string")
    append = opt_bool(args, "append", False)
    data = content.encode("utf-8")
    with _walk(ctx, raw) as walk:
        if walk.is_root or _is_dir(walk):
            raise ToolExecutionError(
                "E_FS_IS_A_DIRECTORY",
                f"'{raw}' is a directory; cannot write file content to it",
                suggestion="Write to a file path inside that directory instead.",
            )
        try:
            if walk.parent_is_not_a_directory:
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST))
            walk.make_parents()
            fd = walk.open(os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC))
            with open(fd, "ab" if append else "wb") as fh:
                fh.write(data)
                fh.flush()
                size = os.fstat(fd).st_size
        except FileExistsError:
            raise ToolExecutionError(
                "E_FS_NOT_A_DIRECTORY",
                f"a parent of '{raw}' exists and is not a directory",
                suggestion="Choose a path whose parents are directories.",
            ) from None
        except NotADirectoryError:
            raise ToolExecutionError(
                "E_FS_NOT_A_DIRECTORY",
                f"a parent of '{raw}' is a file, not a directory",
                suggestion="Choose a path whose parents are directories.",
            ) from None
        except OSError as exc:
            raise _os_error(raw, exc) from None
        shown = walk.display
    return {"path": shown, "size": size, "bytesWritten": len(data), "written": True, "append": append}


def list_dir(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``file-system__list``: ``{path?, recursive?, includeDirs?, includeFiles?, maxEntries?}``."""
    args = args_dict(input)
    check_keys(args, ("path", "recursive", "includeDirs", "includeFiles", "maxEntries"))
    raw = opt_str(args, "path") or "."
    recursive = opt_bool(args, "recursive", False)
    include_dirs = opt_bool(args, "includeDirs", True)
    include_files = opt_bool(args, "includeFiles", True)
    limit = opt_int(args, "maxEntries", DEFAULT_MAX_ENTRIES, minimum=1, maximum=MAX_ENTRIES)
    assert limit is not None
    with _walk(ctx, raw) as walk:
        try:
            info = walk.stat()
        except OSError:
            raise _not_found(raw, "directory") from None
        if not stat_mod.S_ISDIR(info.st_mode):
            raise ToolExecutionError(
                "E_FS_NOT_A_DIRECTORY",
                f"'{raw}' is a file, not a directory",
                suggestion="Use file-system__read to read a file.",
            )
        try:
            base_fd: int | None = walk.open(os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            base_fd = None  # unreadable directory: an empty listing, like any unreadable subdirectory
        shown = walk.display
    entries: list[dict[str, Any]] = []
    truncated = False
    prefix = "" if shown == "." else shown + "/"
    if base_fd is not None:
        try:
            truncated = _collect(base_fd, prefix, recursive, include_dirs, include_files, limit, entries)
        finally:
            os.close(base_fd)
    entries.sort(key=lambda e: e["path"])
    out: dict[str, Any] = {"path": shown, "recursive": recursive, "count": len(entries), "entries": entries}
    if truncated:
        out["truncated"] = True
    return out


def _collect(
    base_fd: int,
    prefix: str,
    recursive: bool,
    include_dirs: bool,
    include_files: bool,
    limit: int,
    entries: list[dict[str, Any]],
) -> bool:
    """Fill ``entries`` from the directory ``base_fd``; True when ``limit`` cut the listing short.

    Pending subdirectories are kept as names, not fds (a wide tree would exhaust descriptors), and
    reopened from ``base_fd`` one ``O_NOFOLLOW`` component at a time, so a subdirectory swapped for
    a symlink meanwhile is skipped instead of followed.
    """
    stack: list[tuple[str, ...]] = [()]
    while stack:
        rel = stack.pop()
        fd = _open_below(base_fd, rel)
        if fd is None:
            continue  # unreadable or replaced subdirectory: list what we can
        try:
            with os.scandir(fd) as scan:
                children = sorted(scan, key=lambda e: e.name)
                for child in children:
                    try:
                        info = child.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    kind = _kind(info)
                    path = prefix + "/".join((*rel, child.name))
                    item: dict[str, Any] = {"name": child.name, "path": path, "type": kind}
                    if kind == "file":
                        item["size"] = info.st_size
                    if include_dirs if kind == "dir" else include_files:
                        if len(entries) >= limit:
                            return True
                        entries.append(item)
                    if recursive and kind == "dir":
                        stack.append((*rel, child.name))
        except OSError:
            continue
        finally:
            if fd != base_fd:
                os.close(fd)
    return False


def _open_below(base_fd: int, rel: tuple[str, ...]) -> int | None:
    """A readable fd of directory ``rel`` under ``base_fd`` reached without following links, or None."""
    if not rel:
        return base_fd
    fd = base_fd
    try:
        for i, name in enumerate(rel):
            flags = DIR_FLAGS if i < len(rel) - 1 else os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
            nxt = os.open(name, flags, dir_fd=fd)
            if fd != base_fd:
                os.close(fd)
            fd = nxt
    except OSError:
        if fd != base_fd:
            os.close(fd)
        return None
    return fd


def mkdir(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``file-system__mkdir``: ``{path, recursive?}`` → ``{path, created, recursive}``."""
    args = args_dict(input)
    check_keys(args, ("path", "recursive"))
    raw = require_str(args, "path")
    recursive = opt_bool(args, "recursive", True)
    with _walk(ctx, raw) as walk:
        try:
            info: os.stat_result | None = walk.stat()
        except OSError:
            info = None
        existed = info is not None and stat_mod.S_ISDIR(info.st_mode)
        if info is not None and not existed:
            raise ToolExecutionError(
                "E_FS_ALREADY_EXISTS",
                f"'{raw}' already exists and is a file",
                suggestion="Choose another directory name, or delete the file first.",
            )
        try:
            if recursive:
                walk.make_parents()
            try:
                walk.mkdir()
            except FileExistsError:
                if not (recursive and _is_dir(walk)):
                    raise
        except FileExistsError:
            raise ToolExecutionError(
                "E_FS_ALREADY_EXISTS",
                f"directory '{raw}' already exists",
                suggestion="Pass recursive: true to accept an existing directory.",
            ) from None
        except FileNotFoundError:
            raise ToolExecutionError(
                "E_FS_NOT_FOUND",
                f"the parent of '{raw}' does not exist",
                suggestion="Pass recursive: true to create missing parent directories.",
            ) from None
        except NotADirectoryError:
            raise ToolExecutionError(
                "E_FS_NOT_A_DIRECTORY",
                f"a parent of '{raw}' is a file, not a directory",
                suggestion="Choose a path whose parents are directories.",
            ) from None
        except OSError as exc:
            raise _os_error(raw, exc) from None
        shown = walk.display
    return {"path": shown, "created": not existed, "recursive": recursive}


def exists(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``file-system__exists``: ``{path}`` → ``{path, exists, type}``."""
    args = args_dict(input)
    check_keys(args, ("path",))
    raw = require_str(args, "path")
    with _walk(ctx, raw) as walk:
        try:
            info = walk.stat()
        except OSError:
            return {"path": walk.display, "exists": False, "type": None}
        return {"path": walk.display, "exists": True, "type": _kind(info)}


def stat(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``file-system__stat``: ``{path}`` → ``{path, type, size, modifiedAt}``."""
    args = args_dict(input)
    check_keys(args, ("path",))
    raw = require_str(args, "path")
    with _walk(ctx, raw) as walk:
        try:
            info = walk.stat()
        except FileNotFoundError:
            raise _not_found(raw) from None
        except OSError as exc:
            raise _os_error(raw, exc) from None
        shown = walk.display
    modified = datetime.fromtimestamp(info.st_mtime, UTC).isoformat().replace("+00:00", "Z")
    return {"path": shown, "type": _kind(info), "size": info.st_size, "modifiedAt": modified}


def delete(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``file-system__delete``: ``{path, recursive?}``; a symlink is removed, never its target."""
    args = args_dict(input)
    check_keys(args, ("path", "recursive"))
    raw = require_str(args, "path")
    recursive = opt_bool(args, "recursive", False)
    with _walk(ctx, raw, follow_last=False) as walk:
        if walk.is_root:
            raise ToolExecutionError(
                "E_FS_INVALID_PATH",
                "refusing to delete the workdir itself",
                suggestion="Delete the entries inside it instead.",
            )
        try:
            kind = _kind(walk.stat())
        except FileNotFoundError:
            raise _not_found(raw) from None
        except OSError as exc:
            raise _os_error(raw, exc) from None
        try:
            name, dir_fd = walk.here()
            if kind != "dir":
                os.unlink(name, dir_fd=dir_fd)
            elif recursive:
                shutil.rmtree(name, dir_fd=dir_fd)  # the fd-based rmtree: never follows links inside
            else:
                os.rmdir(name, dir_fd=dir_fd)
        except OSError as exc:
            if kind == "dir" and not recursive and not walk.is_empty_dir():
                raise ToolExecutionError(
                    "E_FS_DIRECTORY_NOT_EMPTY",
                    f"directory '{raw}' is not empty",
                    suggestion="Pass recursive: true to delete it with its contents.",
                ) from None
            raise _os_error(raw, exc) from None
        shown = walk.display
    return {"path": shown, "deleted": True, "type": kind}


def _in_thread(fn: Callable[[Any, Any], dict[str, Any]]) -> Callable[[Any, Any], Awaitable[dict[str, Any]]]:
    """Run a blocking file operation in a worker thread: a big read, a deep listing or a recursive
    delete must not stall the other agents and connectors sharing the event loop."""

    async def handler(ctx: ToolContext, input: Any) -> dict[str, Any]:
        ctx.workdir  # noqa: B018 -- create the workdir on the loop thread, before going parallel
        return await asyncio.to_thread(fn, ctx, input)

    handler.__name__ = fn.__name__
    handler.__doc__ = fn.__doc__
    return handler


handlers = {
    "read": _in_thread(read),
    "write": _in_thread(write),
    "list": _in_thread(list_dir),
    "mkdir": _in_thread(mkdir),
    "exists": _in_thread(exists),
    "stat": _in_thread(stat),
    "delete": _in_thread(delete),
}
