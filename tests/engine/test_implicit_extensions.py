"""Built-in behaviour an agent gets without listing it: requiredTools enforcement, prompt delivery,
and the extension cleanup event on shutdown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import goondan
import kit as k

TOOL = """\
def ping(ctx, args):
    return "pong"

handlers = {"ping": ping}
"""


def _bundle(tmp_path: Path, **agent_kw: Any) -> Path:
    agent = k.agent_doc("a", tools=["probe"], **agent_kw)
    agent["spec"]["requiredTools"] = ["probe__ping"]
    return k.simple_bundle(
        tmp_path,
        agents=[agent],
        tools=[k.tool_doc("probe", "./probe.py", [k.export("ping")])],
        files={"probe.py": TOOL},
    )


async def _ask(root: Path, state_root: Path, text: str) -> Any:
    async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
        return await rt.request(text)


def test_required_tools_are_enforced_without_listing_the_guard(tmp_path: Path) -> None:
    # the model first answers without calling the required tool; the guard must send it back
    k.MODEL = k.scripted(k.text("I am done"), k.call("probe__ping"), k.text("now really done"))
    result = k.run(_ask(_bundle(tmp_path), tmp_path / "state", "go"))
    assert result.text == "now really done"
    assert len(k.REQUESTS) == 3
    nudge = k.REQUESTS[1].last
    assert nudge["role"] == "user" and "probe__ping" in str(nudge["content"])


def test_listed_guard_without_config_takes_the_agent_required_tools(tmp_path: Path) -> None:
    k.MODEL = k.scripted(k.text("skip"), k.call("probe__ping"), k.text("ok"))
    guard = {"ref": {"kind": "Extension", "name": "required-tools-guard", "package": "@goondan/base"}}
    result = k.run(_ask(_bundle(tmp_path, extensions=[guard]), tmp_path / "state", "go"))
    assert result.text == "ok"
    assert len(k.REQUESTS) == 3


CLEANUP_EXT = """\
import kit


def register(api):
    api.events.on("extension.cleanup", lambda payload: kit.TRACE.append(("cleanup", payload)))
"""


def test_extensions_receive_a_cleanup_event_when_the_instance_closes(tmp_path: Path) -> None:
    k.MODEL = k.scripted(k.text("hi"))
    root = k.simple_bundle(
        tmp_path,
        agents=[k.agent_doc("a", extensions=["cleaner"])],
        extensions=[k.extension_doc("cleaner", "./cleaner.py")],
        files={"cleaner.py": CLEANUP_EXT},
    )
    k.run(_ask(root, tmp_path / "state", "hello"))
    assert k.TRACE == [("cleanup", {"agentName": "a", "instanceKey": "default"})]
