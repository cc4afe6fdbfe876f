"""A --state-root that is (or lies under) a file is E_STORAGE_WRITE with what to do: it said only
"[Errno 17] File exists: '<path>'", without a suggestion, the path being a file and not a directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


def test_a_state_root_that_is_a_file_says_to_give_a_directory(tmp_path: Path) -> None:
    taken = tmp_path / "state"
    taken.write_text("not a directory")
    for root in (taken, taken / "below"):
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "goondan",
                "run",
                str(QUICKSTART),
                "--input",
                "add 2 and 3",
                "--state-root",
                str(root),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "HOME": str(tmp_path / "home"), "GOONDAN_ISOLATION": "inline"},
        )
        assert run.returncode == 1, run.stdout + run.stderr
        assert "[E_STORAGE_WRITE]" in run.stderr
        assert f"suggestion: {taken} is a file, not a directory: give a directory with --state-root" in run.stderr
        assert "Traceback" not in run.stderr and taken.read_text() == "not a directory"
