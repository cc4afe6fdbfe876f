"""Structured output (``Agent.spec.output``): reading the final answer as JSON and checking it
against the agent's schema.

Providers with a native structured-output mode get the schema with the request, but none of them
guarantees a valid answer for every schema (OpenAI's non-strict mode, Gemini's schema subset, a
python model that ignores it), so the answer is always validated here: one rule for every provider.
An answer that does not validate goes back to the model with the problems (the model reads them
and must fix its answer in one try, hence short path-qualified lines), a bounded number of times;
after that the turn fails with ``E_OUTPUT_INVALID``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .._json import dumps, json_type_name
from ..errors import GoondanError

MAX_SHOWN_ISSUES = 8
FEEDBACK_TEXT = (
    "Your final answer must be a single JSON value that validates against this JSON Schema:\n{schema}\n"
    "Your previous answer did not:\n{issues}\n"
    "Answer again with only the corrected JSON (no prose, no code fences)."
)
_validators: dict[bytes, Any] = {}


def _validator(schema: dict[str, Any]) -> Any:
    key = dumps(schema)
    validator = _validators.get(key)
    if validator is None:
        from jsonschema import Draft202012Validator

        validator = Draft202012Validator(schema)
        if len(_validators) > 256:
            _validators.clear()
        _validators[key] = validator
    return validator


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def parse_answer(text: str | None) -> tuple[Any, str | None]:
    """The JSON value of a final answer, or the reason it is not one. One surrounding Markdown code
    fence is tolerated: models add it even when told not to, and it carries no meaning."""
    if text is None or not text.strip():
        return None, "output: the turn ended without a final answer"
    body = text.strip()
    if body.startswith("```") and body.endswith("```") and len(body) >= 6:
        inner = body[3:-3]
        newline = inner.find("\n")
        body = (inner[newline + 1 :] if newline >= 0 else inner).strip()
    try:
        return json.loads(body, parse_constant=_reject_constant), None
    except ValueError as exc:
        return None, f"output: not valid JSON ({exc})"


def _path(parts: Any) -> str:
    out = "output"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _describe(error: Any) -> list[str]:
    where = list(error.absolute_path)
    kind = error.validator
    if kind == "required":
        instance = error.instance if isinstance(error.instance, dict) else {}
        return [
            f"{_path([*where, n])}: required property is missing" for n in error.validator_value if n not in instance
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
    return [f"{_path(where)}: {error.message}"]


def check_output(schema: dict[str, Any], value: Any) -> list[str]:
    """The problems of ``value`` against ``schema``, outermost first (empty when it validates)."""
    validator = _validator(schema)
    if validator.is_valid(value):
        return []
    issues: list[str] = []
    errors = sorted(validator.iter_errors(value), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    for error in errors:
        for line in _describe(error):
            if line not in issues:
                issues.append(line)
    return issues


def validate_answer(schema: dict[str, Any], text: str | None) -> tuple[Any, list[str]]:
    """The parsed answer and its problems (empty when it may be returned as ``TurnResult.output``)."""
    value, problem = parse_answer(text)
    if problem is not None:
        return None, [problem]
    if isinstance(value, float) and not math.isfinite(value):
        return None, ["output: must be a finite number"]
    return value, check_output(schema, value)


def _shown(issues: list[str]) -> list[str]:
    shown = issues[:MAX_SHOWN_ISSUES]
    if len(issues) > MAX_SHOWN_ISSUES:
        shown.append(f"(+{len(issues) - MAX_SHOWN_ISSUES} more)")
    return shown


def feedback_text(schema: dict[str, Any], issues: list[str]) -> str:
    """The corrective message sent to the model after an answer that does not validate."""
    listing = "\n".join(f"- {line}" for line in _shown(issues))
    return FEEDBACK_TEXT.format(schema=json.dumps(schema, ensure_ascii=False), issues=listing)


def output_invalid(agent: str, attempts: int, issues: list[str]) -> GoondanError:
    """The error that ends a turn whose answers never validated."""
    listing = "; ".join(_shown(issues))
    tries = "attempt" if attempts == 1 else "attempts"
    return GoondanError(
        "E_OUTPUT_INVALID",
        f"agent '{agent}' gave no answer valid against its output schema after {attempts} {tries}: {listing}",
        suggestion="Describe the expected JSON in the agent's prompt, simplify Agent.spec.output.schema, "
        "or raise Agent.spec.output.retries.",
    )


__all__ = ["check_output", "feedback_text", "output_invalid", "parse_answer", "validate_answer"]
