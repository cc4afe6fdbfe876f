"""The status line of a one-shot ``gdn run --input``: drawn on a terminal (a real pseudo-terminal
here), never on a pipe, never with ``--json``; the reply on stdout is the same either way."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

from cli_testkit import env_for, gdn

from kit import write_files

BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Model
metadata: {name: m}
spec:
  provider: scripted
  model: m
  options:
    rules:
      - when: {role: user}
        reply: {toolCalls: [{name: slow__wait, args: {}}]}
      - reply: {text: "done after {{last}}"}
---
apiVersion: goondan.ai/v1
kind: Tool
metadata: {name: slow}
spec:
  entry: ./slow.py
  exports: [{name: wait, description: Waits a little., parameters: {type: object}}]
---
apiVersion: goondan.ai/v1
kind: Agent
metadata: {name: a}
spec:
  modelConfig: {modelRef: Model/m}
  tools: [Tool/slow]
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata: {name: default}
spec:
  entryAgent: Agent/a
  agents: [Agent/a]
"""
FILES = {
    "goondan.yaml": BUNDLE,
    "slow.py": """\
        import time


        def wait(ctx, args):
            time.sleep(0.8)
            return "waiting"


        handlers = {"wait": wait}
        """,
}


def run_with_terminal_stderr(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """stderr on a pseudo-terminal, stdout on a pipe (``gdn run --input x | jq`` on a terminal)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "goondan", "run", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env_for(tmp_path, TERM="xterm"),
        cwd=tmp_path,
    )
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    out = proc.stdout.read().decode() if proc.stdout else ""
    code = proc.wait(timeout=60)
    os.close(master)
    return code, out, seen.decode(errors="replace")


def test_status_line_is_drawn_on_a_terminal_and_erased_before_the_reply(tmp_path: Path) -> None:
    app = write_files(tmp_path / "app", FILES)
    code, out, terminal = run_with_terminal_stderr(tmp_path, str(app), "--input", "go")
    assert code == 0, terminal
    assert out == "done after waiting\n"
    assert "running slow__wait" in terminal and "⠋" in terminal
    assert terminal.endswith("\r\x1b[K")  # the last thing written erases the line


def test_no_status_line_on_pipes_or_with_json(tmp_path: Path) -> None:
    app = write_files(tmp_path / "app", FILES)
    piped = gdn(tmp_path, "run", str(app), "--input", "go", TERM="xterm")
    assert piped.returncode == 0 and piped.stdout == "done after waiting\n"
    assert piped.stderr == ""
    code, out, terminal = run_with_terminal_stderr(tmp_path, str(app), "--input", "go", "--json")
    assert code == 0 and '"text": "done after waiting"' in out
    assert "⠋" not in terminal and "running" not in terminal


def test_a_log_record_while_the_line_shows_gets_a_line_of_its_own(tmp_path: Path) -> None:
    """A warning logged during the turn (here by the tool, in the agent process) used to be written
    after the spinner's glyph and status, on the same line; the line is now erased first."""
    files = dict(FILES)
    files["slow.py"] = """\
        import logging
        import time


        def wait(ctx, args):
            time.sleep(0.4)
            logging.getLogger("slowtool").warning("the disk is nearly full")
            time.sleep(0.4)
            return "waiting"


        handlers = {"wait": wait}
        """
    app = write_files(tmp_path / "app", files)
    for executor in ("process", "inline"):
        code, out, terminal = run_with_terminal_stderr(tmp_path, str(app), "--input", "go", "--executor", executor)
        assert code == 0 and out == "done after waiting\n", terminal
        assert "the disk is nearly full" in terminal and "running slow__wait" in terminal, terminal
        # what the terminal shows on the warning's line: the text after the last erase before it
        shown = terminal.split("the disk is nearly full", 1)[0].rsplit("\r\x1b[K", 1)[-1]
        assert shown == "WARNING slowtool: ", (executor, shown)  # was '⠸ step 1 · running slow__wait · 0.4sWARNING ...'
