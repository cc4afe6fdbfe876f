"""The public extension API is typed: an extension author's type checker (and so their editor) sees
the precise types of ``ctx``, ``api`` and the tool context, and flags misuse.

mypy runs once, in-process, over a handful of snippet files in a temp dir (its cache there too), the
way a user's project would check code that imports the installed ``goondan`` package."""

from __future__ import annotations

import re
import textwrap

import pytest

mypy_api = pytest.importorskip("mypy.api")

SNIPPETS = {
    "good_extension": """
        from typing import Any

        from goondan.types import (
            ExtensionApi,
            StepContext,
            StepResult,
            ToolCallContext,
            ToolCallResult,
            ToolContext,
            TurnCompletedEvent,
            TurnContext,
            TurnResult,
        )


        async def turn(ctx: TurnContext) -> TurnResult:
            ctx.emit_message_event({"type": "remove", "targetId": "msg-1"})
            if ctx.runtime.swarm.entry_agent != ctx.agent_name:
                reply = await ctx.agents.request(ctx.runtime.swarm.entry_agent, "hi", timeout_ms=1000)
                ctx.metadata["reply"] = reply.response
            result = await ctx.next()
            return result


        async def step(ctx: StepContext) -> StepResult:
            ctx.tool_catalog = [item for item in ctx.tool_catalog if item["name"] != "shell__wipe"]
            return await ctx.next()


        async def tool_call(ctx: ToolCallContext) -> ToolCallResult:
            ctx.args = {**ctx.args, "checked": True}
            return await ctx.next()


        async def stats(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
            return {"workdir": str(ctx.workdir), "instance": ctx.instance_key, "agent": ctx.runtime.request}


        def on_done(event: TurnCompletedEvent) -> None:
            print(event["duration"], event["turnId"])


        def register(api: ExtensionApi, config: dict[str, Any]) -> None:
            api.pipeline.register("turn", turn)
            api.pipeline.register("step", step, priority=10)
            api.pipeline.register("toolCall", tool_call)
            api.tools.register({"name": "x__stats", "description": "d", "parameters": {"type": "object"}}, stats)
            api.events.on("turn.completed", on_done)
            api.logger.info("registered")
    """,
    "bad_catalog": """
        from goondan.types import StepContext, StepResult


        async def step(ctx: StepContext) -> StepResult:
            ctx.tool_catalog = 3
            return await ctx.next()
    """,
    "misspelled": """
        from goondan.types import StepContext, StepResult


        async def step(ctx: StepContext) -> StepResult:
            result = await ctx.next()
            print(ctx.tool_catalgo)
            return result
    """,
    "wrong_chain": """
        from goondan.types import ExtensionApi, StepContext, StepResult


        async def step(ctx: StepContext) -> StepResult:
            return await ctx.next()


        def register(api: ExtensionApi) -> None:
            api.pipeline.register("turn", step)
    """,
    "removed_api": """
        from goondan.types import ExtensionApi


        def register(api: ExtensionApi) -> None:
            api.pipelines.mutate("step.pre", print)
    """,
    "bad_import": """
        from goondan import StepContxt, TurnContext

        print(StepContxt, TurnContext)
    """,
    "reveal": """
        from goondan.types import StepContext, ToolContext


        async def step(ctx: StepContext) -> None:
            reveal_type(ctx.tool_catalog)
            reveal_type(ctx.next())


        def tool(ctx: ToolContext) -> None:
            reveal_type(ctx.workdir)
    """,
}


@pytest.fixture(scope="module")
def mypy_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    root = tmp_path_factory.mktemp("typed_snippets")
    config = root / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\n")
    files = []
    for name, source in SNIPPETS.items():
        path = root / f"{name}.py"
        path.write_text(textwrap.dedent(source).lstrip())
        files.append(str(path))
    stdout, stderr, _status = mypy_api.run(
        ["--config-file", str(config), "--cache-dir", str(root / "cache"), "--no-error-summary", *files]
    )
    report: dict[str, list[str]] = {name: [] for name in SNIPPETS}
    for line in (stdout + stderr).splitlines():
        match = re.match(r"(?:.*[/\\])?(\w+)\.py:\d+: (.*)", line)
        if match and match.group(1) in report:
            report[match.group(1)].append(match.group(2))
        else:
            report.setdefault("_other", []).append(line)
    return report


def errors(report: dict[str, list[str]], name: str) -> list[str]:
    return [line for line in report[name] if line.startswith("error:")]


def test_package_is_typed_and_a_correct_extension_type_checks(mypy_report: dict[str, list[str]]) -> None:
    assert not mypy_report.get("_other"), mypy_report.get("_other")
    assert errors(mypy_report, "good_extension") == []


def test_assigning_a_non_list_tool_catalog_is_flagged(mypy_report: dict[str, list[str]]) -> None:
    found = errors(mypy_report, "bad_catalog")
    assert len(found) == 1 and "Incompatible types in assignment" in found[0], found


def test_misspelled_context_attribute_is_flagged(mypy_report: dict[str, list[str]]) -> None:
    found = errors(mypy_report, "misspelled")
    assert len(found) == 1 and '"StepContext" has no attribute "tool_catalgo"' in found[0], found


def test_step_middleware_registered_as_turn_middleware_is_flagged(mypy_report: dict[str, list[str]]) -> None:
    found = errors(mypy_report, "wrong_chain")
    assert found and "register" in found[0], found


def test_removed_extension_api_part_is_flagged(mypy_report: dict[str, list[str]]) -> None:
    found = errors(mypy_report, "removed_api")
    assert len(found) == 1 and '"ExtensionApi" has no attribute "pipelines"' in found[0], found


def test_misspelled_name_imported_from_goondan_is_flagged(mypy_report: dict[str, list[str]]) -> None:
    found = errors(mypy_report, "bad_import")
    assert len(found) == 1 and "StepContxt" in found[0], found


def test_context_attributes_reveal_their_precise_types(mypy_report: dict[str, list[str]]) -> None:
    notes = [line for line in mypy_report["reveal"] if "Revealed type" in line]
    assert len(notes) == 3, mypy_report["reveal"]
    catalog, next_result, workdir = notes
    assert re.search(r"list\[TypedDict\('?goondan\.[\w.]+\.ToolCatalogItem'?, \{'name': (builtins\.)?str", catalog), (
        catalog
    )
    assert re.search(r"Coroutine\[.*StepResult\]", next_result), next_result
    assert "Path" in workdir, workdir
