"""``gdn approvals list|approve ID|deny ID`` against a state root with no runtime running: the
turn paused by one ``gdn run --input`` is listed, decided and resumed by later commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_testkit import gdn
from hypothesis import given, settings
from hypothesis import strategies as st

from goondan.cli._approvals import _parse_args
from goondan.cli._output import CliError
from kit.approvals import approval_bundle, ran


def _pause(tmp_path: Path, text: str = "one") -> tuple[Path, Path, Path]:
    log = tmp_path / "ran.log"
    bundle = approval_bundle(tmp_path / "b", log)
    state = tmp_path / "state"
    proc = gdn(tmp_path, "run", str(bundle), "--state-root", str(state), "--instance-key", "k", "--input", text)
    assert proc.returncode == 0, proc.stderr
    return bundle, state, log


def _pending(tmp_path: Path, bundle: Path, state: Path) -> list[dict[str, object]]:
    proc = gdn(tmp_path, "approvals", "list", str(bundle), "--state-root", str(state), "--json")
    assert proc.returncode == 0, proc.stderr
    items = json.loads(proc.stdout)
    assert isinstance(items, list)
    return items


def test_gdn_approvals_list_and_approve_resume_a_turn_with_no_runtime_running(tmp_path: Path) -> None:
    bundle, state, log = _pause(tmp_path)
    (item,) = _pending(tmp_path, bundle, state)
    assert (item["toolName"], item["args"], item["instanceKey"]) == ("shell__run", {"cmd": "rm x"}, "k")
    text = gdn(tmp_path, "approvals", "list", str(bundle), "--state-root", str(state))
    assert f"{item['approvalId']}  a:k  shell__run" in text.stdout
    proc = gdn(tmp_path, "approvals", "approve", str(item["approvalId"]), str(bundle), "--state-root", str(state))
    assert proc.returncode == 0, proc.stderr
    assert "ran rm x" in proc.stdout
    assert ran(log) == ["rm x"]
    assert _pending(tmp_path, bundle, state) == []
    empty = gdn(tmp_path, "approvals", "list", str(bundle), "--state-root", str(state))
    assert "no pending approvals" in empty.stdout


def test_gdn_approvals_deny_with_a_note_and_approve_with_edited_args(tmp_path: Path) -> None:
    bundle, state, log = _pause(tmp_path, "two")
    first, second = _pending(tmp_path, bundle, state)
    deny = gdn(
        tmp_path, "approvals", "deny", str(first["approvalId"]), str(bundle), "--state-root", str(state),
        "--note", "not a",
    )  # fmt: skip
    assert deny.returncode == 0, deny.stderr
    assert f"waiting for approval: {second['approvalId']}" in deny.stdout
    approve = gdn(
        tmp_path, "approvals", "approve", str(second["approvalId"]), str(bundle), "--state-root", str(state),
        "--args", '{"cmd": "edited"}', "--json",
    )  # fmt: skip
    assert approve.returncode == 0, approve.stderr
    result = json.loads(approve.stdout)
    assert result["finishReason"] == "text_response"
    assert "E_TOOL_DENIED" in result["text"] and "not a" in result["text"] and "ran edited" in result["text"]
    assert ran(log) == ["echo free", "edited"]


def test_gdn_approvals_errors_are_clear(tmp_path: Path) -> None:
    bundle, state, _ = _pause(tmp_path)
    (item,) = _pending(tmp_path, bundle, state)
    missing = gdn(tmp_path, "approvals", "approve", "appr-nope", str(bundle), "--state-root", str(state))
    assert missing.returncode != 0
    assert "[E_APPROVAL_NOT_FOUND]" in missing.stderr and "Traceback" not in missing.stderr
    bad = gdn(
        tmp_path, "approvals", "approve", str(item["approvalId"]), str(bundle), "--state-root", str(state),
        "--args", "[1, 2]",
    )  # fmt: skip
    assert bad.returncode == 2
    assert "[E_INVALID_ARGUMENT]" in bad.stderr and "JSON object" in bad.stderr


def test_gdn_logs_shows_approval_requested_and_decided(tmp_path: Path) -> None:
    bundle, state, _ = _pause(tmp_path)
    (item,) = _pending(tmp_path, bundle, state)
    proc = gdn(tmp_path, "approvals", "deny", str(item["approvalId"]), str(bundle), "--state-root", str(state))
    assert proc.returncode == 0, proc.stderr
    logs = gdn(tmp_path, "logs", "--state-root", str(state), "-l", "0")
    assert logs.returncode == 0, logs.stderr
    requested = next(line for line in logs.stdout.splitlines() if "approval.requested" in line)
    decided = next(line for line in logs.stdout.splitlines() if "approval.decided" in line)
    assert f"approvalId={item['approvalId']}" in requested and "toolName=shell__run" in requested
    assert "approved=False" in decided and "decidedBy=cli" in decided


def test_gdn_run_input_names_the_calls_it_waits_for(tmp_path: Path) -> None:
    bundle = approval_bundle(tmp_path / "b", tmp_path / "ran.log")
    proc = gdn(tmp_path, "run", str(bundle), "--state-root", str(tmp_path / "state"), "--input", "one")
    assert proc.returncode == 0, proc.stderr
    assert "I will run it." in proc.stdout
    assert "waiting for approval: appr" in proc.stderr and "decide with `gdn approvals approve appr_" in proc.stderr


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(value=JSON_VALUES)
def test_args_given_on_the_command_line_must_be_a_json_object(value: object) -> None:
    text = json.dumps(value)
    if isinstance(value, dict):
        assert _parse_args(text) == value
    else:
        with pytest.raises(CliError) as info:
            _parse_args(text)
        assert info.value.code == "E_INVALID_ARGUMENT"


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=30))
def test_args_that_are_not_json_are_a_usage_error_never_a_traceback(text: str) -> None:
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    try:
        _parse_args(text)
    except CliError as exc:
        assert exc.code == "E_INVALID_ARGUMENT"
    else:
        assert isinstance(parsed, dict)


def test_gdn_approvals_asks_the_running_gdn_run_that_holds_the_instance(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    from cli_testkit import env_for

    log = tmp_path / "ran.log"
    bundle = approval_bundle(tmp_path / "b", log)
    state = tmp_path / "state"
    session = subprocess.Popen(
        [sys.executable, "-m", "goondan", "run", str(bundle), "--state-root", str(state), "--instance-key", "k"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env_for(tmp_path),
        cwd=tmp_path,
    )
    try:
        assert session.stdin is not None
        session.stdin.write("one\n")
        session.stdin.flush()
        items: list[dict[str, object]] = []
        deadline = time.monotonic() + 30
        while not items and time.monotonic() < deadline:  # until the session's turn has paused
            items = _pending(tmp_path, bundle, state)
            time.sleep(0.2)
        (item,) = items
        # the session holds the instance: only the running gdn run can resume the turn
        proc = gdn(tmp_path, "approvals", "approve", str(item["approvalId"]), str(bundle), "--state-root", str(state))
        assert proc.returncode == 0, proc.stderr
        assert "ran rm x" in proc.stdout
        assert ran(log) == ["rm x"]
        session.stdin.close()
        assert session.wait(30) == 0
    finally:
        if session.poll() is None:
            session.kill()
            session.wait()
