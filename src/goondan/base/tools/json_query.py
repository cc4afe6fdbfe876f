"""json-query: look into JSON text without writing code.

``data`` is always JSON *text* (what a previous tool returned). Paths are dot/bracket paths:
``.`` (the whole document), ``a.b.c``, ``items[1]``, ``items[-1]`` (from the end),
``users[0].name``; a leading ``.`` is allowed. A path that does not exist is a normal answer
(``found: false``), not an error; a path that cannot be parsed is an input error.
"""

from __future__ import annotations

import json
import re
from typing import Any

from goondan.base.tools._common import (
    ToolInputError,
    args_dict,
    check_keys,
    opt_int,
    opt_str,
    require_str,
)
from goondan.types import ToolContext

MAX_DEPTH = 1000
_SEGMENT = re.compile(r"([^.\[\]]*)((?:\[-?\d+\])*)")
_INDEX = re.compile(r"\[(-?\d+)\]")
_MISSING = object()


def _data(args: dict[str, Any]) -> Any:
    text = require_str(args, "data")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolInputError(
            f"'data' must be a valid JSON string: {exc.msg} at line {exc.lineno} column {exc.colno}",
            suggestion="Pass the JSON text itself (e.g. the body returned by http-fetch__get).",
        ) from None


def parse_path(path: str) -> list[str | int]:
    """``"a.items[1].b"`` → ``["a", "items", 1, "b"]``; ``"."`` → ``[]``."""
    text = path.strip()
    if text in ("", "."):
        return []
    if text.startswith("."):
        text = text[1:]
    steps: list[str | int] = []
    for raw in text.split("."):
        match = _SEGMENT.fullmatch(raw)
        if raw == "" or match is None or (match.group(1) == "" and not match.group(2)):
            raise ToolInputError(
                f"'path' is not a valid path: '{path}'",
                suggestion="Use '.', 'a.b.c', 'items[1]' or 'users[0].name'.",
            )
        if match.group(1):
            steps.append(match.group(1))
        steps.extend(int(i) for i in _INDEX.findall(match.group(2)))
    return steps


def _walk(value: Any, steps: list[str | int]) -> Any:
    for step in steps:
        if isinstance(step, int):
            if not isinstance(value, list) or not -len(value) <= step < len(value):
                return _MISSING
            value = value[step]
        else:
            if not isinstance(value, dict) or step not in value:
                return _MISSING
            value = value[step]
    return value


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def query(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``json-query__query``: ``{data, path?}`` → ``{path, found, value}``."""
    args = args_dict(input)
    check_keys(args, ("data", "path"))
    data = _data(args)
    path = opt_str(args, "path") or "."
    value = _walk(data, parse_path(path))
    found = value is not _MISSING
    return {"path": path, "found": found, "value": value if found else None}


def pick(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``json-query__pick``: ``{data, keys}`` → ``{keys, result}``; an array of objects is picked item-wise."""
    args = args_dict(input)
    check_keys(args, ("data", "keys"))
    data = _data(args)
    keys = args.get("keys")
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k for k in keys):
        raise ToolInputError("'keys' must be a non-empty array of non-empty strings")

    def one(obj: dict[str, Any]) -> dict[str, Any]:
        return {k: obj[k] for k in keys if k in obj}

    if isinstance(data, dict):
        result: Any = one(data)
    elif isinstance(data, list) and all(isinstance(item, dict) for item in data):
        result = [one(item) for item in data]
    else:
        raise ToolInputError(
            f"'data' must be a JSON object (or an array of objects) to pick keys from, got {_type_name(data)}"
        )
    return {"keys": keys, "result": result}


def count(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``json-query__count``: ``{data, path?}`` → ``{path, count, type}`` (missing path: 0 and null)."""
    args = args_dict(input)
    check_keys(args, ("data", "path"))
    data = _data(args)
    path = opt_str(args, "path") or "."
    value = _walk(data, parse_path(path))
    if value is _MISSING:
        return {"path": path, "count": 0, "type": None}
    n = len(value) if isinstance(value, list | dict | str) else 0 if value is None else 1
    return {"path": path, "count": n, "type": _type_name(value)}


def _flatten(items: list[Any], depth: int) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, list) and depth > 0:
            out.extend(_flatten(item, depth - 1))
        else:
            out.append(item)
    return out


def flatten(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``json-query__flatten``: ``{data (array), depth?}`` → ``{depth, count, result}``."""
    args = args_dict(input)
    check_keys(args, ("data", "depth"))
    data = _data(args)
    depth = opt_int(args, "depth", 1, minimum=0, maximum=MAX_DEPTH)
    assert depth is not None
    if not isinstance(data, list):
        raise ToolInputError(f"'data' must be a JSON array to flatten, got {_type_name(data)}")
    result = _flatten(data, depth)
    return {"depth": depth, "count": len(result), "result": result}


handlers = {"query": query, "pick": pick, "count": count, "flatten": flatten}
