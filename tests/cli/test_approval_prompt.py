"""The approval prompt of an interactive ``gdn run`` session: on a pseudo-terminal (edit the
arguments, deny with a note, approve) and from a pipe, where the answers are the next lines."""

from __future__ import annotations

from pathlib import Path

from cli_testkit import gdn
from test_interactive_pty import Terminal

from kit.approvals import approval_bundle, ran


def test_the_session_prompts_approve_deny_or_edit_on_a_terminal(tmp_path: Path) -> None:
    log = tmp_path / "ran.log"
    bundle = approval_bundle(tmp_path / "b", log)
    term = Terminal(tmp_path, str(bundle), "--state-root", str(tmp_path / "state"), "--instance-key", "k")
    try:
        term.expect("> ")
        term.send("one\r")
        term.expect("I will run it.")
        term.expect('approval needed: shell__run {"cmd": "rm x"}')
        term.expect("approve? [y]es / [n]o / [e]dit args: ")
        term.send("e\r")
        term.expect("args as a JSON object: ")
        term.send('{"cmd": "ls"}\r')
        term.expect("ran ls")
        term.expect("> ")
        term.send("two\r")
        term.expect('approval needed: shell__run {"cmd": "a"}')
        term.expect("approve? ")
        term.send("n\r")
        term.expect("note for the model (optional): ")
        term.send("not a\r")
        term.expect('approval needed: shell__run {"cmd": "b"}')
        term.expect("approve? ")
        term.send("y\r")
        seen = term.expect("> ")
        assert "E_TOOL_DENIED" in seen and "not a" in seen and "ran b" in seen
        term.send("/quit\r")
        assert term.wait() == 0
    finally:
        term.close()
    assert ran(log) == ["ls", "echo free", "b"]


def test_a_piped_session_reads_the_decision_from_the_next_line(tmp_path: Path) -> None:
    log = tmp_path / "ran.log"
    bundle = approval_bundle(tmp_path / "b", log)
    proc = gdn(
        tmp_path, "run", str(bundle), "--state-root", str(tmp_path / "state"), "--instance-key", "k",
        stdin="one\nmaybe\ny\n",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "answer y, n or e" in proc.stderr
    assert "ran rm x" in proc.stdout
    assert ran(log) == ["rm x"]


def test_ctrl_c_at_the_question_leaves_the_call_pending_and_the_next_session_asks_first(tmp_path: Path) -> None:
    log = tmp_path / "ran.log"
    bundle = approval_bundle(tmp_path / "b", log)
    args = (str(bundle), "--state-root", str(tmp_path / "state"), "--instance-key", "k")
    term = Terminal(tmp_path, *args)
    try:
        term.expect("> ")
        term.send("one\r")
        term.expect("approve? [y]es / [n]o / [e]dit args: ")
        term.send("\x03")
        seen = term.expect("or in the next `gdn run` of this conversation, which asks again)")
        assert "left pending: appr_" in seen
        assert term.wait() == 130
    finally:
        term.close()
    assert ran(log) == []
    # the next session asks before its first prompt: a first message would deny the call unasked;
    # Ctrl+C at the note of a denial decides nothing either
    term = Terminal(tmp_path, *args)
    try:
        term.expect("approve? [y]es / [n]o / [e]dit args: ")
        term.send("n\r")
        term.expect("note for the model (optional): ")
        term.send("\x03")
        assert "left pending: appr_" in term.expect("which asks again)")
        assert term.wait() == 130
    finally:
        term.close()
    term = Terminal(tmp_path, *args)
    try:
        seen = term.expect("approve? [y]es / [n]o / [e]dit args: ")
        assert "this conversation has a tool call waiting for approval from an earlier turn" in seen
        assert 'approval needed: shell__run {"cmd": "rm x"}' in seen and "> " not in seen
        term.send("y\r")
        assert "ran rm x" in term.expect("> ")
        term.send("/quit\r")
        assert term.wait() == 0
    finally:
        term.close()
    assert ran(log) == ["rm x"]


def test_edited_args_that_do_not_fit_the_tool_are_asked_again_at_the_prompt(tmp_path: Path) -> None:
    log = tmp_path / "ran.log"
    bundle = approval_bundle(tmp_path / "b", log)
    proc = gdn(
        tmp_path, "run", str(bundle), "--state-root", str(tmp_path / "state"), "--instance-key", "k",
        stdin='one\ne\n{"cmd": 3}\ne\n{"cmd": "ls"}\n',
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "args.cmd: expected string but got integer; nothing was decided; asking again" in proc.stderr
    assert "ran ls" in proc.stdout
    assert ran(log) == ["ls"]
