"""A decision that comes second (the same id approved again, two terminals deciding at once) is
told who decided first and when (``E_APPROVAL_DECIDED``), never that the id does not exist or that
the conversation is locked, and the call runs at most once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from cli_testkit import env_for, gdn

from kit.approvals import approval_bundle, ran

# the guarded export, slow: the turn an approval resumes holds the conversation for a while
SLOW_TOOL = """\
import time


def run(ctx, args):
    with open(ctx.config["log"], "a") as f:
        f.write("start " + args["cmd"] + "\\n")
    time.sleep(2)
    with open(ctx.config["log"], "a") as f:
        f.write(args["cmd"] + "\\n")
    return "ran " + args["cmd"]


def echo(ctx, args):
    return "echo " + args["cmd"]


handlers = {"run": run, "echo": echo}
"""


def _paused(tmp_path: Path, *, slow: bool = False) -> tuple[Path, Path, Path, str]:
    log = tmp_path / "ran.log"
    bundle = approval_bundle(tmp_path / "b", log)
    if slow:
        (bundle / "shell.py").write_text(SLOW_TOOL)
    state = tmp_path / "state"
    proc = gdn(tmp_path, "run", str(bundle), "--state-root", str(state), "--instance-key", "k", "--input", "one")
    assert proc.returncode == 0, proc.stderr
    listed = gdn(tmp_path, "approvals", "list", str(bundle), "--state-root", str(state), "--json")
    (item,) = json.loads(listed.stdout)
    return bundle, state, log, str(item["approvalId"])


def test_deciding_an_approval_again_names_the_first_decision(tmp_path: Path) -> None:
    bundle, state, log, approval_id = _paused(tmp_path)
    first = gdn(tmp_path, "approvals", "approve", approval_id, str(bundle), "--state-root", str(state))
    assert first.returncode == 0, first.stderr
    again = gdn(tmp_path, "approvals", "deny", approval_id, str(bundle), "--state-root", str(state), "--note", "no")
    assert again.returncode == 1
    assert f"[E_APPROVAL_DECIDED] approval '{approval_id}' (shell__run) was already approved by cli at" in again.stderr
    assert "suggestion:" in again.stderr and "Traceback" not in again.stderr
    assert ran(log) == ["rm x"]  # denied late: nothing undone, nothing run twice
    unknown = gdn(tmp_path, "approvals", "approve", "appr_0000", str(bundle), "--state-root", str(state))
    assert unknown.returncode == 1 and "[E_APPROVAL_NOT_FOUND]" in unknown.stderr


def test_a_second_terminal_deciding_while_the_first_resumes_waits_and_hears_who_won(tmp_path: Path) -> None:
    bundle, state, log, approval_id = _paused(tmp_path, slow=True)
    first = subprocess.Popen(
        [sys.executable, "-m", "goondan", "approvals", "approve", approval_id, str(bundle), "--state-root", str(state)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(tmp_path),
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 30
        while ran(log) != ["start rm x"]:  # the first holds the conversation while its call runs
            assert time.monotonic() < deadline and first.poll() is None, first.communicate()
            time.sleep(0.05)
        second = gdn(tmp_path, "approvals", "deny", approval_id, str(bundle), "--state-root", str(state))
        out, err = first.communicate(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, err
    assert "ran rm x" in out
    assert second.returncode == 1
    assert "[E_APPROVAL_DECIDED]" in second.stderr and "already approved by cli" in second.stderr, second.stderr
    assert "E_INSTANCE_LOCKED" not in second.stderr
    assert ran(log) == ["start rm x", "rm x"]


def test_edited_args_that_do_not_fit_the_tool_are_refused_and_the_approval_still_waits(tmp_path: Path) -> None:
    bundle, state, log, approval_id = _paused(tmp_path)
    typo = gdn(
        tmp_path, "approvals", "approve", approval_id, str(bundle), "--state-root", str(state),
        "--args", '{"cmd": 3}',
    )  # fmt: skip
    assert typo.returncode == 2, typo.stdout + typo.stderr
    assert "[E_APPROVAL_INVALID] Invalid arguments for tool 'shell__run': args.cmd: expected string" in typo.stderr
    assert "nothing was decided" in typo.stderr and "required: none; allowed: cmd" in typo.stderr
    assert ran(log) == []
    listed = gdn(tmp_path, "approvals", "list", str(bundle), "--state-root", str(state), "--json")
    assert [item["approvalId"] for item in json.loads(listed.stdout)] == [approval_id]
    fixed = gdn(
        tmp_path, "approvals", "approve", approval_id, str(bundle), "--state-root", str(state),
        "--args", '{"cmd": "ls"}',
    )  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr
    assert ran(log) == ["ls"]


def test_listing_says_which_approvals_it_denies_as_expired(tmp_path: Path) -> None:
    log = tmp_path / "ran.log"
    bundle = approval_bundle(tmp_path / "b", log, timeout=0.5)
    state = tmp_path / "state"
    paused = gdn(tmp_path, "run", str(bundle), "--state-root", str(state), "--instance-key", "k", "--input", "one")
    approval_id = paused.stderr.split("waiting for approval: ", 1)[1].split()[0]
    time.sleep(0.7)
    listed = gdn(tmp_path, "approvals", "list", str(bundle), "--state-root", str(state))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == "no pending approvals\n"
    assert f'expired, denied: {approval_id}  a:k  shell__run {{"cmd": "rm x"}}' in listed.stderr  # was silent
    late = gdn(tmp_path, "approvals", "approve", approval_id, str(bundle), "--state-root", str(state))
    assert late.returncode == 1 and "was already denied because nobody decided in time" in late.stderr
    assert ran(log) == []
