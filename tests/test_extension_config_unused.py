"""An Extension given a config whose ``register(api)`` takes none is warned about, naming the keys:
``register(api, config)`` is the only way an extension gets its config, so the YAML's values reached
nothing, silently (the author wrote ``config: {limit: 3}`` and forgot the parameter). Real ``gdn run``
with both executors; an extension that takes its config is not warned about."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import kit

NO_CONFIG = 'def register(api):\n    api.logger.info("registered")\n'
WITH_CONFIG = 'def register(api, config):\n    api.logger.info("limit=%s", config["limit"])\n'
WARNING = "extension x: its config (limit, names) is not used: register(api) takes none; define register(api, config)"


def _run(tmp_path: Path, executor: str, source: str) -> subprocess.CompletedProcess[str]:
    docs = [
        kit.package_doc("config-unused"),
        kit.python_model_doc(),
        kit.extension_doc("x", "./x.py", config={"limit": 3, "names": ["a"]}),
        kit.agent_doc("a", extensions=["x"]),
        kit.swarm_doc(["a"]),
    ]
    model = 'def generate(request):\n    return {"text": "fine"}\n'
    bundle = kit.write_bundle(tmp_path / "b", *docs, files={"model.py": model, "x.py": source})
    env = {k: v for k, v in os.environ.items() if k != "GOONDAN_STATE_ROOT"}
    env.update({"HOME": str(tmp_path), "NO_COLOR": "1", "GOONDAN_STATE_ROOT": str(tmp_path / "state")})
    command = [sys.executable, "-m", "goondan", "run", str(bundle), "--executor", executor, "--input", "go"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_config_that_register_does_not_take_is_warned_about(tmp_path: Path, executor: str) -> None:
    run = _run(tmp_path, executor, NO_CONFIG)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "fine"
    assert run.stderr.count(WARNING) == 1, run.stderr
    taken = _run(tmp_path, executor, WITH_CONFIG)
    assert taken.returncode == 0, taken.stderr
    assert "is not used" not in taken.stderr
