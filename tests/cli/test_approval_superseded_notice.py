"""A new message to a conversation whose calls wait for approval denies them (``superseded``);
``gdn run --input`` says so on stderr, naming each call, instead of dropping it without a word."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_testkit import gdn

from kit.approvals import approval_bundle, ran


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_new_message_names_the_waiting_call_it_denies(tmp_path: Path, executor: str) -> None:
    log = tmp_path / "ran.log"
    bundle = approval_bundle(tmp_path / "b", log)
    run = ("run", str(bundle), "--state-root", str(tmp_path / "state"), "--instance-key", "k", "--executor", executor)
    paused = gdn(tmp_path, *run, "--input", "one")
    assert paused.returncode == 0 and "waiting for approval: appr_" in paused.stderr, paused.stderr
    approval_id = paused.stderr.split("waiting for approval: ", 1)[1].split()[0]
    later = gdn(tmp_path, *run, "--input", "hello")
    assert later.returncode == 0, later.stderr
    assert later.stdout == "said hello\n"  # stdout keeps only the answer
    assert (
        f'denied {approval_id} (shell__run {{"cmd": "rm x"}}): this message arrived before anyone decided; '
        "the call was not run"
    ) in later.stderr
    again = gdn(tmp_path, *run, "--input", "hello")
    assert "denied" not in again.stderr  # said once, for the message that denied it
    assert ran(log) == []
