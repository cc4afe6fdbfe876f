"""How the ``local`` provider talks to a small chat model that has no native tool calling.

The model sees the conversation in its own chat template plus one system message that lists the
tools; it must answer with one JSON value, and a JSON-Schema grammar (compiled by llama.cpp) makes
every sampled token obey::

    {"answer": "<text for the user>"}
    [{"tool": "<exact tool name>", "arguments": {...that tool's own parameters schema...}}, ...]

where the list holds 1 to ``maxToolCalls`` calls, so tool calls are always well-formed JSON naming a
real tool. Past tool calls are shown back to the model in that same JSON, and tool results as user
turns, which is what a small model follows best. A bare ``{"tool": ..., "arguments": ...}`` object
(the one-call format of earlier versions) is still understood when parsing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from .._content import placeholder
from .._ids import new_id
from ..errors import ModelError
from ._base import ModelResponse, ModelToolCall
from ._convert import MEDIA_PARTS, parts_of, text_of, tool_output_text, unsupported

TOOL_CHOICES = ("auto", "required", "none", "first")
DEFAULT_MAX_TOOL_CALLS = 4
# the grammar grows by one nested optional item per allowed call; beyond this a small model only
# repeats itself
MAX_TOOL_CALLS_LIMIT = 16
_PREVIEW = 240


def effective_tool_choice(messages: Sequence[dict[str, Any]], choice: str) -> str:
    """``first`` means: answer each new user message with a tool call, then decide freely once tool
    results are in. Tiny models rarely choose a tool on their own; this keeps them useful for
    tool-driven agents without forcing a tool call forever."""
    if choice != "first":
        return choice
    for message in reversed(messages):
        role = message.get("role")
        if role == "system":
            continue
        if role == "user" and not any(p.get("type") == "tool-result" for p in parts_of(message)):
            return "required"
        return "auto"
    return "auto"


def call_key(name: str, args: Any) -> str:
    """Identity of a call: same tool and equal arguments, whatever their key order."""
    return json.dumps([name, args], sort_keys=True)


def answered_calls(messages: Sequence[dict[str, Any]]) -> frozenset[str]:
    """The calls made since the last user message, whose results the model has already seen."""
    keys: set[str] = set()
    for message in reversed(messages):
        role = message.get("role")
        parts = parts_of(message)
        if role == "user" and not any(p.get("type") == "tool-result" for p in parts):
            break
        if role == "assistant":
            keys.update(
                call_key(str(p.get("toolName")), p.get("input", {})) for p in parts if p.get("type") == "tool-call"
            )
    return frozenset(keys)


def instructions(
    tools: Sequence[Mapping[str, Any]],
    tool_choice: str,
    max_calls: int = DEFAULT_MAX_TOOL_CALLS,
    output_schema: Mapping[str, Any] | None = None,
) -> str:
    lines = ["Reply with exactly one JSON value and nothing else."]
    if output_schema is not None:
        schema = json.dumps(output_schema, ensure_ascii=False, separators=(",", ":"))
        lines.append(f'Your answer is JSON valid against this schema: {schema}; reply {{"answer": <that JSON>}}.')
    if tools and tool_choice != "none":
        lines.append("Tools you can call:")
        for tool in tools:
            params = json.dumps(tool.get("parameters", {}), ensure_ascii=False, separators=(",", ":"))
            lines.append(f"- {tool['name']}: {tool.get('description', '')} Arguments schema: {params}")
        if max_calls == 1:
            lines.append(
                'To call a tool reply with a JSON list of one call: [{"tool": "<tool name>", "arguments": {...}}].'
            )
        else:
            lines.append(
                f"To call tools reply with a JSON list of 1 to {max_calls} calls: "
                '[{"tool": "<tool name>", "arguments": {...}}, ...]. '
                "When the user asks for several things, put one call for each in the same list."
            )
        if tool_choice == "auto":
            lines.append('When a tool result already answers the user, reply {"answer": "<your answer>"}.')
    else:
        lines.append('Reply {"answer": "<your answer>"}.')
    return "\n".join(lines)


def response_schema(
    tools: Sequence[Mapping[str, Any]],
    tool_choice: str,
    max_calls: int = DEFAULT_MAX_TOOL_CALLS,
    output_schema: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The grammar's schema. With a structured output (``Agent.spec.output.schema``) the answer is
    that JSON itself instead of a string, so the grammar makes the model write a valid value."""
    answer = {
        "type": "object",
        "properties": {"answer": dict(output_schema) if output_schema is not None else {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    calls = [
        {
            "type": "object",
            "properties": {"tool": {"const": t["name"]}, "arguments": t.get("parameters") or {"type": "object"}},
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        }
        for t in tools
    ]
    if tool_choice == "none" or not calls:
        return answer
    call_list = {
        "type": "array",
        "items": calls[0] if len(calls) == 1 else {"anyOf": calls},
        "minItems": 1,
        "maxItems": max_calls,
    }
    return call_list if tool_choice == "required" else {"anyOf": [answer, call_list]}


def render_calls(calls: Sequence[tuple[str, Any]]) -> str:
    """Tool calls in the exact form the grammar makes the model write, so the history it reads back
    looks like what it is asked to produce."""
    return json.dumps([{"tool": name, "arguments": args} for name, args in calls], ensure_ascii=False)


MEDIA_PART_MODES = ("error", "placeholder")


def _media_text(message: Mapping[str, Any], part: Mapping[str, Any], media: str) -> str:
    """The local model reads text only: an image or file is an error, or (``mediaParts:
    placeholder``) a note saying what was left out, so the model can tell the user."""
    if media == "placeholder":
        return placeholder(part)
    raise ModelError(
        "E_MODEL_UNSUPPORTED_CONTENT",
        f"the local model reads text only, and a {message.get('role')!r} message has an {part.get('type')} part",
        suggestion="Use a provider that takes images and files (anthropic, openai, google), or set "
        "Model.spec.options.mediaParts: placeholder to give the model a note in place of each one.",
    )


def to_chat_messages(
    messages: Sequence[dict[str, Any]], system_prefix: str, *, media: str = "error"
) -> list[dict[str, str]]:
    out: list[dict[str, str]] = [{"role": "system", "content": system_prefix}]
    for message in messages:
        role = message.get("role")
        if role == "system":
            out.append({"role": "system", "content": text_of(message)})
            continue
        chunks: list[str] = []
        calls: list[tuple[str, Any]] = []
        for part in parts_of(message):
            kind = part.get("type")
            if kind == "text":
                chunks.append(str(part.get("text", "")))
            elif kind == "tool-call" and role == "assistant":
                calls.append((str(part.get("toolName")), part.get("input", {})))
            elif kind == "tool-result":
                text, is_error = tool_output_text(part)
                label = "error" if is_error else "result"
                chunks.append(f"Tool {part.get('toolName')} {label}: {text}")
            elif kind in MEDIA_PARTS and role == "user":
                chunks.append(_media_text(message, part, media))
            else:
                raise unsupported(message, f"a {kind!r} part")
        if role == "assistant":
            if calls:
                text = "\n".join([*chunks, render_calls(calls)])
            else:
                text = json.dumps({"answer": "".join(chunks)}, ensure_ascii=False)
            out.append({"role": "assistant", "content": text})
        elif role in ("user", "tool"):
            out.append({"role": "user", "content": "\n".join(chunks)})
        else:
            raise unsupported(message, "an unknown role")
    return out


def parse_output(
    raw: str,
    finish: str | None,
    usage: dict[str, int] | None,
    max_calls: int = DEFAULT_MAX_TOOL_CALLS,
    answered: Collection[str] = frozenset(),
    structured: bool = False,
) -> ModelResponse:
    """The grammar guarantees a complete answer or call list unless generation stopped at maxTokens;
    anything else (a caller's own grammar through ``params.extra``, a damaged model file) comes back
    as issues, which make the runtime retry the step with a corrective message.

    Calls whose :func:`call_key` is in ``answered`` are dropped like repeats within the reply: small
    models copy their previous call instead of answering from its result. When nothing else is
    left, :func:`only_repeats` is true and the caller samples an answer instead."""
    try:
        data = json.loads(raw)
    except ValueError:
        if finish == "length":
            issue = f"the local model's output was cut off before its JSON ended ({len(raw)} chars); raise maxTokens"
        else:
            issue = f"the local model's output is not JSON: {_preview(raw)}"
        return ModelResponse(
            usage=usage,
            finish_reason="length" if finish == "length" else "error",
            raw_finish_reason=finish,
            issues=[issue],
        )
    if isinstance(data, dict) and "tool" in data:
        data = [data]  # the one-call object of earlier versions
    if isinstance(data, list):
        calls, issues = _parse_calls(data, max_calls, answered)
        return ModelResponse(
            tool_calls=calls, usage=usage, finish_reason="tool-calls", raw_finish_reason=finish, issues=issues
        )
    answer = data.get("answer") if isinstance(data, dict) else None
    if structured and isinstance(data, dict) and "answer" in data:
        answer = json.dumps(answer, ensure_ascii=False)  # the structured answer: its JSON is the text
    if not isinstance(answer, str):
        return ModelResponse(
            usage=usage,
            finish_reason="error",
            raw_finish_reason=finish,
            issues=[f"the local model's output is neither an answer nor a list of tool calls: {_preview(raw)}"],
        )
    return ModelResponse(
        text=answer or None,
        usage=usage,
        finish_reason="length" if finish == "length" else "stop",
        raw_finish_reason=finish,
    )


def only_repeats(response: ModelResponse) -> bool:
    """A well-formed call list whose every call was dropped as a repeat."""
    return response.finish_reason == "tool-calls" and not response.tool_calls and not response.issues


def _parse_calls(items: list[Any], max_calls: int, answered: Collection[str]) -> tuple[list[ModelToolCall], list[str]]:
    """Every well-formed call with a fresh id, plus one issue per item that is not a call.

    A call identical to an earlier one of the same reply (same tool, same arguments) is dropped:
    calls of one step run without seeing each other's results, so a repeat can only redo the same
    work, and small models under a list grammar tend to repeat their first call until the list is
    full."""
    calls: list[ModelToolCall] = []
    issues: list[str] = []
    seen = set(answered)
    if not items:
        issues.append("the local model replied with an empty list of tool calls")
    for index, item in enumerate(items):
        name = item.get("tool") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            issues.append(f"tool call #{index + 1} does not name a tool: {_preview(json.dumps(item))}")
            continue
        args = item.get("arguments", {})
        key = call_key(name, args)
        if key in seen:
            continue
        seen.add(key)
        calls.append(ModelToolCall(new_id("call"), name, args))
    if len(calls) > max_calls:
        issues.append(
            f"the local model made {len(calls)} tool calls in one step; options.maxToolCalls allows {max_calls}"
        )
    return calls, issues


def _preview(text: str) -> str:
    return text if len(text) <= _PREVIEW else text[:_PREVIEW] + "..."


class AnswerStreamer:
    """Turns the growing JSON text into deltas of the ``answer`` string only, so listeners see the
    words of the answer as they are sampled and never the JSON around them (or a tool call)."""

    _PREFIX_KEY = '"answer"'

    def __init__(self, emit: Callable[[str], None]) -> None:
        self._emit = emit
        self._buf = ""
        self._pos = -1  # index in _buf of the first unread character of the answer string
        self._done = False

    def feed(self, piece: str) -> None:
        if self._done:
            return
        self._buf += piece
        if self._pos < 0:
            start = self._buf.lstrip()
            if start and start[0] != "{":
                self._done = True  # a list of tool calls: nothing to show
                return
            key = self._buf.find('"')
            if key < 0 or len(self._buf) - key < len(self._PREFIX_KEY):
                return
            if not self._buf.startswith(self._PREFIX_KEY, key):
                self._done = True  # a one-call object of earlier versions: nothing to show
                return
            quote = self._buf.find('"', key + len(self._PREFIX_KEY))
            colon = self._buf.find(":", key + len(self._PREFIX_KEY))
            if colon < 0 or quote < 0:
                return
            self._pos = quote + 1
        out: list[str] = []
        i = self._pos
        while i < len(self._buf):
            ch = self._buf[i]
            if ch == '"':
                self._done = True
                break
            if ch == "\\":
                decoded, used = _escape(self._buf, i)
                if used == 0:
                    break  # incomplete escape: wait for more text
                out.append(decoded)
                i += used
                continue
            out.append(ch)
            i += 1
        self._pos = i
        if out:
            self._emit("".join(out))


def _escape(buf: str, i: int) -> tuple[str, int]:
    if i + 1 >= len(buf):
        return "", 0
    code = buf[i + 1]
    if code == "u":
        if i + 6 > len(buf):
            return "", 0
        try:
            decoded = json.loads(f'"{buf[i : i + 6]}"')
        except ValueError:
            decoded = buf[i : i + 6]
        return decoded, 6
    simple = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", '"': '"'}
    return simple.get(code, code), 2
