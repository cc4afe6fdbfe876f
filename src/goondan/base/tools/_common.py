"""Argument checks and error types shared by the standard tools.

The executor already validates arguments against each export's JSON Schema before a handler runs,
but handlers repeat the checks because they are also called directly (by tests, by users' own
tools that wrap them) and because some rules are worded better here than a schema validator can:
a model that sent ``""`` should read ``'command' must be a non-empty string``, not a schema path.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from goondan.errors import GoondanError

INVALID_ARGS = "E_TOOL_INVALID_ARGS"


class ToolInputError(GoondanError):
    """The model called a tool with arguments the tool cannot use (code ``E_TOOL_INVALID_ARGS``)."""

    def __init__(self, message: str, *, suggestion: str | None = None) -> None:
        super().__init__(INVALID_ARGS, message, suggestion=suggestion)


class ToolExecutionError(GoondanError):
    """The arguments were fine but the work failed; ``code`` says why (``E_FS_NOT_FOUND``, ...)."""


def check_keys(args: Mapping[str, Any], allowed: Iterable[str]) -> None:
    """Refuse properties the export does not declare (schemas are closed)."""
    allowed_list = list(allowed)
    extra = [k for k in args if k not in allowed_list]
    if extra:
        names = ", ".join(f"'{k}'" for k in extra)
        raise ToolInputError(
            f"unexpected argument(s) {names}",
            suggestion=f"Allowed arguments: {', '.join(allowed_list) or '(none)'}.",
        )


def require_str(args: Mapping[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or value == "":
        raise ToolInputError(
            f"'{key}' must be a non-empty string",
            suggestion=f"Call the tool again with '{key}' set to a non-empty string.",
        )
    return value


def opt_str(args: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    value = args.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ToolInputError(f"'{key}' must be a string")
    return value


def opt_bool(args: Mapping[str, Any], key: str, default: bool) -> bool:
    value = args.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ToolInputError(f"'{key}' must be a boolean")
    return value


def _bounded(key: str, value: float, minimum: float | None, maximum: float | None) -> None:
    if minimum is not None and value < minimum:
        raise ToolInputError(f"'{key}' must be greater than or equal to {_fmt(minimum)}")
    if maximum is not None and value > maximum:
        raise ToolInputError(f"'{key}' must be less than or equal to {_fmt(maximum)}")


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def opt_int(
    args: Mapping[str, Any],
    key: str,
    default: int | None,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int | None:
    """An optional integer; ``3.0`` counts as ``3`` (JSON has one number type)."""
    value = args.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolInputError(f"'{key}' must be an integer")
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise ToolInputError(f"'{key}' must be an integer")
    _bounded(key, value, minimum, maximum)
    return int(value)


def require_number(
    args: Mapping[str, Any], key: str, *, minimum: float | None = None, maximum: float | None = None
) -> float:
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ToolInputError(f"'{key}' must be a finite number")
    _bounded(key, value, minimum, maximum)
    return float(value)


def opt_object(args: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ToolInputError(f"'{key}' must be an object")
    return value


def opt_enum(args: Mapping[str, Any], key: str, choices: tuple[str, ...], default: str) -> str:
    value = args.get(key)
    if value is None:
        return default
    if value not in choices:
        raise ToolInputError(f"'{key}' must be one of {', '.join(choices)}")
    return str(value)


def string_map(args: Mapping[str, Any], key: str) -> dict[str, str] | None:
    """An object of primitive values (string/number/boolean) rendered as strings, e.g. env or headers."""
    raw = opt_object(args, key)
    if raw is None:
        return None
    out: dict[str, str] = {}
    for name, value in raw.items():
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, str):
            out[name] = value
        elif isinstance(value, int | float) and math.isfinite(value):
            out[name] = _fmt(value) if isinstance(value, float) else str(value)
        else:
            raise ToolInputError(f"'{key}.{name}' must be a string, number or boolean")
    return out


def args_dict(args: Any) -> dict[str, Any]:
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise ToolInputError("arguments must be a JSON object")
    return args


__all__ = [
    "INVALID_ARGS",
    "ToolExecutionError",
    "ToolInputError",
    "args_dict",
    "check_keys",
    "opt_bool",
    "opt_enum",
    "opt_int",
    "opt_object",
    "opt_str",
    "require_number",
    "require_str",
    "string_map",
]
