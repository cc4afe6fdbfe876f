"""``gdn validate`` refuses a Tool whose ``handlers`` is a literal the runtime cannot use: a list of
functions (``handlers = [add]``), a string, or a dict that maps an export to a constant
(``{"add": "add"}``, the function's name in quotes). Both validated; ``gdn run`` then failed at
start with "must define handlers" / "no handler for export add", which the user's file seemed to do."""

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

DEF = "def add(ctx, args):\n    return args['a'] + args['b']\n\n\n"


def validate(tmp_path: Path, source: str) -> tuple[int, dict[str, Any]]:
    agent = "    modelRef: Model/echo\n  tools: [Tool/calc]\n"
    text = ECHO_BUNDLE.replace("    modelRef: Model/echo\n", agent, 1) + TOOL
    b = write_bundle(tmp_path / "b", text, files={"calc.py": source})
    proc = gdn(tmp_path, "validate", str(b), "--format", "json")
    return proc.returncode, json.loads(proc.stdout)


def test_handlers_as_a_list_is_an_error_at_its_line_with_the_dict_to_write(tmp_path: Path) -> None:
    code, report = validate(tmp_path, DEF + "handlers = [add]\n")
    assert code == 4, report
    (error,) = report["errors"]
    assert error["code"] == "E_CONFIG_TOOL_HANDLER_MISSING"
    expected = "`handlers` at calc.py:5 is a list; it must be a dict from each export name to its function"
    assert expected in error["message"]
    assert (error["file"], error["line"]) == ("calc.py", 5)
    assert error["suggestion"] == "write `handlers = {'add': add}` in calc.py"
    code, report = validate(tmp_path, DEF + "handlers = 'add'\n")
    assert code == 4 and "is the str 'add'" in report["errors"][0]["message"]


def test_a_quoted_function_name_in_handlers_is_an_error_at_the_export(tmp_path: Path) -> None:
    code, report = validate(tmp_path, DEF + "handlers = {'add': 'add'}\n")
    assert code == 4, report
    (error,) = report["errors"]
    assert error["code"] == "E_CONFIG_TOOL_HANDLER_MISSING"
    assert "export 'add': `handlers` at calc.py:5 maps it to 'add', not to a function" in error["message"]
    assert error["suggestion"] == "name the function itself, without quotes: `'add': add`"


def test_a_dict_of_functions_and_a_computed_handlers_stay_valid(tmp_path: Path) -> None:
    assert validate(tmp_path, DEF + "handlers = {'add': add}\n")[0] == 0
    assert validate(tmp_path, DEF + "handlers = dict(add=add)\n")[0] == 0
    assert validate(tmp_path, DEF + "handlers = {name: add for name in ['add']}\n")[0] == 0
