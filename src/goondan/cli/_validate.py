"""``gdn validate``: every problem of a bundle as text, JSON or GitHub annotations."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from ._env import bundle_dir, load_env
from ._output import EXIT_OK, EXIT_VALIDATION, Style, location
from ._state import state_root_arg


def _issue_dict(issue: Any) -> dict[str, Any]:
    data: dict[str, Any] = issue.to_dict()
    return data


def cmd_validate(args: argparse.Namespace) -> int:
    from ..bundle import validate_bundle

    directory = bundle_dir(args.path)
    env = load_env(directory, getattr(args, "env_file", None)) if directory.is_dir() else dict(os.environ)
    report = validate_bundle(args.path, env=env, state_root=state_root_arg(args))
    errors = list(report.errors)
    warnings = list(report.warnings)
    if args.strict:
        from ..errors import ConfigIssue

        for w in warnings:
            errors.append(
                ConfigIssue(
                    f"STRICT_{w.code}",
                    w.message,
                    path=w.path,
                    file=w.file,
                    line=w.line,
                    column=w.column,
                    suggestion=w.suggestion,
                )
            )
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
        for level, items in (("error", errors), ("warning", warnings)):
            for item in items:
                attrs = []
                if item.file:
                    attrs.append(f"file={item.file}")
                if item.line:
                    attrs.append(f"line={item.line}")
                if item.column:
                    attrs.append(f"col={item.column}")
                prefix = f"::{level} {','.join(attrs)}" if attrs else f"::{level}"
                out.write(f"{prefix}::[{item.code}] {item.message}\n")
        out.write(f"Summary: errors={len(errors)}, warnings={len(warnings)}\n")
    else:
        style = Style(out, not args.no_color)
        if not args.quiet:
            out.write(f"Validating {args.path}...\n")
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
