"""`gdn run --input` whose turn ends waiting for approval exits 0 (the exit codes have none for
"waiting"), so what it prints must let a person and a script tell it from a finished turn: stderr
says the turn is not finished and gives the commands that decide, with this run's bundle and state
root, ready to paste (it said `gdn approvals approve ID`, which looks in ~/.goondan and the current
directory); ``--json`` carries finishReason and every pending call. Both executors, real `gdn`
subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_testkit import env_for, gdn

from kit.approvals import approval_bundle, ran

EXECUTORS = ["inline", "process"]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_turn_waiting_for_approval_says_it_is_not_finished_and_how_to_decide(tmp_path: Path, executor: str) -> None:
    log = tmp_path / "ran.log"
    bundle = approval_bundle(tmp_path / "b", log)
    state = tmp_path / "state dir"  # a path the pasted command must quote
    run = gdn(tmp_path, "run", str(bundle), "--executor", executor, "--state-root", str(state), "--input", "one")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "I will run it.\n"  # only what the model said before the call
    approval_id = run.stderr.split("waiting for approval: ", 1)[1].split()[0]
    assert (
        "the turn is not finished: it waits until a tool call is approved or denied (exit status 0; with --json, "
        'finishReason is "awaiting_approval" and pendingApprovals lists the calls)' in run.stderr
    )
    where = f"{bundle} --state-root '{state}'"
    approve = f"gdn approvals approve {approval_id} {where}"
    assert f"decide with `{approve}` or `gdn approvals deny {approval_id} {where} --note TEXT`\n" in run.stderr
    # pasted into a shell as printed, it decides that very call
    env = env_for(tmp_path, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    decided = subprocess.run(["bash", "-c", approve], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=90)
    assert decided.returncode == 0, decided.stderr
    assert "ran rm x" in decided.stdout
    assert ran(log) == ["rm x"]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_json_output_of_a_turn_waiting_for_approval_carries_the_status_and_the_calls(
    tmp_path: Path, executor: str
) -> None:
    bundle = approval_bundle(tmp_path / "b", tmp_path / "ran.log")
    state = str(tmp_path / "state")
    run = gdn(tmp_path, "run", str(bundle), "--executor", executor, "--state-root", state, "--input", "two", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["finishReason"] == "awaiting_approval"
    assert [(p["toolCallId"], p["toolName"], p["args"]) for p in result["pendingApprovals"]] == [
        ("c1", "shell__run", {"cmd": "a"}),
        ("c3", "shell__run", {"cmd": "b"}),
    ]
    assert all(p["approvalId"].startswith("appr_") for p in result["pendingApprovals"])
    several = gdn(tmp_path, "run", str(bundle), "--executor", executor, "--state-root", state, "--input", "two")
    assert f"(`gdn approvals list {bundle} --state-root {state}` shows them)" in several.stderr
