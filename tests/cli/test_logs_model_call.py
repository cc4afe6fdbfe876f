"""`gdn logs` shows a step's model call (the ``model`` field of step.completed) as name, time and
finish reason, not as a JSON object."""

from __future__ import annotations

import re
from pathlib import Path

from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


def test_a_step_line_names_the_model_its_call_time_and_why_it_stopped(tmp_path: Path) -> None:
    write_bundle(tmp_path, ECHO_BUNDLE)
    state = str(tmp_path / "state")
    assert gdn(tmp_path, "run", ".", "--input", "hi", "--state-root", state).returncode == 0
    out = gdn(tmp_path, "logs", "--state-root", state)
    assert out.returncode == 0, out.stderr
    [line] = [ln for ln in out.stdout.splitlines() if "step.completed" in ln]
    assert re.search(r"  model=echo \d+\.\dms stop  ", line), line
    assert '"provider"' not in line
