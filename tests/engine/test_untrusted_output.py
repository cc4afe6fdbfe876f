"""What tools and models hand back is untrusted: whatever they return, the turn goes on and the
history never keeps a tool call without its result (issue 11 items 4, 7b, 8b, 11a)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import goondan
import kit as k
from kit import agent_doc, call, export, scripted, text, tool_doc

BAD_TOOL = """\
def big_int(ctx, args):
    return {"n": 2 ** 70}


def surrogate(ctx, args):
    return "half a pair: \\udc80 here"


def deep(ctx, args):
    value = "leaf"
    for _ in range(int(args.get("depth", 1000))):
        value = [value]
    return value


def huge(ctx, args):
    return "x" * int(args["size"])


def ok(ctx, args):
    return "fine"


handlers = {"big_int": big_int, "surrogate": surrogate, "deep": deep, "huge": huge, "ok": ok}
"""

EXPORTS = [
    export("big_int"),
    export("surrogate"),
    export("deep", {"depth": {"type": "integer"}}),
    export("huge", {"size": {"type": "integer"}}),
    export("ok"),
]


def bad_bundle(tmp_path: Path) -> Path:
    return k.simple_bundle(
        tmp_path,
        agents=[agent_doc("a", tools=["t"])],
        tools=[tool_doc("t", "./tools/bad.py", EXPORTS)],
        files={"tools/bad.py": BAD_TOOL},
    )


async def _run(root: Path, state_root: Path, isolation: str, *inputs: str) -> tuple[list[Any], list[dict[str, Any]]]:
    results = []
    async with goondan.Runtime(root, state_root=state_root, isolation=isolation) as rt:
        for item in inputs:
            results.append(await rt.request(item))
        hist = k.history(rt)
    return results, hist


def run(
    root: Path, state_root: Path, *inputs: str, isolation: str = "inline"
) -> tuple[list[Any], list[dict[str, Any]]]:
    return k.run(_run(root, state_root, isolation, *inputs))


def assert_every_call_answered(hist: list[dict[str, Any]]) -> None:
    calls = [p["toolCallId"] for m in hist if m["role"] == "assistant" for p in k.parts(m, "tool-call")]
    answered = [p["toolCallId"] for p in k.tool_results(hist)]
    assert sorted(calls) == sorted(answered)


def test_tool_output_big_int_is_stored_as_decimal_string_and_turn_goes_on(tmp_path: Path, state_root: Path) -> None:
    root = bad_bundle(tmp_path)
    k.MODEL = scripted(call("t__big_int"), text("done"))
    [result], hist = run(root, state_root, "go")
    assert result.error is None, result.error
    [res] = k.tool_results(hist)
    assert res["output"] == {"type": "json", "value": {"n": str(2**70)}}
    assert_every_call_answered(hist)


def test_tool_output_lone_surrogate_becomes_replacement_char(tmp_path: Path, state_root: Path) -> None:
    root = bad_bundle(tmp_path)
    k.MODEL = scripted(call("t__surrogate"), text("done"))
    [result], hist = run(root, state_root, "go")
    assert result.error is None, result.error
    [res] = k.tool_results(hist)
    assert res["output"] == {"type": "text", "value": "half a pair: \ufffd here"}


def test_tool_output_nested_too_deep_becomes_error_result(tmp_path: Path, state_root: Path) -> None:
    root = bad_bundle(tmp_path)
    k.MODEL = scripted(call("t__deep", {"depth": 1000}), text("done"))
    [result], hist = run(root, state_root, "go")
    assert result.error is None, result.error
    [res] = k.tool_results(hist)
    assert res["output"]["type"] == "error-json"
    assert res["output"]["value"]["code"] == "E_TOOL_RESULT_NOT_JSON"


def test_tool_output_over_size_limit_becomes_too_large_error(tmp_path: Path, state_root: Path) -> None:
    root = bad_bundle(tmp_path)
    k.MODEL = scripted(call("t__huge", {"size": 2 * 1024 * 1024}), text("done"))
    [result], hist = run(root, state_root, "go")
    assert result.error is None, result.error
    [res] = k.tool_results(hist)
    assert res["output"]["type"] == "error-json"
    assert res["output"]["value"]["code"] == "E_TOOL_RESULT_TOO_LARGE"
    assert "suggestion" in res["output"]["value"]


def test_unencodable_tool_output_keeps_history_answered_in_process_mode(tmp_path: Path, state_root: Path) -> None:
    root = bad_bundle(tmp_path)
    reply = {"text": None, "toolCalls": [{"name": "t__big_int", "args": {}}, {"name": "t__surrogate", "args": {}}]}
    model = tmp_path / "bundle" / "model.py"
    model.write_text(
        "def generate(request):\n"
        "    if request.messages[-1]['role'] == 'tool':\n"
        "        return {'text': 'done \\udc80'}\n"
        f"    return {reply!r}\n",
        encoding="utf-8",
    )
    [result], hist = run(root, state_root, "go", isolation="process")
    assert result.error is None, result.error
    assert result.text == "done \ufffd"
    assert_every_call_answered(hist)
    assert [r["output"]["type"] for r in k.tool_results(hist)] == ["json", "text"]


def test_model_output_big_int_args_and_surrogate_text_are_repaired(tmp_path: Path, state_root: Path) -> None:
    root = bad_bundle(tmp_path)
    k.MODEL = scripted(
        {"text": "calling \ud800", "toolCalls": [{"name": "t__ok", "args": {"n": 2**80, "s": "\udfff"}}]},
        text("done"),
    )
    [result], hist = run(root, state_root, "go")
    assert result.error is None, result.error
    [assistant] = [m for m in hist if m["role"] == "assistant" and k.parts(m, "tool-call")]
    [part] = k.parts(assistant, "tool-call")
    assert part["input"] == {"n": str(2**80), "s": "\ufffd"}
    assert k.parts(assistant, "text")[0]["text"] == "calling \ufffd"
    assert_every_call_answered(hist)


def test_tool_args_nested_too_deep_get_invalid_args_error_result(tmp_path: Path, state_root: Path) -> None:
    root = bad_bundle(tmp_path)
    deep: Any = 1
    for _ in range(1000):
        deep = {"a": deep}
    k.MODEL = scripted(call("t__ok", {"x": deep}), text("done"))
    [result], hist = run(root, state_root, "go")
    assert result.error is None, result.error
    [res] = k.tool_results(hist)
    assert res["output"]["value"]["code"] == "E_TOOL_INVALID_ARGS"
    assert "64" in res["output"]["value"]["message"]
    assert_every_call_answered(hist)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(min_value=60, max_value=3000), as_list=st.booleans())
def test_any_argument_nesting_depth_never_aborts_the_turn(tmp_path: Path, depth: int, as_list: bool) -> None:
    import tempfile

    with tempfile.TemporaryDirectory(dir=tmp_path) as d:
        base = Path(d)
        root = bad_bundle(base)
        value: Any = 0
        for _ in range(depth):
            value = [value] if as_list else {"k": value}
        k.MODEL = scripted(call("t__ok", {"x": value}), text("done"))
        (base / "state").mkdir()
        [result], hist = run(root, base / "state", "go")
        assert result.error is None, result.error
        [res] = k.tool_results(hist)
        code = res["output"]["value"].get("code") if res["output"]["type"] == "error-json" else None
        assert code == ("E_TOOL_INVALID_ARGS" if depth > 64 else None)


def test_tool_calls_beyond_per_step_limit_get_call_limit_errors(tmp_path: Path, state_root: Path) -> None:
    root = bad_bundle(tmp_path)
    many = {"text": None, "toolCalls": [{"name": "t__ok", "args": {}} for _ in range(300)]}
    k.MODEL = scripted(many, text("done"))
    [result], hist = run(root, state_root, "go")
    assert result.error is None, result.error
    results = k.tool_results(hist)
    assert len(results) == 300
    codes = [r["output"]["value"]["code"] if r["output"]["type"] == "error-json" else "ok" for r in results]
    assert codes[:128] == ["ok"] * 128
    assert codes[128:] == ["E_TOOL_CALL_LIMIT"] * 172
    assert_every_call_answered(hist)


EMITTING_EXT = """\
from goondan.messages import system_message


def register(api, config):
    async def turn(ctx):
        ctx.emit_message_event(
            {"type": "append", "message": system_message("note \\udc80", {"n": 2 ** 70})}
        )
        return await ctx.next()

    api.pipeline.register("turn", turn)
"""


def test_extension_emitted_message_with_unencodable_values_is_stored_repaired(tmp_path: Path, state_root: Path) -> None:
    from kit import extension_doc

    root = k.simple_bundle(
        tmp_path,
        agents=[agent_doc("a", tools=["t"], extensions=["emitter"])],
        tools=[tool_doc("t", "./tools/bad.py", EXPORTS)],
        extensions=[extension_doc("emitter", "./ext.py")],
        files={"tools/bad.py": BAD_TOOL, "ext.py": EMITTING_EXT},
    )
    k.MODEL = scripted(text("done"))
    [result], hist = run(root, state_root, "go")
    assert result.error is None, result.error
    [note] = [m for m in hist if m["role"] == "system"]
    assert note["content"] == "note \ufffd"
    [inst] = k.instance_dirs(state_root)
    [record] = [r for r in k.read_jsonl(inst / "messages" / "base.jsonl") if r["data"]["role"] == "system"]
    assert record["metadata"] == {"n": str(2**70)}


def _orphan_records() -> list[dict[str, Any]]:
    def rec(mid: str, data: dict[str, Any], stype: str) -> dict[str, Any]:
        return {"id": mid, "data": data, "metadata": {}, "createdAt": "2024-01-01T00:00:00Z", "source": {"type": stype}}

    call_part = {"type": "tool-call", "toolCallId": "c-old", "toolName": "t__ok", "input": {}}
    return [
        rec("m1", {"role": "user", "content": "first"}, "user"),
        rec("m2", {"role": "assistant", "content": [call_part]}, "assistant"),
        rec("m3", {"role": "user", "content": "second"}, "user"),
        rec("m4", {"role": "assistant", "content": "answer"}, "assistant"),
    ]


def test_history_on_disk_with_unanswered_call_in_the_middle_is_answered_on_load(
    tmp_path: Path, state_root: Path
) -> None:
    import json

    root = bad_bundle(tmp_path)
    k.MODEL = scripted(text("done"))
    run(root, state_root, "hello")
    [inst] = k.instance_dirs(state_root)
    base = inst / "messages" / "base.jsonl"
    base.write_text("".join(json.dumps(r) + "\n" for r in _orphan_records()), encoding="utf-8")
    [result], hist = run(root, state_root, "again")
    assert result.error is None, result.error
    assert k.roles(hist) == ["user", "assistant", "tool", "user", "assistant", "user", "assistant"]
    [res] = k.tool_results(hist)
    assert res["toolCallId"] == "c-old"
    assert res["output"]["value"]["code"] == "E_TOOL_INTERRUPTED"
    # what the model received was already valid
    seen = k.REQUESTS[-1].messages
    assert k.roles(seen)[:3] == ["user", "assistant", "tool"]
