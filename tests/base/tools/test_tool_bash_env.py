"""bash runs commands with a minimal environment: the runtime's secrets never reach a command's output.

Real ``/bin/sh`` processes; the runtime environment is the test process's own (monkeypatched).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import tools_testkit
from tools_testkit import FakeCtx, run

import goondan
import kit
from goondan.base.tools import bash
from goondan.errors import GoondanError


def _env_of(ctx: FakeCtx, **extra: Any) -> dict[str, str]:
    out = run(bash.exec_command, ctx, {"command": "env", **extra})
    assert out["exitCode"] == 0, out
    pairs = (line.partition("=") for line in out["stdout"].splitlines() if "=" in line)
    return {k: v for k, _, v in pairs}


def test_runtime_api_keys_are_not_visible_to_bash_exec(ctx: FakeCtx, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    monkeypatch.setenv("LANG", "C.UTF-8")
    env = _env_of(ctx)
    assert "sk-secret" not in str(env) and "OPENAI_API_KEY" not in env and "ANTHROPIC_API_KEY" not in env
    # what a command needs to run at all is there
    assert env["PATH"] and env["LANG"] == "C.UTF-8" and env["TERM"] == "dumb"
    assert env["HOME"] == str(ctx.workdir)  # not the user's home: its login profile is not sourced


def test_bash_script_gets_the_same_minimal_environment(ctx: FakeCtx, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    (Path(ctx.workdir) / "s.sh").write_text('echo "key=${OPENAI_API_KEY:-none}"\n', encoding="utf-8")
    out = run(bash.run_script, ctx, {"path": "s.sh"})
    assert out["stdout"] == "key=none\n"


def test_allow_listed_and_set_variables_reach_the_command(ctx: FakeCtx, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-allowed")
    monkeypatch.setenv("PIP_INDEX_URL", "http://mirror")
    monkeypatch.setenv("PIP_CACHE_DIR", "/tmp/pipcache")
    ctx.config = {"env": {"allow": ["GITHUB_TOKEN", "PIP_*", "NOT_SET_ANYWHERE"], "set": {"MODE": "ci", "N": 3}}}
    env = _env_of(ctx, env={"PER_CALL": "yes"})
    assert env["GITHUB_TOKEN"] == "ghp-allowed"
    assert env["PIP_INDEX_URL"] == "http://mirror" and env["PIP_CACHE_DIR"] == "/tmp/pipcache"
    assert env["MODE"] == "ci" and env["N"] == "3" and env["PER_CALL"] == "yes"
    assert "OPENAI_API_KEY" not in env and "NOT_SET_ANYWHERE" not in env


def test_allowing_home_passes_the_runtime_home(ctx: FakeCtx, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/someone")
    ctx.config = {"env": {"allow": ["HOME"]}}
    assert _env_of(ctx)["HOME"] == "/home/someone"


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"env": {"allow": "GITHUB_TOKEN"}}, "env.allow"),
        ({"env": {"allow": [1]}}, "env.allow"),
        ({"env": {"allow": ["BAD NAME"]}}, "env.allow"),
        ({"env": {"set": {"A": [1]}}}, "env.set.A"),
        ({"env": {"set": {"A=B": "x"}}}, "env.set"),
        ({"env": {"alow": ["X"]}}, "alow"),
        ({"envv": {}}, "envv"),
        ({"env": "all"}, "env"),
    ],
)
def test_invalid_env_config_is_a_clear_config_error(ctx: FakeCtx, config: dict[str, Any], fragment: str) -> None:
    ctx.config = config
    with pytest.raises(GoondanError) as info:
        run(bash.exec_command, ctx, {"command": "true"})
    assert info.value.code == "E_TOOL_CONFIG_INVALID"
    assert fragment in info.value.message and info.value.suggestion


def _bundle_run(tmp_path: Path, tool_config: dict[str, Any]) -> dict[str, Any]:
    seen: list[dict[str, Any]] = []

    def model(request: Any) -> Any:
        results = kit.tool_results(request.messages)
        if not results:
            return {"toolCalls": [{"id": "c0", "name": "bash__exec", "args": {"command": "env"}}]}
        seen.append(results[0]["output"])
        return {"text": "done"}

    kit.MODEL = model
    root = tools_testkit.tools_bundle(tmp_path / "b", {"a": ["bash"]}, tool_config=tool_config)

    async def main() -> None:
        async with goondan.Runtime(root, state_root=tmp_path / "state", isolation="inline") as rt:
            await rt.request("go")

    asyncio.run(main())
    return seen[0]


def test_agent_tools_config_reaches_bash_through_a_real_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-allowed")
    output = _bundle_run(tmp_path, {"bash": {"env": {"allow": ["GITHUB_TOKEN"]}}})
    stdout = output["value"]["stdout"]
    assert "GITHUB_TOKEN=ghp-allowed" in stdout and "sk-secret" not in stdout


def test_a_bad_bash_config_in_a_bundle_is_a_tool_error_with_its_code(tmp_path: Path) -> None:
    output = _bundle_run(tmp_path, {"bash": {"env": {"allow": "GITHUB_TOKEN"}}})
    assert "E_TOOL_CONFIG_INVALID" in str(output)
