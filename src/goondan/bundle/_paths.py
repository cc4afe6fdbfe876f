"""Resolving files a resource points at (``entry``, ``options.entry``, ``systemRef``).

The spec requires absolute paths and paths that escape the bundle (or package) root to be rejected;
upstream never checked. We resolve symlinks before comparing so a link inside the bundle cannot
smuggle in a file from elsewhere.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath


class PathProblem(Exception):
    def __init__(self, code: str, message: str, suggestion: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.suggestion = suggestion


_INSIDE = "keep entries inside the bundle and write them relative to its root, e.g. ./tools/my_tool.py"


def resolve_inside(root: Path, relative: str, *, python: bool, what: str = "entry") -> Path:
    """Absolute path of ``relative`` under ``root``; raise :class:`PathProblem` when unusable."""
    if "\x00" in relative or not relative.strip():
        raise PathProblem("E_CONFIG_SCHEMA_INVALID", f"{what} {relative!r} is not a usable path")
    if (
        PurePosixPath(relative).is_absolute()
        or PureWindowsPath(relative).is_absolute()
        or PureWindowsPath(relative).drive
        or relative.startswith("~")
    ):
        raise PathProblem("E_CONFIG_ENTRY_OUTSIDE_ROOT", f"{what} {relative!r} is an absolute path", _INSIDE)
    try:
        base = root.resolve()
        target = (base / relative).resolve()
    except (OSError, RuntimeError, ValueError):
        raise PathProblem("E_CONFIG_ENTRY_NOT_FOUND", f"{what} {relative!r} cannot be resolved") from None
    if not target.is_relative_to(base):
        raise PathProblem("E_CONFIG_ENTRY_OUTSIDE_ROOT", f"{what} {relative!r} points outside the root {base}", _INSIDE)
    if python and target.suffix != ".py":
        raise PathProblem(
            "E_CONFIG_SCHEMA_INVALID",
            f"{what} {relative!r} must be a Python file (.py)",
            "point it at a .py module",
        )
    try:
        is_file = target.is_file()
    except OSError:
        is_file = False
    if not is_file:
        raise PathProblem(
            "E_CONFIG_ENTRY_NOT_FOUND",
            f"{what} file {relative!r} does not exist (looked for {target})",
            "check the path; it is relative to the directory holding goondan.yaml",
        )
    return target
