"""Mistakes in the guide's own suite (docs/guides/evaluating.md) that used to read as agents doing
badly: a misspelt ``toolCalled`` name and a python judge that does not load are a broken suite,
refused once before any scenario (exit 3) with the near name or the load error, never N scored
failures; a misspelt ``toolNotCalled`` (a check that would pass whatever) runs with a warning."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from test_evaluating_guide import ROOT, blocks


def _guide_project(tmp_path: Path, edit: tuple[str, str] | None = None) -> None:
    suite = next(b for b in blocks("yaml") if "scenarios:" in b)
    assert edit is None or edit[0] in suite
    shutil.copytree(ROOT / "examples" / "quickstart", tmp_path / "examples" / "quickstart")
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "suite.yaml").write_text(suite.replace(*edit) if edit else suite, encoding="utf-8")
    judge = next(b for b in blocks("python") if "def generate" in b)
    (tmp_path / "evals" / "judge.py").write_text(judge, encoding="utf-8")


def _eval(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "goondan", "eval", "evals/suite.yaml", *extra],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_misspelt_tool_not_called_runs_with_a_warning_naming_the_near_tool(tmp_path: Path) -> None:
    # not refused: a model may call a tool it made up, and toolNotCalled may guard against that
    _guide_project(tmp_path, ("toolNotCalled: [shell__wipe]", "toolNotCalled: [shell__wip]"))
    out = _eval(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (
        "warning: toolNotCalled 'shell__wip': Tool 'shell' has no export 'wip'; did you mean 'shell__wipe'?"
    ) in out.stderr
    assert "ok  1.00  check   no tool shell__wip" in out.stdout
    report = _eval(tmp_path, "--json")  # machine-readable: the note is in the check's detail, stderr stays clean
    (check,) = [c for s in json.loads(report.stdout)["scenarios"] for c in s["criteria"] if c["name"].endswith("wip")]
    assert "did you mean 'shell__wipe'?" in check["detail"] and report.stderr == ""


def test_a_misspelt_tool_called_is_a_broken_suite_refused_before_any_scenario(tmp_path: Path) -> None:
    _guide_project(tmp_path, ("name: calc__add", "name: calc__ad"))
    out = _eval(tmp_path)
    assert out.returncode == 3, out.stdout + out.stderr
    assert (
        "scenario 'adds two numbers': expect.toolCalled 'calc__ad': Tool 'calc' has no export 'ad'; "
        "did you mean 'calc__add'?"
    ) in out.stderr
    assert "suggestion:" in out.stderr and "Traceback" not in out.stderr
    assert "PASS" not in out.stdout and "[1/2]" not in out.stderr  # no scenario ran


def test_a_misspelt_tool_prefix_under_tool_called_names_the_near_tool(tmp_path: Path) -> None:
    _guide_project(tmp_path, ("name: calc__add", "name: cal__add"))
    out = _eval(tmp_path)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "expect.toolCalled 'cal__add': no Tool of the bundle is named 'cal'; did you mean 'calc__add'?" in out.stderr


def test_tools_that_extensions_register_at_run_time_are_not_refused(tmp_path: Path) -> None:
    _guide_project(tmp_path)  # the guide's suite expects turn-counter__stats, an extension's tool
    out = _eval(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_python_judge_that_does_not_load_fails_the_suite_before_any_scenario(tmp_path: Path) -> None:
    _guide_project(tmp_path, ("entry: ./judge.py", "entry: ./judg.py"))
    out = _eval(tmp_path)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "[E_MODEL_LOAD] the suite's judge does not load; no scenario was run" in out.stderr
    assert "judg.py does not exist" in out.stderr and "FAIL" not in out.stdout
    (tmp_path / "evals" / "judg.py").write_text("import json\n\n\ndef helper():\n    return 1 / 0\n\n\nhelper()\n")
    verbose = _eval(tmp_path, "-v")
    assert verbose.returncode == 3, verbose.stdout + verbose.stderr
    assert "importing judg.py failed at judg.py:5: ZeroDivisionError" in verbose.stderr
    assert "gdn eval -v" in verbose.stderr  # the suggestion names the command that shows it
    assert 'judg.py", line 5, in helper' in verbose.stderr  # the user's traceback, with -v


def test_content_parts_that_name_no_file_or_no_part_type_are_a_broken_suite(tmp_path: Path) -> None:
    _guide_project(
        tmp_path, ("    input: add 2 and 3\n", "    input: [{type: text, text: hi}, {type: image, path: ./cat.png}]\n")
    )
    suite = tmp_path / "evals" / "suite.yaml"
    text = suite.read_text(encoding="utf-8")
    suite.write_text(text.replace('turns: ["hello", "show me the stats"]', 'turns: ["hello", [{type: imag, text: x}]]'))
    out = _eval(tmp_path)
    assert out.returncode == 3, out.stdout + out.stderr
    assert (
        "scenario 'adds two numbers': [E_CONTENT_INVALID] input part 1: cannot read "
        f"{tmp_path / 'evals' / 'cat.png'}: No such file or directory"
    ) in out.stderr
    assert "scenario 'counts turns', turn 2: [E_CONTENT_INVALID] input part 0: unknown part type 'imag'" in out.stderr
    assert "a relative path is relative to the suite file" in out.stderr and "FAIL" not in out.stdout


def test_an_output_file_that_cannot_be_written_is_refused_before_any_scenario(tmp_path: Path) -> None:
    _guide_project(tmp_path)
    out = _eval(tmp_path, "--format", "json", "--output", "reports/before.json")
    assert out.returncode == 2, out.stdout + out.stderr  # was INTERNAL_ERROR FileNotFoundError after the run
    assert "[E_INVALID_ARGUMENT] --output reports/before.json: its directory reports does not exist" in out.stderr
    assert "[1/2]" not in out.stderr and "Traceback" not in out.stderr
    into_dir = _eval(tmp_path, "--format", "json", "--output", "evals")
    assert into_dir.returncode == 2 and "--output evals: it is a directory" in into_dir.stderr


def test_an_output_schema_check_on_an_agent_without_structured_output_is_a_broken_suite(tmp_path: Path) -> None:
    _guide_project(tmp_path, ("      maxSteps: 3\n", "      maxSteps: 3\n      outputSchema: {type: object}\n"))
    out = _eval(tmp_path)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "scenario 'adds two numbers': expect.outputSchema, but agent 'assistant' has no spec.output" in out.stderr
    assert "spec.output: {schema: ...}" in out.stderr and "FAIL" not in out.stdout
