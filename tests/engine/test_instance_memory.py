"""An agent instance is one conversation, and a swarm may keep thousands of idle ones: what does not
depend on the conversation is built once per agent and shared by its instances
(engine/_definition.py), so an idle instance holds little more than its own state."""

from __future__ import annotations

import gc
import tracemalloc
import types
from pathlib import Path

import goondan
import kit as k
from goondan.engine._definition import AgentDefinition
from goondan.tools import ToolEntry
from kit import agent_doc, export, extension_doc, scripted, text, tool_doc

EXT = "def register(api, config):\n    pass\n"
TOOL = "handlers = {'add': lambda ctx, args: args['a'] + args['b']}\n"


def _bundle(tmp_path: Path) -> Path:
    return k.simple_bundle(
        tmp_path,
        agents=[agent_doc("a", tools=["calc"], extensions=["ext"])],
        tools=[tool_doc("calc", "./calc.py", [export("add", {"a": {"type": "integer"}, "b": {"type": "integer"}})])],
        extensions=[extension_doc("ext", "./ext.py", {"layers": {}})],
        files={"calc.py": TOOL, "ext.py": EXT},
    )


def test_instances_of_one_agent_share_its_definition_and_tool_entries(tmp_path: Path, state_root: Path) -> None:
    async def main() -> None:
        async with goondan.Runtime(_bundle(tmp_path), state_root=state_root, isolation="inline", persist=False) as rt:
            one = await rt.get_instance("a", "one")
            two = await rt.get_instance("a", "two")
            assert one._definition is two._definition
            assert one.tools.get("calc__add") is two.tools.get("calc__add") is not None
            assert one._agent_info is two._agent_info and one._approval is two._approval
            assert not hasattr(one, "__dict__")  # slots: no per-instance attribute table
            # an instance's own parts stay its own
            assert one.tools is not two.tools and one.pipeline is not two.pipeline
            assert one.conversation is not two.conversation and one.states["ext"] is not two.states["ext"]

    k.run(main())


def test_an_idle_inline_instance_costs_a_few_kib(tmp_path: Path, state_root: Path) -> None:
    # 12.8 KiB per instance before sharing (most of it orjson's 4 KiB buffer kept by the extension
    # state, the instance's attribute table, and every instance's own frozen tool schemas)
    async def main() -> float:
        async with goondan.Runtime(_bundle(tmp_path), state_root=state_root, isolation="inline", persist=False) as rt:
            keep = [await rt.get_instance("a", "warm")]
            assert (await rt.request("hi", instance_key="warm")).text == "ok"
            gc.collect()
            tracemalloc.start()
            try:
                before, _ = tracemalloc.get_traced_memory()
                for i in range(100):
                    keep.append(await rt.get_instance("a", f"k{i}"))
                gc.collect()
                after, _ = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            return (after - before) / 100

    k.MODEL = scripted(text("ok"))
    per_instance = k.run(main())
    assert per_instance < 6 * 1024, f"{per_instance:.0f} bytes per idle instance"


def test_tool_entries_are_built_again_for_a_module_imported_again() -> None:
    # a self-restart forgets the agent's modules: the next instance must get the new handlers
    built: list[int] = []
    definition = AgentDefinition.__new__(AgentDefinition)
    definition._tools = {}
    old, new = types.ModuleType("calc"), types.ModuleType("calc")

    def build() -> list[ToolEntry]:
        built.append(1)
        return [ToolEntry("calc__add", {"name": "calc__add", "description": "", "parameters": {}}, None, source={})]

    first = definition.tool_entries("calc", old, build)
    assert definition.tool_entries("calc", old, build) is first
    assert definition.tool_entries("calc", new, build) is not first
    assert len(built) == 2
