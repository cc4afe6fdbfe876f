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
            _python_file_meant(base, relative) + "point it at a .py module, as a path relative to the bundle root",
        )
    try:
        is_file = target.is_file()
    except OSError:
        is_file = False
    if not is_file:
        near = close_path(target)
        hint = (
            f"did you mean './{near.relative_to(base).as_posix()}'? "
            if near is not None and near.is_file() and near.is_relative_to(base)
            else ""
        )
        raise PathProblem(
            "E_CONFIG_ENTRY_NOT_FOUND",
            f"{what} file {relative!r} does not exist (looked for {target})",
            f"{hint}check the path; it is relative to the directory holding goondan.yaml",
        )
    return target


def _python_file_meant(base: Path, relative: str) -> str:
    """``did you mean './tools/calc.py'? `` for an entry written without ``.py`` (``./tools/calc``) or
    as a module name (``tools.calc``, ``tools.calc.py``), when that file exists; else empty."""
    stem = relative.removesuffix(".py")
    for candidate in (stem + ".py", stem.replace(".", "/") + ".py"):
        path = PurePosixPath(candidate.removeprefix("./"))
        try:
            if (base / path).is_file() and (base / path).resolve().is_relative_to(base):
                return f"did you mean './{path.as_posix()}'? "
        except (OSError, ValueError):
            continue
    return ""


_MAX_LISTED = 2000  # entries of one directory compared with a misspelt name (a huge one is skipped)


def close_path(path: Path, *, depth: int = 3) -> Path | None:
    """An existing path that differs from the missing ``path`` by a misspelt component, or None.

    ``../quikstart/goondan.yaml`` -> ``/abs/quickstart/goondan.yaml``: the first component that does
    not exist is compared with the names in the directory above it (``difflib``, then ignoring case);
    a later one may be misspelt too (``depth`` corrections at most). The result is absolute.
    """
    import difflib

    try:
        absolute = path.resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    parts = absolute.parts
    existing = Path(parts[0])
    for i, name in enumerate(parts[1:], 1):
        candidate = existing / name
        try:
            if candidate.exists():
                existing = candidate
                continue
            names = []
            for entry in existing.iterdir():
                names.append(entry.name)
                if len(names) > _MAX_LISTED:
                    return None
        except OSError:
            return None
        matches = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        if not matches:
            lowered = {n.lower(): n for n in names}
            matches = [lowered[name.lower()]] if name.lower() in lowered else []
        if not matches:
            return None
        fixed = existing.joinpath(matches[0], *parts[i + 1 :])
        if fixed.exists():
            return fixed
        return close_path(fixed, depth=depth - 1) if depth > 1 else None
    return None


def read_text_file(path: Path, shown: str) -> str:
    """The text of a UTF-8 file a resource names (``systemRef``); raise :class:`TextProblem` naming
    the first byte that is not UTF-8, with how to convert it (it was a bare UnicodeDecodeError text
    under ``E_CONFIG_ENTRY_NOT_FOUND``, and ``gdn validate`` passed the file)."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise TextProblem(
            f"{shown} is not valid UTF-8 (byte 0x{data[exc.start]:02x} at line {line}, column {column})",
            line,
            column,
            f"save {shown} as UTF-8 (an editor's 'Save with encoding', or "
            f"`iconv -f latin1 -t utf-8 {shown} > {shown}.new`, then rename it over the original)",
        ) from None


class TextProblem(Exception):
    """A file that is not UTF-8: the message, the 1-based line and column of its first bad byte and
    the suggestion."""

    def __init__(self, message: str, line: int, column: int, suggestion: str) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.suggestion = suggestion
