"""Tool-argument validation against the catalog item's JSON Schema, with messages a model can act on.

``jsonschema`` does the validating (full Draft 2020-12); we only rewrite its findings into short,
path-qualified sentences (``args.items[0].name: expected string but got integer``) because the
model reads them and must fix its call in one try. Validators are compiled once per distinct schema.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ._json import FrozenDict, dumps, json_type_name

_MAX_ISSUES = 5
_cache: dict[bytes, Any] = {}


def _validator(schema: dict[str, Any]) -> Any:
    key = dumps(schema)
    validator = _cache.get(key)
    if validator is None:
        from jsonschema import Draft202012Validator

        validator = Draft202012Validator(schema)
        if len(_cache) > 4096:
            _cache.clear()
        _cache[key] = validator
    return validator


# --- fast path ------------------------------------------------------------------------------------
# Most tool schemas are flat objects of typed properties. For those we compile a plain-Python
# predicate that answers "valid?" in about a microsecond instead of ~20 µs through jsonschema. It is
# deliberately conservative: any keyword outside this subset makes the schema go to jsonschema only,
# and a "no" from the predicate is always re-checked by jsonschema, which also writes the messages.

Predicate = Callable[[Any], bool]
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "$comment", "$schema", "format"})
_TYPES: dict[str, Predicate] = {
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}
_fast_cache: dict[int, tuple[Any, Predicate | None]] = {}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _any_of(preds: list[Predicate]) -> Predicate:
    return lambda v: any(p(v) for p in preds)


def _all_of(preds: list[Predicate]) -> Predicate:
    return lambda v: all(p(v) for p in preds)


def _in_strings(allowed: frozenset[str]) -> Predicate:
    return lambda v: isinstance(v, str) and v in allowed


def _properties(subs: list[tuple[str, Predicate]]) -> Predicate:
    return lambda v: not isinstance(v, dict) or all(n not in v or p(v[n]) for n, p in subs)


def _required(names: tuple[str, ...]) -> Predicate:
    return lambda v: not isinstance(v, dict) or all(n in v for n in names)


def _closed(known: frozenset[str]) -> Predicate:
    return lambda v: not isinstance(v, dict) or all(k in known for k in v)


def _items(sub: Predicate) -> Predicate:
    return lambda v: not isinstance(v, list) or all(sub(x) for x in v)


def _bound(limit: float, lower: bool) -> Predicate:
    if lower:
        return lambda v: not _is_num(v) or v >= limit
    return lambda v: not _is_num(v) or v <= limit


def _size(limit: int, kind: type[str] | type[list[Any]], lower: bool) -> Predicate:
    if lower:
        return lambda v: not isinstance(v, kind) or len(v) >= limit
    return lambda v: not isinstance(v, kind) or len(v) <= limit


def _compile(schema: Any) -> Predicate | None:
    """A predicate equivalent to ``schema`` under jsonschema, or None outside the supported subset."""
    if not isinstance(schema, dict):
        return None
    checks: list[Predicate] = []
    for key, value in schema.items():
        if key in _ANNOTATIONS or (key == "additionalProperties" and value is True):
            continue
        if key == "type":
            names = value if isinstance(value, list) else [value]
            if not names or not all(isinstance(n, str) and n in _TYPES for n in names):
                return None
            preds = [_TYPES[n] for n in names]
            checks.append(preds[0] if len(preds) == 1 else _any_of(preds))
        elif key == "enum":
            if not isinstance(value, list) or not value or not all(isinstance(e, str) for e in value):
                return None
            checks.append(_in_strings(frozenset(value)))
        elif key == "properties":
            if not isinstance(value, dict):
                return None
            subs: list[tuple[str, Predicate]] = []
            for name, sub in value.items():
                compiled = _compile(sub)
                if compiled is None:
                    return None
                subs.append((name, compiled))
            checks.append(_properties(subs))
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
                return None
            checks.append(_required(tuple(value)))
        elif key == "additionalProperties":
            if value is not False or "patternProperties" in schema:
                return None
            checks.append(_closed(frozenset(schema.get("properties") or {})))
        elif key == "items":
            item = _compile(value)
            if item is None:
                return None
            checks.append(_items(item))
        elif key in ("minimum", "maximum"):
            if not _is_num(value):
                return None
            checks.append(_bound(value, key == "minimum"))
        elif key in ("minLength", "maxLength", "minItems", "maxItems"):
            if not _is_count(value):
                return None
            checks.append(_size(value, str if key.endswith("Length") else list, key.startswith("min")))
        else:
            return None
    if not checks:
        return lambda v: True
    return checks[0] if len(checks) == 1 else _all_of(checks)


def _fast_predicate(schema: dict[str, Any]) -> Predicate | None:
    if not isinstance(schema, FrozenDict):  # only immutable schemas may be cached by identity
        return _compile(schema)
    entry = _fast_cache.get(id(schema))
    if entry is None or entry[0] is not schema:
        entry = (schema, _compile(schema))
        if len(_fast_cache) > 4096:
            _fast_cache.clear()
        _fast_cache[id(schema)] = entry
    return entry[1]


def _path(parts: Any) -> str:
    out = "args"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _non_finite(value: Any, path: list[Any]) -> list[str]:
    issues: list[str] = []
    if isinstance(value, float) and not math.isfinite(value):
        issues.append(f"{_path(path)}: must be a finite number")
    elif isinstance(value, dict):
        for k, v in value.items():
            issues.extend(_non_finite(v, [*path, k]))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            issues.extend(_non_finite(v, [*path, i]))
    return issues


def _describe(error: Any) -> list[str]:
    where = list(error.absolute_path)
    kind = error.validator
    if kind == "required":
        instance = error.instance if isinstance(error.instance, dict) else {}
        return [
            f"{_path([*where, name])}: required property is missing"
            for name in error.validator_value
            if name not in instance
        ]
    if kind == "additionalProperties" and error.validator_value is False:
        props = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        instance = error.instance if isinstance(error.instance, dict) else {}
        extras = [k for k in instance if k not in props]
        if extras:
            return [f"{_path([*where, k])}: unexpected property" for k in extras]
    if kind == "type":
        expected = error.validator_value
        exp = " or ".join(expected) if isinstance(expected, list) else str(expected)
        return [f"{_path(where)}: expected {exp} but got {json_type_name(error.instance)}"]
    if kind == "enum":
        allowed = ", ".join(dumps(v).decode() for v in error.validator_value)
        return [f"{_path(where)}: must be one of [{allowed}]"]
    if kind == "const":
        return [f"{_path(where)}: must be {dumps(error.validator_value).decode()}"]
    return [f"{_path(where)}: {error.message}"]


def check_args(schema: dict[str, Any] | None, args: Any) -> list[str]:
    """Return the problems of ``args`` against ``schema`` (empty when valid)."""
    if not isinstance(args, dict):
        return [f"args: expected object but got {json_type_name(args)}"]
    issues = _non_finite(args, [])
    if not schema:
        return issues
    if not issues:
        fast = _fast_predicate(schema)
        if fast is not None and fast(args):
            return []
    validator = _validator(schema)
    if not issues and validator.is_valid(args):
        return []
    errors = sorted(validator.iter_errors(args), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    for error in errors:
        for line in _describe(error):
            if line not in issues:
                issues.append(line)
    return issues


def invalid_args_message(tool_name: str, issues: list[str]) -> str:
    shown = "; ".join(issues[:_MAX_ISSUES])
    more = f"; +{len(issues) - _MAX_ISSUES} more issues" if len(issues) > _MAX_ISSUES else ""
    return f"Invalid arguments for tool '{tool_name}': {shown}{more}"


def schema_hint(schema: dict[str, Any] | None) -> str:
    """``required=[...], allowed=[...]`` for the suggestion attached to invalid-argument errors."""
    if not schema:
        return "Call the tool with a JSON object."
    required = schema.get("required") or []
    props = schema.get("properties") or {}
    return (
        "Fix arguments to match the tool schema, then call this tool again: "
        f"required=[{', '.join(map(str, required))}], allowed=[{', '.join(map(str, props))}]"
    )
