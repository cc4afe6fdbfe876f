"""The types extension, tool and model authors write against, in one place.

Annotate and a type checker (and an editor) knows every attribute of ``ctx`` and ``api``::

    from goondan.types import ExtensionApi, StepContext, StepResult, ToolContext

    async def step(ctx: StepContext) -> StepResult:
        ctx.tool_catalog = [t for t in ctx.tool_catalog if t["name"] != "shell__wipe"]
        return await ctx.next()

    def register(api: ExtensionApi, config: dict[str, Any]) -> None:
        api.pipeline.register("step", step)

* middleware contexts: :class:`TurnContext`, :class:`StepContext`, :class:`ToolCallContext` and their
  results :class:`TurnResult`, :class:`StepResult`, :class:`ToolCallResult`; ``api.pipeline.register``
  pairs each middleware type with its context (:data:`TurnMiddleware` ...);
* ``register(api)``: :class:`ExtensionApi` and its parts :class:`ExtensionPipeline`,
  :class:`ExtensionTools`, :class:`ExtensionState`, :class:`ExtensionEvents` (``api.logger`` is a
  :class:`logging.Logger`), runtime-event records (:data:`RuntimeEvent` and one TypedDict per type);
* tools: :class:`ToolContext`, :data:`ToolHandler`, :class:`ToolCatalogItem`, :class:`ToolDefinition`;
* messages: :class:`Message` and the message events (:data:`MessageEvent`);
* ``python`` models: ``generate(request: ModelRequest) -> ModelOutput``.

The package ships ``py.typed``, so these types reach the user's type checker as they are here.
"""

from __future__ import annotations

from ._api_types import (
    AgentInfo,
    AgentRequestResult,
    AgentsApi,
    AgentSendResult,
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    CallInfo,
    EventError,
    ExtensionFailedEvent,
    InboundInfo,
    ModelCallInfo,
    PromptInfo,
    RuntimeEvent,
    RuntimeEventType,
    RuntimeInfo,
    StepCompletedEvent,
    StepFailedEvent,
    StepStartedEvent,
    SwarmInfo,
    TokenUsage,
    ToolCalledEvent,
    ToolCatalogItem,
    ToolCompletedEvent,
    ToolDefinition,
    ToolFailedEvent,
    ToolLoadFailedEvent,
    ToolRuntimeApi,
    TurnCompletedEvent,
    TurnFailedEvent,
    TurnStartedEvent,
)
from ._content import ContentPart, FilePart, ImagePart, RequestInput, TextPart
from .conversation import ConversationState
from .extensions import ExtensionApi, ExtensionEvents, ExtensionState, ExtensionTools
from .messages import (
    AppendEvent,
    Message,
    MessageEvent,
    MessageRecord,
    RemoveEvent,
    ReplaceEvent,
    TruncateEvent,
)
from .models._base import ModelOutput, ModelOutputToolCall, ModelRequest, ModelResponse, ModelToolCall
from .pipeline import (
    ExtensionPipeline,
    StepContext,
    StepMiddleware,
    ToolCallContext,
    ToolCallMiddleware,
    Turn,
    TurnContext,
    TurnMiddleware,
)
from .results import FinishReason, PendingApproval, StepResult, ToolCall, ToolCallResult, TurnResult
from .tools import ToolContext, ToolHandler

__all__ = [
    "AgentInfo",
    "AgentRequestResult",
    "AgentSendResult",
    "AgentsApi",
    "AppendEvent",
    "ApprovalDecidedEvent",
    "ApprovalRequestedEvent",
    "CallInfo",
    "ContentPart",
    "ConversationState",
    "EventError",
    "ExtensionApi",
    "ExtensionEvents",
    "ExtensionFailedEvent",
    "ExtensionPipeline",
    "ExtensionState",
    "ExtensionTools",
    "FilePart",
    "FinishReason",
    "ImagePart",
    "InboundInfo",
    "Message",
    "MessageEvent",
    "MessageRecord",
    "ModelCallInfo",
    "ModelOutput",
    "ModelOutputToolCall",
    "ModelRequest",
    "ModelResponse",
    "ModelToolCall",
    "PendingApproval",
    "PromptInfo",
    "RemoveEvent",
    "ReplaceEvent",
    "RequestInput",
    "RuntimeEvent",
    "RuntimeEventType",
    "RuntimeInfo",
    "StepCompletedEvent",
    "StepContext",
    "StepFailedEvent",
    "StepMiddleware",
    "StepResult",
    "StepStartedEvent",
    "SwarmInfo",
    "TextPart",
    "TokenUsage",
    "ToolCall",
    "ToolCallContext",
    "ToolCallMiddleware",
    "ToolCallResult",
    "ToolCalledEvent",
    "ToolCatalogItem",
    "ToolCompletedEvent",
    "ToolContext",
    "ToolDefinition",
    "ToolFailedEvent",
    "ToolHandler",
    "ToolLoadFailedEvent",
    "ToolRuntimeApi",
    "TruncateEvent",
    "Turn",
    "TurnCompletedEvent",
    "TurnContext",
    "TurnFailedEvent",
    "TurnMiddleware",
    "TurnResult",
    "TurnStartedEvent",
]
