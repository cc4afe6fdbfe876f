"""How the ``local`` provider talks to a small chat model that has no native tool calling.

The model sees the conversation in its own chat template plus one system message that lists the
tools; it must answer with one JSON object, and a JSON-Schema grammar (compiled by llama.cpp) makes
every sampled token obey::

    {"answer": "<text for the user>"}
    {"tool": "<exact tool name>", "arguments": {...that tool's own parameters schema...}}

so tool calls are always well-formed JSON naming a real tool. Past tool calls are shown back to the
model in that same JSON, and tool results as user turns, which is what a small model follows best.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from .._ids import new_id
from ._base import ModelResponse, ModelToolCall
from ._convert import parts_of, text_of, tool_output_text, unsupported

TOOL_CHOICES = ("auto", "required", "none", "first")


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


def instructions(tools: Sequence[dict[str, Any]], tool_choice: str) -> str:
    lines = ["Reply with exactly one JSON object and nothing else."]
    if tools and tool_choice != "none":
        lines.append("Tools you can call:")
        for tool in tools:
            params = json.dumps(tool.get("parameters", {}), ensure_ascii=False, separators=(",", ":"))
            lines.append(f"- {tool['name']}: {tool.get('description', '')} Arguments schema: {params}")
        lines.append('To call a tool reply {"tool": "<tool name>", "arguments": {...}}.')
        if tool_choice == "auto":
            lines.append('When a tool result already answers the user, reply {"answer": "<your answer>"}.')
    else:
        lines.append('Reply {"answer": "<your answer>"}.')
    return "\n".join(lines)


def response_schema(tools: Sequence[dict[str, Any]], tool_choice: str) -> dict[str, Any]:
    answer = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
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
    options = calls if tool_choice == "required" else [answer, *calls]
    return options[0] if len(options) == 1 else {"anyOf": options}


def to_chat_messages(messages: Sequence[dict[str, Any]], system_prefix: str) -> list[dict[str, str]]:
    out: list[dict[str, str]] = [{"role": "system", "content": system_prefix}]
    for message in messages:
        role = message.get("role")
        if role == "system":
            out.append({"role": "system", "content": text_of(message)})
            continue
        chunks: list[str] = []
        for part in parts_of(message):
            kind = part.get("type")
            if kind == "text":
                chunks.append(str(part.get("text", "")))
            elif kind == "tool-call" and role == "assistant":
                chunks.append(
                    json.dumps({"tool": part.get("toolName"), "arguments": part.get("input", {})}, ensure_ascii=False)
                )
            elif kind == "tool-result":
                text, is_error = tool_output_text(part)
                label = "error" if is_error else "result"
                chunks.append(f"Tool {part.get('toolName')} {label}: {text}")
            else:
                raise unsupported(message, f"a {kind!r} part")
        if role == "assistant":
            calls = any(p.get("type") == "tool-call" for p in parts_of(message))
            text = "\n".join(chunks) if calls else json.dumps({"answer": "".join(chunks)}, ensure_ascii=False)
            out.append({"role": "assistant", "content": text})
        elif role in ("user", "tool"):
            out.append({"role": "user", "content": "\n".join(chunks)})
        else:
            raise unsupported(message, "an unknown role")
    return out


def parse_output(raw: str, finish: str | None, usage: dict[str, int] | None) -> ModelResponse:
    """The grammar guarantees a complete object unless generation stopped at maxTokens."""
    try:
        data = json.loads(raw)
    except ValueError:
        return ModelResponse(
            usage=usage,
            finish_reason="length" if finish == "length" else "error",
            raw_finish_reason=finish,
            issues=[f"the local model's output was cut off before its JSON ended ({len(raw)} chars); raise maxTokens"],
        )
    if isinstance(data, dict) and isinstance(data.get("tool"), str):
        call = ModelToolCall(new_id("call"), data["tool"], data.get("arguments", {}))
        return ModelResponse(tool_calls=[call], usage=usage, finish_reason="tool-calls", raw_finish_reason=finish)
    answer = data.get("answer") if isinstance(data, dict) else None
    return ModelResponse(
        text=answer if isinstance(answer, str) and answer else None,
        usage=usage,
        finish_reason="length" if finish == "length" else "stop",
        raw_finish_reason=finish,
    )


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
            key = self._buf.find('"')
            if key < 0 or len(self._buf) - key < len(self._PREFIX_KEY):
                return
            if not self._buf.startswith(self._PREFIX_KEY, key):
                self._done = True  # a tool call: nothing to show
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
