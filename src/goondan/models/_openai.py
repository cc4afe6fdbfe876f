"""The ``openai`` provider: OpenAI Chat Completions through the official SDK.

With ``Model.spec.endpoint`` the same adapter serves any OpenAI-compatible server (vLLM, llama.cpp
server, Ollama, LM Studio). System messages stay where they are (the Chat API accepts them anywhere);
each tool result becomes one ``role: tool`` message.

Prompt caching is automatic on OpenAI's side for a repeated prefix, but requests are spread over
machines by a hash of their first tokens, so two instances whose prompts start alike compete for the
same cache and a busy one overflows to machines that never saw its history. Every request therefore
carries ``prompt_cache_key``: by default a digest of the agent name and instance key (stable for the
life of the instance, revealing neither), ``options.promptCacheKey: <string>`` for a fixed key shared
on purpose, ``false`` to send none (for a compatible server that rejects unknown fields; the ones we
know of ignore it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from typing import Any

from .._ids import new_id
from ..errors import ModelError
from ._base import ModelRequest, ModelResponse, ModelToolCall, TextDeltaCallback
from ._convert import (
    MEDIA_PARTS,
    media_source,
    normalize_finish,
    parse_arguments,
    parts_of,
    text_of,
    tool_output,
    unsupported,
    usage,
)
from ._errors import ProviderError
from ._network import NetworkAdapter
from ._options import NetworkOptions, parse_network_options
from ._retry import Failure
from ._sdk import import_sdk
from ._stainless import classify

PROVIDER_KEYS = frozenset(
    {"maxTokensParam", "organization", "project", "headers", "streamUsage", "parallelToolCalls", "promptCacheKey"}
)

FINISH = {
    "stop": "stop",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "length": "length",
    "content_filter": "content-filter",
}


def _sdk() -> Any:
    return import_sdk("openai", provider="openai", extra="openai", package="openai")


class OpenAIModel(NetworkAdapter):
    provider = "openai"
    default_endpoint = "https://api.openai.com/v1"
    base_url_variable = "OPENAI_BASE_URL"
    client_paths = ("chat.completions",)

    def __init__(self, model: str, options: dict[str, Any], api_key: str | None, endpoint: str | None) -> None:
        parsed = check_options(options)
        super().__init__(model, parsed, api_key, endpoint)
        self._sdk = _sdk()

    def _make_client(self) -> Any:
        extra = self.options.extra
        key = self._api_key or os.environ.get("OPENAI_API_KEY")
        if key is None and self.endpoint:
            key = "unused"  # self-hosted OpenAI-compatible servers usually need no key
        if key is None:
            raise ModelError(
                "E_MODEL_AUTH",
                "the openai provider has no API key",
                suggestion="Set Model.spec.apiKey (valueFrom.env: OPENAI_API_KEY) or export OPENAI_API_KEY.",
            )
        return self._sdk.AsyncOpenAI(
            api_key=key,
            base_url=self.endpoint or None,
            organization=extra.get("organization"),
            project=extra.get("project"),
            default_headers=extra.get("headers"),
            timeout=self.options.timeout,
            max_retries=0,  # goondan's own retry loop (models/_retry.py) decides
        )

    async def _close_client(self, client: Any) -> None:
        await client.close()

    def _classify(self, exc: BaseException) -> Failure | None:
        return classify(self._sdk, exc)

    def build_request(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": request.model or self.model, "messages": to_openai_messages(request.messages)}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t["name"],
                        "description": t.get("description", ""),
                        "parameters": t.get("parameters", {"type": "object", "properties": {}}),
                    },
                }
                for t in request.tools
            ]
            parallel = self.options.extra.get("parallelToolCalls")
            if parallel is not None:  # unset: the provider's default (parallel calls allowed)
                body["parallel_tool_calls"] = parallel
        params = request.params
        if params.get("temperature") is not None:
            body["temperature"] = params["temperature"]
        if params.get("topP") is not None:
            body["top_p"] = params["topP"]
        if params.get("maxTokens") is not None:
            default_field = "max_tokens" if self.endpoint else "max_completion_tokens"
            body[self.options.extra.get("maxTokensParam", default_field)] = params["maxTokens"]
        if stream:
            body["stream"] = True
            if self.options.extra.get("streamUsage", True):
                body["stream_options"] = {"include_usage": True}
        if request.output_schema is not None:
            # native structured outputs, not strict: strict mode rejects schemas that leave a property
            # optional or allow extra ones, and the runtime validates the answer either way
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request.output_schema},
            }
        cache_key = self.options.extra.get("promptCacheKey", True)
        if cache_key is True:
            body["prompt_cache_key"] = prompt_cache_key(request.agent_name, request.instance_key)
        elif isinstance(cache_key, str):
            body["prompt_cache_key"] = cache_key
        extra = params.get("extra")
        if isinstance(extra, dict) and extra:
            body["extra_body"] = dict(extra)
        return body

    async def _call(self, client: Any, request: ModelRequest, emit: TextDeltaCallback | None) -> ModelResponse:
        body = self.build_request(request, stream=emit is not None)
        if emit is None:
            response = await client.chat.completions.create(**body)
            return parse_completion(_dump(response))
        stream = await client.chat.completions.create(**body)
        acc = _StreamAccumulator()
        try:
            async for chunk in stream:
                acc.add(_dump(chunk), emit)
        finally:
            await stream.close()
        return acc.result()


def check_options(raw: dict[str, Any]) -> NetworkOptions:
    options = parse_network_options("openai", raw, PROVIDER_KEYS)
    field = options.extra.get("maxTokensParam")
    if field is not None and field not in ("max_tokens", "max_completion_tokens"):
        raise ModelError(
            "E_MODEL_CONFIG", "openai model: options.maxTokensParam must be max_tokens or max_completion_tokens"
        )
    headers = options.extra.get("headers")
    if headers is not None and not (
        isinstance(headers, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
    ):
        raise ModelError("E_MODEL_CONFIG", "openai model: options.headers must map strings to strings")
    if not isinstance(options.extra.get("streamUsage", True), bool):
        raise ModelError("E_MODEL_CONFIG", "openai model: options.streamUsage must be true or false")
    if not isinstance(options.extra.get("parallelToolCalls", True), bool):
        raise ModelError("E_MODEL_CONFIG", "openai model: options.parallelToolCalls must be true or false")
    cache_key = options.extra.get("promptCacheKey", True)
    if not isinstance(cache_key, bool) and not (isinstance(cache_key, str) and 0 < len(cache_key) <= 64):
        raise ModelError(
            "E_MODEL_CONFIG",
            "openai model: options.promptCacheKey must be true, false or a string of 1 to 64 characters",
        )
    return options


def prompt_cache_key(agent_name: str, instance_key: str) -> str:
    """The default ``prompt_cache_key`` of one agent instance: stable, short, and not the key itself
    (instance keys may be user ids or chat ids)."""
    digest = hashlib.sha256(f"{agent_name}\0{instance_key}".encode()).hexdigest()
    return f"goondan-{digest[:32]}"


def _dump(obj: Any) -> dict[str, Any]:
    if isinstance(obj, dict):
        return obj
    dump = getattr(obj, "model_dump", None)
    if dump is None:
        raise _bad(f"got {type(obj).__name__} instead of a chat completion")
    out: dict[str, Any] = dump(mode="json", warnings=False)
    return out


def _media_part(message: Any, part: Any) -> dict[str, Any]:
    """An image part as an ``image_url`` content part (a URL, or the bytes as a ``data:`` URL); a
    file part as a ``file`` content part with ``file_data`` (Chat Completions takes files inline only, and
    only PDFs: ``text/*`` files become a text part headed with their name)."""
    media_type, data, url = media_source(message, part)
    inline = f"data:{media_type};base64,{data}"
    if part.get("type") == "image":
        return {"type": "image_url", "image_url": {"url": url or inline}}
    if url is not None:
        raise unsupported(message, "a file by URL (OpenAI Chat Completions takes file bytes only)")
    name = str(part.get("name") or "file")
    if media_type.startswith("text/"):
        # file inputs are PDFs only: a text file is sent as what it is, text, under its name
        body = base64.b64decode(data or "").decode("utf-8", errors="replace")
        return {"type": "text", "text": f"[file {name}]\n{body}"}
    return {"type": "file", "file": {"filename": name, "file_data": inline}}


def to_openai_messages(messages: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            out.append({"role": "system", "content": text_of(message)})
        elif role == "user":
            texts: list[dict[str, Any]] = []
            for part in parts_of(message):
                if part.get("type") == "text":
                    texts.append({"type": "text", "text": str(part.get("text", ""))})
                elif part.get("type") in MEDIA_PARTS:
                    texts.append(_media_part(message, part))
                elif part.get("type") == "tool-result":
                    out.append(_tool_message(part))
                else:
                    raise unsupported(message, f"a {part.get('type')!r} part")
            if isinstance(message.get("content"), str):
                out.append({"role": "user", "content": message["content"]})
            elif texts:
                out.append({"role": "user", "content": texts})
        elif role == "assistant":
            text: list[str] = []
            calls: list[dict[str, Any]] = []
            for part in parts_of(message):
                if part.get("type") == "text":
                    text.append(str(part.get("text", "")))
                elif part.get("type") == "tool-call":
                    args = part.get("input", {})
                    calls.append(
                        {
                            "id": part.get("toolCallId"),
                            "type": "function",
                            "function": {
                                "name": part.get("toolName"),
                                "arguments": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
                            },
                        }
                    )
                else:
                    raise unsupported(message, f"a {part.get('type')!r} part")
            entry: dict[str, Any] = {"role": "assistant", "content": "".join(text) if text or not calls else None}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
        elif role == "tool":
            for part in parts_of(message):
                if part.get("type") != "tool-result":
                    raise unsupported(message, f"a {part.get('type')!r} part")
                out.append(_tool_message(part))
        else:
            raise unsupported(message, "an unknown role")
    return out


def _tool_message(part: dict[str, Any]) -> dict[str, Any]:
    value, is_error = tool_output(part)
    if is_error:
        content = json.dumps({"error": value}, ensure_ascii=False)
    elif isinstance(value, str):
        content = value
    else:
        content = json.dumps(value, ensure_ascii=False)
    return {"role": "tool", "tool_call_id": part.get("toolCallId"), "content": content}


def _bad(what: str) -> ProviderError:
    return ProviderError(
        "E_MODEL_BAD_RESPONSE",
        f"openai returned a malformed chat completion: {what}",
        provider="openai",
        suggestion="Check that Model.spec.endpoint points at an OpenAI-compatible /v1 base URL.",
    )


def parse_completion(data: dict[str, Any]) -> ModelResponse:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _bad("no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _bad("choices[0] has no message")
    text = message.get("content")
    if text is not None and not isinstance(text, str):
        raise _bad("message.content is not a string")
    if not text and isinstance(message.get("refusal"), str):
        text = message["refusal"]
    calls: list[ModelToolCall] = []
    for raw in message.get("tool_calls") or []:
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise _bad("a tool call without a function name")
        calls.append(
            ModelToolCall(raw.get("id") or new_id("call"), function["name"], parse_arguments(function.get("arguments")))
        )
    raw_finish = choice.get("finish_reason")
    u = data.get("usage") or {}
    return ModelResponse(
        text=text or None,
        tool_calls=calls,
        usage=usage(u.get("prompt_tokens"), u.get("completion_tokens"), u.get("total_tokens")),
        finish_reason=normalize_finish(raw_finish, FINISH, has_calls=bool(calls)),
        raw_finish_reason=raw_finish,
    )


class _StreamAccumulator:
    """Builds the same ModelResponse from chunks that the non-streamed call returns."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] = {}
        self.chunks = 0

    def add(self, chunk: dict[str, Any], emit: TextDeltaCallback) -> None:
        self.chunks += 1
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.text.append(content)
                emit(content)
            if isinstance(delta.get("refusal"), str):
                self.refusal.append(delta["refusal"])
            for raw in delta.get("tool_calls") or []:
                index = raw.get("index", len(self.calls))
                call = self.calls.setdefault(index, {"id": None, "name": "", "arguments": []})
                if raw.get("id"):
                    call["id"] = raw["id"]
                function = raw.get("function") or {}
                if function.get("name"):
                    call["name"] += function["name"]
                if function.get("arguments"):
                    call["arguments"].append(function["arguments"])
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]

    def result(self) -> ModelResponse:
        if self.chunks == 0:
            raise _bad("the stream ended without any chunk")
        calls = []
        for _, raw in sorted(self.calls.items()):
            if not raw["name"]:
                raise _bad("a streamed tool call without a function name")
            calls.append(
                ModelToolCall(raw["id"] or new_id("call"), raw["name"], parse_arguments("".join(raw["arguments"])))
            )
        text = "".join(self.text) or "".join(self.refusal)
        u = self.usage
        return ModelResponse(
            text=text or None,
            tool_calls=calls,
            usage=usage(u.get("prompt_tokens"), u.get("completion_tokens"), u.get("total_tokens")),
            finish_reason=normalize_finish(self.finish, FINISH, has_calls=bool(calls)),
            raw_finish_reason=self.finish,
        )
