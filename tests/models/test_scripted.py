"""The ``scripted`` model provider (CONTRACT §3)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from goondan import ModelError
from goondan.models import ModelRequest, ModelResponse, create_model_adapter


def model(*rules: dict[str, Any]) -> Any:
    return create_model_adapter("scripted", model="script", options={"rules": list(rules)})


def ask(adapter: Any, *messages: dict[str, Any]) -> ModelResponse:
    request = ModelRequest(
        messages=list(messages), tools=[], params={}, model="script", agent_name="a", instance_key="k"
    )
    return asyncio.run(adapter.generate(request))


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def test_rules_are_tried_in_order_and_the_first_match_answers() -> None:
    m = model(
        {"when": {"contains": "hello"}, "reply": {"text": "first"}},
        {"when": {"contains": "hello"}, "reply": {"text": "second"}},
        {"reply": {"text": "fallback"}},
    )
    assert ask(m, user("hello there")).text == "first"
    assert ask(m, user("bye")).text == "fallback"


def test_role_contains_and_regex_must_all_match() -> None:
    m = model(
        {"when": {"role": "assistant", "contains": "x"}, "reply": {"text": "assistant rule"}},
        {"when": {"role": "user", "regex": r"^add\s+\d+$"}, "reply": {"text": "regex rule"}},
        {"when": {"role": "user", "contains": "add"}, "reply": {"text": "contains rule"}},
        {"reply": {"text": "catch-all"}},
    )
    assert ask(m, user("add 12")).text == "regex rule"
    assert ask(m, user("add twelve")).text == "contains rule"
    assert ask(m, user("x marks")).text == "catch-all"
    assert ask(m, user("q"), {"role": "assistant", "content": "x"}).text == "assistant rule"


def test_contains_is_case_sensitive_substring() -> None:
    m = model({"when": {"contains": "Hello"}, "reply": {"text": "yes"}}, {"reply": {"text": "no"}})
    assert ask(m, user("say Hello!")).text == "yes"
    assert ask(m, user("say hello!")).text == "no"


def test_last_placeholder_is_replaced_by_the_last_message_text() -> None:
    m = model({"reply": {"text": "You said: {{last}} / {{last}}"}})
    assert ask(m, user("earlier"), {"role": "assistant", "content": "ok"}, user("now")).text == ("You said: now / now")


def test_last_of_a_tool_result_is_its_output_value() -> None:
    m = model({"when": {"role": "tool"}, "reply": {"text": "Tool said: {{last}}"}}, {"reply": {"text": "other"}})
    tool_msg = {
        "role": "tool",
        "content": [
            {"type": "tool-result", "toolCallId": "c1", "toolName": "t__x", "output": {"type": "text", "value": "42"}}
        ],
    }
    assert ask(m, user("q"), tool_msg).text == "Tool said: 42"


def test_text_parts_are_matched() -> None:
    m = model({"when": {"contains": "needle"}, "reply": {"text": "found"}})
    msg = {"role": "user", "content": [{"type": "text", "text": "hay "}, {"type": "text", "text": "needle"}]}
    assert ask(m, msg).text == "found"


def test_no_matching_rule_is_e_model_script_no_match() -> None:
    m = model({"when": {"contains": "never"}, "reply": {"text": "x"}})
    with pytest.raises(ModelError) as info:
        ask(m, user("something else"))
    assert info.value.code == "E_MODEL_SCRIPT_NO_MATCH"


def test_empty_input_is_a_no_match_error() -> None:
    m = model({"reply": {"text": "x"}})
    with pytest.raises(ModelError) as info:
        ask(m)
    assert info.value.code == "E_MODEL_SCRIPT_NO_MATCH"


def test_trailing_system_messages_are_skipped_for_non_system_rules() -> None:
    m = model(
        {"when": {"role": "user", "contains": "hi"}, "reply": {"text": "user rule: {{last}}"}},
        {"reply": {"text": "other"}},
    )
    response = ask(m, user("hi there"), system("You are terse."), system("Second instruction"))
    assert response.text == "user rule: hi there"


def test_system_rules_match_the_trailing_system_message() -> None:
    m = model(
        {"when": {"role": "system", "contains": "terse"}, "reply": {"text": "system rule: {{last}}"}},
        {"reply": {"text": "other"}},
    )
    assert ask(m, user("hi"), system("Be terse.")).text == "system rule: Be terse."


def test_tool_call_replies_get_ids_and_copied_args() -> None:
    args = {"a": 2, "b": [3]}
    m = model({"reply": {"text": "calling", "toolCalls": [{"name": "calc__add", "args": args}]}})
    first = ask(m, user("go"))
    second = ask(m, user("go"))
    assert first.text == "calling"
    [c1] = first.tool_calls
    [c2] = second.tool_calls
    assert (c1.name, c1.args) == ("calc__add", {"a": 2, "b": [3]})
    assert c1.id and c2.id and c1.id != c2.id
    c1.args["b"].append(4)
    assert args == {"a": 2, "b": [3]}
    assert ask(m, user("go")).tool_calls[0].args == {"a": 2, "b": [3]}


def test_missing_rules_is_a_config_error() -> None:
    with pytest.raises(ModelError) as info:
        create_model_adapter("scripted", model="x", options={})
    assert info.value.code == "E_MODEL_CONFIG"


def test_last_placeholder_is_filled_in_tool_call_args_recursively() -> None:
    m = model(
        {
            "reply": {
                "toolCalls": [
                    {
                        "name": "t__x",
                        "args": {"q": "find {{last}}", "n": 3, "list": ["{{last}}", {"deep": "{{last}}!"}]},
                    }
                ]
            }
        }
    )
    [call] = ask(m, user("cats")).tool_calls
    assert call.args == {"q": "find cats", "n": 3, "list": ["cats", {"deep": "cats!"}]}


def test_regex_groups_fill_text_and_tool_call_args_by_number_and_by_name() -> None:
    m = model(
        {
            "when": {"role": "user", "regex": r"add (-?\d+(?:\.\d+)?) and (?P<second>-?\d+(?:\.\d+)?)"},
            "reply": {
                "text": "Adding {{1}} and {{second}} ({{last}})",
                "toolCalls": [{"name": "calc__add", "args": {"a": "{{1}}", "b": "{{second}}", "note": "{{1}}+{{2}}"}}],
            },
        }
    )
    out = ask(m, user("please add 4 and -2.5"))
    assert out.text == "Adding 4 and -2.5 (please add 4 and -2.5)"
    # a value that is one placeholder takes the capture as a JSON number (a `type: number` parameter
    # accepts it); inside a longer string it is text
    assert out.tool_calls[0].args == {"a": 4, "b": -2.5, "note": "4+-2.5"}


def test_a_lone_placeholder_stays_a_string_unless_the_capture_reads_as_a_number_or_boolean() -> None:
    m = model(
        {
            "when": {"regex": r"(\w+) (\w+) (\w+)"},
            "reply": {
                "toolCalls": [{"name": "t", "args": {"x": "{{1}}", "y": "{{2}}", "z": "{{3}}", "w": "{{last}}"}}]
            },
        }
    )
    args = ask(m, user("007 true null")).tool_calls[0].args
    # "007" is not JSON, null is not a number or boolean, and {{last}} is always the message's text
    assert args == {"x": "007", "y": True, "z": "null", "w": "007 true null"}


def test_placeholders_a_rule_has_no_value_for_stay_as_written() -> None:
    m = model({"when": {"contains": "hi"}, "reply": {"text": "{{1}} {{name}} {{last}}", "toolCalls": []}})
    assert ask(m, user("hi")).text == "{{1}} {{name}} hi"
