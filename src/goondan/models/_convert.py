"""Reading core-message dicts (docs/architecture.md#messages) the same way for every provider mapping."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import ModelError

FINISH_REASONS = frozenset({"stop", "tool-calls", "length", "content-filter", "error", "other"})


def parts_of(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A message's content as a list of parts (a string is one text part)."""
    content = message.get("content")
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        out: list[dict[str, Any]] = []
        for part in content:
            if not isinstance(part, dict):
                raise unsupported(message, f"a {type(part).__name__} content part")
            out.append(part)
        return out
    raise unsupported(message, f"content of type {type(content).__name__}")


def text_of(message: Mapping[str, Any]) -> str:
    """The concatenated text parts of a message (for roles that only carry text, like system)."""
    chunks: list[str] = []
    for part in parts_of(message):
        if part.get("type") != "text":
            raise unsupported(message, f"a {part.get('type')!r} part")
        chunks.append(str(part.get("text", "")))
    return "".join(chunks)


def unsupported(message: Mapping[str, Any], what: str) -> ModelError:
    return ModelError(
        "E_MODEL_UNSUPPORTED_CONTENT",
        f"a {message.get('role')!r} message has {what}, which this provider mapping does not support",
        suggestion="Messages carry text, tool-call and tool-result parts, and user messages image and file parts "
        "(docs/architecture.md#messages); send media a provider cannot take as another type, or use another model.",
    )


MEDIA_PARTS = frozenset({"image", "file"})


def media_source(message: Mapping[str, Any], part: Mapping[str, Any]) -> tuple[str, str | None, str | None]:
    """An image or file part as ``(mediaType, base64 data, url)``, exactly one of the last two set.
    The runtime hands providers stored attachments already resolved to ``data``
    (docs/architecture.md#messages); a part with neither is a bug upstream, reported as unsupported."""
    media_type = part.get("mediaType")
    data, url = part.get("data"), part.get("url")
    if not isinstance(media_type, str) or not (isinstance(data, str) or isinstance(url, str)):
        raise unsupported(message, f"a {part.get('type')!r} part without mediaType and data or url")
    return media_type, data if isinstance(data, str) else None, url if isinstance(url, str) and data is None else None


def tool_output(part: Mapping[str, Any]) -> tuple[Any, bool]:
    """A tool-result part's value and whether it reports an error."""
    output = part.get("output")
    if isinstance(output, Mapping) and "type" in output:
        return output.get("value"), output.get("type") in ("error-json", "error-text")
    return output, False


def tool_output_text(part: Mapping[str, Any]) -> tuple[str, bool]:
    """The tool result as the string providers without structured results expect: text as is,
    anything else as JSON."""
    value, is_error = tool_output(part)
    if isinstance(value, str):
        return value, is_error
    return json.dumps(value, ensure_ascii=False), is_error


def parse_arguments(raw: Any) -> Any:
    """Tool-call arguments as the model produced them: a JSON string decoded when it is valid JSON,
    otherwise returned untouched so the runtime reports it as a malformed tool call."""
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return {} if raw is None else raw


def usage(prompt: Any, completion: Any, total: Any = None) -> dict[str, int] | None:
    def num(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    p, c, t = num(prompt), num(completion), num(total)
    if p is None and c is None and t is None:
        return None
    out = {"promptTokens": p or 0, "completionTokens": c or 0}
    out["totalTokens"] = t if t is not None else out["promptTokens"] + out["completionTokens"]
    return out


def normalize_finish(raw: str | None, table: Mapping[str, str], *, has_calls: bool) -> str:
    if raw is None:
        return "tool-calls" if has_calls else "stop"
    mapped = table.get(raw, "other")
    if mapped == "stop" and has_calls:
        # Providers such as Gemini report a plain stop for a response made of function calls.
        return "tool-calls"
    return mapped
