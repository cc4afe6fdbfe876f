"""json-query: query/pick/count/flatten on JSON text (digest §4.4, §9.2 tools-json-query)."""

from __future__ import annotations

import json

import pytest
from tools_testkit import FakeCtx, run

from goondan.base.tools import json_query as jq
from goondan.base.tools._common import ToolInputError

DOC = json.dumps({"a": {"b": {"c": 42}}, "items": ["a", "b", "c"], "users": [{"name": "ann", "age": 3}], "n": None})


def test_query_dotted_path(ctx: FakeCtx) -> None:
    assert run(jq.query, ctx, {"data": DOC, "path": "a.b.c"}) == {"path": "a.b.c", "found": True, "value": 42}


def test_query_array_index(ctx: FakeCtx) -> None:
    assert run(jq.query, ctx, {"data": DOC, "path": "items[1]"})["value"] == "b"
    assert run(jq.query, ctx, {"data": DOC, "path": "items[-1]"})["value"] == "c"
    assert run(jq.query, ctx, {"data": DOC, "path": "users[0].name"})["value"] == "ann"
    assert run(jq.query, ctx, {"data": DOC, "path": ".a.b"})["value"] == {"c": 42}


def test_query_default_path_is_the_whole_document(ctx: FakeCtx) -> None:
    out = run(jq.query, ctx, {"data": DOC})
    assert out["path"] == "." and out["found"] is True and out["value"] == json.loads(DOC)


def test_query_missing_path_is_not_found_with_null(ctx: FakeCtx) -> None:
    for path in ("a.x", "items[9]", "a.b.c.d", "items.name", "users[0][1]"):
        assert run(jq.query, ctx, {"data": DOC, "path": path}) == {"path": path, "found": False, "value": None}
    # an existing null is found
    assert run(jq.query, ctx, {"data": DOC, "path": "n"}) == {"path": "n", "found": True, "value": None}


@pytest.mark.parametrize("path", ["a..b", "items[x]", "a[", "a.]"])
def test_unparseable_paths_are_input_errors(ctx: FakeCtx, path: str) -> None:
    with pytest.raises(ToolInputError, match="'path' is not a valid path"):
        run(jq.query, ctx, {"data": DOC, "path": path})


def test_invalid_json_is_an_input_error_with_position(ctx: FakeCtx) -> None:
    with pytest.raises(ToolInputError, match=r"'data' must be a valid JSON string: .* line 1 column"):
        run(jq.query, ctx, {"data": "{oops"})
    with pytest.raises(ToolInputError, match="'data' must be a non-empty string"):
        run(jq.query, ctx, {"data": ""})


def test_pick_keeps_only_present_keys(ctx: FakeCtx) -> None:
    data = json.dumps({"a": 1, "b": 2, "c": 3})
    assert run(jq.pick, ctx, {"data": data, "keys": ["a", "c", "zz"]}) == {
        "keys": ["a", "c", "zz"],
        "result": {"a": 1, "c": 3},
    }
    rows = json.dumps([{"a": 1, "b": 2}, {"b": 3}])
    assert run(jq.pick, ctx, {"data": rows, "keys": ["b"]})["result"] == [{"b": 2}, {"b": 3}]
    with pytest.raises(ToolInputError, match="'keys' must be a non-empty array"):
        run(jq.pick, ctx, {"data": data, "keys": []})
    with pytest.raises(ToolInputError, match="must be a JSON object"):
        run(jq.pick, ctx, {"data": "[1, 2]", "keys": ["a"]})


def test_count_by_type_and_missing(ctx: FakeCtx) -> None:
    assert run(jq.count, ctx, {"data": DOC, "path": "items"}) == {"path": "items", "count": 3, "type": "array"}
    assert run(jq.count, ctx, {"data": DOC, "path": "a"}) == {"path": "a", "count": 1, "type": "object"}
    assert run(jq.count, ctx, {"data": DOC, "path": "users[0].name"})["count"] == 3
    assert run(jq.count, ctx, {"data": DOC, "path": "nope"}) == {"path": "nope", "count": 0, "type": None}
    assert run(jq.count, ctx, {"data": DOC})["count"] == 4


def test_flatten_one_level_by_default(ctx: FakeCtx) -> None:
    out = run(jq.flatten, ctx, {"data": "[[1,2],[3,[4,5]]]"})
    assert out == {"depth": 1, "count": 4, "result": [1, 2, 3, [4, 5]]}
    deep = run(jq.flatten, ctx, {"data": "[[1,2],[3,[4,5]]]", "depth": 2})
    assert deep["result"] == [1, 2, 3, 4, 5]
    assert run(jq.flatten, ctx, {"data": "[[1]]", "depth": 0})["result"] == [[1]]
    with pytest.raises(ToolInputError, match="must be a JSON array to flatten, got object"):
        run(jq.flatten, ctx, {"data": "{}"})
    with pytest.raises(ToolInputError, match="'depth' must be greater than or equal to 0"):
        run(jq.flatten, ctx, {"data": "[]", "depth": -1})
