"""The layer rules of ``pyproject.toml`` (``[tool.importlinter]``) hold over the real import graph, so a
plain ``pytest`` catches a violation as ``lint-imports`` in CI does — including an import hidden in a
function body, the usual way a layering cycle sneaks in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path, src: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(src), "NO_COLOR": "1"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(cwd / "pyproject.toml")],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def copy_tree(tmp_path: Path) -> Path:
    """A copy of the package and its contracts that a test may break without touching the tree."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(
        ROOT / "src" / "goondan", tmp_path / "src" / "goondan", ignore=shutil.ignore_patterns("__pycache__")
    )
    return tmp_path


def test_layer_import_contracts_are_kept() -> None:
    proc = lint_imports(ROOT, ROOT / "src")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


def test_engine_importing_an_executor_inside_a_function_breaks_the_contracts(tmp_path: Path) -> None:
    tree = copy_tree(tmp_path)
    swarm = tree / "src" / "goondan" / "engine" / "_swarm.py"
    swarm.write_text(
        swarm.read_text() + "\n\ndef _sneaky() -> object:\n    from ..executors.process import Orchestrator\n\n"
        "    return Orchestrator\n"
    )
    proc = lint_imports(tree, tree / "src")
    assert proc.returncode != 0, proc.stdout
    assert "the engine knows no executor" in proc.stdout
    assert "goondan.engine._swarm -> goondan.executors.process" in proc.stdout


def test_an_executor_importing_the_runtime_facade_breaks_the_contracts(tmp_path: Path) -> None:
    tree = copy_tree(tmp_path)
    inline = tree / "src" / "goondan" / "executors" / "_inline.py"
    inline.write_text(
        inline.read_text() + "\n\ndef _facade() -> object:\n    from ..runtime import Runtime\n\n    return Runtime\n"
    )
    proc = lint_imports(tree, tree / "src")
    assert proc.returncode != 0, proc.stdout
    assert "executors never import the facade" in proc.stdout
