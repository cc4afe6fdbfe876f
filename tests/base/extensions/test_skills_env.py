"""skills__run gives a skill's commands the same minimal environment as bash (no runtime secrets)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import policy_kit as k
import pytest

import goondan

SKILL_MD = "# Show env\n\nRun `env`.\n"


def _env_seen(tmp_path: Path, config: dict[str, Any] | None = None) -> dict[str, str]:
    root = k.bundle(tmp_path / "bundle", [k.base_ref("skills", config)], files={"skills/show/SKILL.md": SKILL_MD})
    k.MODEL = k.scripted(
        {"text": None, "toolCalls": [{"id": "c1", "name": "skills__run", "args": {"name": "show", "command": "env"}}]},
        k.text_reply("done"),
    )

    async def main() -> None:
        async with goondan.Runtime(root, isolation="inline", state_root=tmp_path / "state") as rt:
            await rt.request("go")

    asyncio.run(main())
    (output,) = [part["output"] for m in k.REQUESTS[1] if m["role"] == "tool" for part in m["content"]]
    stdout = output["value"]["stdout"]
    return {a: b for a, _, b in (line.partition("=") for line in stdout.splitlines() if "=" in line)}


def test_runtime_api_keys_are_not_visible_to_skills_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    env = _env_seen(tmp_path)
    assert "OPENAI_API_KEY" not in env and "sk-secret" not in str(env)
    assert env["GOONDAN_SKILL_NAME"] == "show" and env["PATH"]


def test_skills_run_env_allow_list_comes_from_the_extension_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("DEPLOY_TOKEN", "dt-1")
    env = _env_seen(tmp_path, {"run": {"env": {"allow": ["DEPLOY_TOKEN"], "set": {"STAGE": "prod"}}}})
    assert env["DEPLOY_TOKEN"] == "dt-1" and env["STAGE"] == "prod" and "OPENAI_API_KEY" not in env
