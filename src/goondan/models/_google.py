"""The ``google`` provider: Gemini through the official ``google-genai`` SDK.

Gemini has one system slot (``system_instruction``), so every system message becomes one of its parts
in conversation order. Tool schemas go in ``parameters_json_schema`` (JSON Schema, verbatim), tool
results become ``function_response`` parts (``{"output": value}`` or ``{"error": value}``), and the
thought signatures Gemini attaches to function calls are kept on the tool call so they can be sent
back with it.
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import Any

from .._ids import new_id
from ..errors import ModelError
from ._base import ModelRequest, ModelResponse, ModelToolCall, TextDeltaCallback
from ._convert import MEDIA_PARTS, media_source, normalize_finish, parts_of, text_of, tool_output, unsupported, usage
from ._errors import ProviderError
from ._network import NetworkAdapter
from ._options import NetworkOptions, parse_network_options
from ._retry import Failure, parse_retry_after
from ._sdk import import_sdk

PROVIDER_KEYS = frozenset({"apiVersion", "headers", "parallelToolCalls"})
# id(genai client) -> the httpx2 client handed to it, closed with it
_TRANSPORTS: dict[int, Any] = {}

FINISH = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content-filter",
    "RECITATION": "content-filter",
    "BLOCKLIST": "content-filter",
    "PROHIBITED_CONTENT": "content-filter",
    "SPII": "content-filter",
    "IMAGE_SAFETY": "content-filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
}

SIGNATURE_KEY = "google"  # ModelToolCall.metadata / tool-call part providerMetadata namespace


def check_options(options: dict[str, Any]) -> NetworkOptions:
    parsed = parse_network_options("google", options, PROVIDER_KEYS)
    version = parsed.extra.get("apiVersion")
    if version is not None and not (isinstance(version, str) and version):
        raise ModelError("E_MODEL_CONFIG", "google model: options.apiVersion must be a string such as v1beta")
    headers = parsed.extra.get("headers")
    if headers is not None and not (
        isinstance(headers, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
    ):
        raise ModelError("E_MODEL_CONFIG", "google model: options.headers must map strings to strings")
    if parsed.extra.get("parallelToolCalls", True) is not True:
        # accepted as true so one Model document can switch providers; Gemini has no setting to stop
        # parallel function calls, so false would be a promise nothing keeps
        raise ModelError(
            "E_MODEL_CONFIG",
            "google model: options.parallelToolCalls can only be true (Gemini has no setting to turn parallel "
            "function calls off)",
            suggestion="Remove the option, or set Swarm.spec.policy.maxParallelToolCalls: 1 to run the calls "
            "of a step one at a time.",
        )
    return parsed


def _modules() -> tuple[Any, Any, Any]:
    genai = import_sdk("google.genai", provider="google", extra="google", package="google-genai")
    errors = import_sdk("google.genai.errors", provider="google", extra="google", package="google-genai")
    types = import_sdk("google.genai.types", provider="google", extra="google", package="google-genai")
    return genai, types, errors


class GoogleModel(NetworkAdapter):
    provider = "google"
    default_endpoint = "https://generativelanguage.googleapis.com"
    client_paths = ("aio.models",)

    def __init__(self, model: str, options: dict[str, Any], api_key: str | None, endpoint: str | None) -> None:
        parsed = check_options(options)
        super().__init__(model, parsed, api_key, endpoint)
        self._genai, self._types, self._errors = _modules()

    def _make_client(self) -> Any:
        key = self._api_key or os.environ.get("GOOGLE_API_KEY") or os.environ.get("GEMINI_API_KEY")
        if not key:
            raise ModelError(
                "E_MODEL_AUTH",
                "the google provider has no API key",
                suggestion="Set Model.spec.apiKey (valueFrom.env: GOOGLE_API_KEY) or export GOOGLE_API_KEY.",
            )
        http: dict[str, Any] = {
            "timeout": int(self.options.timeout * 1000),  # milliseconds
            "retry_options": self._types.HttpRetryOptions(attempts=1),  # goondan's retry loop decides
        }
        if self.endpoint:
            http["base_url"] = self.endpoint
        if self.options.extra.get("apiVersion"):
            http["api_version"] = self.options.extra["apiVersion"]
        if self.options.extra.get("headers"):
            http["headers"] = self.options.extra["headers"]
        # The SDK switches its async transport to aiohttp whenever aiohttp is importable (Ray and many
        # other packages install it), which changes the errors and headers _classify reads. Handing it
        # our own httpx2 client keeps one transport whatever else is installed.
        httpx2: Any = import_sdk("httpx2", provider="google", extra="google", package="httpx2")
        transport = httpx2.AsyncClient(timeout=self.options.timeout)
        http["httpx_async_client"] = transport
        client = self._genai.Client(api_key=key, http_options=self._types.HttpOptions(**http))
        _TRANSPORTS[id(client)] = transport  # the SDK leaves a client it was given open
        return client

    async def _close_client(self, client: Any) -> None:
        await client.aio.aclose()
        client.close()
        transport = _TRANSPORTS.pop(id(client), None)
        if transport is not None:
            await transport.aclose()

    def _classify(self, exc: BaseException) -> Failure | None:
        if isinstance(exc, self._errors.APIError):
            response = getattr(exc, "response", None)
            headers = dict(getattr(response, "headers", None) or {})
            request_id = headers.get("x-request-id") or headers.get("x-goog-request-id")
            detail = f"{exc.status}: {exc.message}" if exc.status else str(exc.message or exc)
            return Failure(
                "status",
                detail,
                status=int(exc.code) if exc.code else None,
                request_id=request_id,
                retry_after=parse_retry_after(headers),
            )
        httpx2: Any = import_sdk("httpx2", provider="google", extra="google", package="httpx2")
        if isinstance(exc, httpx2.TimeoutException):
            return Failure("timeout", "the request timed out")
        if isinstance(exc, httpx2.TransportError):
            return Failure("connection", f"connection failed ({type(exc).__name__}: {exc})")
        if isinstance(exc, self._errors.UnknownApiResponseError | ValueError):
            # pydantic's ValidationError and json's JSONDecodeError are ValueErrors
            return Failure("bad-response", f"the response is not a valid generateContent answer ({type(exc).__name__})")
        return None

    def build_request(self, request: ModelRequest) -> dict[str, Any]:
        system, contents = to_google_contents(request.messages)
        config: dict[str, Any] = {"automatic_function_calling": {"disable": True}}
        if system:
            config["system_instruction"] = {"parts": system}
        if request.tools:
            config["tools"] = [
                {
                    "function_declarations": [
                        {
                            "name": t["name"],
                            "description": t.get("description", ""),
                            "parameters_json_schema": t.get("parameters", {"type": "object", "properties": {}}),
                        }
                        for t in request.tools
                    ]
                }
            ]
        params = request.params
        if params.get("temperature") is not None:
            config["temperature"] = params["temperature"]
        if params.get("topP") is not None:
            config["top_p"] = params["topP"]
        if params.get("maxTokens") is not None:
            config["max_output_tokens"] = params["maxTokens"]
        if request.output_schema is not None:
            # native JSON mode with the full JSON Schema; the runtime still validates the answer
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = request.output_schema
        extra = params.get("extra")
        if isinstance(extra, dict):
            config.update(extra)
        try:
            typed = self._types.GenerateContentConfig(**config)
        except ValueError as exc:
            raise ModelError(
                "E_MODEL_CONFIG",
                f"google model: modelConfig.params.extra is not a valid GenerateContentConfig: {exc}",
            ) from exc
        return {"model": request.model or self.model, "contents": contents, "config": typed}

    async def _call(self, client: Any, request: ModelRequest, emit: TextDeltaCallback | None) -> ModelResponse:
        body = self.build_request(request)
        if emit is None:
            response = await client.aio.models.generate_content(**body)
            return parse_response([_dump(response)])
        chunks: list[dict[str, Any]] = []
        stream = await client.aio.models.generate_content_stream(**body)
        try:
            async for chunk in stream:
                data = _dump(chunk)
                chunks.append(data)
                for part in _parts(data):
                    if isinstance(part.get("text"), str) and not part.get("thought"):
                        emit(part["text"])
        finally:
            await stream.aclose()
        return parse_response(chunks)


def _dump(obj: Any) -> dict[str, Any]:
    dump = getattr(obj, "model_dump", None)
    if dump is None:
        raise _bad(f"got {type(obj).__name__} instead of a GenerateContentResponse")
    out: dict[str, Any] = dump(mode="json", exclude_none=True, warnings=False)
    return out


def _bad(what: str) -> ProviderError:
    return ProviderError(
        "E_MODEL_BAD_RESPONSE",
        f"google returned a malformed response: {what}",
        provider="google",
        suggestion="Check that Model.spec.endpoint points at a Gemini API base URL.",
    )


def to_google_contents(messages: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})

    for message in messages:
        role = message.get("role")
        if role == "system":
            text = text_of(message)
            if text:
                system.append({"text": text})
            continue
        parts: list[dict[str, Any]] = []
        for part in parts_of(message):
            kind = part.get("type")
            if kind == "text":
                if part.get("text"):
                    parts.append({"text": str(part["text"])})
            elif kind == "tool-call" and role == "assistant":
                call: dict[str, Any] = {"name": part.get("toolName"), "args": part.get("input", {})}
                if part.get("toolCallId"):
                    call["id"] = part["toolCallId"]
                entry: dict[str, Any] = {"function_call": call}
                signature = _signature(part)
                if signature is not None:
                    entry["thought_signature"] = signature
                parts.append(entry)
            elif kind in MEDIA_PARTS and role == "user":
                media_type, data, url = media_source(message, part)
                if url is not None:
                    parts.append({"file_data": {"mime_type": media_type, "file_uri": url}})
                else:  # the SDK takes the bytes and base64-encodes them on the wire
                    parts.append({"inline_data": {"mime_type": media_type, "data": base64.b64decode(data or "")}})
            elif kind == "tool-result" and role in ("tool", "user"):
                value, is_error = tool_output(part)
                response: dict[str, Any] = {
                    "name": part.get("toolName"),
                    "response": {"error" if is_error else "output": value},
                }
                if part.get("toolCallId"):
                    response["id"] = part["toolCallId"]
                parts.append({"function_response": response})
            else:
                raise unsupported(message, f"a {kind!r} part")
        if role == "assistant":
            add("model", parts)
        elif role in ("user", "tool"):
            add("user", parts)
        else:
            raise unsupported(message, "an unknown role")
    return system, contents


def _signature(part: dict[str, Any]) -> bytes | None:
    meta = part.get("providerMetadata")
    raw = meta.get(SIGNATURE_KEY, {}).get("thoughtSignature") if isinstance(meta, dict) else None
    if not isinstance(raw, str):
        return None
    try:
        return base64.b64decode(raw)
    except (binascii.Error, ValueError):
        return None


def _parts(data: dict[str, Any]) -> list[dict[str, Any]]:
    candidates = data.get("candidates") or []
    if not candidates or not isinstance(candidates[0], dict):
        return []
    parts = (candidates[0].get("content") or {}).get("parts") or []
    return [p for p in parts if isinstance(p, dict)]


def parse_response(chunks: list[dict[str, Any]]) -> ModelResponse:
    """One response from one or more GenerateContentResponse chunks (a plain call is one chunk)."""
    if not chunks:
        raise _bad("the stream ended without any chunk")
    text: list[str] = []
    calls: list[ModelToolCall] = []
    finish: str | None = None
    usage_meta: dict[str, Any] = {}
    blocked: str | None = None
    for data in chunks:
        candidates = data.get("candidates")
        if candidates is not None and not isinstance(candidates, list):
            raise _bad("candidates is not a list")
        for part in _parts(data):
            if isinstance(part.get("text"), str) and not part.get("thought"):
                text.append(part["text"])
            call = part.get("function_call")
            if isinstance(call, dict):
                if not isinstance(call.get("name"), str):
                    raise _bad("a function_call without a name")
                meta = (
                    {SIGNATURE_KEY: {"thoughtSignature": part["thought_signature"]}}
                    if part.get("thought_signature")
                    else None
                )
                calls.append(
                    ModelToolCall(call.get("id") or new_id("call"), call["name"], call.get("args", {}), metadata=meta)
                )
        if candidates and isinstance(candidates[0], dict) and candidates[0].get("finish_reason"):
            finish = str(candidates[0]["finish_reason"])
        if isinstance(data.get("usage_metadata"), dict):
            usage_meta = data["usage_metadata"]
        feedback = data.get("prompt_feedback")
        if isinstance(feedback, dict) and feedback.get("block_reason"):
            blocked = str(feedback["block_reason"])
    if blocked and not text and not calls:
        return ModelResponse(finish_reason="content-filter", raw_finish_reason=blocked, usage=_usage(usage_meta))
    if finish is None and not text and not calls:
        raise _bad("no candidates")
    return ModelResponse(
        text="".join(text) or None,
        tool_calls=calls,
        usage=_usage(usage_meta),
        finish_reason=normalize_finish(finish, FINISH, has_calls=bool(calls)),
        raw_finish_reason=finish,
    )


def _usage(u: dict[str, Any]) -> dict[str, int] | None:
    if not u:
        return None
    completion = (u.get("candidates_token_count") or 0) + (u.get("thoughts_token_count") or 0)
    return usage(u.get("prompt_token_count"), completion, u.get("total_token_count"))
