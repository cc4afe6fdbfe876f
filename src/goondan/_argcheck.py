"""Tool-argument validation against the catalog item's JSON Schema, with messages a model can act on.

``jsonschema`` does the validating (full Draft 2020-12); we only rewrite its findings into short,
path-qualified sentences (``args.items[0].name: expected string but got integer``) because the
model reads them and must fix its call in one try. Validators are compiled once per distinct schema.
"""

from __future__ import annotations

import math
from typing import Any

from ._json import dumps, json_type_name

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
