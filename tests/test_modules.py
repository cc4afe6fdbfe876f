"""User modules import helpers the way Python developers expect, and bundles never share them."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import goondan
from goondan._modules import forget_path, import_path
from goondan.errors import GoondanError

TOOL = """\
from .helpers import NAME
from . import helpers
import helpers as sibling
from helpers import NAME as SIBLING_NAME
from common import ROOT
import lib.util
from lib import util
import logging

handlers = {{"show": lambda ctx, args: [NAME, helpers.NAME, sibling.NAME, SIBLING_NAME, ROOT, lib.util.X, util.X]}}
STDLIB_LOGGING = logging.getLogger is not None and not hasattr(logging, "SHADOW")
"""


def _bundle(root: Path, label: str) -> Path:
    files = {
        "goondan.yaml": "",
        "tools/calc.py": TOOL.format(),
        "tools/helpers.py": f"NAME = '{label}-helper'\n",
        "tools/logging.py": "SHADOW = True\n",
        "common.py": f"ROOT = '{label}-root'\n",
        "lib/util.py": f"X = '{label}-lib'\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_tool_imports_helpers_relatively_as_siblings_and_from_the_bundle_root(tmp_path: Path) -> None:
    module = import_path(_bundle(tmp_path / "a", "a") / "tools" / "calc.py")
    assert module.handlers["show"](None, {}) == ["a-helper"] * 4 + ["a-root", "a-lib", "a-lib"]
    assert module.STDLIB_LOGGING  # a logging.py beside the tool does not replace the standard library's


def test_two_bundles_with_same_named_helpers_each_get_their_own(tmp_path: Path) -> None:
    a = import_path(_bundle(tmp_path / "a", "a") / "tools" / "calc.py")
    b = import_path(_bundle(tmp_path / "b", "b") / "tools" / "calc.py")
    assert a.handlers["show"](None, {})[0] == "a-helper"
    assert b.handlers["show"](None, {}) == ["b-helper"] * 4 + ["b-root", "b-lib", "b-lib"]
    for bare in ("helpers", "common", "lib", "lib.util", "calc"):
        assert bare not in sys.modules
    assert str(tmp_path) not in " ".join(sys.path)


def test_forgetting_an_entry_reloads_its_changed_helpers(tmp_path: Path) -> None:
    root = _bundle(tmp_path / "c", "c")
    entry = root / "tools" / "calc.py"
    assert import_path(entry).handlers["show"](None, {})[0] == "c-helper"
    (root / "tools" / "helpers.py").write_text("NAME = 'changed'\n")
    forget_path(entry)
    assert import_path(entry).handlers["show"](None, {})[0] == "changed"


BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Model
metadata: {name: m}
spec:
  provider: scripted
  model: x
  options:
    rules:
      - when: {role: tool}
        reply: {text: "tool said {{last}}"}
      - reply: {toolCalls: [{name: calc__show, args: {}}]}
---
apiVersion: goondan.ai/v1
kind: Tool
metadata: {name: calc}
spec:
  entry: ./tools/calc.py
  exports: [{name: show, description: d, parameters: {type: object}}]
---
apiVersion: goondan.ai/v1
kind: Agent
metadata: {name: main}
spec: {modelConfig: {modelRef: Model/m}, tools: [Tool/calc]}
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata: {name: default}
spec: {entryAgent: Agent/main, agents: [Agent/main]}
"""


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_gdn_run_tool_with_helper_modules_in_two_bundles(tmp_path: Path, isolation: str) -> None:
    for label in ("one", "two"):
        root = _bundle(tmp_path / label, label)
        (root / "goondan.yaml").write_text(BUNDLE)
        proc = subprocess.run(
            [sys.executable, "-m", "goondan", "run", str(root), "--input", "go", "--state-root", str(tmp_path / "s")],
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GOONDAN_ISOLATION": isolation},
        )
        assert proc.returncode == 0, proc.stderr
        assert f"{label}-helper" in proc.stdout and f"{label}-root" in proc.stdout


def test_import_error_suggestion_is_a_command_that_reproduces_it(tmp_path: Path) -> None:
    root = _bundle(tmp_path / "d", "d")
    (root / "goondan.yaml").write_text(BUNDLE)
    source = "from . import helpers\n\nhelpers.missing_function()\nhandlers = {'show': print}\n"
    (root / "tools" / "calc.py").write_text(source)

    async def main() -> None:
        async with goondan.Runtime(root, state_root=tmp_path / "s", isolation="inline") as rt:
            await rt.request("go")

    with pytest.raises(GoondanError) as info:
        asyncio.run(main())
    suggestion = info.value.suggestion or ""
    assert "python tools/calc.py" not in suggestion
    command = suggestion.split("`")[-2]  # the last command it names (the first is `gdn run -v`)
    proc = subprocess.run(shlex.split(command), capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 1
    # the same failure as in the runtime (running the file as a script fails on the relative import)
    assert "Traceback" in proc.stderr and "AttributeError" in proc.stderr and "missing_function" in proc.stderr
