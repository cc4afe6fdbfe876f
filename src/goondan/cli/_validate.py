"""``gdn validate``: every problem of a bundle as text, JSON or GitHub annotations."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ._env import bundle_dir, load_env
from ._output import EXIT_OK, EXIT_VALIDATION, Style, location
from ._state import state_root_arg


def _issue_dict(issue: Any) -> dict[str, Any]:
    data: dict[str, Any] = issue.to_dict()
    return data


def _as_error(issue: Any) -> Any:
    from ..errors import ConfigIssue

    return ConfigIssue(
        issue.code,
        issue.message,
        path=issue.path,
        file=issue.file,
        line=issue.line,
        column=issue.column,
        suggestion=issue.suggestion,
        severity="error",
    )


def _from_cwd(file: str, root: Path) -> str:
    """A bundle-relative file as a path from the working directory (what GitHub and editors open)."""
    path = Path(file)
    if not path.is_absolute():
        path = root / path
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _github(out: Any, errors: list[Any], warnings: list[Any], root: Path) -> None:
    """Workflow commands: ``::error file=F,line=L,col=C,title=CODE::message%0Asuggestion: ...``."""
    for level, items in (("error", errors), ("warning", warnings)):
        for item in items:
            attrs = []
            if item.file:
                attrs.append(f"file={_escape_property(_from_cwd(item.file, root))}")
            if item.line:
                attrs.append(f"line={item.line}")
            if item.column:
                attrs.append(f"col={item.column}")
            attrs.append(f"title={_escape_property(item.code)}")
            text = f"[{item.code}] {item.message}"
            if item.suggestion:
                text += f"\nsuggestion: {item.suggestion}"
            out.write(f"::{level} {','.join(attrs)}::{_escape_data(text)}\n")
    out.write(f"Summary: errors={len(errors)}, warnings={len(warnings)}\n")


def cmd_validate(args: argparse.Namespace) -> int:
    from ..bundle import validate_bundle
    from ..errors import ConfigError, ConfigIssue

    directory = bundle_dir(args.path)
    errors: list[ConfigIssue]
    warnings: list[ConfigIssue]
    try:
        env = load_env(directory, getattr(args, "env_file", None)) if directory.is_dir() else dict(os.environ)
    except ConfigError as exc:  # reported like any other problem of the bundle (exit 4)
        errors = [
            ConfigIssue(
                exc.code, exc.message, file=exc.file, line=exc.line, column=exc.column, suggestion=exc.suggestion
            )
        ]
        warnings = []
    else:
        if getattr(args, "fix", False):
            from ._fix import run_fix

            run_fix(args, env, state_root_arg(args))
        report = validate_bundle(args.path, env=env, state_root=state_root_arg(args))
        errors = list(report.errors)
        warnings = list(report.warnings)
    if args.strict:  # warnings count as errors, under their own codes
        errors.extend(_as_error(w) for w in warnings)
        warnings = []
    valid = not errors
    out = sys.stdout
    fmt = "json" if args.json else args.format
    if fmt == "json":
        payload = {
            "valid": valid,
            "errors": [_issue_dict(e) for e in errors],
            "warnings": [_issue_dict(w) for w in warnings],
        }
        out.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    elif fmt == "github":
        _github(out, errors, warnings, directory.resolve() if directory.is_dir() else Path.cwd())
    else:
        style = Style(out, not args.no_color)
        if not args.quiet:
            # `gdn validate` in the bundle read 'Validating ....': name the directory instead of '.'
            shown = Path(args.path).resolve().name if args.path in (".", "./") else args.path
            out.write(f"Validating {shown}...\n")
        for title, items, color in (("Errors", errors, "31"), ("Warnings", warnings, "33")):
            if not items:
                continue
            out.write(f"{style(title + ':', '1;' + color)}\n")
            for item in items:
                out.write(f"  - {style('[' + item.code + ']', color)} {item.message}\n")
                where = location(item)
                if where:
                    out.write(f"    at: {where}\n")
                if item.suggestion:
                    out.write(f"    suggestion: {item.suggestion}\n")
                out.write(f"    help: {item.help_url}\n")
        out.write(f"Summary: errors={len(errors)}, warnings={len(warnings)}\n")
        if valid and not args.quiet:
            out.write(style("Bundle is valid.", "32") + "\n")
    return EXIT_OK if valid else EXIT_VALIDATION
