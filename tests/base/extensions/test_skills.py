"""skills (seed 003 §14.1, seed 002 §12): discovery of SKILL.md bundles under the bundle root, the
catalog/open-skill system message kept by step middleware, the four tools, and open skills kept in
extension state across turns and restarts. Real bundles, ``goondan.Runtime`` and a ``python`` model."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import policy_kit as k
import pytest

import goondan
from goondan.base.extensions.skills._catalog import parse_head

DEPLOY_MD = """\
---
name: deploy
description: Deploy the app to an environment.
---
# Deploy

Run `./deploy.sh <env>`.
"""

REPORT_MD = """\
# Write a weekly report

Use ./report.sh.
"""

DEPLOY_SH = """\
#!/bin/sh
echo "deploying $1 from $(basename "$PWD")"
echo "warn: $2" >&2
exit 3
"""


def _bundle(tmp_path: Path, config: dict[str, Any] | None = None) -> Path:
    return k.bundle(
        tmp_path / "bundle",
        [k.base_ref("skills", config)],
        files={
            "skills/deploy/SKILL.md": DEPLOY_MD,
            "skills/deploy/deploy.sh": DEPLOY_SH,
            "skills/report/SKILL.md": REPORT_MD,
            "skills/not-a-skill/readme.txt": "no SKILL.md here",
        },
    )


def _call(name: str, args: dict[str, Any], cid: str = "c1") -> dict[str, Any]:
    return {"text": None, "toolCalls": [{"id": cid, "name": name, "args": args}]}


def _skill_messages(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "system" and "[skills.catalog]" in m["content"]]


def _tool_outputs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [part["output"] for m in messages if m["role"] == "tool" for part in m["content"]]


async def _request(root: Path, state: Path, text: str = "go") -> goondan.TurnResult:
    async with goondan.Runtime(root, isolation="inline", state_root=state) as rt:
        return await rt.request(text)


def test_skills_under_the_bundle_root_are_listed_once_in_a_system_message(tmp_path: Path) -> None:
    root = _bundle(tmp_path)
    k.MODEL = k.scripted(_call("skills__list", {}), k.text_reply("done"))
    asyncio.run(_request(root, tmp_path / "state"))
    first, second = k.REQUESTS
    (block,) = _skill_messages(first)
    assert "- deploy: Deploy the app to an environment." in block
    assert "- report: Write a weekly report" in block
    assert "not-a-skill" not in block
    assert _skill_messages(second) == [block]  # unchanged: not appended again
    (listing,) = _tool_outputs(second)
    names = {s["name"]: s for s in listing["value"]["skills"]}
    assert set(names) == {"deploy", "report"}
    assert names["deploy"]["dir"] == str((root / "skills" / "deploy").resolve())
    assert names["deploy"]["open"] is False


def test_an_open_skill_is_in_context_from_the_next_step_until_closed(tmp_path: Path) -> None:
    root = _bundle(tmp_path)
    k.MODEL = k.scripted(
        _call("skills__open", {"name": "deploy"}),
        _call("skills__close", {"name": "deploy"}, "c2"),
        k.text_reply("done"),
    )
    asyncio.run(_request(root, tmp_path / "state"))
    opened = _tool_outputs(k.REQUESTS[1])[0]["value"]
    assert opened["content"] == DEPLOY_MD and opened["truncated"] is False
    (with_open,) = _skill_messages(k.REQUESTS[1])
    assert "[skills.open name=deploy" in with_open and "Run `./deploy.sh <env>`." in with_open
    (after_close,) = _skill_messages(k.REQUESTS[2])  # replaced in place, never duplicated
    assert "[skills.open" not in after_close
    assert _tool_outputs(k.REQUESTS[2])[1]["value"] == {"name": "deploy", "closed": True}


def test_open_skills_survive_a_restart_through_extension_state(tmp_path: Path) -> None:
    root = _bundle(tmp_path)
    state = tmp_path / "state"
    k.MODEL = k.scripted(_call("skills__open", {"name": "report"}), k.text_reply("done"))
    asyncio.run(_request(root, state))
    (state_file,) = state.rglob("extensions/skills.json")
    assert json.loads(state_file.read_text())["openSkills"] == ["report"]
    k.REQUESTS.clear()
    k.MODEL = k.scripted(k.text_reply("again"))
    asyncio.run(_request(root, state))
    (block,) = _skill_messages(k.REQUESTS[0])
    assert "[skills.open name=report" in block and "Use ./report.sh." in block


def test_run_executes_in_the_skill_directory_and_reports_output_and_exit_code(tmp_path: Path) -> None:
    root = _bundle(tmp_path)
    k.MODEL = k.scripted(
        _call("skills__run", {"name": "deploy", "command": "sh ./deploy.sh", "args": ["staging", "it's late"]}),
        k.text_reply("done"),
    )
    asyncio.run(_request(root, tmp_path / "state"))
    (output,) = _tool_outputs(k.REQUESTS[1])
    result = output["value"]
    assert result["stdout"] == "deploying staging from deploy\n"
    assert result["stderr"] == "warn: it's late\n"
    assert result["exitCode"] == 3 and result["timedOut"] is False
    assert result["cwd"] == str((root / "skills" / "deploy").resolve())


def test_run_kills_the_whole_process_group_at_the_timeout(tmp_path: Path) -> None:
    root = _bundle(tmp_path)
    k.MODEL = k.scripted(
        _call("skills__run", {"name": "deploy", "command": "sleep 30 & sleep 30; wait", "timeoutMs": 300}),
        k.text_reply("done"),
    )
    started = time.monotonic()
    asyncio.run(_request(root, tmp_path / "state"))
    assert time.monotonic() - started < 10
    result = _tool_outputs(k.REQUESTS[1])[0]["value"]
    assert result["timedOut"] is True and result["exitCode"] == -1


def test_an_unknown_skill_is_a_tool_error_naming_the_available_ones(tmp_path: Path) -> None:
    root = _bundle(tmp_path)
    k.MODEL = k.scripted(_call("skills__open", {"name": "nope"}), k.text_reply("done"))
    asyncio.run(_request(root, tmp_path / "state"))
    (output,) = _tool_outputs(k.REQUESTS[1])
    assert output["type"] == "error-json"
    assert output["value"]["code"] == "E_SKILL_NOT_FOUND"
    assert output["value"]["message"] == "Skill not found: nope"
    assert "deploy, report" in output["value"]["suggestion"]


def test_skill_dirs_are_configurable_and_absolute_paths_work(tmp_path: Path) -> None:
    shared = tmp_path / "shared-skills" / "lint"
    shared.mkdir(parents=True)
    (shared / "SKILL.md").write_text("# Lint the code\n", encoding="utf-8")
    root = _bundle(tmp_path, {"discovery": {"repoSkillDirs": [str(tmp_path / "shared-skills"), "missing"]}})
    k.MODEL = k.scripted(k.text_reply("done"))
    asyncio.run(_request(root, tmp_path / "state"))
    (block,) = _skill_messages(k.REQUESTS[0])
    assert "- lint: Lint the code" in block and "deploy" not in block


def test_skill_md_heads_are_parsed_from_front_matter_or_the_first_line() -> None:
    assert parse_head(DEPLOY_MD, "dir") == ("deploy", "Deploy the app to an environment.")
    assert parse_head(REPORT_MD, "report") == ("report", "Write a weekly report")
    assert parse_head("---\nname: bad name!\n---\n", "fallback") == ("fallback", "Skill: fallback")


class _Ctx:
    """The two step-context members sync_system_message uses, over a real ConversationState."""

    def __init__(self, conversation: Any) -> None:
        self.conversation_state = conversation

    def emit_message_event(self, event: Any) -> None:
        self.conversation_state.emit(event)


def test_the_context_message_is_kept_once_replaced_on_change_and_restored_after_removal() -> None:
    from goondan.base.extensions.skills._synced_message import sync_system_message
    from goondan.conversation import ConversationState
    from goondan.messages import user_message

    conversation = ConversationState([user_message("hi", id="u1")])
    ctx = _Ctx(conversation)

    def sync(text: str | None, remembered: Any) -> Any:
        return sync_system_message(ctx, marker="__m", extension="skills", text=text, remembered_id=remembered)

    first = sync("catalog v1", None)
    assert [e["type"] for e in conversation.events] == ["append"]
    assert sync("catalog v1", first) == first and len(conversation.events) == 1  # unchanged: no event
    assert sync("catalog v2", first) == first  # changed: replaced under the same id
    assert conversation.events[-1]["type"] == "replace"
    assert [m.text for m in conversation.next_messages] == ["hi", "catalog v2"]
    conversation.emit({"type": "remove", "targetId": first})  # e.g. compaction dropped it
    restored = sync("catalog v2", first)
    assert restored != first and [m.text for m in conversation.next_messages] == ["hi", "catalog v2"]
    other = sync_system_message(ctx, marker="__m", extension="mcp", text="mcp block", remembered_id=None)
    assert other != restored  # another extension's block is its own message
    sync(None, restored)  # nothing to show: removed
    assert [m.text for m in conversation.next_messages] == ["hi", "mcp block"]


def test_a_broken_skill_md_is_named_in_one_warning_and_its_skill_keeps_a_real_description(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = _bundle(tmp_path)
    (root / "skills" / "broken").mkdir()
    (root / "skills" / "broken" / "SKILL.md").write_text(
        "---\nname: broken\ndescription: [unclosed\n---\n# Fix things\n"
    )
    (root / "skills" / "folder" / "SKILL.md").mkdir(parents=True)  # a directory where the file should be
    (root / "skills" / "latin").mkdir()
    (root / "skills" / "latin" / "SKILL.md").write_bytes(b"# Caf\xe9 tasks\n")
    k.MODEL = k.scripted(_call("skills__list", {}), k.text_reply("done"))

    async def two_turns() -> None:
        async with goondan.Runtime(root, isolation="inline", state_root=tmp_path / "state") as rt:
            await rt.request("go")
            await rt.request("again")  # a rescan per turn; each problem is still logged once

    with caplog.at_level(logging.WARNING):
        asyncio.run(two_turns())
    (block,) = _skill_messages(k.REQUESTS[0])
    assert "- broken: Fix things" in block  # was "- broken: ---"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    broken = [w for w in warnings if "/broken/" in w]
    assert broken == [
        f"{root / 'skills' / 'broken' / 'SKILL.md'}: the front matter is not valid YAML at line 3: "
        "expected ',' or ']', but got '<stream end>'"
    ]
    assert [w for w in warnings if "/folder/" in w] == [
        f"{root / 'skills' / 'folder' / 'SKILL.md'}: not read (Is a directory); the skill is not listed"
    ]
    assert len([w for w in warnings if "/latin/" in w and "not valid UTF-8" in w]) == 1
    assert "deploy" not in " ".join(warnings)
