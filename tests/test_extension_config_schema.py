"""An extension whose own ``CONFIG_SCHEMA`` is not a valid JSON Schema (``{"type": "integr"}``) is the
extension author's mistake, said as one: ``gdn run`` refuses to load it (E_EXT_LOAD, exit 3) and
``gdn validate`` reports it at the Extension's entry (exit 4), naming the keyword and the type meant.

Before, checking the config with it raised jsonschema's ``UnknownType``: ``gdn run`` inline and
``gdn validate`` printed ``[INTERNAL_ERROR] UnknownType ... Re-run with -v ... and report it``, and the
process executor a bare ``[E_AGENT_START] Unknown type 'integr' for validator with schema: ...``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit

EXTENSION = """\
CONFIG_SCHEMA = {"type": "object", "properties": {"limit": {"type": "integr"}}}


def register(api, config):
    api.logger.warning("config=%r", config)
"""

NAMED = "at properties.limit.type: 'integr' is not a JSON type"


def _bundle(tmp_path: Path) -> Path:
    docs = [
        kit.package_doc("config-schema"),
        kit.python_model_doc(),
        kit.extension_doc("x", "./x.py", config={"limit": 3}),
        kit.agent_doc("a", extensions=["x"]),
        kit.swarm_doc(["a"]),
    ]
    model = 'def generate(request):\n    return {"text": "fine"}\n'
    return kit.write_bundle(tmp_path / "b", *docs, files={"model.py": model, "x.py": EXTENSION})


def _gdn(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT"}
    env.update({"HOME": str(tmp_path), "NO_COLOR": "1", "GOONDAN_STATE_ROOT": str(tmp_path / "state")})
    command = [sys.executable, "-m", "goondan", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_an_invalid_config_schema_is_the_extensions_load_error(tmp_path: Path, executor: str) -> None:
    run = _gdn(tmp_path, "run", str(_bundle(tmp_path)), "--executor", executor, "--input", "go")
    assert run.returncode == 3, run.stderr
    assert "[E_EXT_LOAD] extension x: its CONFIG_SCHEMA is not a valid JSON Schema " + NAMED in run.stderr
    assert "did you mean 'integer'?" in run.stderr
    assert "INTERNAL_ERROR" not in run.stderr and "Traceback" not in run.stderr


def test_validate_reports_an_invalid_config_schema_at_the_extension(tmp_path: Path) -> None:
    run = _gdn(tmp_path, "validate", str(_bundle(tmp_path)))
    assert run.returncode == 4, run.stdout + run.stderr
    out = run.stdout + run.stderr
    assert "[E_CONFIG_EXTENSION_CONFIG_INVALID] Extension/x: the CONFIG_SCHEMA of ./x.py is not a valid" in out
    assert NAMED in out and "did you mean 'integer'?" in out
    assert "INTERNAL_ERROR" not in out
