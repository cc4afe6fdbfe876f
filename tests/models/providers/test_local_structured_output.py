"""The ``local`` provider's structured output: the JSON-Schema grammar makes the answer the agent's
output schema itself (not a string), the instructions show the schema, and the parsed answer's
text is that JSON, which the runtime then validates like any provider's."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from goondan.models._local_format import instructions, parse_output, response_schema

from .conftest import ADD_TOOL

OUTPUT = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "array", "items": {"type": "integer"}}},
    "required": ["city"],
    "additionalProperties": False,
}


def valid(schema: dict[str, Any], value: Any) -> bool:
    return bool(Draft202012Validator(schema).is_valid(value))


def test_the_grammar_makes_the_answer_the_output_schema_and_keeps_tool_calls() -> None:
    schema = response_schema([ADD_TOOL], "auto", 4, OUTPUT)
    assert valid(schema, {"answer": {"city": "Seoul", "days": [1, 2]}})
    assert not valid(schema, {"answer": "Seoul"})
    assert not valid(schema, {"answer": {"days": [1]}})
    assert valid(schema, [{"tool": "calc__add", "arguments": {"a": 1, "b": 2}}])
    assert response_schema([ADD_TOOL], "none", output_schema=OUTPUT)["properties"]["answer"] == OUTPUT
    # without an output schema the answer stays a string
    assert valid(response_schema([ADD_TOOL], "auto"), {"answer": "Seoul"})


def test_the_instructions_show_the_output_schema() -> None:
    text = instructions([ADD_TOOL], "auto", 4, OUTPUT)
    assert json.dumps(OUTPUT, separators=(",", ":")) in text
    assert "schema" not in instructions([], "none").lower()


def test_a_structured_answer_becomes_its_json_text() -> None:
    out = parse_output('{"answer": {"city": "Seoul"}}', "stop", None, structured=True)
    assert out.issues == [] and json.loads(out.text or "") == {"city": "Seoul"}
    # unstructured, a non-string answer is still a problem the runtime retries
    assert parse_output('{"answer": {"city": "Seoul"}}', "stop", None).issues


@settings(max_examples=100, deadline=None)
@given(st.fixed_dictionaries({"city": st.text()}, optional={"days": st.lists(st.integers(-1000, 1000), max_size=5)}))
def test_every_value_the_grammar_admits_comes_back_unchanged(value: dict[str, Any]) -> None:
    raw = json.dumps({"answer": value})
    assert valid(response_schema([], "auto", output_schema=OUTPUT), json.loads(raw))
    out = parse_output(raw, "stop", None, structured=True)
    assert json.loads(out.text or "null") == value
