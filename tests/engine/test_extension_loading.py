"""Extension loading, the extension API surface and extension state (CONTRACT §5, digest §5.1–5.2)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import goondan
import kit as k
from goondan import ExtensionError, GoondanError
from kit import agent_doc, call, export, extension_doc, scripted, text, tool_doc


def bundle(
    tmp_path: Path,
    sources: dict[str, str],
    *,
    refs: list[Any] | None = None,
    configs: dict[str, dict[str, Any]] | None = None,
    tools: bool = False,
) -> Path:
    files = {f"ext/{name}.py": src for name, src in sources.items()}
    docs = [extension_doc(name, f"./ext/{name}.py", (configs or {}).get(name)) for name in sources]
    tool_docs = []
    if tools:
        files["tools/t.py"] = "handlers = {'noop': lambda ctx, args: 'ok'}\n"
        tool_docs = [tool_doc("t", "./tools/t.py", [export("noop")])]
    return k.simple_bundle(
        tmp_path,
        agents=[agent_doc("a", tools=["t"] if tools else [], extensions=refs if refs is not None else list(sources))],
        tools=tool_docs,
        extensions=docs,
        files=files,
    )


async def _requests(root: Path, state_root: Path, inputs: list[tuple[str, str | None]]) -> list[Any]:
    out = []
    async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
        for text_in, key in inputs:
            out.append(await asyncio.wait_for(rt.request(text_in, instance_key=key), 10))
    return out


def requests(root: Path, state_root: Path, *inputs: str, key: str | None = None) -> list[Any]:
    return k.run(_requests(root, state_root, [(i, key) for i in inputs]))


def load_error(root: Path, state_root: Path) -> ExtensionError:
    k.MODEL = scripted(text("never"))
    with pytest.raises(ExtensionError) as info:
        requests(root, state_root, "go")
    assert k.REQUESTS == []
    return info.value


# --- order and config -------------------------------------------------------------------------------

SLOW_ASYNC = """\
import asyncio
import kit


async def register(api):
    kit.TRACE.append("slow:start")
    for _ in range(5):
        await asyncio.sleep(0)
    kit.TRACE.append("slow:end")
"""

FAST_SYNC = """\
import kit


def register(api):
    kit.TRACE.append("fast")
"""


def test_register_runs_in_agent_extension_order_and_async_register_is_awaited(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"fast": FAST_SYNC, "slow": SLOW_ASYNC}, refs=["slow", "fast"])
    k.MODEL = scripted(text("ok"))
    requests(root, state_root, "go")
    assert k.TRACE == ["slow:start", "slow:end", "fast"]


def test_register_runs_once_per_instance(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"fast": FAST_SYNC})
    k.MODEL = scripted(text("ok"))
    k.run(_requests(root, state_root, [("1", "k1"), ("2", "k1"), ("3", "k2")]))
    assert k.TRACE == ["fast", "fast"]


CONFIG_TWO = """\
import kit


def register(api, config):
    kit.PROBE["two"] = config
"""

CONFIG_ONE = """\
import kit


def register(api):
    kit.PROBE["one"] = type(api).__name__
"""


def test_config_is_shallow_merged_with_reference_winning_and_passed_only_to_two_arg_register(
    tmp_path: Path, state_root: Path
) -> None:
    root = bundle(
        tmp_path,
        {"two": CONFIG_TWO, "one": CONFIG_ONE},
        refs=[
            {"ref": "Extension/two", "config": {"b": 2, "c": 3, "nested": {"y": 2}}},
            {"ref": "Extension/one", "config": {"ignored": True}},
        ],
        configs={"two": {"a": 1, "b": 1, "nested": {"x": 1}}},
    )
    k.MODEL = scripted(text("ok"))
    requests(root, state_root, "go")
    assert k.PROBE["two"] == {"a": 1, "b": 2, "c": 3, "nested": {"y": 2}}
    assert k.PROBE["one"] == "ExtensionApi"


def test_extension_spec_config_alone_is_passed(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"two": CONFIG_TWO}, configs={"two": {"mode": "strict"}})
    k.MODEL = scripted(text("ok"))
    requests(root, state_root, "go")
    assert k.PROBE["two"] == {"mode": "strict"}


# --- load and init failures ------------------------------------------------------------------------


def test_missing_register_is_e_ext_load_naming_the_extension(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"hollow": "VALUE = 1\n"})
    err = load_error(root, state_root)
    assert err.code == "E_EXT_LOAD"
    assert err.extension_name == "hollow"
    assert "hollow" in err.message
    assert err.suggestion


@pytest.mark.parametrize(
    "source",
    # (a syntax error is caught earlier, at load: E_CONFIG_ENTRY_SYNTAX)
    ["import module_that_does_not_exist_xyz\n", "from . import missing_helper_xyz\n", "raise RuntimeError('x')\n"],
)
def test_import_failure_is_e_ext_load(tmp_path: Path, state_root: Path, source: str) -> None:
    root = bundle(tmp_path, {"broken": source})
    err = load_error(root, state_root)
    assert err.code == "E_EXT_LOAD"
    assert err.extension_name == "broken"


def test_register_raising_is_e_ext_init_with_message_and_suggestion(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"angry": "def register(api):\n    raise ValueError('cannot start: no token')\n"})
    err = load_error(root, state_root)
    assert err.code == "E_EXT_INIT"
    assert err.extension_name == "angry"
    assert "cannot start: no token" in err.message
    assert "angry" in err.message
    assert err.suggestion


def test_failing_extension_fails_every_request_without_hanging(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"angry": "def register(api):\n    raise ValueError('boom')\n"})
    k.MODEL = scripted(text("never"))

    async def main() -> list[str]:
        codes = []
        async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
            for _ in range(2):
                try:
                    await asyncio.wait_for(rt.request("go"), 5)
                except ExtensionError as exc:
                    codes.append(exc.code)
        return codes

    assert k.run(main()) == ["E_EXT_INIT", "E_EXT_INIT"]


def test_goondan_run_raises_extension_error(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"angry": "def register(api):\n    raise ValueError('boom')\n"})
    k.MODEL = scripted(text("never"))
    with pytest.raises(ExtensionError):
        goondan.run(root, "go", state_root=state_root, isolation="inline")


@pytest.mark.parametrize(
    "body",
    [
        "api.pipelines",
        "api.pipeline.mutate('step.pre', lambda ctx: None)",
        "api.pipeline.wrap('step.llmCall', lambda ctx, nxt: None)",
        "api.extState",
        "api.pipeline.register('step.pre', lambda ctx: None)",
    ],
)
def test_removed_v09_api_is_e_ext_compat_with_suggestion(tmp_path: Path, state_root: Path, body: str) -> None:
    root = bundle(tmp_path, {"legacy": f"def register(api):\n    {body}\n"})
    err = load_error(root, state_root)
    assert err.code == "E_EXT_COMPAT"
    assert err.extension_name == "legacy"
    assert err.suggestion


def test_extension_tool_name_without_extension_prefix_fails_at_register(tmp_path: Path, state_root: Path) -> None:
    source = """\
def register(api):
    api.tools.register({"name": "status", "description": "", "parameters": {"type": "object"}}, lambda c, a: 1)
"""
    root = bundle(tmp_path, {"myext": source})
    err = load_error(root, state_root)
    assert isinstance(err, GoondanError)
    assert err.extension_name == "myext"
    assert "status" in err.message
    assert "myext__" in err.message


def test_extension_tool_with_another_extensions_prefix_fails_at_register(tmp_path: Path, state_root: Path) -> None:
    source = """\
def register(api):
    api.tools.register({"name": "other__status", "parameters": {"type": "object"}}, lambda c, a: 1)
"""
    root = bundle(tmp_path, {"myext": source})
    err = load_error(root, state_root)
    assert "other__status" in err.message


ONE_SHOT = """\
def register(api):
    def once(ctx, args):
        api.tools.unregister("myext__once")  # a tool that withdraws itself after its first use
        return "used"

    api.tools.register({"name": "myext__once", "parameters": {"type": "object"}}, once)
    api.tools.register({"name": "myext__keep", "parameters": {"type": "object"}}, lambda c, a: 1)
"""


def test_an_extension_can_unregister_its_own_tool_and_later_steps_do_not_offer_it(
    tmp_path: Path, state_root: Path
) -> None:
    root = bundle(tmp_path, {"myext": ONE_SHOT})
    k.MODEL = scripted(call("myext__once", {}), call("myext__once", {}), text("done"))
    [result] = requests(root, state_root, "go")
    assert result.text == "done"
    catalogs = [r.tool_names for r in k.REQUESTS]
    assert "myext__once" in catalogs[0]
    assert all("myext__once" not in c and "myext__keep" in c for c in catalogs[1:])
    second = [m for m in k.REQUESTS[2].messages if m["role"] == "tool"][-1]
    assert second["content"][0]["output"]["value"]["code"] == "E_TOOL_NOT_IN_CATALOG"


def test_an_extension_cannot_unregister_tools_it_does_not_own(tmp_path: Path, state_root: Path) -> None:
    source = """\
def register(api):
    api.tools.unregister("other__status")
"""
    root = bundle(tmp_path, {"myext": source})
    err = load_error(root, state_root)
    assert err.code == "E_EXT_INIT"
    assert err.extension_name == "myext"
    assert "[E_TOOL_NAME_INVALID]" in err.message and "other__status" in err.message


CONFIG_SCHEMA_EXT = """\
CONFIG_SCHEMA = {
    "type": "object",
    "properties": {"limit": {"type": "integer"}},
    "required": ["limit"],
    "additionalProperties": False,
}


def register(api, config):
    pass
"""


@pytest.mark.parametrize(
    ("config", "expected"),
    [({"limit": "ten"}, "expected integer"), ({}, "limit"), ({"limit": 1, "extra": 2}, "extra")],
)
def test_config_schema_violation_is_e_ext_config(
    tmp_path: Path, state_root: Path, config: dict[str, Any], expected: str
) -> None:
    root = bundle(tmp_path, {"strict": CONFIG_SCHEMA_EXT}, configs={"strict": config})
    err = load_error(root, state_root)
    assert err.code == "E_EXT_CONFIG"
    assert err.extension_name == "strict"
    assert expected in err.message


def test_config_matching_the_schema_loads(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"strict": CONFIG_SCHEMA_EXT}, configs={"strict": {"limit": 3}})
    k.MODEL = scripted(text("ok"))
    [result] = requests(root, state_root, "go")
    assert result.text == "ok"


# --- api.state ---------------------------------------------------------------------------------------

COUNTER = """\
import kit
from goondan import GoondanError

NAME = {name!r}


def register(api):
    async def turn(ctx):
        value = await api.state.get()
        kit.TRACE.append((NAME, ctx.instance_key, value))
        if kit.PROBE.get("freeze"):
            return await ctx.next()
        count = (value or {{"count": 0}})["count"]
        await api.state.set({{"count": count + {step}}})
        try:
            await api.state.set(object())
        except GoondanError as exc:
            kit.PROBE["bad_set"] = exc.code
        return await ctx.next()

    api.pipeline.register("turn", turn)
"""

READER = """\
import kit


def register(api):
    async def turn(ctx):
        kit.PROBE["reader"] = await api.state.get()
        return await ctx.next()

    api.pipeline.register("turn", turn)
"""


def state_bundle(tmp_path: Path) -> Path:
    return bundle(
        tmp_path,
        {
            "s1": COUNTER.format(name="s1", step=1),
            "s2": COUNTER.format(name="s2", step=10),
            "reader": READER,
        },
    )


def test_state_is_isolated_per_extension_and_instance_and_json_only(tmp_path: Path, state_root: Path) -> None:
    root = state_bundle(tmp_path)
    k.MODEL = scripted(text("ok"))
    k.run(_requests(root, state_root, [("1", "k1"), ("2", "k1"), ("3", "k2")]))
    assert k.TRACE == [
        ("s1", "k1", None),
        ("s2", "k1", None),
        ("s1", "k1", {"count": 1}),
        ("s2", "k1", {"count": 10}),
        ("s1", "k2", None),
        ("s2", "k2", None),
    ]
    assert k.PROBE["bad_set"] == "E_EXT_STATE_INVALID"
    assert k.PROBE["reader"] is None
    ext1 = k.instance_dir(state_root, "a", "k1") / "extensions"
    ext2 = k.instance_dir(state_root, "a", "k2") / "extensions"
    assert json.loads((ext1 / "s1.json").read_text()) == {"count": 2}
    assert json.loads((ext1 / "s2.json").read_text()) == {"count": 20}
    assert json.loads((ext2 / "s1.json").read_text()) == {"count": 1}
    # an extension that never set its state writes no file
    assert not (ext1 / "reader.json").exists()


def test_state_is_restored_after_a_runtime_restart(tmp_path: Path, state_root: Path) -> None:
    root = state_bundle(tmp_path)
    k.MODEL = scripted(text("ok"))
    requests(root, state_root, "1", key="k1")
    k.TRACE.clear()
    requests(root, state_root, "2", key="k1")
    assert k.TRACE[:2] == [("s1", "k1", {"count": 1}), ("s2", "k1", {"count": 10})]
    ext = k.instance_dir(state_root, "a", "k1") / "extensions"
    assert json.loads((ext / "s1.json").read_text()) == {"count": 2}


def test_state_file_is_written_only_when_the_state_changed(tmp_path: Path, state_root: Path) -> None:
    root = state_bundle(tmp_path)
    k.MODEL = scripted(text("ok"))
    requests(root, state_root, "1", key="k1")
    path = k.instance_dir(state_root, "a", "k1") / "extensions" / "s1.json"
    before = path.stat()
    k.PROBE["freeze"] = True
    requests(root, state_root, "2", "3", key="k1")
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (before.st_ino, before.st_mtime_ns, before.st_size)
    assert json.loads(path.read_text()) == {"count": 1}


def test_state_get_returns_a_copy(tmp_path: Path, state_root: Path) -> None:
    source = """\
import kit


def register(api):
    async def turn(ctx):
        await api.state.set({"items": [1]})
        value = await api.state.get()
        value["items"].append(2)
        kit.PROBE["after"] = await api.state.get()
        return await ctx.next()

    api.pipeline.register("turn", turn)
"""
    root = bundle(tmp_path, {"copy": source})
    k.MODEL = scripted(text("ok"))
    requests(root, state_root, "go")
    assert k.PROBE["after"] == {"items": [1]}


# --- api.events ---------------------------------------------------------------------------------------

ALL_EVENTS = """\
import kit

TYPES = [
    "turn.started", "turn.completed", "turn.failed",
    "step.started", "step.completed", "step.failed",
    "tool.called", "tool.completed", "tool.failed",
]


def register(api):
    seen = kit.PROBE.setdefault("types", [])
    for name in TYPES:
        api.events.on(name, lambda event, name=name: seen.append((name, event["type"])))

    async def tool_call(ctx):
        if kit.PROBE.get("break_tool"):
            raise RuntimeError("middleware failure")
        return await ctx.next()

    api.pipeline.register("toolCall", tool_call)
"""


def test_all_nine_runtime_event_types_reach_extension_subscribers(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"all": ALL_EVENTS}, tools=True)
    k.MODEL = scripted(call("t__noop", {}), text("one"), call("t__noop", {}), text("two"), RuntimeError("down"))

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
            await rt.request("ok turn")
            k.PROBE["break_tool"] = True
            await rt.request("tool failure turn")
            await rt.request("model failure turn")

    k.run(main())
    seen = k.PROBE["types"]
    assert all(subscribed == actual for subscribed, actual in seen)
    assert {t for t, _ in seen} == {
        "turn.started",
        "turn.completed",
        "turn.failed",
        "step.started",
        "step.completed",
        "step.failed",
        "tool.called",
        "tool.completed",
        "tool.failed",
    }


def test_extension_logger_has_the_four_methods(tmp_path: Path, state_root: Path) -> None:
    source = """\
import kit


def register(api):
    for name in ("debug", "info", "warning", "error"):
        getattr(api.logger, name)("hello from %s", name)
    kit.PROBE["logged"] = True
"""
    root = bundle(tmp_path, {"talker": source})
    k.MODEL = scripted(text("ok"))
    requests(root, state_root, "go")
    assert k.PROBE["logged"] is True


def test_state_is_saved_even_when_the_turn_fails(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"s1": COUNTER.format(name="s1", step=1)})
    k.MODEL = scripted(RuntimeError("model down"))
    [result] = requests(root, state_root, "go", key="k1")
    assert result.finish_reason == "error"
    path = k.instance_dir(state_root, "a", "k1") / "extensions" / "s1.json"
    assert json.loads(path.read_text()) == {"count": 1}
