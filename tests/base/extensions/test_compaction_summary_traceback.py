"""A python summary model that raises: compaction falls back to the static summary and logs the
error's last line; `gdn run -v` also prints the summary model's own traceback (nothing showed where
in summarizer.py it failed, -v included)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

RECIPE = Path(__file__).resolve().parents[3] / "docs" / "cookbook" / "compaction"


def _turn(bundle: Path, state: Path, text: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "goondan", "run", str(bundle), "--input", text, "--state-root", str(state), *flags],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "HOME": str(bundle.parent / "home"), "GOONDAN_ISOLATION": "inline"},
    )


def test_a_summary_model_that_raises_shows_its_traceback_with_v(tmp_path: Path) -> None:
    bundle = tmp_path / "diary"
    shutil.copytree(RECIPE, bundle)
    manifest = bundle / "goondan.yaml"
    text = (
        manifest.read_text()
        .replace("maxMessages: 6 ", "maxMessages: 2 ")
        .replace("retainLastMessages: 2 ", "retainLastMessages: 0 ")
    )
    manifest.write_text(text)
    summarizer = bundle / "summarizer.py"
    summarizer.write_text(
        summarizer.read_text().replace(
            "    said: list[str] = []\n", '    said: list[str] = []\n    raise RuntimeError("summarizer broke")\n', 1
        )
    )
    state = tmp_path / "state"
    assert _turn(bundle, state, "day 1").returncode == 0

    verbose = _turn(bundle, state, "day 2", "-v")  # 3 messages > 2: compaction runs and its model fails
    assert verbose.returncode == 0, verbose.stderr
    assert "summary: [message-compaction] mode=" in verbose.stdout  # the static summary took its place
    assert "summary model failed, using the static summary" in verbose.stderr
    assert "traceback of the summary model:" in verbose.stderr
    assert 'summarizer.py", line' in verbose.stderr and "RuntimeError: summarizer broke" in verbose.stderr

    quiet = _turn(bundle, state, "day 3")
    assert quiet.returncode == 0, quiet.stderr
    assert "summary model failed" in quiet.stderr and "Traceback" not in quiet.stderr
