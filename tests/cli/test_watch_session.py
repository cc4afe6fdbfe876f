"""`gdn run --watch` as an interactive chat on a pseudo-terminal while the bundle's files are edited.

A file saved half-way through an edit must never end the session: the problem is reported (code and
file:line), the last good version keeps answering, and the fixed file is picked up with one
"reloaded: ..." line. Lines printed while the `> ` prompt is shown must leave the prompt (and what the
user has typed so far) on screen.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_interactive_pty import Terminal

from kit import write_bundle

CALC_BUNDLE = """\
apiVersion: goondan.ai/v1
kind: Package
metadata:
  name: watch-suite
spec:
  version: 0.1.0
---
apiVersion: goondan.ai/v1
kind: Model
metadata:
  name: scripted
spec:
  provider: scripted
  model: demo
  options:
    rules:
      - when: { role: user, contains: "add" }
        reply:
          toolCalls:
            - name: calc__add
              args: { a: 2, b: 3 }
      - when: { role: tool }
        reply:
          text: "Tool said: {{last}}"
      - reply:
          text: "echo: {{last}}"
---
apiVersion: goondan.ai/v1
kind: Tool
metadata:
  name: calc
spec:
  entry: ./tools/calc.py
  exports:
    - name: add
      description: Add two numbers.
      parameters:
        type: object
        properties:
          a: { type: number }
          b: { type: number }
---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: talker
spec:
  modelConfig:
    modelRef: Model/scripted
  tools: [Tool/calc]
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata:
  name: default
spec:
  entryAgent: Agent/talker
  agents: [Agent/talker]
"""

GOOD = "def add(ctx, args):\n    return {'sum': args['a'] + args['b']}\n\n\nhandlers = {'add': add}\n"
BROKEN = "def add(ctx, args:\n    return 1\n\n\nhandlers = {'add': add}\n"
FIXED = "def add(ctx, args):\n    return {'sum': 99}\n\n\nhandlers = {'add': add}\n"


def _calc_bundle(tmp_path: Path) -> Path:
    bundle = write_bundle(tmp_path / "b", CALC_BUNDLE)
    (bundle / "tools").mkdir()
    (bundle / "tools" / "calc.py").write_text(GOOD)
    return bundle


def _save(path: Path, text: str) -> None:
    """Write so the watcher's (mtime, size) scan sees a change even within one clock tick."""
    path.write_text(text)
    later = time.time() + 2
    import os

    os.utime(path, (later, later))


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_a_broken_tool_file_is_reported_and_the_session_waits_for_the_fix(tmp_path: Path, isolation: str) -> None:
    bundle = _calc_bundle(tmp_path)
    term = Terminal(
        tmp_path, str(bundle), "--watch", "--state-root", str(tmp_path / "state"), GOONDAN_ISOLATION=isolation
    )
    try:
        term.expect("> ")
        term.send("add 2 and 3\r")
        term.expect('Tool said: {"sum":5}')
        term.expect("> ")
        _save(bundle / "tools" / "calc.py", BROKEN)
        report = term.expect("> ")
        assert "reload failed: [E_" in report
        assert "tools/calc.py:1" in report and "never closed" in report
        assert "last good version" in report
        # meanwhile the last good version keeps answering
        term.send("add 2 and 3\r")
        term.expect('Tool said: {"sum":5}')
        term.expect("> ")
        _save(bundle / "tools" / "calc.py", FIXED)
        assert "reloaded: tools/calc.py" in term.expect("reloaded: tools/calc.py")
        term.expect("> ")
        term.send("add 2 and 3\r")
        term.expect('Tool said: {"sum":99}')
        term.expect("> ")
        term.send("/quit\r")
        assert term.wait() == 0
    finally:
        term.close()


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_a_tool_that_fails_to_import_fails_that_request_not_the_session(tmp_path: Path, isolation: str) -> None:
    bundle = _calc_bundle(tmp_path)
    term = Terminal(
        tmp_path, str(bundle), "--watch", "--state-root", str(tmp_path / "state"), GOONDAN_ISOLATION=isolation
    )
    try:
        term.expect("> ")
        # valid syntax, so the reload goes ahead; the import itself fails when the agent starts again
        _save(bundle / "tools" / "calc.py", GOOD + "raise RuntimeError('not yet')\n")
        term.expect("reloaded: tools/calc.py")
        term.expect("> ")
        term.send("add 2 and 3\r")
        failed = term.expect("> ")
        assert "[E_TOOL_LOAD]" in failed
        _save(bundle / "tools" / "calc.py", GOOD)
        term.expect("reloaded: tools/calc.py")
        term.expect("> ")
        term.send("add 2 and 3\r")
        term.expect('Tool said: {"sum":5}')
        term.expect("> ")
        term.send("/quit\r")
        assert term.wait() == 0
    finally:
        term.close()


def test_a_line_printed_while_the_prompt_is_shown_redraws_the_prompt_and_typed_text(tmp_path: Path) -> None:
    bundle = _calc_bundle(tmp_path)
    term = Terminal(tmp_path, str(bundle), "--watch", "--state-root", str(tmp_path / "state"))
    try:
        term.expect("> ")
        term.send("hel")
        term.expect("hel")
        manifest = bundle / "goondan.yaml"
        _save(manifest, manifest.read_text().replace("echo: {{last}}", "v2: {{last}}"))
        shown = term.expect("reloaded: goondan.yaml")
        # the message starts on a clean line: the prompt line is cleared, not written over
        assert shown.endswith("\r\x1b[Kreloaded: goondan.yaml")
        term.expect("\r\n> hel")  # the prompt comes back with what was typed
        term.send("lo\r")
        term.expect("v2: hello")
        term.expect("> ")
        term.send("/quit\r")
        assert term.wait() == 0
    finally:
        term.close()
