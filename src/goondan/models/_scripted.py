"""The ``scripted`` provider: ordered rules matched against the last input message.

It makes whole swarms runnable offline and deterministically — examples, tests and benchmarks use it.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from .._ids import new_id
from .._json import copy_json, dumps_str
from ..errors import ModelError
from ._base import ModelRequest, ModelResponse
from ._python import parse_model_output


def message_match_text(message: dict[str, Any]) -> str:
    """The text a rule matches against: string content, text parts, or tool-result outputs."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    out: list[str] = []
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "text":
                out.append(str(part.get("text", "")))
            elif part.get("type") == "tool-result":
                output = part.get("output")
                value = output.get("value") if isinstance(output, dict) else output
                out.append(value if isinstance(value, str) else dumps_str(value))
    return "".join(out)


class _Rule:
    __slots__ = ("contains", "regex", "reply", "role")

    def __init__(self, raw: dict[str, Any]) -> None:
        when = raw.get("when") or {}
        self.role: str | None = when.get("role")
        self.contains: str | None = when.get("contains")
        pattern = when.get("regex")
        self.regex = re.compile(pattern) if isinstance(pattern, str) else None
        self.reply: dict[str, Any] = raw.get("reply") or {}

    def match(self, role: str, text: str) -> dict[str, str] | None:
        """``None`` when the rule does not apply; else what its placeholders take: ``last`` (the
        matched text) and, for a ``regex``, every group by number (``1``...) and by name."""
        if self.role is not None and self.role != role:
            return None
        if self.contains is not None and self.contains not in text:
            return None
        values = {"last": text}
        if self.regex is not None:
            found = self.regex.search(text)
            if found is None:
                return None
            for i, group in enumerate(found.groups(), 1):
                values[str(i)] = group or ""
            for name, group in found.groupdict().items():
                values[name] = group or ""
        return values


_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


def _fill_text(text: str, values: dict[str, str]) -> str:
    """Placeholders the match has a value for replaced; any other ``{{...}}`` stays as written."""
    if "{{" not in text:
        return text
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def _fill_args(value: Any, values: dict[str, str], _depth: int = 0) -> Any:
    """Placeholders replaced in every string of a (copied) tool-call ``args`` tree, as in ``text``.

    A string that is one placeholder and nothing else takes the captured text as a JSON number or
    boolean when it reads as one (``a: "{{1}}"`` with ``add (\\d+)`` gives ``a: 4``, which a
    ``type: number`` parameter accepts), else as a string. The rules come from the bundle's YAML,
    whose nesting the loader bounds; the depth guard only keeps this walk from recursing without
    end on a pathological tree."""
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole is not None and whole.group(1) != "last" and whole.group(1) in values:
            captured = values[whole.group(1)]
            try:
                parsed = orjson.loads(captured)
            except orjson.JSONDecodeError:
                return captured
            return parsed if isinstance(parsed, (int, float, bool)) else captured
        return _fill_text(value, values)
    if _depth > 64:
        return value
    if isinstance(value, dict):
        return {k: _fill_args(v, values, _depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_args(v, values, _depth + 1) for v in value]
    return value


class ScriptedModel:
    provider = "scripted"

    def __init__(self, rules: list[dict[str, Any]], model: str) -> None:
        self._rules = [_Rule(r) for r in rules]
        self._model = model

    async def generate(self, request: ModelRequest) -> ModelResponse:
        if len(request.messages) == 0:
            raise ModelError("E_MODEL_SCRIPT_NO_MATCH", "scripted model got no messages")
        messages = request.messages
        last = messages[-1]
        role = str(last.get("role", ""))
        text = message_match_text(last)
        # Trailing system messages are instructions injected by extensions (the agent prompt, a
        # compaction summary), not conversation turns: rules that do not ask for role "system"
        # match the last non-system message instead.
        turn_role, turn_text = role, text
        if role == "system":
            for i in range(len(messages) - 2, -1, -1):
                if messages[i].get("role") != "system":
                    turn_role = str(messages[i].get("role", ""))
                    turn_text = message_match_text(messages[i])
                    break
        for rule in self._rules:
            use_role, use_text = (role, text) if rule.role == "system" else (turn_role, turn_text)
            values = rule.match(use_role, use_text)
            if values is not None:
                reply = rule.reply
                out: dict[str, Any] = {}
                if isinstance(reply.get("text"), str):
                    out["text"] = _fill_text(reply["text"], values)
                calls = reply.get("toolCalls") or []
                out["toolCalls"] = [
                    {
                        "id": new_id("call"),
                        "name": c.get("name"),
                        "args": _fill_args(copy_json(c.get("args") or {}), values),
                    }
                    for c in calls
                    if isinstance(c, dict)
                ]
                return parse_model_output(out, where="scripted model")
        # named as the rules saw it: the last non-system message (the agent prompt after a user's
        # message was named instead, though only role: system rules look at it)
        preview = turn_text if len(turn_text) <= 120 else turn_text[:117] + "..."
        raise ModelError(
            "E_MODEL_SCRIPT_NO_MATCH",
            f"no scripted rule matches the last message ({turn_role}: {preview!r})",
            suggestion="Add a rule for it, or a catch-all rule without `when` at the end of options.rules.",
        )

    async def aclose(self) -> None:
        return None
