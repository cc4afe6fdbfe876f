"""Reading and checking a structured final answer (``goondan.engine._output``): any JSON value the
model writes (bare or in one code fence) parses back to itself; problems name the path the model
must fix; non-JSON and non-finite answers are problems, never exceptions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goondan.engine._output import check_output, feedback_text, output_invalid, parse_answer, validate_answer

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(json_values, st.sampled_from(["{}", "  {}\n", "```json\n{}\n```", "```\n{}\n```"]))
def test_any_json_answer_parses_back_to_itself_bare_or_fenced(value: Any, frame: str) -> None:
    text = frame.replace("{}", json.dumps(value))
    parsed, problem = parse_answer(text)
    assert problem is None
    assert parsed == value


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_parsing_arbitrary_text_never_raises(text: str) -> None:
    value, problem = parse_answer(text)
    assert problem is None or value is None


@pytest.mark.parametrize("text", [None, "", "   ", "NaN", "Infinity", "{'n': 1}", "here you go: {}"])
def test_missing_or_non_json_answers_are_problems(text: str | None) -> None:
    value, issues = validate_answer({"type": "object"}, text)
    assert value is None and len(issues) == 1 and issues[0].startswith("output:")


def test_problems_name_the_path_to_fix_outermost_first() -> None:
    schema = {
        "type": "object",
        "properties": {
            "total": {"type": "integer"},
            "items": {"type": "array", "items": {"type": "object", "required": ["id"]}},
        },
        "required": ["total", "items"],
        "additionalProperties": False,
    }
    issues = check_output(schema, {"items": [{"id": 1}, {}], "extra": 1})
    assert issues == [
        "output.total: required property is missing",
        "output.extra: unexpected property",
        "output.items[1].id: required property is missing",
    ]
    assert check_output(schema, {"total": 1, "items": []}) == []


def test_feedback_and_error_list_at_most_eight_problems() -> None:
    issues = [f"output.p{i}: required property is missing" for i in range(12)]
    feedback = feedback_text({"type": "object"}, issues)
    assert "- output.p7:" in feedback and "output.p8:" not in feedback and "(+4 more)" in feedback
    error = output_invalid("agent", 3, issues)
    assert error.code == "E_OUTPUT_INVALID"
    assert "after 3 attempts" in error.message and "(+4 more)" in error.message
    assert error.suggestion
