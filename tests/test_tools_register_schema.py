"""``api.tools.register`` refuses ``parameters`` that are not a valid JSON Schema (a misspelt type,
``required`` given as a string) when the extension registers, naming the keyword: ``gdn run`` exits
3 with E_EXT_INIT wrapping E_TOOL_DEFINITION_INVALID. Before, the tool registered and every call of
it failed, the model reading jsonschema's own ``Unknown type 'numbr' for validator with schema: ...``
while ``gdn run`` exited 0. Real ``gdn run`` with both executors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit

MODEL = """\
def generate(request):
    if request.messages[-1]["role"] == "tool":
        return {"text": "tool said " + str(request.messages[-1]["content"][0]["output"]["value"])}
    return {"toolCalls": [{"name": "x__ping", "args": {"n": 1}}]}
"""

EXTENSION = """\
def register(api):
    parameters = {parameters}
    item = {{"name": "x__ping", "description": "Ping.", "parameters": parameters}}
    api.tools.register(item, lambda ctx, args: "pong")
"""

MISSPELT_TYPE = '{"type": "object", "properties": {"n": {"type": "numbr"}}}'
PROPERTIES_ONLY = '{"n": {"type": "number"}}'  # the properties, without {"type": "object", "properties": ...}


def _run(tmp_path: Path, executor: str, parameters: str = MISSPELT_TYPE) -> subprocess.CompletedProcess[str]:
    docs = [
        kit.package_doc("tool-schema"),
        kit.python_model_doc(),
        kit.extension_doc("x", "./x.py"),
        kit.agent_doc("a", extensions=["x"]),
        kit.swarm_doc(["a"]),
    ]
    bundle = kit.write_bundle(
        tmp_path / "b", *docs, files={"model.py": MODEL, "x.py": EXTENSION.format(parameters=parameters)}
    )
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT"}
    env.update({"HOME": str(tmp_path), "NO_COLOR": "1", "GOONDAN_STATE_ROOT": str(tmp_path / "state")})
    command = [sys.executable, "-m", "goondan", "run", str(bundle), "--executor", executor, "--input", "go"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_tool_whose_parameters_are_no_json_schema_is_refused_at_register(tmp_path: Path, executor: str) -> None:
    run = _run(tmp_path, executor)
    assert run.returncode == 3, run.stdout + run.stderr
    assert (
        "[E_TOOL_DEFINITION_INVALID] tool 'x__ping': parameters is not a valid JSON Schema at properties.n.type: "
        "'numbr' is not a JSON type" in run.stderr
    )
    assert "did you mean 'number'?" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_parameters_written_as_bare_properties_are_refused_with_the_object_to_write(
    tmp_path: Path, executor: str
) -> None:
    """{"n": {"type": "number"}} registered, the model saw a schema of unknown keywords and no call
    was checked (gdn run exited 0)."""
    run = _run(tmp_path, executor, PROPERTIES_ONLY)
    assert run.returncode == 3, run.stdout + run.stderr
    assert (
        "[E_TOOL_DEFINITION_INVALID] tool 'x__ping' parameters has no 'type' or 'properties', only 'n': they look "
        "like properties written without their object" in run.stderr
    )
    assert "Write {'type': 'object', 'properties': {'n': ...}}." in run.stderr
