"""The compiled fast path of tool-argument validation must agree with jsonschema exactly."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from goondan._argcheck import _compile, check_args
from goondan._json import freeze_json

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-5, 5, allow_nan=False) | st.text(max_size=4),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from("abcd"), children, max_size=3),
    max_leaves=8,
)
type_names = st.sampled_from(["string", "integer", "number", "boolean", "null", "array", "object"])


def schemas(depth: int = 2) -> st.SearchStrategy[dict]:
    leaf = st.fixed_dictionaries(
        {},
        optional={
            "type": type_names | st.lists(type_names, min_size=1, max_size=2),
            "enum": st.lists(st.text(max_size=2), min_size=1, max_size=3),
            "minimum": st.integers(-3, 3),
            "maximum": st.integers(-3, 3),
            "minLength": st.integers(0, 3),
            "maxLength": st.integers(0, 3),
            "minItems": st.integers(0, 2),
            "maxItems": st.integers(0, 2),
            "description": st.text(max_size=3),
        },
    )
    if depth == 0:
        return leaf
    child = schemas(depth - 1)
    return st.fixed_dictionaries(
        {},
        optional={
            "type": type_names,
            "properties": st.dictionaries(st.sampled_from("abcd"), child, max_size=3),
            "required": st.lists(st.sampled_from("abcd"), max_size=3, unique=True),
            "additionalProperties": st.booleans(),
            "items": child,
            "minimum": st.integers(-3, 3),
        },
    )


@settings(max_examples=600, deadline=None)
@given(schemas(), json_values)
def test_fast_predicate_agrees_with_jsonschema(schema, value):
    predicate = _compile(schema)
    assert predicate is not None  # every generated keyword is in the supported subset
    assert predicate(value) == Draft202012Validator(schema).is_valid(value)


def test_unsupported_keywords_fall_back_to_jsonschema():
    for schema in (
        {"oneOf": [{"type": "string"}]},
        {"pattern": "^a"},
        {"enum": [1, True]},
        {"additionalProperties": {"type": "string"}},
        {"$ref": "#/$defs/x"},
    ):
        assert _compile(schema) is None
    schema = freeze_json({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}})
    assert check_args(schema, {"s": "abc"}) == []
    assert check_args(schema, {"s": "xyz"}) == ["args.s: 'xyz' does not match '^a'"]


finite_or_not = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats() | st.text(max_size=2),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from("abc"), children, max_size=3),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from("abc"), finite_or_not, max_size=3), st.booleans())
def test_non_finite_numbers_are_found_at_any_depth(args, frozen):
    """check_args reports exactly the non-finite numbers, whether the quick plain-JSON test or the
    path-naming scan decides, for plain and frozen trees."""
    import math

    from goondan._argcheck import _non_finite

    value = freeze_json(args) if frozen else args

    def has_non_finite(v):
        if isinstance(v, float):
            return not math.isfinite(v)
        if isinstance(v, dict):
            return any(has_non_finite(x) for x in v.values())
        if isinstance(v, list):
            return any(has_non_finite(x) for x in v)
        return False

    assert bool(_non_finite(value, [])) == has_non_finite(value)
    assert bool(check_args({}, value)) == has_non_finite(value)
