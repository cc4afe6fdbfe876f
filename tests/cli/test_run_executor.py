"""``gdn run --executor NAME`` picks where agent instances run, over ``GOONDAN_EXECUTOR`` /
``GOONDAN_ISOLATION``; a name no executor has is a clear error, never a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_testkit import gdn

import kit

# the model reports its parent: the test process itself when the instance runs inside gdn (inline)
MODEL = "import os\n\n\ndef generate(request):\n    return {'text': str(os.getppid())}\n"


def bundle(root: Path) -> Path:
    docs = [kit.package_doc(), kit.python_model_doc(), kit.agent_doc("a"), kit.swarm_doc(["a"])]
    return kit.write_bundle(root, *docs, files={"model.py": MODEL})


def test_executor_flag_chooses_where_the_instance_runs(tmp_path: Path) -> None:
    root = bundle(tmp_path / "b")
    state = str(tmp_path / "state")
    inline = gdn(tmp_path, "run", str(root), "--state-root", state, "--input", "hi", "--executor", "inline")
    assert inline.returncode == 0, inline.stderr
    assert inline.stdout.strip() == str(os.getpid())
    process = gdn(
        tmp_path,
        "run",
        str(root),
        "--state-root",
        state,
        "--input",
        "hi",
        "--executor",
        "process",
        GOONDAN_ISOLATION="inline",
    )
    assert process.returncode == 0, process.stderr
    assert process.stdout.strip() != str(os.getpid())
    by_env = gdn(tmp_path, "run", str(root), "--state-root", state, "--input", "hi", GOONDAN_EXECUTOR="process")
    assert by_env.returncode == 0, by_env.stderr
    assert by_env.stdout.strip() != str(os.getpid())


def test_an_unknown_executor_is_a_clear_error(tmp_path: Path) -> None:
    root = bundle(tmp_path / "b")
    proc = gdn(
        tmp_path, "run", str(root), "--state-root", str(tmp_path / "state"), "--input", "hi", "--executor", "rya"
    )
    assert proc.returncode != 0
    assert "E_EXECUTOR_UNSUPPORTED" in proc.stderr
    assert "suggestion:" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_gdn_run_with_the_ray_executor_prints_only_the_answer(tmp_path: Path) -> None:
    """Ray logs "Token authentication is enabled for this Ray cluster" when it starts a local Ray;
    nothing of it may reach the user's terminal between gdn's own lines."""
    root = bundle(tmp_path / "b")
    proc = gdn(
        tmp_path,
        "run",
        str(root),
        "--state-root",
        str(tmp_path / "state"),
        "--input",
        "hi",
        "--executor",
        "ray",
        timeout=240,
        RAY_USAGE_STATS_ENABLED="0",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().isdigit()  # the model's answer and nothing else
    assert "Token authentication" not in proc.stderr, proc.stderr
