"""The ``anthropic`` provider: the Messages API through the official SDK.

Anthropic has one system slot, so every system message becomes one block of the top-level ``system``
list, in conversation order. Tool results (one core ``role: tool`` message each) become
``tool_result`` blocks of user turns; consecutive turns of the same role are merged into one message
because the API expects the results of one assistant turn together.

Extended thinking (``thinking`` in ``modelConfig.params.extra``): while a tool loop runs, the API
requires the assistant message that carried ``tool_use`` blocks to come back with its ``thinking`` /
``redacted_thinking`` blocks unchanged and first, or it answers 400. The core message format has no
place for them, so a response's thinking blocks ride on its first tool call as provider metadata
(``{"anthropic": {"thinkingBlocks": [...]}}``, stored by the runtime as the part's
``providerMetadata`` and persisted with the conversation) and are put back, verbatim and ahead of
everything else, when that message is sent again. Thinking is never reported as assistant text.

Prompt caching: the API bills a prefix it has cached (tools, then system, then messages, up to a
block marked with ``cache_control``) at a tenth of the input price, and checks for a hit only at
marked blocks (looking back about 20 blocks from each). A Goondan history only grows at its end
between two requests of one instance (extensions remove or replace old messages, they never edit one
in place), so by default every request marks the prefixes that the next request repeats
(``options.cacheBreakpoints``, in the order they are kept when there are more than the API's four):
the last block of the newest message (``history``: the whole request, which the next step or turn
repeats); the last block before the newest assistant message (``previousStep``: where the previous
request of this instance ended, so a step that added more than 20 blocks still finds it); the last
system block (``system``: tools and every system message, e.g. a compaction summary); the first
system block (``prompt``: tools and the first system message, usually the agent's prompt, which
outlives a new summary); the last tool (``tools``). A mark that would land on the block another
place already marked is not repeated. Thinking blocks and empty text cannot carry a mark, so the
nearest earlier block takes it. ``cacheBreakpoints: []`` turns marking off; ``cacheTtl: 1h`` asks
for the longer-lived cache.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .._ids import new_id
from .._json import copy_json
from ..errors import ModelError
from ._base import ModelRequest, ModelResponse, ModelToolCall, TextDeltaCallback
from ._convert import (
    MEDIA_PARTS,
    media_source,
    normalize_finish,
    parse_arguments,
    parts_of,
    text_of,
    tool_output_text,
    unsupported,
    usage,
)
from ._errors import ProviderError
from ._network import NetworkAdapter
from ._options import NetworkOptions, parse_network_options
from ._retry import Failure
from ._sdk import import_sdk
from ._stainless import classify

PROVIDER_KEYS = frozenset({"defaultMaxTokens", "headers", "parallelToolCalls", "cacheBreakpoints", "cacheTtl"})
CACHE_PLACES = ("history", "previousStep", "system", "prompt", "tools")  # the default, by priority
MAX_CACHE_MARKS = 4  # the API rejects a request with more
CACHE_TTLS = frozenset({"5m", "1h"})
DEFAULT_MAX_TOKENS = 4096  # the API requires max_tokens; used when modelConfig.params.maxTokens is unset

FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content-filter",
    "pause_turn": "other",
}

METADATA_KEY = "anthropic"  # ModelToolCall.metadata / tool-call part providerMetadata namespace
BLOCKS_KEY = "thinkingBlocks"
THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})


def check_options(options: dict[str, Any]) -> NetworkOptions:
    parsed = parse_network_options("anthropic", options, PROVIDER_KEYS)
    default = parsed.extra.get("defaultMaxTokens", DEFAULT_MAX_TOKENS)
    if isinstance(default, bool) or not isinstance(default, int) or default <= 0:
        raise ModelError("E_MODEL_CONFIG", "anthropic model: options.defaultMaxTokens must be an integer > 0")
    if not isinstance(parsed.extra.get("parallelToolCalls", True), bool):
        raise ModelError("E_MODEL_CONFIG", "anthropic model: options.parallelToolCalls must be true or false")
    _check_headers(parsed)
    places = parsed.extra.get("cacheBreakpoints", list(CACHE_PLACES))
    if (
        not isinstance(places, list)
        or not all(isinstance(p, str) and p in CACHE_PLACES for p in places)
        or len(set(places)) != len(places)
    ):
        raise ModelError(
            "E_MODEL_CONFIG",
            "anthropic model: options.cacheBreakpoints must be a list of distinct places out of "
            + ", ".join(CACHE_PLACES),
            suggestion="Use [] to send no cache_control marks, or leave it out for the default (all of them).",
        )
    if parsed.extra.get("cacheTtl", "5m") not in CACHE_TTLS:
        raise ModelError("E_MODEL_CONFIG", "anthropic model: options.cacheTtl must be 5m or 1h")
    return parsed


def _check_headers(options: NetworkOptions) -> None:
    headers = options.extra.get("headers")
    if headers is not None and not (
        isinstance(headers, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
    ):
        raise ModelError("E_MODEL_CONFIG", "anthropic model: options.headers must map strings to strings")


class AnthropicModel(NetworkAdapter):
    provider = "anthropic"
    default_endpoint = "https://api.anthropic.com"
    base_url_variable = "ANTHROPIC_BASE_URL"
    client_paths = ("messages",)

    def __init__(self, model: str, options: dict[str, Any], api_key: str | None, endpoint: str | None) -> None:
        parsed = check_options(options)
        super().__init__(model, parsed, api_key, endpoint)
        self._default_max_tokens: int = parsed.extra.get("defaultMaxTokens", DEFAULT_MAX_TOKENS)
        self._cache_places: tuple[str, ...] = tuple(parsed.extra.get("cacheBreakpoints", CACHE_PLACES))
        ttl = parsed.extra.get("cacheTtl")
        self._cache_mark: dict[str, str] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
        self._sdk = import_sdk("anthropic", provider="anthropic", extra="anthropic", package="anthropic")

    def _make_client(self) -> Any:
        key = self._api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ModelError(
                "E_MODEL_AUTH",
                "the anthropic provider has no API key",
                suggestion="Set Model.spec.apiKey (valueFrom.env: ANTHROPIC_API_KEY) or export ANTHROPIC_API_KEY.",
            )
        return self._sdk.AsyncAnthropic(
            api_key=key,
            base_url=self.endpoint or None,
            default_headers=self.options.extra.get("headers"),
            timeout=self.options.timeout,
            max_retries=0,  # goondan's own retry loop (models/_retry.py) decides
        )

    async def _close_client(self, client: Any) -> None:
        await client.close()

    def _classify(self, exc: BaseException) -> Failure | None:
        return classify(self._sdk, exc)

    def build_request(self, request: ModelRequest) -> dict[str, Any]:
        system, messages = to_anthropic_messages(request.messages)
        params = request.params
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "max_tokens": params.get("maxTokens") or self._default_max_tokens,
            "messages": messages,
        }
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [
                {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "input_schema": t.get("parameters", {"type": "object", "properties": {}}),
                }
                for t in request.tools
            ]
            if self.options.extra.get("parallelToolCalls") is False:
                body["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
        # Sampling parameters travel as body fields: recent SDK releases dropped them from the typed
        # signature although the API still accepts them.
        wire: dict[str, Any] = {}
        if params.get("temperature") is not None:
            wire["temperature"] = params["temperature"]
        if params.get("topP") is not None:
            wire["top_p"] = params["topP"]
        extra = params.get("extra")
        if isinstance(extra, dict):
            wire.update(extra)
        if wire:
            body["extra_body"] = wire
        if request.output_schema is not None:
            # native structured outputs; the runtime still validates the answer against the schema
            body["output_config"] = {"format": {"type": "json_schema", "schema": request.output_schema}}
        if self._cache_places:
            mark_cache_breakpoints(body, self._cache_places, self._cache_mark)
        return body

    async def _call(self, client: Any, request: ModelRequest, emit: TextDeltaCallback | None) -> ModelResponse:
        body = self.build_request(request)
        if emit is None:
            message = await client.messages.create(**body)
            return parse_message(_dump(message))
        stream = await client.messages.create(**body, stream=True)
        acc = _StreamAccumulator()
        try:
            async for event in stream:
                acc.add(_dump(event), emit)
        finally:
            await stream.close()
        return acc.result()


def mark_cache_breakpoints(body: dict[str, Any], places: Sequence[str], mark: dict[str, str]) -> None:
    """Puts ``cache_control`` on the blocks that end the stable prefixes named in ``places`` (see the
    module docstring): each block at most once, at most four, the first places first."""
    messages: list[dict[str, Any]] = body["messages"]
    tools = body.get("tools") or []
    system = body.get("system") or []
    targets: list[dict[str, Any]] = []
    for place in places:
        block: dict[str, Any] | None = None
        if place == "history":
            block = _last_cacheable(messages, len(messages))
        elif place == "previousStep":
            newest = next((i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "assistant"), 0)
            block = _last_cacheable(messages, newest)
        elif place == "system" and system:
            block = system[-1]
        elif place == "prompt" and system:
            block = system[0]
        elif place == "tools" and tools:
            block = tools[-1]
        if block is not None and all(block is not t for t in targets):
            targets.append(block)
    for block in targets[:MAX_CACHE_MARKS]:
        block["cache_control"] = dict(mark)


def _last_cacheable(messages: list[dict[str, Any]], end: int) -> dict[str, Any] | None:
    """The last block of ``messages[:end]`` that may carry ``cache_control`` (not thinking, not empty text)."""
    for message in reversed(messages[:end]):
        block: dict[str, Any]
        for block in reversed(message["content"]):
            if block.get("type") not in THINKING_TYPES and not (block.get("type") == "text" and not block.get("text")):
                return block
    return None


def _dump(obj: Any) -> dict[str, Any]:
    dump = getattr(obj, "model_dump", None)
    if dump is None:
        raise _bad(f"got {type(obj).__name__} instead of a message")
    # exclude_unset: exactly the fields the server sent, so thinking blocks replay as received
    # instead of gaining defaults (e.g. ``null`` for fields a newer SDK declares)
    out: dict[str, Any] = dump(mode="json", exclude_unset=True, warnings=False)
    return out


def _bad(what: str) -> ProviderError:
    return ProviderError(
        "E_MODEL_BAD_RESPONSE",
        f"anthropic returned a malformed response: {what}",
        provider="anthropic",
        suggestion="Check that Model.spec.endpoint points at an Anthropic Messages API base URL.",
    )


def to_anthropic_messages(messages: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]], thinking: list[dict[str, Any]]) -> None:
        if not blocks and not thinking:
            return
        if out and out[-1]["role"] == role:
            # a merged assistant message still has to open with its thinking blocks
            content = out[-1]["content"]
            at = 0
            while at < len(content) and content[at].get("type") in THINKING_TYPES:
                at += 1
            content[at:at] = thinking
            content.extend(blocks)
        else:
            out.append({"role": role, "content": [*thinking, *blocks]})

    for message in messages:
        role = message.get("role")
        if role == "system":
            text = text_of(message)
            if text:
                system.append({"type": "text", "text": text})
            continue
        blocks: list[dict[str, Any]] = []
        thinking: list[dict[str, Any]] = []
        for part in parts_of(message):
            kind = part.get("type")
            if kind == "text":
                if part.get("text"):  # the API rejects empty text blocks
                    blocks.append({"type": "text", "text": str(part["text"])})
            elif kind == "tool-call" and role == "assistant":
                thinking.extend(_stored_thinking(part))
                args = part.get("input", {})
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": part.get("toolCallId"),
                        "name": part.get("toolName"),
                        "input": args,
                    }
                )
            elif kind in MEDIA_PARTS and role == "user":
                blocks.append(_media_block(message, part))
            elif kind == "tool-result" and role in ("tool", "user"):
                text, is_error = tool_output_text(part)
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.get("toolCallId"), "content": text}
                if is_error:
                    block["is_error"] = True
                blocks.append(block)
            else:
                raise unsupported(message, f"a {kind!r} part")
        if role == "assistant":
            add("assistant", blocks, thinking)
        elif role in ("user", "tool"):
            add("user", blocks, [])
        else:
            raise unsupported(message, "an unknown role")
    return system, out


def _media_block(message: Mapping[str, Any], part: Mapping[str, Any]) -> dict[str, Any]:
    """An image part as an ``image`` block; a file part as a ``document`` block: PDFs as base64,
    ``text/*`` as a plain-text source (the two document kinds the Messages API reads)."""
    media_type, data, url = media_source(message, part)
    if part.get("type") == "image":
        source = {"type": "url", "url": url} if url else {"type": "base64", "media_type": media_type, "data": data}
        return {"type": "image", "source": source}
    if url is not None:
        if media_type != "application/pdf":
            raise unsupported(message, f"a {media_type} file by URL (Anthropic reads PDFs by URL)")
        source = {"type": "url", "url": url}
    elif media_type == "application/pdf":
        source = {"type": "base64", "media_type": media_type, "data": data}
    elif media_type.startswith("text/"):
        text = base64.b64decode(data or "").decode("utf-8", errors="replace")
        source = {"type": "text", "media_type": "text/plain", "data": text}
    else:
        raise unsupported(message, f"a {media_type} file (Anthropic reads PDF and text documents)")
    block: dict[str, Any] = {"type": "document", "source": source}
    if part.get("name"):
        block["title"] = str(part["name"])
    return block


def _stored_thinking(part: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The thinking blocks a tool-call part carries (see the module docstring), as plain dicts."""
    meta = part.get("providerMetadata")
    ours = meta.get(METADATA_KEY) if isinstance(meta, Mapping) else None
    if not isinstance(ours, Mapping) or ours.get(BLOCKS_KEY) is None:
        return []
    stored = ours[BLOCKS_KEY]
    if not isinstance(stored, list) or not all(
        isinstance(b, Mapping) and b.get("type") in THINKING_TYPES for b in stored
    ):
        raise ModelError(
            "E_MODEL_UNSUPPORTED_CONTENT",
            f"tool call {part.get('toolCallId')!r}: providerMetadata.{METADATA_KEY}.{BLOCKS_KEY} must be the list "
            "of thinking / redacted_thinking blocks Anthropic returned with that call",
            suggestion=(
                f"Restore the message as the runtime stored it, or remove providerMetadata.{METADATA_KEY} from the "
                "part (the API then rejects the request only while the tool loop of that message is still running "
                "with thinking enabled)."
            ),
        )
    blocks: list[dict[str, Any]] = copy_json(stored)
    return blocks


def parse_message(data: dict[str, Any]) -> ModelResponse:
    content = data.get("content")
    if data.get("type") not in (None, "message") or not isinstance(content, list):
        raise _bad("no content list")
    text: list[str] = []
    calls: list[ModelToolCall] = []
    thinking: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, dict):
            raise _bad("a content block is not an object")
        if block.get("type") == "text":
            text.append(str(block.get("text", "")))
        elif block.get("type") in THINKING_TYPES:
            thinking.append(block)
        elif block.get("type") == "tool_use":
            if not isinstance(block.get("name"), str):
                raise _bad("a tool_use block without a name")
            calls.append(ModelToolCall(block.get("id") or new_id("call"), block["name"], block.get("input", {})))
    if calls and thinking:
        # only a tool loop needs them back; a final answer's thinking is not required later
        calls[0].metadata = {METADATA_KEY: {BLOCKS_KEY: thinking}}
    raw = data.get("stop_reason")
    return ModelResponse(
        text="".join(text) or None,
        tool_calls=calls,
        usage=_usage(data.get("usage") or {}),
        finish_reason=normalize_finish(raw, FINISH, has_calls=bool(calls)),
        raw_finish_reason=raw,
    )


def _usage(u: dict[str, Any]) -> dict[str, int] | None:
    """input_tokens excludes prompt-cache reads and writes; promptTokens counts them all."""
    if not u:
        return None
    prompt = sum(u.get(k) or 0 for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    return usage(prompt, u.get("output_tokens"))


class _StreamAccumulator:
    """Rebuilds the final message from the documented event sequence (message_start,
    content_block_start/delta/stop, message_delta, message_stop). Only text deltas are emitted:
    thinking arrives as ``thinking_delta`` pieces plus a ``signature_delta`` before the block stops,
    and a ``redacted_thinking`` block comes whole in its ``content_block_start``."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.started = False
        self.stopped = False

    def add(self, event: dict[str, Any], emit: TextDeltaCallback) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self.started = True
            self.usage.update((event.get("message") or {}).get("usage") or {})
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            if block.get("type") == "tool_use":
                block["partial"] = []
            self.blocks[int(event.get("index", len(self.blocks)))] = block
            if block.get("type") == "text" and block.get("text"):
                emit(block["text"])
        elif kind == "content_block_delta":
            target = self.blocks.get(int(event.get("index", -1)))
            delta = event.get("delta") or {}
            if target is None:
                raise _bad("a content_block_delta for a block that never started")
            block = target
            if delta.get("type") == "text_delta":
                piece = str(delta.get("text", ""))
                block["text"] = block.get("text", "") + piece
                emit(piece)
            elif delta.get("type") == "input_json_delta":
                block.setdefault("partial", []).append(str(delta.get("partial_json", "")))
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
            elif delta.get("type") == "signature_delta":
                block["signature"] = block.get("signature", "") + str(delta.get("signature", ""))
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason"):
                self.stop_reason = delta["stop_reason"]
            self.usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            err = event.get("error") or {}
            raise ProviderError(
                "E_MODEL_PROVIDER_ERROR",
                f"anthropic stream error: {err.get('type')}: {err.get('message')}",
                provider="anthropic",
            )

    def result(self) -> ModelResponse:
        if not self.started:
            raise _bad("the stream ended before message_start")
        content: list[dict[str, Any]] = []
        for _, block in sorted(self.blocks.items()):
            if block.get("type") == "tool_use":
                partial = "".join(block.pop("partial", []))
                block["input"] = parse_arguments(partial) if partial else block.get("input") or {}
            content.append(block)
        return parse_message(
            {"type": "message", "content": content, "stop_reason": self.stop_reason, "usage": self.usage}
        )
