"""bash: exec and script run real processes; timeouts kill the whole process group (digest §4.4)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from tools_testkit import FakeCtx, run

from goondan.base.tools import bash
from goondan.base.tools._common import ToolExecutionError, ToolInputError


def test_exec_returns_stdout_and_exit_code_zero(ctx: FakeCtx) -> None:
    out = run(bash.exec_command, ctx, {"command": "printf hello"})
    assert out["stdout"] == "hello"
    assert out["stderr"] == ""
    assert out["exitCode"] == 0
    assert out["signal"] is None
    assert out["timedOut"] is False
    assert out["command"] == "printf hello"
    assert isinstance(out["durationMs"], int)


def test_exec_runs_in_the_instance_workdir_by_default(ctx: FakeCtx, workdir: Path) -> None:
    out = run(bash.exec_command, ctx, {"command": "pwd; echo x > made.txt"})
    assert out["stdout"].strip() == os.path.realpath(workdir)
    assert out["cwd"] == str(workdir.resolve())
    assert (workdir / "made.txt").read_text() == "x\n"


def test_exec_cwd_is_relative_to_the_workdir(ctx: FakeCtx, workdir: Path) -> None:
    (workdir / "sub").mkdir()
    out = run(bash.exec_command, ctx, {"command": "pwd", "cwd": "sub"})
    assert out["stdout"].strip() == os.path.realpath(workdir / "sub")


def test_exec_missing_cwd_is_a_precise_error(ctx: FakeCtx) -> None:
    with pytest.raises(ToolExecutionError) as info:
        run(bash.exec_command, ctx, {"command": "pwd", "cwd": "nope"})
    assert info.value.code == "E_BASH_CWD_NOT_FOUND"
    assert "'nope'" in info.value.message


def test_exec_nonzero_exit_and_stderr_are_a_normal_result(ctx: FakeCtx) -> None:
    out = run(bash.exec_command, ctx, {"command": "echo oops >&2; exit 3"})
    assert out["exitCode"] == 3
    assert out["stderr"] == "oops\n"
    assert out["timedOut"] is False


def test_exec_env_values_are_layered_over_the_process_environment(ctx: FakeCtx) -> None:
    out = run(
        bash.exec_command,
        ctx,
        {"command": 'printf "%s|%s|%s|%s" "$A" "$N" "$B" "${PATH:+has-path}"', "env": {"A": "x", "N": 5, "B": True}},
    )
    assert out["stdout"] == "x|5|true|has-path"


def test_exec_rejects_empty_command_and_unknown_arguments(ctx: FakeCtx) -> None:
    with pytest.raises(ToolInputError, match="'command' must be a non-empty string"):
        run(bash.exec_command, ctx, {"command": ""})
    with pytest.raises(ToolInputError, match="unexpected argument\\(s\\) 'shell'"):
        run(bash.exec_command, ctx, {"command": "true", "shell": "/bin/zsh"})
    with pytest.raises(ToolInputError, match="'timeoutMs' must be greater than or equal to 1"):
        run(bash.exec_command, ctx, {"command": "true", "timeoutMs": 0})
    with pytest.raises(ToolInputError, match=r"'env\.X' must be a string, number or boolean"):
        run(bash.exec_command, ctx, {"command": "true", "env": {"X": [1]}})


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); treat it as dead
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_exec_timeout_kills_the_process_group_including_grandchildren(ctx: FakeCtx, workdir: Path) -> None:
    # the shell starts a background sleep (a grandchild of the tool), records its pid, then blocks
    command = "sleep 30 & echo $! > grandchild.pid; echo started; wait"
    started = time.monotonic()
    out = run(bash.exec_command, ctx, {"command": command, "timeoutMs": 300})
    elapsed = time.monotonic() - started
    assert out["timedOut"] is True
    assert out["exitCode"] == -1
    assert out["signal"] in ("SIGTERM", "SIGKILL")
    assert out["stdout"] == "started\n"
    assert elapsed < 5
    pid = int((workdir / "grandchild.pid").read_text())
    deadline = time.monotonic() + 2
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(pid), "the grandchild sleep survived the timeout"


def test_exec_timeout_escalates_to_sigkill_when_sigterm_is_ignored(ctx: FakeCtx) -> None:
    started = time.monotonic()
    out = run(bash.exec_command, ctx, {"command": "trap '' TERM; echo ready; sleep 30", "timeoutMs": 300})
    assert out["timedOut"] is True
    assert out["exitCode"] == -1
    assert time.monotonic() - started < 5


def test_exec_returns_promptly_when_a_background_child_keeps_the_pipes_open(ctx: FakeCtx, workdir: Path) -> None:
    started = time.monotonic()
    out = run(bash.exec_command, ctx, {"command": "sleep 5 & echo $! > bg.pid; echo main-done", "timeoutMs": 10000})
    assert time.monotonic() - started < 3
    assert out["exitCode"] == 0
    assert out["timedOut"] is False
    assert out["stdout"] == "main-done\n"
    os.kill(int((workdir / "bg.pid").read_text()), 9)


def test_exec_keeps_head_and_tail_of_huge_output(ctx: FakeCtx) -> None:
    command = "echo FIRST; head -c 300000 /dev/zero | tr '\\0' x; echo; echo LAST"
    out = run(bash.exec_command, ctx, {"command": command, "maxOutputBytes": 1000})
    assert out["stdout"].startswith("FIRST\n")
    assert out["stdout"].rstrip().endswith("LAST")
    assert "bytes omitted" in out["stdout"]
    assert len(out["stdout"]) < 1200
    assert out["outputTruncated"] is True
    assert out["exitCode"] == 0


def test_exec_does_not_block_the_event_loop(ctx: FakeCtx) -> None:
    async def main() -> tuple[int, dict[str, object]]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.ensure_future(ticker())
        out = await bash.exec_command(ctx, {"command": "sleep 0.3"})
        task.cancel()
        return ticks, out

    ticks, out = asyncio.run(main())
    assert out["exitCode"] == 0
    assert ticks >= 10


def test_exec_cancellation_kills_the_command(ctx: FakeCtx, workdir: Path) -> None:
    async def main() -> None:
        task = asyncio.ensure_future(bash.exec_command(ctx, {"command": "echo $$ > sh.pid; sleep 30"}))
        for _ in range(200):
            await asyncio.sleep(0.01)
            if (workdir / "sh.pid").exists() and (workdir / "sh.pid").read_text().strip():
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    pid = int((workdir / "sh.pid").read_text())
    deadline = time.monotonic() + 2
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(pid)


def test_script_runs_a_workdir_file_with_args(ctx: FakeCtx, workdir: Path) -> None:
    (workdir / "greet.sh").write_text('echo "hi $1 and $2"; echo "n=$#"\n')
    out = run(bash.run_script, ctx, {"path": "greet.sh", "args": ["ann", "bob"]})
    assert out["stdout"] == "hi ann and bob\nn=2\n"
    assert out["exitCode"] == 0
    assert out["shell"] == "/bin/bash"
    assert out["args"] == ["ann", "bob"]
    assert out["path"] == "greet.sh"


def test_script_with_custom_shell_and_timeout(ctx: FakeCtx, workdir: Path) -> None:
    (workdir / "slow.sh").write_text("sleep 30\n")
    out = run(bash.run_script, ctx, {"path": "slow.sh", "shell": "/bin/sh", "timeoutMs": 200})
    assert out["timedOut"] is True
    assert out["exitCode"] == -1


def test_script_missing_file_and_missing_shell_are_precise_errors(ctx: FakeCtx, workdir: Path) -> None:
    with pytest.raises(ToolExecutionError) as info:
        run(bash.run_script, ctx, {"path": "absent.sh"})
    assert info.value.code == "E_BASH_SCRIPT_NOT_FOUND"
    (workdir / "a.sh").write_text("true\n")
    with pytest.raises(ToolExecutionError) as info:
        run(bash.run_script, ctx, {"path": "a.sh", "shell": "/no/such/shell"})
    assert info.value.code == "E_BASH_SHELL_NOT_FOUND"
    with pytest.raises(ToolInputError, match="'args' must be an array of strings"):
        run(bash.run_script, ctx, {"path": "a.sh", "args": "x y"})
