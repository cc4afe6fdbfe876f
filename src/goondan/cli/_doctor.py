"""``gdn doctor``: is this machine ready to run a bundle? Python, optional extras, API keys, the bundle."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from ._env import load_env
from ._output import EXIT_INTERNAL, EXIT_OK, Style

_EXTRAS = (
    ("anthropic", "anthropic", "Anthropic models"),
    ("openai", "openai", "OpenAI models"),
    ("google.genai", "google-genai", "Google Gemini models"),
    ("cryptography", "cryptography", "Discord connector signatures (Ed25519)"),
    ("readline", "readline", "line editing in `gdn run`"),
)
_KEYS = (
    ("anthropic", "ANTHROPIC_API_KEY"),
    ("openai", "OPENAI_API_KEY"),
    ("google", "GOOGLE_API_KEY"),
)


def _find(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def cmd_doctor(args: argparse.Namespace) -> int:
    checks: list[dict[str, Any]] = []

    def add(name: str, status: str, detail: str) -> None:
        checks.append({"check": name, "status": status, "detail": detail})

    version = ".".join(map(str, sys.version_info[:3]))
    add("python", "ok" if sys.version_info >= (3, 11) else "fail", f"Python {version} ({sys.executable})")
    for module, dist, purpose in _EXTRAS:
        present = _find(module)
        add(
            f"extra:{dist}",
            "ok" if present else "warn",
            ("installed" if present else "not installed") + f" - {purpose}",
        )
    directory = Path(args.path)
    env = load_env(directory, None) if directory.is_dir() else dict(os.environ)
    used: set[str] = set()
    manifest = directory / "goondan.yaml" if directory.is_dir() else directory
    if manifest.is_file():
        from ..bundle import validate_bundle

        report = validate_bundle(args.path, env=env, state_root=Path(args.state_root) if args.state_root else None)
        if report.errors:
            first = report.errors[0]
            add(
                "bundle",
                "fail",
                f"{len(report.errors)} error(s), first: [{first.code}] {first.message} - run `gdn validate`",
            )
        else:
            add("bundle", "ok", f"{manifest} is valid ({len(report.warnings)} warning(s))")
        if report.bundle is not None:
            used = {str(getattr(m.spec, "provider", "")) for m in report.bundle.of_kind("Model")}
    else:
        add("bundle", "warn", f"no goondan.yaml at {directory} (create one with `gdn init`)")
    for provider, variable in _KEYS:
        present = bool(env.get(variable))
        needed = provider in used
        status = "ok" if present else ("fail" if needed else "warn")
        detail = "set" if present else "not set" + (" (a Model in the bundle uses it)" if needed else "")
        add(f"key:{variable}", status, detail)
    failed = any(c["status"] == "fail" for c in checks)
    if args.json:
        sys.stdout.write(json.dumps({"ok": not failed, "checks": checks}, indent=2) + "\n")
    else:
        style = Style(sys.stdout, not args.no_color)
        marks = {"ok": style("ok  ", "32"), "warn": style("warn", "33"), "fail": style("FAIL", "31")}
        sys.stdout.write("Goondan Doctor\n")
        for c in checks:
            sys.stdout.write(f"  [{marks[c['status']]}] {c['check']}: {c['detail']}\n")
        sys.stdout.write("All required checks passed.\n" if not failed else "Some checks failed.\n")
    return EXIT_INTERNAL if failed else EXIT_OK
