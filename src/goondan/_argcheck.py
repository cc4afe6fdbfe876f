"""Tool-argument validation against the catalog item's JSON Schema, with messages a model can act on.

``jsonschema`` does the validating (full Draft 2020-12); we only rewrite its findings into short,
path-qualified sentences (``args.items[0].name: expected string but got integer``) because the
model reads them and must fix its call in one try. Validators are compiled once per distinct schema.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ._json import FrozenDict, dumps, is_plain_json, json_type_name

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
# Each JSON type as a Python expression over a variable; the exact-type test comes first because
# arguments decoded from JSON have exactly these types.
_TYPE_TESTS: dict[str, str] = {
    "string": "isinstance({v}, str)",
    "boolean": "isinstance({v}, bool)",
    "null": "{v} is None",
    "object": "isinstance({v}, dict)",
    "array": "isinstance({v}, list)",
    "number": "(type({v}) is int or type({v}) is float"
    " or (isinstance({v}, (int, float)) and not isinstance({v}, bool)))",
    "integer": "(type({v}) is int or (isinstance({v}, int) and not isinstance({v}, bool))"
    " or (isinstance({v}, float) and {v}.is_integer()))",
}
_NUM = "(isinstance({v}, (int, float)) and not isinstance({v}, bool))"
_fast_cache: dict[int, tuple[Any, Predicate | None]] = {}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Unsupported(Exception):
    """The schema uses a keyword outside the compiled subset."""


class _Gen:
    """Writes one Python function that returns False as soon as a keyword fails: a straight-line
    check is several times faster than a tree of closures (one call per keyword per value)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {}
        self.n = 0

    def const(self, value: Any) -> str:
        name = f"_c{len(self.consts)}"
        self.consts[name] = value
        return name

    def var(self) -> str:
        self.n += 1
        return f"x{self.n}"

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def schema(self, schema: Any, v: str, depth: int) -> None:
        if not isinstance(schema, dict):
            raise _Unsupported
        for key, value in schema.items():
            if key in _ANNOTATIONS or (key == "additionalProperties" and value is True):
                continue
            if key == "type":
                names = value if isinstance(value, list) else [value]
                if not names or not all(isinstance(n, str) and n in _TYPE_TESTS for n in names):
                    raise _Unsupported
                test = " or ".join(_TYPE_TESTS[n].format(v=v) for n in names)
                self.emit(depth, f"if not ({test}): return False")
            elif key == "enum":
                if not isinstance(value, list) or not value or not all(isinstance(e, str) for e in value):
                    raise _Unsupported
                allowed = self.const(frozenset(value))
                self.emit(depth, f"if not (isinstance({v}, str) and {v} in {allowed}): return False")
            elif key == "properties":
                if not isinstance(value, dict):
                    raise _Unsupported
                self.emit(depth, f"if isinstance({v}, dict):")
                self.emit(depth + 1, "pass")
                for name, sub in value.items():
                    key_const = self.const(name)
                    x = self.var()
                    self.emit(depth + 1, f"if {key_const} in {v}:")
                    self.emit(depth + 2, f"{x} = {v}[{key_const}]")
                    self.schema(sub, x, depth + 2)
            elif key == "required":
                if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
                    raise _Unsupported
                if value:
                    present = " and ".join(f"{self.const(n)} in {v}" for n in value)
                    self.emit(depth, f"if isinstance({v}, dict) and not ({present}): return False")
            elif key == "additionalProperties":
                if value is not False or "patternProperties" in schema:
                    raise _Unsupported
                known = self.const(frozenset(schema.get("properties") or {}))
                self.emit(depth, f"if isinstance({v}, dict) and not {known}.issuperset({v}): return False")
            elif key == "items":
                x = self.var()
                self.emit(depth, f"if isinstance({v}, list):")
                self.emit(depth + 1, f"for {x} in {v}:")
                self.emit(depth + 2, "pass")
                self.schema(value, x, depth + 2)
            elif key in ("minimum", "maximum"):
                if not _is_num(value):
                    raise _Unsupported
                op = "<" if key == "minimum" else ">"
                self.emit(depth, f"if {_NUM.format(v=v)} and {v} {op} {self.const(value)}: return False")
            elif key in ("minLength", "maxLength", "minItems", "maxItems"):
                if not _is_count(value):
                    raise _Unsupported
                kind = "str" if key.endswith("Length") else "list"
                op = "<" if key.startswith("min") else ">"
                self.emit(depth, f"if isinstance({v}, {kind}) and len({v}) {op} {value}: return False")
            else:
                raise _Unsupported


def _compile(schema: Any) -> Predicate | None:
    """A predicate equivalent to ``schema`` under jsonschema, or None outside the supported subset."""
    gen = _Gen()
    try:
        gen.schema(schema, "v", 1)
    except _Unsupported:
        return None
    source = "def check(v):\n" + "\n".join(gen.lines) + ("\n" if gen.lines else "") + "    return True\n"
    namespace: dict[str, Any] = dict(gen.consts)
    exec(compile(source, "<goondan tool schema>", "exec"), namespace)  # generated from the checked subset above
    check: Predicate = namespace["check"]
    return check


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
    # plain JSON has no NaN/inf: the path-naming scan runs only when the quick test is not sure
    issues = [] if is_plain_json(args) else _non_finite(args, [])
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


_JSON_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
_schema_problems: dict[bytes, str | None] = {}


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not a valid JSON Schema (Draft 2020-12), or None when it is: ``at
    properties.limit.type: 'integr' is not a JSON type (string, ...); did you mean 'integer'?``.

    For schemas written by users' code (an extension's ``CONFIG_SCHEMA``, ``api.tools.register``'s
    ``parameters``), which the validator otherwise rejects only when it first validates something,
    with ``jsonschema``'s own error (``Unknown type 'integr' for validator with schema: ...``). The
    metaschema check takes about a millisecond, so the answer is kept per distinct schema."""
    try:
        key = dumps(schema)
    except Exception:  # not JSON: the caller's own check says so
        key = None
    if key is not None and key in _schema_problems:
        return _schema_problems[key]
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    problem: str | None = None
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = ".".join(str(p) for p in exc.path)
        problem = exc.message
        if exc.path and exc.path[-1] == "type" and isinstance(exc.instance, str):
            from ._hints import did_you_mean

            problem = f"{exc.instance!r} is not a JSON type ({', '.join(_JSON_TYPES)})"
            hint = did_you_mean(exc.instance, _JSON_TYPES)
            problem += f"; {hint}" if hint else ""
        problem = f"at {where}: {problem}" if where else problem
    if key is not None:
        if len(_schema_problems) > 1024:
            _schema_problems.clear()
        _schema_problems[key] = problem
    return problem
