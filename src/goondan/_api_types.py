"""Definitions of the public types that have no behaviour of their own: catalog items, runtime-event
records, the read-only ``ctx.runtime`` value objects of a turn and the inter-agent call interfaces.

They live in this leaf module (standard library imports only) so that the pipeline, the tool
executor and the runtime can all use them without importing each other; users import them from
:mod:`goondan.types`. TypedDicts cost nothing at run time: the records stay plain dicts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, Protocol, TypedDict

# --- tool catalog ----------------------------------------------------------------------------------


class ToolCatalogItem(TypedDict):
    """One entry of a step's tool catalog (``ctx.tool_catalog``, ``request.tools``). ``parameters``
    is a shared, frozen JSON Schema: build a new item (``{**item, "parameters": ...}``) to change it."""

    name: str
    description: str
    parameters: Mapping[str, Any]


class ToolDefinition(TypedDict):
    """What ``api.tools.register`` takes: the name is ``<extension>__<tool>``."""

    name: str
    description: NotRequired[str]
    parameters: NotRequired[Mapping[str, Any]]
    errorMessageLimit: NotRequired[int]
    parallel: NotRequired[bool]  # False: its calls run alone, never beside other calls of their step


# --- runtime events (runtime-events.jsonl, api.events.on) -------------------------------------------

RuntimeEventType = Literal[
    "turn.started",
    "turn.completed",
    "turn.failed",
    "step.started",
    "step.completed",
    "step.failed",
    "tool.called",
    "tool.completed",
    "tool.failed",
    "approval.requested",
    "approval.decided",
    "tool.loadFailed",
    "extension.failed",
]


class TokenUsage(TypedDict, total=False):
    promptTokens: int
    completionTokens: int
    totalTokens: int


class EventError(TypedDict):
    code: str
    message: NotRequired[str]
    traceback: NotRequired[str]


class _SpanFields(TypedDict):
    timestamp: str
    agentName: str
    instanceKey: str
    traceId: str
    spanId: str


class _TurnFields(_SpanFields):
    turnId: str
    parentSpanId: NotRequired[str]


class TurnStartedEvent(_TurnFields):
    type: Literal["turn.started"]


class TurnCompletedEvent(_TurnFields):
    type: Literal["turn.completed"]
    stepCount: int
    duration: int
    tokenUsage: NotRequired[TokenUsage]
    cancelled: NotRequired[bool]  # the turn was cancelled (Runtime.cancel) and committed what it had


class TurnFailedEvent(_TurnFields):
    type: Literal["turn.failed"]
    duration: int
    errorMessage: str
    extensionName: NotRequired[str]  # the extension whose turn or step middleware raised
    error: EventError


class _StepFields(_SpanFields):
    parentSpanId: str
    turnId: str
    stepId: str
    stepIndex: int


class StepStartedEvent(_StepFields):
    type: Literal["step.started"]
    llmInputMessages: NotRequired[list[dict[str, Any]]]


class ModelCallInfo(TypedDict):
    """The model call of a step (``model`` of ``step.completed`` / ``step.failed``): ``start`` is
    milliseconds after the step began, ``duration`` milliseconds (fractions kept)."""

    name: str
    provider: str
    start: float
    duration: float
    finishReason: NotRequired[str]
    failed: NotRequired[bool]  # the step failed during the call (a model error)


class StepCompletedEvent(_StepFields):
    type: Literal["step.completed"]
    toolCallCount: int
    duration: int
    tokenUsage: NotRequired[TokenUsage]
    model: NotRequired[ModelCallInfo]  # absent when a step middleware answered without the model


class StepFailedEvent(_StepFields):
    type: Literal["step.failed"]
    duration: int
    errorMessage: str
    error: NotRequired[EventError]
    model: NotRequired[ModelCallInfo]  # the model was called (it may be what failed)


class _ToolFields(_SpanFields):
    parentSpanId: str
    turnId: str
    stepId: str
    toolCallId: str
    toolName: str


class ToolCalledEvent(_ToolFields):
    type: Literal["tool.called"]


class ToolCompletedEvent(_ToolFields):
    type: Literal["tool.completed"]
    status: Literal["ok", "error"]
    duration: int
    error: NotRequired[EventError]


class ToolFailedEvent(_ToolFields):
    type: Literal["tool.failed"]
    duration: int
    errorMessage: str
    extensionName: NotRequired[str]  # the extension whose toolCall middleware raised
    error: EventError


class _ApprovalFields(_TurnFields):
    approvalId: str
    toolCallId: str
    toolName: str


class ApprovalRequestedEvent(_ApprovalFields):
    """A tool call paused its turn until a person decides (``Runtime.approve``, ``gdn approvals``)."""

    type: Literal["approval.requested"]
    args: dict[str, Any]
    stepIndex: int
    reason: NotRequired[str]
    expiresAt: NotRequired[str]


class ApprovalDecidedEvent(_ApprovalFields):
    """A paused call was decided; ``decidedBy`` is who (``api``, ``cli``, ``expiry``, ``superseded``)."""

    type: Literal["approval.decided"]
    approved: bool
    decidedBy: str
    argsEdited: bool
    note: NotRequired[str]


class ToolLoadFailedEvent(_SpanFields):
    """A Tool's module failed to import while the instance started; ``error.traceback`` is the
    user's traceback (``gdn logs -v``). Written to ``runtime-events.jsonl`` only: it happens before
    any extension is loaded, so ``api.events`` never delivers it."""

    type: Literal["tool.loadFailed"]
    toolName: str
    errorMessage: str
    error: EventError


class ExtensionFailedEvent(_SpanFields):
    """An Extension's module failed to import or its ``register()`` raised while the instance
    started; ``error.traceback`` is the user's traceback (``gdn logs -v``). Written to
    ``runtime-events.jsonl`` only, like ``tool.loadFailed``."""

    type: Literal["extension.failed"]
    extensionName: str
    errorMessage: str
    error: EventError


RuntimeEvent = (
    TurnStartedEvent
    | TurnCompletedEvent
    | TurnFailedEvent
    | StepStartedEvent
    | StepCompletedEvent
    | StepFailedEvent
    | ToolCalledEvent
    | ToolCompletedEvent
    | ToolFailedEvent
    | ApprovalRequestedEvent
    | ApprovalDecidedEvent
    | ToolLoadFailedEvent
    | ExtensionFailedEvent
)


# --- ctx.runtime of turn and step middleware: read-only value objects --------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class PromptInfo:
    system: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class AgentInfo:
    name: str
    bundle_root: str
    prompt: PromptInfo | None


@dataclasses.dataclass(frozen=True, slots=True)
class SwarmInfo:
    swarm_name: str
    entry_agent: str
    self_agent: str
    available_agents: tuple[str, ...]
    callable_agents: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class InboundInfo:
    event_id: str
    event_type: str
    source_kind: str
    source_name: str
    created_at: str
    instance_key: str | None
    event_metadata: dict[str, Any] | None


@dataclasses.dataclass(frozen=True, slots=True)
class CallInfo:
    caller_agent: str | None
    caller_instance_key: str | None
    caller_turn_id: str | None
    call_source: str | None
    call_stack: tuple[str, ...]
    reply_to: dict[str, Any] | None


@dataclasses.dataclass(frozen=True, slots=True)
class RuntimeInfo:
    """``ctx.runtime`` of turn and step middleware: who this agent is, its swarm, the inbound event
    and (for an inter-agent call) the caller."""

    agent: AgentInfo
    swarm: SwarmInfo
    inbound: InboundInfo
    call: CallInfo | None


# --- inter-agent calls: ctx.agents (middleware) and ctx.runtime (tools) -------------------------------
# Protocols, so that how calls are routed (in this process, through an orchestrator, ...) stays the
# runtime's business; goondan._api_checks proves the runtime's classes satisfy them.


class AgentRequestResult(Protocol):
    @property
    def target(self) -> str: ...
    @property
    def response(self) -> str: ...
    @property
    def correlation_id(self) -> str: ...
    @property
    def accepted(self) -> bool: ...
    @property
    def async_(self) -> bool: ...
    @property
    def event_id(self) -> str: ...
    @property
    def instance_key(self) -> str: ...
    @property
    def output(self) -> Any:
        """The target's parsed JSON answer when it has ``spec.output.schema`` (else None)."""
        ...


class AgentSendResult(Protocol):
    @property
    def accepted(self) -> bool: ...
    @property
    def target(self) -> str: ...
    @property
    def event_id(self) -> str: ...


class AgentsApi(Protocol):
    """``ctx.agents`` of turn and step middleware. Failures raise ``AgentRequestError``."""

    async def request(
        self,
        target: str,
        input: str | None = None,
        *,
        instance_key: str | None = None,
        timeout_ms: int | None = None,
        async_: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> AgentRequestResult: ...

    async def send(
        self,
        target: str,
        input: str | None = None,
        *,
        instance_key: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> AgentSendResult: ...


class ToolRuntimeApi(AgentsApi, Protocol):
    """``ctx.runtime`` of tool handlers: the calls of :class:`AgentsApi` plus spawn/list/catalog."""

    async def spawn(
        self, target: str, *, instance_key: str | None = None, cwd: str | None = None
    ) -> dict[str, Any]: ...

    async def list(self, *, include_all: bool = False) -> dict[str, Any]: ...

    async def catalog(self) -> dict[str, Any]: ...
