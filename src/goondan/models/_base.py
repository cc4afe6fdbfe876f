"""The provider protocol every model adapter implements.

The runtime calls :meth:`ModelAdapter.generate` once per step with the step's messages (system
messages included, in place) and the step's tool catalog verbatim. Real providers (issue: real model
providers) plug in behind the same protocol, which is why the request carries ``params`` untouched
and the response reports usage and the provider's raw finish reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NotRequired, Protocol, TypedDict

from .._api_types import TokenUsage, ToolCatalogItem

TextDeltaCallback = Callable[[str], None]


@dataclasses.dataclass(slots=True)
class ModelRequest:
    """One model call: the step's messages (``{"role", "content"}`` dicts, oldest first, system
    messages in place) and its tool catalog, with ``Agent.spec.modelConfig.params`` untouched."""

    messages: Sequence[dict[str, Any]]
    tools: list[ToolCatalogItem]
    params: dict[str, Any]
    model: str
    agent_name: str
    instance_key: str
    on_text_delta: TextDeltaCallback | None = None
    # Agent.spec.output.schema: the final answer must be JSON valid against it. Providers with a
    # native structured-output mode pass it on; the runtime validates the answer either way.
    output_schema: dict[str, Any] | None = None


@dataclasses.dataclass(slots=True)
class ModelToolCall:
    id: str
    name: str
    args: Any  # a dict when well-formed; anything else is reported as malformed by the runtime
    # provider data that must travel back with this call in later requests (Gemini thought
    # signatures), keyed by provider: {"google": {"thoughtSignature": "<base64>"}}. The runtime
    # should store it as the tool-call part's "providerMetadata".
    metadata: dict[str, Any] | None = None


@dataclasses.dataclass(slots=True)
class ModelResponse:
    text: str | None = None
    tool_calls: list[ModelToolCall] = dataclasses.field(default_factory=list)
    usage: dict[str, int] | None = None
    finish_reason: str | None = None
    raw_finish_reason: str | None = None
    issues: list[str] = dataclasses.field(default_factory=list)


class ModelOutputToolCall(TypedDict):
    """One tool call in a :class:`ModelOutput`; ``id`` is generated when missing."""

    name: str
    args: dict[str, Any]
    id: NotRequired[str]


class ModelOutput(TypedDict, total=False):
    """What the ``generate(request)`` of a ``python`` model returns (the ``scripted`` provider's
    replies have the same shape)."""

    text: str | None
    toolCalls: list[ModelOutputToolCall]
    usage: TokenUsage
    finishReason: str


class ModelAdapter(Protocol):
    provider: str

    async def generate(self, request: ModelRequest) -> ModelResponse: ...

    async def aclose(self) -> None: ...


def normalize_usage(usage: Any) -> dict[str, int] | None:
    if not isinstance(usage, dict):
        return None
    out: dict[str, int] = {}
    for key in ("promptTokens", "completionTokens", "totalTokens"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[key] = value
    if not out:
        return None
    if "totalTokens" not in out:
        out["totalTokens"] = out.get("promptTokens", 0) + out.get("completionTokens", 0)
    return out
