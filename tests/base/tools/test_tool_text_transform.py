"""text-transform: exact string operations (digest §4.4, §9.2 tools-text-transform)."""

from __future__ import annotations

import pytest
from tools_testkit import FakeCtx, run

from goondan.base.tools import text_transform as tt
from goondan.base.tools._common import ToolInputError


def test_replace_first_occurrence_by_default(ctx: FakeCtx) -> None:
    out = run(tt.replace, ctx, {"text": "a-b-c-d", "search": "-", "replacement": "+"})
    assert out == {"original": "a-b-c-d", "result": "a+b-c-d", "replacements": 1}


def test_replace_all_counts_replacements(ctx: FakeCtx) -> None:
    out = run(tt.replace, ctx, {"text": "a-b-c-d", "search": "-", "replacement": "+", "all": True})
    assert out == {"original": "a-b-c-d", "result": "a+b+c+d", "replacements": 3}


def test_replace_without_match_or_replacement(ctx: FakeCtx) -> None:
    assert run(tt.replace, ctx, {"text": "abc", "search": "z"})["replacements"] == 0
    assert run(tt.replace, ctx, {"text": "abc", "search": "b"})["result"] == "ac"
    with pytest.raises(ToolInputError, match="'search' must be a non-empty string"):
        run(tt.replace, ctx, {"text": "abc", "search": ""})


def test_slice_start_end(ctx: FakeCtx) -> None:
    out = run(tt.slice_text, ctx, {"text": "hello world", "start": 6, "end": 11})
    assert out == {"original": "hello world", "result": "world", "start": 6, "end": 11, "length": 5}
    assert run(tt.slice_text, ctx, {"text": "hello world", "start": -5})["result"] == "world"
    assert run(tt.slice_text, ctx, {"text": "hello", "start": 3, "end": 1})["result"] == ""
    assert run(tt.slice_text, ctx, {"text": "hello", "end": 99})["end"] == 5


def test_split_and_max_parts(ctx: FakeCtx) -> None:
    assert run(tt.split, ctx, {"text": "a\nb\nc"}) == {"delimiter": "\n", "count": 3, "parts": ["a", "b", "c"]}
    assert run(tt.split, ctx, {"text": "a,b,c", "delimiter": ",", "maxParts": 2})["parts"] == ["a", "b"]
    assert run(tt.split, ctx, {"text": "abc", "delimiter": ""})["parts"] == ["a", "b", "c"]


def test_join(ctx: FakeCtx) -> None:
    assert run(tt.join, ctx, {"parts": ["a", "b"], "delimiter": ", "}) == {
        "delimiter": ", ",
        "count": 2,
        "result": "a, b",
    }
    assert run(tt.join, ctx, {"parts": ["x", "y"]})["result"] == "x\ny"
    with pytest.raises(ToolInputError, match="'parts' must be an array of strings"):
        run(tt.join, ctx, {"parts": ["a", 1]})


def test_trim_modes(ctx: FakeCtx) -> None:
    text = "  hi  "
    assert run(tt.trim, ctx, {"text": text}) == {"original": text, "result": "hi", "mode": "both", "trimmedLength": 2}
    assert run(tt.trim, ctx, {"text": text, "mode": "start"})["result"] == "hi  "
    assert run(tt.trim, ctx, {"text": text, "mode": "end"})["result"] == "  hi"
    with pytest.raises(ToolInputError, match="'mode' must be one of both, start, end"):
        run(tt.trim, ctx, {"text": text, "mode": "middle"})


def test_case(ctx: FakeCtx) -> None:
    assert run(tt.change_case, ctx, {"text": "Hello", "to": "upper"}) == {
        "original": "Hello",
        "result": "HELLO",
        "to": "upper",
    }
    assert run(tt.change_case, ctx, {"text": "Hello", "to": "lower"})["result"] == "hello"
    with pytest.raises(ToolInputError, match="'to' must be one of upper, lower"):
        run(tt.change_case, ctx, {"text": "Hello"})
