"""docs/guides/evaluating.md runs as written: its suite and judge evaluate examples/quickstart with
`gdn eval`, and its price snippet is a valid part of a suite."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from goondan.eval import load_suite

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guides" / "evaluating.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.DOTALL)


def test_the_guides_suite_and_judge_evaluate_the_quickstart(tmp_path: Path) -> None:
    suite_text = next(b for b in blocks("yaml") if "scenarios:" in b)
    judge = next(b for b in blocks("python") if "def generate" in b)
    shutil.copytree(ROOT / "examples" / "quickstart", tmp_path / "examples" / "quickstart")
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "suite.yaml").write_text(suite_text, encoding="utf-8")
    (tmp_path / "evals" / "judge.py").write_text(judge, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "goondan", "eval", "evals/suite.yaml", "--format", "json", "--output", "r.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASS  adds two numbers" in out.stdout and "PASS  counts turns" in out.stdout
    assert "rubric  gives the sum  (mentions 5)" in out.stdout
    compared = subprocess.run(
        [sys.executable, "-m", "goondan", "eval", "--compare", "r.json", "r.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "0 better, 0 worse, 2 unchanged" in compared.stdout


def test_the_guides_price_snippet_is_valid_in_a_suite(tmp_path: Path) -> None:
    snippet = next(b for b in blocks("yaml") if b.startswith("prices:"))
    suite = {"bundle": ".", "scenarios": [{"name": "a", "input": "x"}], **yaml.safe_load(snippet)}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(suite), encoding="utf-8")
    loaded, _ = load_suite(path)
    assert loaded.prices["openai/gpt-4o-mini"].output == 0.60
