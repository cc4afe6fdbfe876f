"""Text that is not UTF-8 (a Latin-1 terminal) given to `gdn run`: `--input` is E_INVALID_ARGUMENT
naming the byte, and a chat line is refused with a notice while the chat goes on. Before, both reached
the agent as lone surrogates and the turn failed with E_IPC_NOT_JSON "the event cannot cross the
process boundary"; with a stdin that decodes strictly, the chat ended at that line as at end of input,
dropping every line after it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONIOENCODING"}
    return {**env, "HOME": str(tmp_path / "home"), "NO_COLOR": "1", "GOONDAN_ISOLATION": "inline", **extra}


def test_an_input_that_is_not_utf8_is_a_usage_error_naming_the_byte(tmp_path: Path) -> None:
    argv = [sys.executable.encode(), b"-m", b"goondan", b"run", bytes(QUICKSTART), b"--input", b"caf\xe9"]
    run = subprocess.run(
        [*argv, b"--state-root", bytes(tmp_path / "state")],
        capture_output=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env=_env(tmp_path),
    )
    stderr = run.stderr.decode()
    assert run.returncode == 2, stderr
    assert "[E_INVALID_ARGUMENT] --input is not UTF-8 text (byte 0xe9 at offset 3)" in stderr
    assert "E_IPC_NOT_JSON" not in stderr and not (tmp_path / "state" / "workspaces").exists()


def test_a_chat_line_that_is_not_utf8_is_not_sent_and_the_chat_goes_on(tmp_path: Path) -> None:
    for extra in ({}, {"PYTHONIOENCODING": "utf-8:strict"}):
        run = subprocess.run(
            [sys.executable, "-m", "goondan", "run", str(QUICKSTART), "--state-root", str(tmp_path / "state")],
            input=b"caf\xe9\nadd 2 and 3\n",
            capture_output=True,
            timeout=120,
            env=_env(tmp_path, **extra),
        )
        out, err = run.stdout.decode(), run.stderr.decode()
        assert run.returncode == 0, err
        assert "this line is not UTF-8 text (byte 0xe9 at offset 3); not sent" in err, (extra, err)
        assert out.strip() == 'Tool said: {"sum":5}', (extra, out)
        assert "E_IPC_NOT_JSON" not in err
