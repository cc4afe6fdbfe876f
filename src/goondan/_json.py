"""JSON helpers: fast (orjson) encoding, strict JSON-value checks and cheap deep copies.

The runtime copies messages at the boundary of the conversation state so that callers never alias
stored data; those copies are on the hot path, hence the hand-written copier instead of
``copy.deepcopy`` (which is several times slower for plain JSON trees).
"""

from __future__ import annotations

import math
from typing import Any

import orjson

JsonValue = Any  # documented alias: None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]
JsonObject = dict[str, Any]


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


def dumps_line(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_APPEND_NEWLINE)


def dumps_pretty(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)


def dumps_str(value: Any) -> str:
    return orjson.dumps(value).decode()


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def copy_json(value: Any) -> Any:
    """Deep, mutable copy of a JSON tree: dicts and lists (frozen ones included) are copied into
    plain ``dict``/``list``; scalars are shared."""
    if isinstance(value, dict):
        return {k: copy_json(v) if isinstance(v, dict | list) else v for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) if isinstance(v, dict | list) else v for v in value]
    return value


_READ_ONLY_HINT = (
    "messages held by the conversation state are read-only; build a changed copy "
    "(message.copy() or dataclasses.replace) and emit a 'replace' event instead"
)


def _read_only(*_args: Any, **_kwargs: Any) -> Any:
    raise TypeError(_READ_ONLY_HINT)


class FrozenDict(dict[str, Any]):
    """A dict that refuses mutation. Stored messages are frozen so that reading the conversation
    state costs no copy yet can never alias-mutate it. It is still a ``dict`` for every reader
    (``json``, ``orjson``, SDKs)."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _read_only
    __ior__ = _read_only

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return copy_json(self)

    def __reduce__(self) -> Any:
        return (dict, (copy_json(self),))


class FrozenList(list[Any]):
    """A list that refuses mutation (see :class:`FrozenDict`)."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = _read_only
    sort = reverse = __iadd__ = __imul__ = _read_only

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return copy_json(self)

    def __reduce__(self) -> Any:
        return (list, (copy_json(self),))


_LEAF_TYPES = frozenset({str, int, float, bool, type(None)})


def freeze_json(value: Any) -> Any:
    """A frozen deep copy of a JSON tree (the input is never aliased).

    Frozen containers are returned as they are: they are only ever built here (deeply frozen), so
    re-emitting a stored message, or a message built from stored parts, copies nothing. Leaves are
    tested by exact type first because this runs for every message a turn appends."""
    t = type(value)
    if t is FrozenDict or t is FrozenList:
        return value
    if t is dict or isinstance(value, dict):
        leaf = _LEAF_TYPES
        return FrozenDict({k: v if type(v) in leaf else freeze_json(v) for k, v in value.items()})
    if t is list or isinstance(value, list):
        leaf = _LEAF_TYPES
        return FrozenList([v if type(v) in leaf else freeze_json(v) for v in value])
    return value


def to_frozen_json(value: Any) -> Any:
    """:func:`to_json_value` and :func:`freeze_json` in one pass: a frozen JSON copy of a tool or
    handler result, for storing it in a message without copying it twice."""
    t = type(value)
    if value is None or t is bool or t is int or t is str or t is FrozenDict or t is FrozenList:
        return value
    if t is float:
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return FrozenDict({str(k): to_frozen_json(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList([to_frozen_json(v) for v in value])
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)


def json_type_name(value: Any) -> str:
    """The JSON Schema type name of a Python value (``integer`` and ``number`` are distinguished)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() and math.isfinite(value) else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def is_plain_json(value: Any, _depth: int = 0) -> bool:
    """A quick yes for the common case: a tree of exact dicts/lists (no deeper than 32) whose leaves
    are str, int, bool, None or finite floats. False means "look closer" with :func:`json_problem`
    (which also names the problem); it is never a verdict on its own."""
    if _depth > 32:
        return False
    t = type(value)
    if t is dict or t is FrozenDict:
        items = value.values()
        for k in value:
            if type(k) is not str:
                return False
    elif t is list or t is FrozenList:
        items = value
    else:
        return value is None or t is str or t is int or t is bool or (t is float and math.isfinite(value))
    for item in items:
        it = type(item)
        if it is str or it is int or it is bool or item is None:
            continue
        if it is float:
            if not math.isfinite(item):
                return False
        elif not is_plain_json(item, _depth + 1):
            return False
    return True


def json_problem(value: Any, path: str = "$") -> str | None:
    """Return a description of the first non-JSON part of ``value``, or None if it is pure JSON."""
    stack: list[tuple[Any, str]] = [(value, path)]
    seen: set[int] = set()
    while stack:
        item, where = stack.pop()
        t = type(item)
        if item is None or t is bool or t is int or t is str:
            continue
        if t is float:
            if not math.isfinite(item):
                return f"{where}: {item!r} is not a finite number"
            continue
        if isinstance(item, dict | list):
            if id(item) in seen:
                return f"{where}: circular reference"
            seen.add(id(item))
            if isinstance(item, dict):
                for k, v in item.items():
                    if type(k) is not str:
                        return f"{where}: key {k!r} is not a string"
                    stack.append((v, f"{where}.{k}"))
            else:
                for i, v in enumerate(item):
                    stack.append((v, f"{where}[{i}]"))
            continue
        return f"{where}: {t.__name__} is not a JSON value"
    return None


def to_json_value(value: Any) -> Any:
    """Coerce a tool/handler result into JSON: tuples become lists, non-finite floats strings,
    unknown objects their ``str``. Used where the spec says "output coerced to JSON"."""
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json_value(v) for v in value]
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)
