"""turn / step / toolCall middleware running inside real turns (CONTRACT §5, digest §5.3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import goondan
import kit as k
from kit import agent_doc, call, export, extension_doc, scripted, text, tool_doc

TOOL = """\
import kit


def echo(ctx, args):
    kit.TRACE.append(("handler", dict(args)))
    return "echo:" + str(args.get("command"))


def other(ctx, args):
    kit.TRACE.append(("other", dict(args)))
    return "other"


handlers = {"echo": echo, "other": other}
"""


def bundle(tmp_path: Path, extensions: dict[str, str], order: list[Any] | None = None, **kw: Any) -> Path:
    files = {"tools/t.py": TOOL}
    ext_docs = []
    for name, source in extensions.items():
        files[f"ext/{name}.py"] = source
        ext_docs.append(extension_doc(name, f"./ext/{name}.py"))
    return k.simple_bundle(
        tmp_path,
        agents=[agent_doc("a", tools=["t"], extensions=order if order is not None else list(extensions))],
        tools=[
            tool_doc(
                "t",
                "./tools/t.py",
                [export("echo", {"command": {"type": "string"}}), export("other")],
            )
        ],
        extensions=ext_docs,
        files=files,
        **kw,
    )


async def _go(root: Path, state_root: Path, inputs: list[str]) -> dict[str, Any]:
    async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
        results = [await rt.request(i) for i in inputs]
        return {"results": results, "history": k.history(rt)}


def go(root: Path, state_root: Path, *inputs: str) -> dict[str, Any]:
    return k.run(_go(root, state_root, list(inputs)))


# --- onion order ----------------------------------------------------------------------------------

ORDER_A = """\
import kit

T = kit.TRACE


def layer(label, kind):
    async def mw(ctx):
        T.append(f"{kind}:{label}:pre")
        result = await ctx.next()
        T.append(f"{kind}:{label}:post")
        return result
    return mw


def register(api):
    api.pipeline.register("turn", layer("A", "turn"), priority=10)
    api.pipeline.register("step", layer("A", "step"))
    api.pipeline.register("toolCall", layer("A", "toolCall"))
"""

ORDER_B = """\
import kit

T = kit.TRACE


def layer(label, kind):
    async def mw(ctx):
        T.append(f"{kind}:{label}:pre")
        result = await ctx.next()
        T.append(f"{kind}:{label}:post")
        return result
    return mw


def register(api):
    api.pipeline.register("turn", layer("B", "turn"), priority=5)
    api.pipeline.register("turn", layer("C", "turn"), priority=10)
    api.pipeline.register("step", layer("B", "step"))
    api.pipeline.register("toolCall", layer("B", "toolCall"))
"""


def _of(kind: str) -> list[str]:
    return [t.split(":", 1)[1] for t in k.TRACE if isinstance(t, str) and t.startswith(kind + ":")]


def test_middlewares_run_in_onion_order_by_priority_then_extension_order(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"ea": ORDER_A, "eb": ORDER_B})
    k.MODEL = scripted(call("t__echo", {"command": "x"}), text("done"))
    go(root, state_root, "go")
    assert _of("turn") == ["B:pre", "A:pre", "C:pre", "C:post", "A:post", "B:post"]
    # equal priorities: Agent.spec.extensions order, first is outermost; two steps
    assert _of("step") == ["A:pre", "B:pre", "B:post", "A:post"] * 2
    assert _of("toolCall") == ["A:pre", "B:pre", "B:post", "A:post"]
    # the handler runs inside the innermost toolCall layer
    i_pre = k.TRACE.index("toolCall:B:pre")
    i_handler = next(i for i, t in enumerate(k.TRACE) if isinstance(t, tuple) and t[0] == "handler")
    i_post = k.TRACE.index("toolCall:B:post")
    assert i_pre < i_handler < i_post


def test_equal_priority_order_follows_agent_extension_list_not_resource_order(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"ea": ORDER_A, "eb": ORDER_B}, order=["eb", "ea"])
    k.MODEL = scripted(text("done"))
    go(root, state_root, "go")
    assert _of("step") == ["B:pre", "A:pre", "A:post", "B:post"]
    # priorities still win over list order
    assert _of("turn") == ["B:pre", "C:pre", "A:pre", "A:post", "C:post", "B:post"]


# --- mutable context fields ---------------------------------------------------------------------

CATALOG_FILTER = """\
def register(api):
    async def step(ctx):
        ctx.tool_catalog = [item for item in ctx.tool_catalog if item["name"] != "t__other"]
        return await ctx.next()

    api.pipeline.register("step", step)
"""


def test_tool_catalog_changed_in_step_middleware_reaches_the_model_and_the_executor(
    tmp_path: Path, state_root: Path
) -> None:
    root = bundle(tmp_path, {"guard": CATALOG_FILTER})
    k.MODEL = scripted(call("t__other", {}), text("fine"))
    out = go(root, state_root, "go")
    assert k.REQUESTS[0].tool_names == ["t__echo"]
    [res] = k.tool_results(out["history"])
    assert res["output"]["type"] == "error-json"
    assert res["output"]["value"]["code"] == "E_TOOL_NOT_IN_CATALOG"
    assert k.TRACE == []


CATALOG_INPLACE = """\
def register(api):
    async def step(ctx):
        ctx.tool_catalog.append({"name": "t__other", "description": "renamed", "parameters": {"type": "object"}})
        ctx.tool_catalog[:] = [i for i in ctx.tool_catalog if i.get("description") != "the other export"]
        return await ctx.next()

    api.pipeline.register("step", step)
"""


def test_tool_catalog_edited_in_place_reaches_the_model(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"edit": CATALOG_INPLACE})
    k.MODEL = scripted(text("fine"))
    go(root, state_root, "go")
    tools = {t["name"]: t["description"] for t in k.REQUESTS[0].tools}
    assert tools == {"t__echo": "the echo export", "t__other": "renamed"}


ARGS_REWRITE = """\
def register(api):
    async def tool_call(ctx):
        if ctx.tool_name == "t__echo":
            ctx.args["command"] = "rewritten"
        else:
            ctx.args = {"replaced": True}
        return await ctx.next()

    api.pipeline.register("toolCall", tool_call)
"""


def test_args_changed_in_toolcall_middleware_reach_the_handler(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"rw": ARGS_REWRITE})
    k.MODEL = scripted(
        {"toolCalls": [{"name": "t__echo", "args": {"command": "orig"}}, {"name": "t__other", "args": {"x": 1}}]},
        text("done"),
    )
    out = go(root, state_root, "go")
    # the step's two calls run concurrently: their handlers may run in either order
    assert sorted(k.TRACE, key=lambda t: t[0]) == [("handler", {"command": "rewritten"}), ("other", {"replaced": True})]
    assert k.tool_results(out["history"])[0]["output"] == {"type": "text", "value": "echo:rewritten"}


CONTINUE_ONCE = """\
import dataclasses
import kit


def register(api):
    async def step(ctx):
        result = await ctx.next()
        if not result.should_continue and not kit.PROBE.get("forced"):
            kit.PROBE["forced"] = True
            return dataclasses.replace(result, should_continue=True)
        return result

    api.pipeline.register("step", step)
"""


def test_should_continue_overridden_in_step_post_causes_one_more_model_call(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"more": CONTINUE_ONCE})
    k.MODEL = scripted(text("first"), text("second"), text("third"))
    out = go(root, state_root, "go")
    assert len(k.REQUESTS) == 2
    assert out["results"][0].text == "second"
    assert out["results"][0].finish_reason == "text_response"


ATTRS = """\
import kit


def register(api):
    async def turn(ctx):
        kit.PROBE["turn"] = hasattr(ctx, "agents")
        return await ctx.next()

    async def step(ctx):
        kit.PROBE["step"] = hasattr(ctx, "agents")
        kit.PROBE["step_runtime"] = ctx.runtime.swarm.self_agent
        return await ctx.next()

    async def tool_call(ctx):
        kit.PROBE["toolCall"] = hasattr(ctx, "agents")
        kit.PROBE["toolCall_fields"] = (ctx.tool_name, ctx.step_index, type(ctx.args).__name__)
        return await ctx.next()

    api.pipeline.register("turn", turn)
    api.pipeline.register("step", step)
    api.pipeline.register("toolCall", tool_call)
"""


def test_toolcall_context_has_no_agents_but_turn_and_step_do(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"attrs": ATTRS})
    k.MODEL = scripted(call("t__echo", {"command": "x"}), text("done"))
    go(root, state_root, "go")
    assert k.PROBE["turn"] is True
    assert k.PROBE["step"] is True
    assert k.PROBE["toolCall"] is False
    assert k.PROBE["step_runtime"] == "a"
    assert k.PROBE["toolCall_fields"] == ("t__echo", 0, "dict")


NEXT_TWICE = """\
import kit
from goondan import GoondanError


def register(api):
    async def step(ctx):
        result = await ctx.next()
        try:
            await ctx.next()
        except GoondanError as exc:
            kit.PROBE["code"] = exc.code
        return result

    api.pipeline.register("step", step)
"""


def test_calling_next_twice_raises_goondan_error(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"twice": NEXT_TWICE})
    k.MODEL = scripted(text("done"))
    out = go(root, state_root, "go")
    assert k.PROBE["code"] == "E_PIPELINE_NEXT_TWICE"
    assert len(k.REQUESTS) == 1  # the second next() did not run the core again
    assert out["results"][0].text == "done"


SHORT_CIRCUIT = """\
from goondan import TurnResult


def register(api):
    async def turn(ctx):
        return TurnResult(ctx.turn_id, None, "text_response", None, "answered by middleware")

    api.pipeline.register("turn", turn)
"""


def test_turn_middleware_that_skips_next_skips_the_core(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"short": SHORT_CIRCUIT})
    k.MODEL = scripted(text("model"))
    out = go(root, state_root, "go")
    assert k.REQUESTS == []
    assert out["results"][0].text == "answered by middleware"


SKIP_TOOL = """\
from goondan import ToolCallResult


def register(api):
    async def tool_call(ctx):
        return ToolCallResult(ctx.tool_call_id, ctx.tool_name, {"cached": True}, "ok", None)

    api.pipeline.register("toolCall", tool_call)
"""


def test_toolcall_middleware_that_skips_next_skips_the_handler(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"cache": SKIP_TOOL})
    k.MODEL = scripted(call("t__echo", {"command": "x"}), text("done"))
    out = go(root, state_root, "go")
    assert k.TRACE == []
    assert k.tool_results(out["history"])[0]["output"] == {"type": "json", "value": {"cached": True}}


# --- message events from middleware --------------------------------------------------------------

EDITOR = """\
import kit
from goondan.messages import system_message, user_message


def register(api):
    async def turn(ctx):
        mode = kit.PROBE.get("mode")
        msgs = ctx.conversation_state.next_messages
        if mode == "edit":
            ctx.emit_message_event({"type": "replace", "targetId": msgs[0].id, "message": user_message("REPLACED")})
            ctx.emit_message_event({"type": "remove", "targetId": msgs[1].id})
            ctx.emit_message_event({"type": "append", "message": system_message("APPENDED")})
        elif mode == "truncate":
            ctx.emit_message_event({"type": "truncate"})
            ctx.emit_message_event({"type": "append", "message": user_message("fresh start")})
        result = await ctx.next()
        if mode == "post":
            ctx.emit_message_event({"type": "append", "message": system_message("POST-NOTE")})
        return result

    api.pipeline.register("turn", turn)
"""


def test_message_events_from_middleware_change_what_the_model_sees(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"editor": EDITOR})

    def model(request: Any) -> dict[str, Any]:
        return text(f"answer {len(k.REQUESTS)}")

    k.MODEL = model

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
            await rt.request("original question")
            k.PROBE["mode"] = "edit"
            await rt.request("second question")
            k.PROBE["mode"] = "truncate"
            await rt.request("third question")

    k.run(main())
    assert k.REQUESTS[0].messages == [{"role": "user", "content": "original question"}]
    assert k.REQUESTS[1].messages == [
        {"role": "user", "content": "REPLACED"},
        {"role": "user", "content": "second question"},
        {"role": "system", "content": "APPENDED"},
    ]
    assert k.REQUESTS[2].messages == [{"role": "user", "content": "fresh start"}]


def test_message_events_emitted_after_next_in_turn_post_are_persisted(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"editor": EDITOR})
    k.MODEL = scripted(text("reply"))
    k.PROBE["mode"] = "post"
    go(root, state_root, "go")
    [inst] = k.instance_dirs(state_root)
    base = k.read_jsonl(inst / "messages" / "base.jsonl")
    assert [r["data"] for r in base] == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "reply"},
        {"role": "system", "content": "POST-NOTE"},
    ]
    # and a fresh runtime on the same state root gives it to the model
    k.PROBE["mode"] = None
    go(root, state_root, "again")
    assert {"role": "system", "content": "POST-NOTE"} in k.REQUESTS[-1].messages


@pytest.mark.parametrize(
    "bad_event",
    [{"type": "upsert", "message": None}, {"type": "remove"}, "append"],
)
def test_malformed_message_event_is_rejected_with_a_goondan_error(
    tmp_path: Path, state_root: Path, bad_event: Any
) -> None:
    source = f"""\
import kit
from goondan import GoondanError


def register(api):
    async def turn(ctx):
        try:
            ctx.emit_message_event({bad_event!r})
        except GoondanError as exc:
            kit.PROBE["code"] = exc.code
        return await ctx.next()

    api.pipeline.register("turn", turn)
"""
    root = bundle(tmp_path, {"bad": source})
    k.MODEL = scripted(text("ok"))
    out = go(root, state_root, "go")
    assert isinstance(k.PROBE.get("code"), str)
    assert out["results"][0].text == "ok"
    assert k.REQUESTS[0].messages == [{"role": "user", "content": "go"}]


# --- dynamic tools ---------------------------------------------------------------------------------

DYNAMIC = """\
import kit


def register(api):
    api.tools.register(
        {"name": "dyn__tool", "description": "first", "parameters": {"type": "object", "properties": {}}},
        lambda ctx, args: "first handler",
    )
    api.tools.register(
        {"name": "dyn__tool", "description": "second", "parameters": {"type": "object", "properties": {}}},
        lambda ctx, args: "second handler",
    )

    async def step(ctx):
        if ctx.step_index == 0:
            api.tools.register(
                {"name": "dyn__late", "description": "late", "parameters": {"type": "object", "properties": {}}},
                lambda c, a: "late handler",
            )
        return await ctx.next()

    api.pipeline.register("step", step)
"""


def test_dynamic_tools_appear_in_the_next_step_and_later_registration_wins(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"dyn": DYNAMIC})
    k.MODEL = scripted(call("dyn__tool", {}), call("dyn__late", {}), text("done"))
    out = go(root, state_root, "go")
    first = k.REQUESTS[0]
    assert first.tool_names.count("dyn__tool") == 1
    assert {t["name"]: t["description"] for t in first.tools}["dyn__tool"] == "second"
    assert "dyn__late" not in first.tool_names
    assert "dyn__late" in k.REQUESTS[1].tool_names
    outputs = [r["output"] for r in k.tool_results(out["history"])]
    assert outputs == [{"type": "text", "value": "second handler"}, {"type": "text", "value": "late handler"}]


OWN_TOOL_WRAPPED = """\
import dataclasses


def register(api):
    api.tools.register(
        {"name": "own__status", "description": "s", "parameters": {"type": "object", "properties": {}}},
        lambda ctx, args: {"ok": 1},
    )

    async def tool_call(ctx):
        result = await ctx.next()
        return dataclasses.replace(result, output={"wrappedBy": "own", "tool": ctx.tool_name, "inner": result.output})

    api.pipeline.register("toolCall", tool_call)
"""


def test_tool_call_middleware_also_wraps_the_extension_s_own_tools(tmp_path: Path, state_root: Path) -> None:
    root = bundle(tmp_path, {"own": OWN_TOOL_WRAPPED})
    k.MODEL = scripted(call("own__status", {}), text("done"))
    out = go(root, state_root, "go")
    [result] = k.tool_results(out["history"])
    assert result["output"]["value"] == {"wrappedBy": "own", "tool": "own__status", "inner": {"ok": 1}}


LATE_MIDDLEWARE = """\
import kit


def register(api):
    def arm(ctx, args):
        async def late(ctx):
            kit.TRACE.append("late:" + ctx.tool_name)
            return await ctx.next()

        api.pipeline.register("toolCall", late)
        return "armed"

    api.tools.register(
        {"name": "late__arm", "description": "a", "parameters": {"type": "object", "properties": {}}}, arm
    )
"""


def test_a_middleware_registered_during_a_turn_wraps_the_calls_of_the_next_steps(
    tmp_path: Path, state_root: Path
) -> None:
    root = bundle(tmp_path, {"late": LATE_MIDDLEWARE})
    k.MODEL = scripted(call("late__arm", {}), call("t__other", {}), text("done"), call("t__other", {}), text("ok"))
    go(root, state_root, "go", "again")
    assert [t for t in k.TRACE if isinstance(t, str) and t.startswith("late:")] == ["late:t__other", "late:t__other"]
