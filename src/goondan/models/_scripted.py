"""The ``scripted`` provider: ordered rules matched against the last input message.

It makes whole swarms runnable offline and deterministically — examples, tests and benchmarks use it.
"""

from __future__ import annotations

import re
from typing import Any

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

    def matches(self, role: str, text: str) -> bool:
        if self.role is not None and self.role != role:
            return False
        if self.contains is not None and self.contains not in text:
            return False
        return not (self.regex is not None and self.regex.search(text) is None)


def _fill_last(value: Any, last: str, _depth: int = 0) -> Any:
    """``{{last}}`` replaced in every string of a (copied) tool-call ``args`` tree, as in ``text``.
    The rules come from the bundle's YAML, whose nesting the loader bounds; the depth guard only
    keeps this walk from recursing without end on a pathological tree."""
    if isinstance(value, str):
        return value.replace("{{last}}", last)
    if _depth > 64:
        return value
    if isinstance(value, dict):
        return {k: _fill_last(v, last, _depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_last(v, last, _depth + 1) for v in value]
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
            if rule.matches(use_role, use_text):
                text = use_text
                reply = rule.reply
                out: dict[str, Any] = {}
                if isinstance(reply.get("text"), str):
                    out["text"] = reply["text"].replace("{{last}}", text)
                calls = reply.get("toolCalls") or []
                out["toolCalls"] = [
                    {
                        "id": new_id("call"),
                        "name": c.get("name"),
                        "args": _fill_last(copy_json(c.get("args") or {}), text),
                    }
                    for c in calls
                    if isinstance(c, dict)
                ]
                return parse_model_output(out, where="scripted model")
        preview = text if len(text) <= 120 else text[:117] + "..."
        raise ModelError(
            "E_MODEL_SCRIPT_NO_MATCH",
            f"no scripted rule matches the last message ({role}: {preview!r})",
            suggestion="Add a rule for it, or a catch-all rule without `when` at the end of options.rules.",
        )

    async def aclose(self) -> None:
        return None
