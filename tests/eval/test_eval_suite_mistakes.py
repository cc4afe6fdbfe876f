"""Suite mistakes a new user makes, through the real ``gdn eval`` on the real quickstart bundle:
a misspelt field names the field meant, ``textContains: 5`` (a YAML number) is the text "5", and a
suite saved as Latin-1 is an error at its byte, not an INTERNAL_ERROR."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SUITE = """\
name: mistakes
bundle: ./quickstart
scenarios:
  - name: adds
    input: add 2 and 3
    expect:
      textContains: 5
      textRegex: [5]
"""


def _eval(tmp_path: Path, suite: str | bytes) -> subprocess.CompletedProcess[str]:
    if not (tmp_path / "quickstart").exists():
        shutil.copytree(EXAMPLES / "quickstart", tmp_path / "quickstart")
    path = tmp_path / "suite.yaml"
    path.write_bytes(suite if isinstance(suite, bytes) else suite.encode())
    return subprocess.run(
        [sys.executable, "-m", "goondan", "eval", "suite.yaml", "--state-root", str(tmp_path / "state")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_a_number_in_text_contains_is_its_text(tmp_path: Path) -> None:
    run = _eval(tmp_path, SUITE)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "check   text contains '5'" in run.stdout and "PASSED: 1/1" in run.stdout


def test_a_misspelt_field_names_the_field_meant_at_its_line(tmp_path: Path) -> None:
    bad = SUITE.replace("    input:", "    inptu:").replace("name: mistakes", "name: mistakes\nthreshhold: 0.5")
    run = _eval(tmp_path, bad)
    assert run.returncode == 3, run.stdout + run.stderr
    assert "suite.yaml:2: threshhold: unknown field 'threshhold'; did you mean 'threshold'?" in run.stderr
    assert (
        "suite.yaml:6: scenarios.0.inptu: unknown field 'inptu'; did you mean 'input'? Allowed fields: name, input"
        in run.stderr
    )
    assert "Extra inputs are not permitted" not in run.stderr


def test_a_suite_not_in_utf8_is_an_error_at_its_byte(tmp_path: Path) -> None:
    run = _eval(tmp_path, SUITE.replace("name: adds", "name: caf\xe9").encode("latin-1"))
    assert run.returncode == 3, run.stderr
    assert "[E_EVAL_SUITE_YAML] suite.yaml:4:14: the suite is not valid UTF-8 (byte 0xe9)" in run.stderr
    assert "iconv -f latin1 -t utf-8 suite.yaml" in run.stderr and "INTERNAL_ERROR" not in run.stderr


JUDGED = """\
name: judged
bundle: ./quickstart
judge:
  model: {provider: python, model: judge, options: {entry: ./judge.py}}
scenarios:
  - name: adds
    input: add 2 and 3
    rubric:
      - {name: gives the sum, criterion: The answer states that the sum is 5.}
"""


def test_a_judge_that_raises_fails_its_criterion_and_v_prints_the_judges_traceback(tmp_path: Path) -> None:
    # the criterion failed with "[E_MODEL_CALL] python model generate() raised KeyError: 'contnt'", and
    # nothing, -v included, showed where in judge.py
    (tmp_path / "judge.py").write_text('def generate(request):\n    return request.messages[-1]["contnt"]\n')
    run = _eval(tmp_path, JUDGED)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "rubric  gives the sum  ([E_MODEL_CALL] python model generate() raised KeyError: 'contnt')" in run.stdout
    assert "Traceback" not in run.stderr
    verbose = subprocess.run(
        [sys.executable, "-m", "goondan", "eval", "suite.yaml", "-v", "--state-root", str(tmp_path / "state")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert verbose.returncode == 1, verbose.stdout + verbose.stderr
    assert "traceback of the judge grading 'gives the sum':" in verbose.stderr
    assert 'judge.py", line 2, in generate' in verbose.stderr and "KeyError: 'contnt'" in verbose.stderr


def _keep_state(tmp_path: Path, where: str) -> subprocess.CompletedProcess[str]:
    shutil.copytree(EXAMPLES / "quickstart", tmp_path / "quickstart", dirs_exist_ok=True)
    (tmp_path / "suite.yaml").write_text(SUITE)
    return subprocess.run(
        [sys.executable, "-m", "goondan", "eval", "suite.yaml", "--keep-state", where],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "GOONDAN_STATE_ROOT": str(tmp_path / "state"), "HOME": str(tmp_path / "home")},
    )


def test_a_keep_state_directory_that_cannot_be_made_is_a_usage_error_before_any_scenario(tmp_path: Path) -> None:
    # every scenario failed its "runs" check with a FileNotFoundError and gdn eval exited 1 (below threshold)
    (tmp_path / "taken").write_text("a file")
    for where, problem in (("taken", "it is a file, not a directory"), ("taken/runs", "it cannot be created")):
        run = _keep_state(tmp_path, where)
        assert run.returncode == 2, run.stdout + run.stderr
        assert f"[E_INVALID_ARGUMENT] --keep-state {where}: {problem}" in run.stderr
        assert "no scenario was run" in run.stderr and run.stdout == ""
    kept = _keep_state(tmp_path, "runs/new")  # a new directory (and its parents) is made, as before
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert (tmp_path / "runs" / "new" / "adds").is_dir()
