"""JSON helpers: fast (orjson) encoding, strict JSON-value checks and cheap deep copies.

The runtime copies messages at the boundary of the conversation state so that callers never alias
stored data; those copies are on the hot path, hence the hand-written copier instead of
``copy.deepcopy`` (which is several times slower for plain JSON trees).
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from .errors import GoondanError

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


# How deeply a value a tool or a model hands over (tool arguments, tool outputs) may nest. Real
# arguments and results are a few levels deep; the bound keeps every walk over them far from
# Python's recursion limit and the stored records below the encoder's own limit (255).
MAX_VALUE_DEPTH = 64
# The bound for whole messages and records (a message wraps a value in about six more levels).
MAX_RECORD_DEPTH = 200
# orjson encodes integers in [-2**63, 2**64 - 1] only
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


class JsonDepthError(GoondanError):
    """A value nests deeper than a bound; raised instead of letting a walk hit ``RecursionError``."""

    def __init__(self, limit: int, what: str = "value") -> None:
        super().__init__(
            "E_JSON_TOO_DEEP",
            f"{what} is nested deeper than {limit} levels",
            suggestion=f"Keep JSON values at most {limit} levels deep (flatten the structure).",
        )
        self.limit = limit


def copy_json(value: Any, _depth: int = 0) -> Any:
    """Deep, mutable copy of a JSON tree: dicts and lists (frozen ones included) are copied into
    plain ``dict``/``list``; scalars are shared."""
    if _depth > MAX_RECORD_DEPTH:
        raise JsonDepthError(MAX_RECORD_DEPTH)
    if isinstance(value, dict):
        return {k: copy_json(v, _depth + 1) if isinstance(v, dict | list) else v for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v, _depth + 1) if isinstance(v, dict | list) else v for v in value]
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


_SCHEMA_READ_ONLY_HINT = (
    "a tool's parameters schema is shared by every step and read-only; give the catalog item a changed "
    "copy instead: item['parameters'] = {**item['parameters'], 'properties': {...}}"
)


def _schema_read_only(*_args: Any, **_kwargs: Any) -> Any:
    raise TypeError(_SCHEMA_READ_ONLY_HINT)


class FrozenSchema(FrozenDict):
    """A tool's frozen ``parameters`` (and its sub-schemas): editing one in place (a step middleware
    adding a property) says what to do for a schema; the message hint of :class:`FrozenDict` told
    the user to emit a 'replace' event."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _schema_read_only
    __ior__ = _schema_read_only


class FrozenSchemaList(FrozenList):
    """A list inside a :class:`FrozenSchema` (``required``, ``enum``, ``anyOf``)."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = _schema_read_only
    sort = reverse = __iadd__ = __imul__ = _schema_read_only


def freeze_schema(value: Any, _depth: int = 0) -> Any:
    """A frozen deep copy of a JSON Schema, as :func:`freeze_json` but with the schema's hint."""
    if _depth > MAX_RECORD_DEPTH:
        raise JsonDepthError(MAX_RECORD_DEPTH, "schema")
    if isinstance(value, dict):
        return FrozenSchema({k: freeze_schema(v, _depth + 1) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenSchemaList([freeze_schema(v, _depth + 1) for v in value])
    return value


_LEAF_TYPES = frozenset({str, int, float, bool, type(None)})


def freeze_json(value: Any, _depth: int = 0) -> Any:
    """A frozen deep copy of a JSON tree (the input is never aliased).

    Frozen containers are returned as they are: they are only ever built here (deeply frozen), so
    re-emitting a stored message, or a message built from stored parts, copies nothing. Leaves are
    tested by exact type first because this runs for every message a turn appends. Deeper than
    :data:`MAX_RECORD_DEPTH` is :class:`JsonDepthError` (such a record could not be stored)."""
    t = type(value)
    if t is FrozenDict or t is FrozenList:
        return value
    if _depth > MAX_RECORD_DEPTH:
        raise JsonDepthError(MAX_RECORD_DEPTH, "message")
    if t is dict or isinstance(value, dict):
        leaf = _LEAF_TYPES
        d = _depth + 1
        return FrozenDict({k: v if type(v) in leaf else freeze_json(v, d) for k, v in value.items()})
    if t is list or isinstance(value, list):
        leaf = _LEAF_TYPES
        d = _depth + 1
        return FrozenList([v if type(v) in leaf else freeze_json(v, d) for v in value])
    return value


def to_frozen_json(value: Any, _depth: int = 0) -> Any:
    """:func:`to_json_value` and :func:`freeze_json` in one pass: a frozen JSON copy of a tool or
    handler result, for storing it in a message without copying it twice. Deeper than
    :data:`MAX_VALUE_DEPTH` is :class:`JsonDepthError`."""
    t = type(value)
    if value is None or t is bool or t is int or t is str or t is FrozenDict or t is FrozenList:
        return value
    if t is float:
        return value if math.isfinite(value) else str(value)
    if _depth >= MAX_VALUE_DEPTH:
        raise JsonDepthError(MAX_VALUE_DEPTH)
    if isinstance(value, dict):
        return FrozenDict({str(k): to_frozen_json(v, _depth + 1) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList([to_frozen_json(v, _depth + 1) for v in value])
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    plain = _plain_object(value)
    return str(value) if plain is _NOT_PLAIN else to_frozen_json(plain, _depth + 1)


_NOT_PLAIN: Any = object()


def _plain_object(value: Any) -> Any:
    """The JSON form of an object a tool commonly returns, or ``_NOT_PLAIN``: a pydantic model its
    ``model_dump(mode="json")``, a dataclass instance its fields, a set or frozenset a list, an enum
    member its value, a date/time its ISO text. Their ``str()`` (what anything else becomes) would
    hand the model ``Point(x=1, y=2)`` or ``2026-11-24 21:00:00`` instead of data. Only reached for
    values that are not plain JSON, so a tool returning dicts and lists pays nothing."""
    import dataclasses
    import datetime
    import enum

    try:
        dump = getattr(value, "model_dump", None)
        if callable(dump) and not isinstance(value, type):
            try:
                return dump(mode="json")
            except TypeError:  # a model_dump of another library, without pydantic's mode argument
                return dump()
    except Exception:  # a model that cannot serialize itself: its str(), as before
        return _NOT_PLAIN
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, set | frozenset):
        items = list(value)
        try:
            items.sort()
        except TypeError:  # mixed types: the set's own order
            pass
        return items
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return _NOT_PLAIN


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


def json_problem(value: Any, path: str = "$", max_depth: int = MAX_RECORD_DEPTH) -> str | None:
    """Return a description of the first non-JSON part of ``value`` (or of nesting deeper than
    ``max_depth``), or None if it is pure JSON. Iterative: any depth is safe to look at."""
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    seen: set[int] = set()
    while stack:
        item, where, depth = stack.pop()
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
            if depth >= max_depth:
                return f"{path}: nested deeper than the limit of {max_depth} levels"
            seen.add(id(item))
            if isinstance(item, dict):
                for k, v in item.items():
                    if type(k) is not str:
                        return f"{where}: key {k!r} is not a string"
                    stack.append((v, f"{where}.{k}", depth + 1))
            else:
                for i, v in enumerate(item):
                    stack.append((v, f"{where}[{i}]", depth + 1))
            continue
        return f"{where}: {t.__name__} is not a JSON value"
    return None


def to_json_value(value: Any, _depth: int = 0) -> Any:
    """Coerce a tool/handler result into JSON: tuples become lists, non-finite floats strings,
    pydantic models, dataclasses, sets, enums and dates their JSON form (:func:`_plain_object`),
    other objects their ``str``. Used where the spec says "output coerced to JSON". Deeper than
    :data:`MAX_VALUE_DEPTH` is :class:`JsonDepthError`."""
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        return value if math.isfinite(value) else str(value)
    if _depth >= MAX_VALUE_DEPTH:
        raise JsonDepthError(MAX_VALUE_DEPTH)
    if isinstance(value, dict):
        return {str(k): to_json_value(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json_value(v, _depth + 1) for v in value]
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    plain = _plain_object(value)
    return str(value) if plain is _NOT_PLAIN else to_json_value(plain, _depth + 1)


def repair_text(text: str) -> str:
    """``text`` with every lone surrogate (which no UTF-8 file can hold) replaced by U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def repair_json(value: Any, max_depth: int = MAX_VALUE_DEPTH, _depth: int = 0) -> Any:
    """A plain JSON copy of ``value`` that can always be stored: integers outside the 64-bit range
    become their decimal string, lone surrogates U+FFFD, non-finite floats and unknown objects their
    ``str``. Only nesting deeper than ``max_depth`` cannot be repaired (:class:`JsonDepthError`).

    This is the slow path: callers first try to encode the value as it is."""
    t = type(value)
    if value is None or t is bool:
        return value
    if isinstance(value, str):
        return repair_text(str(value))
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value) if _INT_MIN <= value <= _INT_MAX else str(int(value))
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else str(value)
    if _depth >= max_depth:
        raise JsonDepthError(max_depth)
    if isinstance(value, dict):
        return {repair_text(str(k)): repair_json(v, max_depth, _depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [repair_json(v, max_depth, _depth + 1) for v in value]
    return repair_text(str(value))


def encoded_size(value: Any) -> int | None:
    """The size of ``value`` as stored JSON, or None when it cannot be stored as it is (see
    :func:`repair_json`)."""
    try:
        return len(orjson.dumps(value))
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return None
