"""CONTRACT §9: ``gdn run`` exits 3 when the bundle cannot be set up, not only when ``goondan.yaml``
fails to load: a tool, extension or python model module that the runtime refuses when it first
imports it is the same kind of failure ("fix your bundle"), whichever executor found it. A turn
that fails while running (the user's middleware or model raising) stays 1.

Each case runs a real ``gdn run --input`` subprocess, with the process executor (the default) and
inline, and checks the code and message the user sees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_testkit import AUDIT_EXTENSION, gdn

from kit import write_bundle

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Model
metadata: {name: m}
spec:
  provider: MODEL_PROVIDER
  model: x
  options:
    MODEL_OPTIONS
---
apiVersion: goondan.ai/v1
kind: Tool
metadata: {name: calc}
spec:
  entry: ./calc.py
  exports:
    - name: add
      description: Add two numbers.
      parameters: {type: object, properties: {a: {type: number}, b: {type: number}}}
---
apiVersion: goondan.ai/v1
kind: Agent
metadata: {name: a}
spec:
  modelConfig: {modelRef: Model/m}
  tools: [Tool/calc]
  extensions: [Extension/audit]
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata: {name: s}
spec:
  entryAgent: Agent/a
  agents: [Agent/a]
"""

SCRIPTED = (
    "rules: [{when: {role: tool}, reply: {text: 'tool: {{last}}'}},"
    " {reply: {toolCalls: [{name: calc__add, args: {a: 1, b: 2}}]}}]"
)
CALC = "def add(ctx, args):\n    return args['a'] + args['b']\n\nhandlers = {'add': add}\n"
AUDIT = "def register(api, config):\n    pass\n"
MODEL = "def generate(request):\n    return {'text': 'hi'}\n"


def bundle(tmp_path: Path, **files: str) -> Path:
    python_model = "model.py" in files
    text = BUNDLE.replace("MODEL_PROVIDER", "python" if python_model else "scripted").replace(
        "MODEL_OPTIONS", "entry: ./model.py" if python_model else SCRIPTED
    )
    return write_bundle(tmp_path / "b", text + AUDIT_EXTENSION, files={"calc.py": CALC, "audit.py": AUDIT, **files})


LOAD_FAILURES = [
    pytest.param({"audit.py": "def register():\n    pass\n"}, "E_EXT_LOAD", id="register-signature"),
    pytest.param({"audit.py": "import goondan_no_such_module\n" + AUDIT}, "E_EXT_LOAD", id="extension-import"),
    pytest.param({"audit.py": "x = 1\n"}, "E_EXT_LOAD", id="extension-without-register"),
    pytest.param(
        {"audit.py": "def register(api, config):\n    raise RuntimeError('no token')\n"},
        "E_EXT_INIT",
        id="register-raises",
    ),
    pytest.param(
        {"audit.py": "def register(api, config):\n    api.pipeline.mutate('step', print)\n"},
        "E_EXT_COMPAT",
        id="removed-extension-api",
    ),
    pytest.param({"calc.py": "import goondan_no_such_module\n" + CALC}, "E_TOOL_LOAD", id="tool-import"),
    pytest.param({"calc.py": "x = 1\n"}, "E_TOOL_LOAD", id="tool-without-handlers"),
    pytest.param({"model.py": "import goondan_no_such_module\n" + MODEL}, "E_MODEL_LOAD", id="python-model-import"),
]


@pytest.mark.parametrize("executor", ["process", "inline"])
@pytest.mark.parametrize(("files", "code"), LOAD_FAILURES)
def test_a_module_the_runtime_cannot_load_exits_3(
    tmp_path: Path, executor: str, files: dict[str, str], code: str
) -> None:
    proc = gdn(tmp_path, "run", str(bundle(tmp_path, **files)), "--input", "add", "--executor", executor)
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    assert f"[{code}]" in proc.stderr and "suggestion:" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == ""


def test_the_json_error_carries_the_same_exit_code(tmp_path: Path) -> None:
    path = bundle(tmp_path, **{"audit.py": "def register():\n    pass\n"})
    proc = gdn(tmp_path, "run", str(path), "--input", "add", "--json")
    assert proc.returncode == 3, proc.stderr
    error = json.loads(proc.stderr.strip().splitlines()[-1])
    assert error["code"] == "E_EXT_LOAD" and error["exitCode"] == 3 and error["extensionName"] == "audit", error


RUN_FAILURES = [
    pytest.param(
        {
            "audit.py": "def register(api, config):\n    async def mw(ctx):\n        raise ValueError('mw')\n"
            "    api.pipeline.register('step', mw)\n"
        },
        id="middleware-raises",
    ),
    pytest.param({"model.py": "def generate(request):\n    raise RuntimeError('model')\n"}, id="python-model-raises"),
]


@pytest.mark.parametrize("files", RUN_FAILURES)
def test_a_turn_that_fails_while_running_still_exits_1(tmp_path: Path, files: dict[str, str]) -> None:
    proc = gdn(tmp_path, "run", str(bundle(tmp_path, **files)), "--input", "add")
    assert proc.returncode == 1, (proc.returncode, proc.stderr)


def test_the_bundle_loads_and_runs_when_nothing_is_broken(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "run", str(bundle(tmp_path)), "--input", "add")
    assert (proc.returncode, proc.stdout) == (0, "tool: 3\n"), proc.stderr


@pytest.mark.parametrize("executor", ["process", "inline"])
def test_verbose_shows_where_an_extension_import_failed(tmp_path: Path, executor: str) -> None:
    files = {"audit.py": "import json\nimport goondan_no_such_module\n" + AUDIT}
    proc = gdn(tmp_path, "run", str(bundle(tmp_path, **files)), "--input", "add", "-v", "--executor", executor)
    assert proc.returncode == 3, proc.stderr
    assert 'audit.py", line 2, in <module>' in proc.stderr and "import goondan_no_such_module" in proc.stderr
