"""What the operator asked for cannot run: an executor name nobody registered, Ray actor options
that are not a JSON object, the Ray executor without ray installed. Each is a usage error (exit 2,
CONTRACT §9) with its code and the fix, no traceback; a cluster that does not answer stays a failed
run (exit 1). Real ``gdn run`` subprocesses; no Ray is started."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import kit

MODEL = 'def generate(request):\n    return {"text": "ok"}\n'
# `gdn` with `import ray` failing, as on a machine without the ray extra
NO_RAY = "import sys; sys.modules['ray'] = None; from goondan.cli import main; sys.exit(main())"


def _gdn_run(
    tmp_path: Path, *extra: str, code: str | None = None, **env_extra: str
) -> subprocess.CompletedProcess[str]:
    root = kit.write_bundle(
        tmp_path / "b",
        kit.package_doc("ray-usage"),
        kit.python_model_doc(),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
        files={"model.py": MODEL},
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "GOONDAN_"))}
    env.update(RAY_USAGE_STATS_ENABLED="0", **env_extra)
    head = [sys.executable, "-c", code] if code else [sys.executable, "-m", "goondan"]
    argv = [*head, "run", str(root), "--state-root", str(tmp_path / "state"), "--input", "hi", *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize(
    ("extra", "env", "code", "fix"),
    [
        (["--executor", "rya"], {}, "E_EXECUTOR_UNSUPPORTED", "inline, process, ray"),
        (["--executor", "ray"], {"GOONDAN_RAY_ACTOR_OPTIONS": '{"num_cpus": 1'}, "E_RAY_OPTIONS", "JSON object"),
        ([], {"GOONDAN_EXECUTOR": "ray", "GOONDAN_RAY_ACTOR_OPTIONS": "[1]"}, "E_RAY_OPTIONS", "JSON object"),
    ],
    ids=["unknown-executor", "options-not-json", "options-not-an-object"],
)
def test_an_executor_setting_that_cannot_work_is_a_usage_error(
    tmp_path: Path, extra: list[str], env: dict[str, str], code: str, fix: str
) -> None:
    proc = _gdn_run(tmp_path, *extra, **env)
    assert proc.stderr.startswith(f"[{code}] "), proc.stderr
    assert proc.returncode == 2, proc.stderr  # was 1 (internal)
    assert fix in proc.stderr and "Traceback" not in proc.stderr


def test_the_ray_executor_without_ray_installed_is_a_usage_error_naming_the_extra(tmp_path: Path) -> None:
    proc = _gdn_run(tmp_path, "--executor", "ray", code=NO_RAY)
    assert proc.stderr.startswith("[E_RAY_NOT_INSTALLED] "), proc.stderr
    assert proc.returncode == 2, proc.stderr  # was 1 (internal)
    assert "pip install 'goondan-runtime[ray]'" in proc.stderr and "Traceback" not in proc.stderr


def test_a_cluster_that_does_not_answer_stays_a_failed_run(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _gdn_run(tmp_path, "--executor", "ray", "--ray-address", f"127.0.0.1:{port}")
    assert proc.stderr.startswith("[E_RAY_CONNECT] "), proc.stderr
    assert proc.returncode == 1, proc.stderr
