"""Resolving model-supplied paths inside the instance workdir, and nowhere else.

Every path is resolved the way the OS would follow it (``..`` collapsed, every symlink on the way
followed) and the result must lie inside the workdir's own real path. That one rule refuses the
three classic escapes — ``../x``, ``/etc/passwd`` and a symlink planted inside the workdir that
points outside — including a symlink whose target does not exist yet (writing through it would
create a file outside). Callers then operate on the *resolved* path, so the link is not followed a
second time after the check.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from goondan.base.tools._common import ToolExecutionError, ToolInputError

OUTSIDE = "E_FS_OUTSIDE_WORKDIR"


def workdir_root(workdir: Path) -> Path:
    return Path(os.path.realpath(workdir))


def _outside(raw: str, why: str) -> ToolExecutionError:
    return ToolExecutionError(
        OUTSIDE,
        f"path '{raw}' {why}; file-system tools only work inside the instance workdir",
        suggestion="Use a path relative to the workdir (e.g. 'notes/todo.md') without '..' segments.",
    )


def _real(path: Path, raw: str) -> Path:
    """``realpath`` until it stops changing.

    One ``realpath`` is not enough: on a symlink loop it gives up and only normalizes the rest, so
    ``loop/../out-link`` comes back as ``<root>/out-link`` — a path inside the workdir that is itself
    a link to the outside. Re-resolving until a fixpoint closes that gap; what remains unresolved
    then sits behind the loop, where the OS refuses to follow it (ELOOP).
    """
    current = os.path.realpath(path)
    for _ in range(40):
        again = os.path.realpath(current)
        if again == current:
            return Path(current)
        current = again
    raise ToolExecutionError(
        "E_FS_SYMLINK_LOOP",
        f"path '{raw}' goes through symlinks that never settle",
        suggestion="Remove the symlink loop, or use a path that avoids it.",
    )


def resolve(root: Path, raw: str, *, follow_last: bool = True) -> Path:
    """The real path ``raw`` names, which is guaranteed to be ``root`` or inside it.

    With ``follow_last=False`` a symlink in the last component is not followed (used to delete or
    describe the link itself); its parent directory must still resolve inside ``root``.
    """
    if "\x00" in raw:
        raise ToolInputError("'path' must not contain NUL characters")
    given = Path(raw)
    joined = given if given.is_absolute() else root / given
    real = _real(joined, raw)
    if not follow_last:
        lexical = Path(os.path.normpath(joined))
        if lexical != root and lexical.name not in ("", "..", "."):
            real = _real(lexical.parent, raw) / lexical.name
    if real.is_relative_to(root):
        return real
    if given.is_absolute():
        raise _outside(raw, "is an absolute path outside the workdir")
    if not Path(os.path.normpath(joined)).is_relative_to(root):
        raise _outside(raw, "climbs out of the workdir with '..'")
    raise _outside(raw, "goes through a symlink that points outside the workdir")


def display(root: Path, path: Path) -> str:
    """The workdir-relative POSIX form shown to the model (``.`` for the workdir itself)."""
    rel = path.relative_to(root)
    text = str(PurePosixPath(*rel.parts)) if rel.parts else "."
    return text


__all__ = ["OUTSIDE", "display", "resolve", "workdir_root"]
