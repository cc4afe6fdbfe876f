"""``gdn validate`` reads a tool handler's ``def`` (without running the module): handlers are called
``handler(ctx, args)``, so one that cannot take that is an error, and ``(args, ctx)`` a warning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle

TOOL = """\
---
apiVersion: goondan.ai/v1
kind: Tool
metadata: {name: calc}
spec:
  entry: ./calc.py
  exports:
    - name: add
      description: adds
      parameters: {type: object}
"""


def validate(tmp_path: Path, source: str) -> tuple[int, dict[str, Any]]:
    agent = "    modelRef: Model/echo\n  tools: [Tool/calc]\n"
    text = ECHO_BUNDLE.replace("    modelRef: Model/echo\n", agent, 1) + TOOL
    b = write_bundle(tmp_path / "b", text, files={"calc.py": source})
    proc = gdn(tmp_path, "validate", str(b), "--format", "json")
    return proc.returncode, json.loads(proc.stdout)


def test_a_handler_that_cannot_take_ctx_and_args_is_an_error_at_the_export(tmp_path: Path) -> None:
    code, report = validate(tmp_path, "def add(args):\n    return args['a'] + args['b']\n\nhandlers = {'add': add}\n")
    assert code == 4, report
    (error,) = report["errors"]
    assert error["code"] == "E_CONFIG_TOOL_HANDLER_SIGNATURE"
    assert "add(args) at calc.py:1" in error["message"] and error["path"].endswith("spec.exports[0].name")
    assert "def add(ctx, args)" in error["suggestion"]


def test_swapped_handler_parameters_are_a_warning(tmp_path: Path) -> None:
    code, report = validate(tmp_path, "async def add(args, ctx):\n    return 1\n\nhandlers = {'add': add}\n")
    assert code == 0 and report["errors"] == [], report
    (warning,) = report["warnings"]
    assert warning["code"] == "E_CONFIG_TOOL_HANDLER_SIGNATURE" and "looks swapped" in warning["message"]


def test_handlers_the_runtime_can_call_pass(tmp_path: Path) -> None:
    source = (
        "import functools\n\n"
        "def add(ctx, args, extra=None):\n    return 1\n\n"
        "def anything(*a):\n    return 2\n\n"
        "@functools.wraps(add)\ndef wrapped(x):\n    return 3\n\n"
        "handlers = {'add': add, 'other': anything, 'w': wrapped, 'lam': lambda ctx, args: 4}\n"
    )
    code, report = validate(tmp_path, source)
    assert (code, report["errors"], report["warnings"]) == (0, [], []), report
