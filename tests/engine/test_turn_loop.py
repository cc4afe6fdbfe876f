"""The turn/step loop (digest §2.5–2.7, §4.3; CONTRACT §4–§6) driven through goondan.Runtime."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import goondan
import kit as k
from goondan import GoondanError, StepResult, ToolCall, ToolCallResult, TurnResult
from kit import agent_doc, call, export, extension_doc, scripted, swarm_doc, text, tool_doc

ECHO_TOOL = """\
import kit


def echo(ctx, args):
    kit.TRACE.append(("echo", dict(args)))
    return "echo:" + str(args.get("command"))


def data(ctx, args):
    return {"n": args.get("n", 0), "ok": True}


handlers = {"echo": echo, "data": data}
"""

# the tool-catalog-guard schema: {command: string, required, closed}
ECHO_EXPORT = export("echo", {"command": {"type": "string"}}, required=["command"], additionalProperties=False)


def echo_bundle(tmp_path: Path, *, extensions: Sequence[Any] = (), ext_docs: Sequence[Any] = (), **kw: Any) -> Path:
    files = {"tools/echo.py": ECHO_TOOL}
    files.update(kw.pop("files", {}))
    return k.simple_bundle(
        tmp_path,
        agents=[agent_doc("a", tools=["t"], extensions=list(extensions), prompt=kw.pop("prompt", None))],
        tools=[
            tool_doc(
                "t",
                "./tools/echo.py",
                [ECHO_EXPORT, export("data", {"n": {"type": "integer"}})],
                **kw.pop("tool_kw", {}),
            )
        ],
        extensions=list(ext_docs),
        swarm=kw.pop("swarm", None),
        files=files,
    )


async def _request(root: Path, state_root: Path, *inputs: str, **kw: Any) -> tuple[list[TurnResult], Any]:
    events: list[dict[str, Any]] = []
    results = []
    async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
        rt.on_runtime_event(events.append)
        for item in inputs:
            results.append(await rt.request(item, **kw))
        hist = k.history(rt, key=kw.get("instance_key"))
    return results, {"events": events, "history": hist}


def request(root: Path, state_root: Path, *inputs: str, **kw: Any) -> tuple[list[TurnResult], dict[str, Any]]:
    return k.run(_request(root, state_root, *inputs, **kw))


# --- inbound message -----------------------------------------------------------------------------


def test_inbound_user_message_carries_goondan_inbound_metadata(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(tmp_path)
    k.MODEL = scripted(text("hi back"))
    request(root, state_root, "hello there", instance_key="room-1")
    [inst] = k.instance_dirs(state_root)
    base = k.read_jsonl(inst / "messages" / "base.jsonl")
    first = base[0]
    assert first["data"] == {"role": "user", "content": "hello there"}
    assert first["source"] == {"type": "user"}
    inbound = first["metadata"]["__goondanInbound"]
    assert inbound == {
        "sourceKind": "connector",
        "sourceName": "api",
        "eventName": "message",
        "instanceKey": "room-1",
    }


def test_inbound_metadata_reflects_the_request_source(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(tmp_path)
    k.MODEL = scripted(text("ok"))

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
            await rt.request("x", source={"kind": "connector", "name": "telegram"})

    k.run(main())
    [inst] = k.instance_dirs(state_root)
    inbound = k.read_jsonl(inst / "messages" / "base.jsonl")[0]["metadata"]["__goondanInbound"]
    assert inbound["sourceKind"] == "connector"
    assert inbound["sourceName"] == "telegram"


# --- messages of a tool-using turn ----------------------------------------------------------------


def test_two_model_calls_and_one_tool_call_produce_user_assistant_tool_assistant(
    tmp_path: Path, state_root: Path
) -> None:
    root = echo_bundle(tmp_path)
    k.MODEL = scripted(call("t__echo", {"command": "ls"}, id="c1"), text("all done"))
    [result], seen = request(root, state_root, "run ls")
    hist = seen["history"]
    assert k.roles(hist) == ["user", "assistant", "tool", "assistant"]
    assert hist[1]["content"] == [
        {"type": "tool-call", "toolCallId": "c1", "toolName": "t__echo", "input": {"command": "ls"}}
    ]
    assert hist[2]["content"] == [
        {
            "type": "tool-result",
            "toolCallId": "c1",
            "toolName": "t__echo",
            "output": {"type": "text", "value": "echo:ls"},
        }
    ]
    assert hist[3] == {"role": "assistant", "content": "all done"}
    assert result.text == "all done"
    assert result.finish_reason == "text_response"
    assert result.error is None
    assert result.response_message is not None and result.response_message.text == "all done"
    assert len(k.REQUESTS) == 2
    # the second model call saw the tool result
    assert k.roles(k.REQUESTS[1].messages) == ["user", "assistant", "tool"]


def test_each_tool_call_gets_its_own_tool_message_and_json_outputs_are_typed(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(tmp_path)
    two_calls = {
        "text": "working",
        "toolCalls": [
            {"id": "c1", "name": "t__echo", "args": {"command": "a"}},
            {"id": "c2", "name": "t__data", "args": {"n": 7}},
        ],
    }
    k.MODEL = scripted(two_calls, text("done"))
    [result], seen = request(root, state_root, "go")
    hist = seen["history"]
    assert k.roles(hist) == ["user", "assistant", "tool", "tool", "assistant"]
    assistant = hist[1]["content"]
    assert assistant[0] == {"type": "text", "text": "working"}
    assert [p["toolCallId"] for p in k.parts(hist[1], "tool-call")] == ["c1", "c2"]
    r1, r2 = k.tool_results(hist)
    assert (r1["toolCallId"], r1["output"]) == ("c1", {"type": "text", "value": "echo:a"})
    assert (r2["toolCallId"], r2["output"]) == ("c2", {"type": "json", "value": {"n": 7, "ok": True}})
    assert all(len(m["content"]) == 1 for m in hist if m["role"] == "tool")
    assert result.text == "done"


# --- system messages ------------------------------------------------------------------------------

SYSTEM_EXT = """\
from goondan.messages import system_message


def register(api):
    async def turn(ctx):
        ctx.emit_message_event({"type": "append", "message": system_message("EXTRA RULES: be kind")})
        return await ctx.next()

    api.pipeline.register("turn", turn)
"""


def test_system_messages_from_prompt_and_extensions_reach_the_model(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(
        tmp_path,
        prompt="You are a terse assistant.",
        extensions=["sys"],
        ext_docs=[extension_doc("sys", "./ext/sys.py")],
        files={"ext/sys.py": SYSTEM_EXT},
    )
    k.MODEL = scripted(text("ok"))
    request(root, state_root, "hello")
    [seen] = k.REQUESTS
    systems = [m["content"] for m in seen.messages if m["role"] == "system"]
    assert "You are a terse assistant." in systems
    assert "EXTRA RULES: be kind" in systems
    assert {"role": "user", "content": "hello"} in seen.messages


def test_agent_prompt_is_injected_once_per_history(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(tmp_path, prompt="PROMPT-X")
    k.MODEL = scripted(text("one"), text("two"))
    request(root, state_root, "first", "second")
    last = k.REQUESTS[-1].messages
    assert [m["content"] for m in last if m["role"] == "system"] == ["PROMPT-X"]


# --- step limit -----------------------------------------------------------------------------------


def test_max_steps_per_turn_ends_the_turn_with_max_steps(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(tmp_path, swarm=swarm_doc(["a"], max_steps=3))
    k.MODEL = scripted(call("t__echo", {"command": "again"}, text="still going"))
    [result], seen = request(root, state_root, "loop forever")
    assert result.finish_reason == "max_steps"
    assert len(k.REQUESTS) == 3
    completed = [e for e in seen["events"] if e["type"] == "turn.completed"]
    assert completed[0]["stepCount"] == 3
    assert [e["stepIndex"] for e in seen["events"] if e["type"] == "step.started"] == [0, 1, 2]
    # the final text is the last assistant text, and it is the last message of the history
    assert result.text == "still going"
    assert seen["history"][-1]["role"] in ("assistant", "tool")
    assert len(k.tool_results(seen["history"])) == 3


def test_max_steps_without_any_text_still_answers_with_a_text(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(tmp_path, swarm=swarm_doc(["a"], max_steps=2))
    k.MODEL = scripted(call("t__echo", {"command": "x"}))
    [result], seen = request(root, state_root, "go")
    assert result.finish_reason == "max_steps"
    assert isinstance(result.text, str) and result.text
    assert seen["history"][-1] == {"role": "assistant", "content": result.text}


# --- retries --------------------------------------------------------------------------------------


def test_malformed_tool_call_gets_a_corrective_user_message_and_is_retried(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(tmp_path)
    k.MODEL = scripted(call("t__echo", "not-an-object"), text("fixed"))
    [result], seen = request(root, state_root, "go")
    assert len(k.REQUESTS) == 2
    corrective = k.REQUESTS[1].last
    assert corrective["role"] == "user"
    assert "t__echo" in corrective["content"]
    assert "JSON object" in corrective["content"]
    assert result.text == "fixed"
    assert result.finish_reason == "text_response"
    # the malformed call was never executed and left no orphan tool-call part behind
    assert k.TRACE == []
    assert k.tool_results(seen["history"]) == []
    assert all(not k.parts(m, "tool-call") for m in seen["history"])


def test_three_malformed_tool_calls_in_a_row_give_up(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(tmp_path)
    k.MODEL = scripted(call("t__echo", ["list", "args"]))
    [result], seen = request(root, state_root, "go")
    assert len(k.REQUESTS) == 3
    assert result.finish_reason == "text_response"
    assert isinstance(result.text, str) and result.text
    assert seen["history"][-1]["role"] == "assistant"
    assert k.TRACE == []


def test_empty_output_is_retried_with_a_corrective_message(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(tmp_path)
    k.MODEL = scripted({"text": None, "toolCalls": []}, text("now with text"))
    [result], _ = request(root, state_root, "go")
    assert len(k.REQUESTS) == 2
    assert k.REQUESTS[1].last["role"] == "user"
    assert "empty" in k.REQUESTS[1].last["content"].lower()
    assert result.text == "now with text"


def test_empty_output_right_after_a_tool_result_ends_the_turn(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(tmp_path)
    k.MODEL = scripted(call("t__echo", {"command": "x"}, text="calling"), {"text": "", "toolCalls": []})
    [result], _ = request(root, state_root, "go")
    assert len(k.REQUESTS) == 2
    assert result.finish_reason == "text_response"
    assert result.text == "calling"


# --- model failure --------------------------------------------------------------------------------


def test_model_exception_gives_error_result_and_keeps_the_conversation(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(tmp_path)
    k.MODEL = scripted(RuntimeError("provider exploded"), text("recovered"))
    [failed, ok], seen = request(root, state_root, "first question", "second question")
    assert failed.finish_reason == "error"
    assert failed.text is None
    assert isinstance(failed.error, dict)
    assert isinstance(failed.error.get("code"), str) and failed.error["code"]
    assert "provider exploded" in failed.error["message"]
    assert any(e["type"] == "turn.failed" for e in seen["events"])
    # the user message of the failed turn is committed and reaches the next model call
    second_input = k.REQUESTS[1].messages
    assert {"role": "user", "content": "first question"} in second_input
    assert second_input[-1] == {"role": "user", "content": "second question"}
    assert ok.text == "recovered"
    [inst] = k.instance_dirs(state_root)
    base = k.read_jsonl(inst / "messages" / "base.jsonl")
    assert base[0]["data"] == {"role": "user", "content": "first question"}


# --- tool errors never abort the turn --------------------------------------------------------------


def _error_of(hist: list[dict[str, Any]], index: int = 0) -> dict[str, Any]:
    output = k.tool_results(hist)[index]["output"]
    assert output["type"] == "error-json", output
    return output["value"]


def test_call_to_tool_not_in_catalog_is_an_error_result(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(tmp_path)
    k.MODEL = scripted(call("nope__missing", {}), text("sorry"))
    [result], seen = request(root, state_root, "go")
    err = _error_of(seen["history"])
    assert err["code"] == "E_TOOL_NOT_IN_CATALOG"
    assert err["message"] == "Tool 'nope__missing' is not available in the current Tool Catalog."
    assert result.finish_reason == "text_response"
    assert result.text == "sorry"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({}, "args.command: required property is missing"),
        ({"command": 123}, "expected string but got integer"),
        ({"command": "ls", "extra": True}, "unexpected property"),
    ],
)
def test_invalid_tool_args_are_rejected_before_the_handler_runs(
    tmp_path: Path, state_root: Path, args: dict[str, Any], expected: str
) -> None:
    root = echo_bundle(tmp_path)
    k.MODEL = scripted(call("t__echo", args), text("ok"))
    [result], seen = request(root, state_root, "go")
    err = _error_of(seen["history"])
    assert err["code"] == "E_TOOL_INVALID_ARGS"
    assert expected in err["message"]
    assert "t__echo" in err["message"]
    assert k.TRACE == []  # the handler never ran
    assert result.finish_reason == "text_response"


def test_valid_tool_args_call_the_handler_exactly_once(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(tmp_path)
    k.MODEL = scripted(call("t__echo", {"command": "pwd"}), text("ok"))
    request(root, state_root, "go")
    assert k.TRACE == [("echo", {"command": "pwd"})]


def test_tool_export_without_handler_is_a_load_error(tmp_path: Path, state_root: Path) -> None:
    root = k.simple_bundle(
        tmp_path,
        agents=[agent_doc("a", tools=["t"])],
        tools=[tool_doc("t", "./tools/t.py", [export("present"), export("absent")])],
        files={"tools/t.py": "handlers = {'present': lambda ctx, args: 1}\n"},
    )
    k.MODEL = scripted(text("never"))

    async def main() -> None:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
            await rt.request("go")

    with pytest.raises(GoondanError) as info:
        k.run(main())
    assert info.value.code == "E_TOOL_LOAD"
    assert "absent" in info.value.message
    assert k.REQUESTS == []


CATALOG_ONLY_EXT = """\
def register(api):
    async def step(ctx):
        ghost = {"name": "ghost__run", "description": "", "parameters": {"type": "object"}}
        ctx.tool_catalog = [*ctx.tool_catalog, ghost]
        return await ctx.next()

    api.pipeline.register("step", step)
"""


def test_catalog_item_without_handler_gives_tool_not_found(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(
        tmp_path,
        extensions=["ghost"],
        ext_docs=[extension_doc("ghost", "./ext/ghost.py")],
        files={"ext/ghost.py": CATALOG_ONLY_EXT},
    )
    k.MODEL = scripted(call("ghost__run", {}), text("ok"))
    [result], seen = request(root, state_root, "go")
    assert "ghost__run" in k.REQUESTS[0].tool_names
    assert _error_of(seen["history"])["code"] == "E_TOOL_NOT_FOUND"
    assert result.text == "ok"


RAISING_TOOL = """\
class ToolFailure(Exception):
    def __init__(self, message):
        super().__init__(message)
        self.code = "E_CUSTOM_FAILURE"
        self.suggestion = "try a smaller input"


def boom(ctx, args):
    raise ToolFailure("x" * 2000)


def plain(ctx, args):
    raise ValueError("short failure")


handlers = {"boom": boom, "plain": plain}
"""


def test_handler_exception_becomes_error_result_with_code_suggestion_and_truncated_message(
    tmp_path: Path, state_root: Path
) -> None:
    root = k.simple_bundle(
        tmp_path,
        agents=[agent_doc("a", tools=["r"])],
        tools=[tool_doc("r", "./tools/r.py", [export("boom"), export("plain")], error_message_limit=100)],
        files={"tools/r.py": RAISING_TOOL},
    )
    k.MODEL = scripted(
        {"toolCalls": [{"id": "c1", "name": "r__boom", "args": {}}, {"id": "c2", "name": "r__plain", "args": {}}]},
        text("handled"),
    )
    [result], seen = request(root, state_root, "go")
    boom = _error_of(seen["history"], 0)
    assert boom["code"] == "E_CUSTOM_FAILURE"
    assert boom["suggestion"] == "try a smaller input"
    assert len(boom["message"]) == 100
    assert boom["message"].endswith("... (truncated)")
    plain = _error_of(seen["history"], 1)
    assert "short failure" in plain["message"]
    assert result.finish_reason == "text_response"
    assert result.text == "handled"


def test_handler_error_message_default_limit_is_1000(tmp_path: Path, state_root: Path) -> None:
    root = k.simple_bundle(
        tmp_path,
        agents=[agent_doc("a", tools=["r"])],
        tools=[tool_doc("r", "./tools/r.py", [export("boom"), export("plain")])],
        files={"tools/r.py": RAISING_TOOL},
    )
    k.MODEL = scripted(call("r__boom", {}), text("ok"))
    _, seen = request(root, state_root, "go")
    msg = _error_of(seen["history"])["message"]
    assert len(msg) == 1000
    assert msg.endswith("... (truncated)")


RAISING_TOOLCALL_MW = """\
def register(api):
    async def tool_call(ctx):
        raise RuntimeError("middleware broke")

    api.pipeline.register("toolCall", tool_call)
"""


def test_raising_toolcall_middleware_becomes_an_error_result_without_orphans(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(
        tmp_path,
        extensions=["bad"],
        ext_docs=[extension_doc("bad", "./ext/bad.py")],
        files={"ext/bad.py": RAISING_TOOLCALL_MW},
    )
    k.MODEL = scripted(call("t__echo", {"command": "x"}, id="c9"), text("survived"))
    [result], seen = request(root, state_root, "go")
    hist = seen["history"]
    assert k.roles(hist) == ["user", "assistant", "tool", "assistant"]
    [res] = k.tool_results(hist)
    assert res["toolCallId"] == "c9"
    assert res["output"]["type"] == "error-json"
    assert "middleware broke" in res["output"]["value"]["message"]
    assert result.text == "survived"
    assert k.TRACE == []
    types = [e["type"] for e in seen["events"]]
    assert "tool.failed" in types
    assert "turn.completed" in types


# --- token usage and result types ----------------------------------------------------------------


def test_token_usage_of_all_steps_is_summed_into_turn_completed(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(tmp_path)
    k.MODEL = scripted(
        {
            **call("t__echo", {"command": "x"}),
            "usage": {"promptTokens": 100, "completionTokens": 50, "totalTokens": 150},
        },
        text("done", usage={"promptTokens": 10, "completionTokens": 5, "totalTokens": 15}),
    )
    _, seen = request(root, state_root, "go")
    [completed] = [e for e in seen["events"] if e["type"] == "turn.completed"]
    assert completed["tokenUsage"] == {"promptTokens": 110, "completionTokens": 55, "totalTokens": 165}
    steps = [e for e in seen["events"] if e["type"] == "step.completed"]
    assert steps[0]["tokenUsage"] == {"promptTokens": 100, "completionTokens": 50, "totalTokens": 150}


def test_result_types_support_dataclasses_replace() -> None:
    turn = TurnResult("turn_1", None, "text_response", None, "hi")
    changed = dataclasses.replace(turn, text="bye", finish_reason="max_steps")
    assert (changed.turn_id, changed.text, changed.finish_reason) == ("turn_1", "bye", "max_steps")
    assert turn.text == "hi"
    step = StepResult("completed", False, [ToolCall("c1", "t__x", {})], [], {})
    again = dataclasses.replace(step, should_continue=True)
    assert again.should_continue is True and again.has_tool_calls
    assert step.should_continue is False
    res = ToolCallResult("c1", "t__x", "out", "ok", None)
    assert dataclasses.replace(res, status="error", error={"message": "m"}).status == "error"


REPLACING_TURN_MW = """\
import dataclasses


def register(api):
    async def turn(ctx):
        result = await ctx.next()
        return dataclasses.replace(result, text=result.text.upper())

    api.pipeline.register("turn", turn)
"""


def test_turn_middleware_can_return_a_replaced_turn_result(tmp_path: Path, state_root: Path) -> None:
    root = echo_bundle(
        tmp_path,
        extensions=["up"],
        ext_docs=[extension_doc("up", "./ext/up.py")],
        files={"ext/up.py": REPLACING_TURN_MW},
    )
    k.MODEL = scripted(text("quiet words"))
    [result], _ = request(root, state_root, "go")
    assert result.text == "QUIET WORDS"
    assert result.finish_reason == "text_response"


CTX_TOOL = """\
import kit


def inspect_ctx(ctx, args):
    kit.PROBE["ctx"] = {
        "agent_name": ctx.agent_name,
        "instance_key": ctx.instance_key,
        "turn_id": ctx.turn_id,
        "trace_id": ctx.trace_id,
        "tool_call_id": ctx.tool_call_id,
        "message": ctx.message.data if ctx.message is not None else None,
        "workdir": str(ctx.workdir),
        "workdir_is_dir": ctx.workdir.is_dir(),
        "has_logger": callable(getattr(ctx.logger, "info", None)),
        "has_runtime": all(hasattr(ctx.runtime, m) for m in ("request", "send", "spawn", "list", "catalog")),
    }
    return "inspected"


handlers = {"inspect": inspect_ctx}
"""


def test_tool_handler_context_fields(tmp_path: Path, state_root: Path) -> None:
    root = k.simple_bundle(
        tmp_path,
        agents=[agent_doc("a", tools=["c"])],
        tools=[tool_doc("c", "./tools/c.py", [export("inspect")])],
        files={"tools/c.py": CTX_TOOL},
    )
    k.MODEL = scripted(call("c__inspect", {}, id="call-7", text="let me look"), text("done"))
    trace = "11112222333344445555666677778888"
    _, seen = request(root, state_root, "go", instance_key="k-9", trace_id=trace)
    ctx = k.PROBE["ctx"]
    turn_started = next(e for e in seen["events"] if e["type"] == "turn.started")
    assert ctx["agent_name"] == "a"
    assert ctx["instance_key"] == "k-9"
    assert ctx["turn_id"] == turn_started["turnId"]
    assert ctx["trace_id"] == trace
    assert ctx["tool_call_id"] == "call-7"
    # the message is the assistant message that holds the call
    assert ctx["message"]["role"] == "assistant"
    assert [p["toolCallId"] for p in k.parts(ctx["message"], "tool-call")] == ["call-7"]
    # the workdir belongs to the instance under the state root, never to the bundle
    assert ctx["workdir_is_dir"]
    assert Path(ctx["workdir"]).resolve().is_relative_to(state_root.resolve())
    assert ctx["has_logger"] and ctx["has_runtime"]


REBIND_TOOL = """\
def rebind(ctx, args):
    ctx.message.data = {"role": "assistant", "content": "rebound by the tool"}
    ctx.message.id = "rebound-id"
    return "ok"


handlers = {"rebind": rebind}
"""


def test_messages_shown_to_tools_and_callers_are_copies_of_the_stored_ones(tmp_path: Path, state_root: Path) -> None:
    """The turn loop stores the messages it builds without copying them; what a tool's ctx.message
    and the TurnResult show must still be objects of their own, so rebinding their attributes
    changes neither the history the model is given next nor what is committed."""
    root = k.simple_bundle(
        tmp_path,
        agents=[agent_doc("a", tools=["c"])],
        tools=[tool_doc("c", "./tools/c.py", [export("rebind")])],
        files={"tools/c.py": REBIND_TOOL},
    )
    seen: list[list[Any]] = []

    def answer(request: Any) -> dict[str, Any]:
        seen.append([dict(m) for m in request.messages])
        return text("done")

    k.MODEL = scripted(call("c__rebind", {}, id="call-1", text="calling"), answer, answer)

    async def run() -> list[dict[str, Any]]:
        async with goondan.Runtime(root, state_root=state_root, isolation="inline") as rt:
            first = await rt.request("go")
            assert first.response_message is not None
            first.response_message.data = {"role": "assistant", "content": "rebound by the caller"}
            first.response_message.id = "rebound-by-caller"
            await rt.request("again")
            return k.history(rt)

    committed = k.run(run())
    for messages in (seen[-1], committed):
        assistants = [m for m in messages if m["role"] == "assistant"]
        assert [k.parts(assistants[0], "tool-call")[0]["toolCallId"], assistants[1]["content"]] == ["call-1", "done"]
        assert "rebound" not in repr(messages)


ODD_OUTPUT_TOOL = """\
def nothing(ctx, args):
    return None


def nan(ctx, args):
    return {"x": float("nan"), "t": (1, 2)}


handlers = {"nothing": nothing, "nan": nan}
"""


def test_handler_output_is_coerced_to_json(tmp_path: Path, state_root: Path) -> None:
    root = k.simple_bundle(
        tmp_path,
        agents=[agent_doc("a", tools=["o"])],
        tools=[tool_doc("o", "./tools/o.py", [export("nothing"), export("nan")])],
        files={"tools/o.py": ODD_OUTPUT_TOOL},
    )
    k.MODEL = scripted({"toolCalls": [{"name": "o__nothing", "args": {}}, {"name": "o__nan", "args": {}}]}, text("ok"))
    [result], seen = request(root, state_root, "go")
    outputs = [r["output"] for r in k.tool_results(seen["history"])]
    assert outputs[0] == {"type": "json", "value": None}
    assert outputs[1]["type"] == "json"
    assert outputs[1]["value"]["t"] == [1, 2]
    assert isinstance(outputs[1]["value"]["x"], str)
    assert result.text == "ok"


SCRIPTED_DOCS = [
    k.package_doc(),
    {
        "apiVersion": k.API,
        "kind": "Model",
        "metadata": {"name": "m"},
        "spec": {
            "provider": "scripted",
            "model": "s",
            "options": {
                "rules": [
                    {
                        "when": {"role": "user"},
                        "reply": {"toolCalls": [{"name": "t__echo", "args": {"command": "ls"}}]},
                    },
                    {"when": {"role": "tool"}, "reply": {"text": "Tool said: {{last}}"}},
                ]
            },
        },
    },
    tool_doc("t", "./tools/echo.py", [ECHO_EXPORT]),
    agent_doc("a", tools=["t"]),
    swarm_doc(["a"]),
]


@pytest.mark.parametrize("isolation", ["inline", "process"])
def test_isolation_modes_produce_the_same_turn(tmp_path: Path, isolation: str) -> None:
    standalone_tool = "handlers = {'echo': lambda ctx, args: 'echo:' + args['command']}\n"
    root = k.write_bundle(tmp_path / "bundle", *SCRIPTED_DOCS, files={"tools/echo.py": standalone_tool})
    state = tmp_path / "state"

    async def main() -> TurnResult:
        async with goondan.Runtime(root, state_root=state, isolation=isolation) as rt:
            return await rt.request("list files", instance_key="iso")

    result = k.run(main())
    assert result.text == "Tool said: echo:ls"
    assert result.finish_reason == "text_response"
    [inst] = k.instance_dirs(state)
    base = k.read_jsonl(inst / "messages" / "base.jsonl")
    assert k.roles(r["data"] for r in base) == ["user", "assistant", "tool", "assistant"]
    assert base[0]["metadata"]["__goondanInbound"]["instanceKey"] == "iso"
