"""file-system: read, write, list and manage files inside the instance workdir (digest §4.4).

Every path is relative to the instance workdir (``ctx.workdir``) and must stay inside it: ``..``
escapes, absolute paths elsewhere and symlinks that lead out are refused with
``E_FS_OUTSIDE_WORKDIR`` (see ``_confine``). Paths in results are workdir-relative, so results never
reveal where the runtime keeps its state.

Reads are bounded (``maxBytes``) and cut on a UTF-8 character boundary; listings are bounded
(``maxEntries``) and never follow symlinks, so a link cycle cannot make them loop.
"""

from __future__ import annotations

import asyncio
import codecs
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
from goondan.base.tools._confine import display, resolve, workdir_root

DEFAULT_READ_BYTES = 100_000
MAX_READ_BYTES = 10_000_000
DEFAULT_MAX_ENTRIES = 1000
MAX_ENTRIES = 100_000


def _root(ctx: Any) -> Path:
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


def read(ctx: Any, input: Any) -> dict[str, Any]:
    """``file-system__read``: ``{path, maxBytes?}`` → ``{path, size, truncated, content}``."""
    args = args_dict(input)
    check_keys(args, ("path", "maxBytes"))
    raw = require_str(args, "path")
    max_bytes = opt_int(args, "maxBytes", DEFAULT_READ_BYTES, minimum=1, maximum=MAX_READ_BYTES)
    assert max_bytes is not None
    root = _root(ctx)
    path = resolve(root, raw)
    if path.is_dir():
        raise ToolExecutionError(
            "E_FS_NOT_A_FILE",
            f"'{raw}' is a directory",
            suggestion="Use file-system__list to see a directory's entries.",
        )
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            data = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise _not_found(raw, "file") from None
    except OSError as exc:
        raise _os_error(raw, exc) from None
    truncated = len(data) > max_bytes
    data = data[:max_bytes]
    # final=False drops a multi-byte character cut in half by the limit instead of garbling it
    content = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(data, final=not truncated)
    return {"path": display(root, path), "size": max(size, len(data)), "truncated": truncated, "content": content}


def write(ctx: Any, input: Any) -> dict[str, Any]:
    """``file-system__write``: ``{path, content, append?}``; parent directories are created."""
    args = args_dict(input)
    check_keys(args, ("path", "content", "append"))
    raw = require_str(args, "path")
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolInputError("'content' must be a string")
    append = opt_bool(args, "append", False)
    root = _root(ctx)
    path = resolve(root, raw)
    if path == root or path.is_dir():
        raise ToolExecutionError(
            "E_FS_IS_A_DIRECTORY",
            f"'{raw}' is a directory; cannot write file content to it",
            suggestion="Write to a file path inside that directory instead.",
        )
    data = content.encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab" if append else "wb") as fh:
            fh.write(data)
        size = path.stat().st_size
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
    return {"path": display(root, path), "size": size, "bytesWritten": len(data), "written": True, "append": append}


def _entry(root: Path, path: Path, st: os.stat_result) -> dict[str, Any]:
    kind = _kind(st)
    item: dict[str, Any] = {"name": path.name, "path": display(root, path), "type": kind}
    if kind == "file":
        item["size"] = st.st_size
    return item


def list_dir(ctx: Any, input: Any) -> dict[str, Any]:
    """``file-system__list``: ``{path?, recursive?, includeDirs?, includeFiles?, maxEntries?}``."""
    args = args_dict(input)
    check_keys(args, ("path", "recursive", "includeDirs", "includeFiles", "maxEntries"))
    raw = opt_str(args, "path") or "."
    recursive = opt_bool(args, "recursive", False)
    include_dirs = opt_bool(args, "includeDirs", True)
    include_files = opt_bool(args, "includeFiles", True)
    limit = opt_int(args, "maxEntries", DEFAULT_MAX_ENTRIES, minimum=1, maximum=MAX_ENTRIES)
    assert limit is not None
    root = _root(ctx)
    base = resolve(root, raw)
    if not base.exists():
        raise _not_found(raw, "directory")
    if not base.is_dir():
        raise ToolExecutionError(
            "E_FS_NOT_A_DIRECTORY",
            f"'{raw}' is a file, not a directory",
            suggestion="Use file-system__read to read a file.",
        )
    entries: list[dict[str, Any]] = []
    truncated = False
    stack = [base]
    while stack and not truncated:
        current = stack.pop()
        try:
            children = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError:
            continue  # unreadable subdirectory: list what we can
        for child in children:
            try:
                st = child.stat(follow_symlinks=False)
            except OSError:
                continue
            item = _entry(root, Path(child.path), st)
            is_dir = item["type"] == "dir"
            wanted = include_dirs if is_dir else include_files
            if wanted:
                if len(entries) >= limit:
                    truncated = True
                    break
                entries.append(item)
            if recursive and is_dir:
                stack.append(Path(child.path))
    entries.sort(key=lambda e: e["path"])
    out: dict[str, Any] = {
        "path": display(root, base),
        "recursive": recursive,
        "count": len(entries),
        "entries": entries,
    }
    if truncated:
        out["truncated"] = True
    return out


def mkdir(ctx: Any, input: Any) -> dict[str, Any]:
    """``file-system__mkdir``: ``{path, recursive?}`` → ``{path, created, recursive}``."""
    args = args_dict(input)
    check_keys(args, ("path", "recursive"))
    raw = require_str(args, "path")
    recursive = opt_bool(args, "recursive", True)
    root = _root(ctx)
    path = resolve(root, raw)
    existed = path.is_dir()
    if path.exists() and not existed:
        raise ToolExecutionError(
            "E_FS_ALREADY_EXISTS",
            f"'{raw}' already exists and is a file",
            suggestion="Choose another directory name, or delete the file first.",
        )
    try:
        path.mkdir(parents=recursive, exist_ok=recursive)
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
    return {"path": display(root, path), "created": not existed, "recursive": recursive}


def exists(ctx: Any, input: Any) -> dict[str, Any]:
    """``file-system__exists``: ``{path}`` → ``{path, exists, type}``."""
    args = args_dict(input)
    check_keys(args, ("path",))
    raw = require_str(args, "path")
    root = _root(ctx)
    path = resolve(root, raw)
    try:
        st = path.stat()
    except OSError:
        return {"path": display(root, path), "exists": False, "type": None}
    return {"path": display(root, path), "exists": True, "type": _kind(st)}


def stat(ctx: Any, input: Any) -> dict[str, Any]:
    """``file-system__stat``: ``{path}`` → ``{path, type, size, modifiedAt}``."""
    args = args_dict(input)
    check_keys(args, ("path",))
    raw = require_str(args, "path")
    root = _root(ctx)
    path = resolve(root, raw)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise _not_found(raw) from None
    except OSError as exc:
        raise _os_error(raw, exc) from None
    modified = datetime.fromtimestamp(st.st_mtime, UTC).isoformat().replace("+00:00", "Z")
    return {"path": display(root, path), "type": _kind(st), "size": st.st_size, "modifiedAt": modified}


def delete(ctx: Any, input: Any) -> dict[str, Any]:
    """``file-system__delete``: ``{path, recursive?}``; a symlink is removed, never its target."""
    args = args_dict(input)
    check_keys(args, ("path", "recursive"))
    raw = require_str(args, "path")
    recursive = opt_bool(args, "recursive", False)
    root = _root(ctx)
    path = resolve(root, raw, follow_last=False)
    if path == root:
        raise ToolExecutionError(
            "E_FS_INVALID_PATH",
            "refusing to delete the workdir itself",
            suggestion="Delete the entries inside it instead.",
        )
    try:
        st = path.lstat()
    except FileNotFoundError:
        raise _not_found(raw) from None
    kind = _kind(st)
    try:
        if kind == "dir":
            if recursive:
                shutil.rmtree(path)
            else:
                path.rmdir()
        else:
            path.unlink()
    except OSError as exc:
        if kind == "dir" and not recursive and any(path.iterdir()):
            raise ToolExecutionError(
                "E_FS_DIRECTORY_NOT_EMPTY",
                f"directory '{raw}' is not empty",
                suggestion="Pass recursive: true to delete it with its contents.",
            ) from None
        raise _os_error(raw, exc) from None
    return {"path": display(root, path), "deleted": True, "type": kind}


def _in_thread(fn: Callable[[Any, Any], dict[str, Any]]) -> Callable[[Any, Any], Awaitable[dict[str, Any]]]:
    """Run a blocking file operation in a worker thread: a big read, a deep listing or a recursive
    delete must not stall the other agents and connectors sharing the event loop."""

    async def handler(ctx: Any, input: Any) -> dict[str, Any]:
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
