"""One agent instance (agent name + instance key): its conversation, tools, extensions and the
turn/step loop (docs/architecture.md#where-a-turn-runs).

Turns of one instance never overlap (an asyncio lock, FIFO). Every message change is a message
event, appended to ``events.jsonl`` the moment it is emitted, and folded into ``base.jsonl`` at turn
end; a failed turn still commits what it emitted, so the conversation stays intact.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .._content import has_media
from .._ids import is_span_id, new_id, new_span_id, new_trace_id, now_iso
from .._json import (
    MAX_RECORD_DEPTH,
    MAX_VALUE_DEPTH,
    FrozenList,
    copy_json,
    encoded_size,
    is_plain_json,
    json_problem,
    repair_json,
    repair_text,
    to_frozen_json,
)
from .._modules import import_path, reproduce_command
from .._usercode import format_traceback, import_failure, released, user_traceback
from ..conversation import ConversationState, handle
from ..errors import ExtensionError, GoondanError, ModelError
from ..extensions import EventBus, ExtensionApi, ExtensionState, load_module, register_extension
from ..messages import Message, assistant_message, tool_message, user_message
from ..models import ModelAdapter, ModelRequest, ModelResponse, create_model_adapter, default_api_key
from ..pipeline import ApprovalRequired, PipelineRegistry, StepState, ToolCallState, Turn, TurnState, raised_in
from ..results import StepResult, ToolCall, ToolCallResult, TurnResult
from ..storage import _atomic
from ..storage._atomic import crash_point
from ..tools import (
    DEFAULT_ERROR_MESSAGE_LIMIT,
    DEFAULT_MAX_RESULT_BYTES,
    ToolContext,
    ToolEntry,
    ToolRegistry,
    error_from_exception,
    execute_tool,
    handler_call_problem,
    recent_tool_errors,
    resource_tool_entries,
    result_output_part,
    stored_output_part,
)
from . import _approvals as approvals
from ._definition import AgentDefinition, trace_llm_input
from ._info import RuntimeInfo, call_info, inbound_info
from ._media import any_media, event_has_media, resolve_media, store_parts
from ._messages import EVENT_ID_KEY, inbound_message, model_message, tool_result_message
from ._output import feedback_text, output_invalid, validate_answer
from ._parallel import CONCURRENT, DEFERRED, Job, ready, run_jobs

if TYPE_CHECKING:
    from ..storage import InstanceStore
    from ._agents import AgentsHub

log = logging.getLogger("goondan.runtime")


def _log_failure(logger: logging.Logger, what: str, exc: Exception) -> None:
    """A failure on a path that already fails (the store's): a coded error (a full disk, a store
    that went away) says what and what to do in one line, its traceback only at debug level (-vv);
    anything else keeps its traceback. Every turn of a chat on a full disk printed two."""
    if isinstance(exc, GoondanError):
        logger.error("%s: %s", what, exc)
        logger.debug("%s", what, exc_info=exc)
    else:
        logger.exception(what)


MAX_CONSECUTIVE_RETRIES = 2
# shared by instances that have none: never changed in place (a loaded value replaces it)
_NO_PARAMS: dict[str, Any] = {}
_NO_MESSAGES: Mapping[str, Message] = MappingProxyType({})
INBOX_LIMIT = 256
# how long a closing instance waits for the async handlers api.events.emit scheduled (then cancels them)
DRAIN_HANDLERS_SECONDS = 5.0
# an empty set shared by every step whose calls are all well-formed (the sets are made only when one is not)
_NOTHING: frozenset[Any] = frozenset()
MAX_STEPS_TEXT = "Reached the maximum of {n} steps for this turn; stopping here."
RETRY_GIVE_UP_TEXT = "I could not produce a usable response after several attempts."
MALFORMED_RETRY_TEXT = (
    "Your previous response contained malformed tool calls. Each tool call needs a tool name from the "
    "catalog and `args` that is a JSON object matching the tool's parameters. Issues:\n{issues}\n"
    "Call the tools again with valid arguments, or answer in text."
)
EMPTY_RETRY_TEXT = "Your previous response was empty. Produce a text answer or a tool call."

RuntimeEventListener = Callable[[dict[str, Any]], Any]
# what runs one chain for a state (Chain.runner)
_Runner = Callable[[Any], Awaitable[Any]]


def _preview(value: Any, limit: int = 240) -> str:
    from .._json import dumps_str

    try:
        text = value if isinstance(value, str) else dumps_str(value)
    except Exception:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


LLM_INPUT_MAX_MESSAGES = 64
LLM_INPUT_MAX_TEXT = 2000


def _clip(text: str) -> tuple[str, bool]:
    if len(text) <= LLM_INPUT_MAX_TEXT:
        return text, False
    return text[:LLM_INPUT_MAX_TEXT] + "...", True


def llm_input_summary(messages: Any) -> list[dict[str, Any]]:
    """``runtime.llmInputMessages`` (of ``step.started``): what the model is about to see, bounded (last 64
    messages, texts ≤ 2000 chars) so runtime events stay small. Tool parts become ``summary`` lines
    ``[tool-call:<name>] <json>`` / ``[tool-result:<name>] <json>``."""
    from .._json import dumps_str

    out: list[dict[str, Any]] = []
    for data in messages[-LLM_INPUT_MAX_MESSAGES:]:  # a snapshot view: slicing costs O(64), not O(history)
        role = str(data.get("role", ""))
        content = data.get("content")
        if isinstance(content, str):
            text, cut = _clip(content)
            entry: dict[str, Any] = {"role": role, "content": text, "contentSource": "verbatim"}
            if cut:
                entry["truncated"] = True
            out.append(entry)
            continue
        parts: list[dict[str, Any]] = []
        lines: list[str] = []
        summary = False
        for part in content if isinstance(content, list) else []:
            if not isinstance(part, dict):
                continue
            ptype = part.get("type")
            if ptype == "text":
                text, cut = _clip(str(part.get("text", "")))
                parts.append({"type": "text", "text": text, **({"truncated": True} if cut else {})})
                lines.append(text)
            elif ptype in ("tool-call", "tool-result"):
                summary = True
                field = "input" if ptype == "tool-call" else "output"
                try:
                    raw = dumps_str(part.get(field))
                except Exception:
                    raw = repr(part.get(field))
                text, cut = _clip(raw)
                name = str(part.get("toolName", ""))
                parts.append(
                    {
                        "type": ptype,
                        "toolCallId": part.get("toolCallId"),
                        "toolName": name,
                        field: text,
                        **({"truncated": True} if cut else {}),
                    }
                )
                lines.append(f"[{ptype}:{name}] {text}")
        out.append(
            {
                "role": role,
                "content": "\n".join(lines),
                "contentSource": "summary" if summary else "verbatim",
                "parts": parts,
            }
        )
    return out


RESTART_FLAGS = ("restartRequested", "runtimeRestart", "__goondanRestart")


def restart_signal(output: Any) -> str | None:
    """The restart reason if a successful tool output asks for a restart (``self-restart``), else None.
    ``{"type": "json", "value": {...}}`` outputs are looked into."""
    if isinstance(output, dict) and output.get("type") == "json" and isinstance(output.get("value"), dict):
        output = output["value"]
    if not isinstance(output, dict):
        return None
    for flag in RESTART_FLAGS:  # a loop, not any(<generator>): no cell and generator on every call
        if output.get(flag) is True:
            break
    else:
        return None
    reason = output.get("restartReason")
    return reason.strip() if isinstance(reason, str) and reason.strip() else "self-restart"


class _TurnRun:
    """Private per-turn bookkeeping (kept out of ``ctx.turn.metadata``, which belongs to users)."""

    __slots__ = (
        "held",
        "last_assistant",
        "last_text",
        "last_text_message",
        "output",
        "output_attempts",
        "pending",
        "resume",
        "retry_count",
        "retry_kind",
        "span_id",
        "usage",
    )

    def __init__(self, span_id: str) -> None:
        self.span_id = span_id
        self.usage = {"promptTokens": 0, "completionTokens": 0, "totalTokens": 0}
        self.last_text: str | None = None
        self.last_text_message: Message | None = None
        self.last_assistant: Message | None = None
        self.retry_kind: str | None = None
        self.retry_count = 0
        self.output: Any = None  # the validated structured output (Agent.spec.output)
        self.output_attempts = 0
        self.pending: list[dict[str, Any]] = []  # calls of this step paused for approval
        # results of calls after the first paused one, kept out of the history until it is answered
        self.held: list[dict[str, Any]] = []
        self.resume: dict[str, Any] | None = None  # the paused-turn record this run continues


class AgentInstance:
    """One conversation of one agent. What does not depend on the conversation is shared with the
    agent's other instances through its :class:`AgentDefinition` (engine/_definition.py) and
    referenced here; slots, no per-instance ``__dict__``: a swarm may keep thousands of idle ones."""

    __slots__ = (
        "_agent_info",
        "_append_events",
        "_approval",
        "_bus_handlers",
        "_cancel_requested",
        "_chains",
        "_definition",
        "_delta_listeners",
        "_event_buffer",
        "_event_flush_due",
        "_has_media",
        "_listeners",
        "_max_parallel_tools",
        "_max_result_bytes",
        "_max_steps",
        "_max_tool_calls",
        "_model_name",
        "_output_retries",
        "_output_schema",
        "_params",
        "_paused",
        "_provider_name",
        "_recovered",
        "_steer_acks",
        "_steer_open",
        "_steered",
        "_steering",
        "_swarm_info",
        "_trace_llm_input",
        "_turn_done",
        "_turn_starting",
        "_turn_task",
        "agent_name",
        "bus",
        "conversation",
        "hub",
        "inbox",
        "instance_key",
        "killed_on_cancel",
        "lock",
        "logger",
        "model",
        "pipeline",
        "plan",
        "restart_requested",
        "started",
        "states",
        "status",
        "store",
        "tools",
    )

    def __init__(
        self,
        *,
        definition: AgentDefinition,
        instance_key: str,
        store: InstanceStore,
        hub: AgentsHub,
        listeners: list[RuntimeEventListener],
        delta_listeners: list[RuntimeEventListener] | None = None,
    ) -> None:
        self._definition = definition
        self.plan = definition.plan
        self.agent_name: str = definition.name
        self.instance_key = instance_key
        self.store = store
        # A store that takes runtime events in batches (storage._protocol.RuntimeEventBatches) gets
        # them from a buffer, written when the turn suspends, before a tool runs and before the
        # turn's result is returned: see _record_event. Without it each record is one append.
        append_events = getattr(store, "append_runtime_events", None)
        self._append_events: Callable[[Sequence[Mapping[str, Any]]], None] | None = (
            append_events if callable(append_events) else None
        )
        self._event_buffer: list[dict[str, Any]] = []
        self._event_flush_due = False  # a call_soon flush is scheduled
        self.hub = hub
        self._swarm_info = definition.swarm_info
        self._listeners = listeners
        self._delta_listeners = delta_listeners if delta_listeners is not None else []
        self.pipeline = PipelineRegistry()
        self.tools = ToolRegistry()
        self.bus = EventBus()
        self._bus_handlers = self.bus.handlers_by_event  # read per runtime event: no method call
        self.states: dict[str, ExtensionState] = {}
        self.model: ModelAdapter | None = None
        self.conversation: ConversationState | None = None
        self.lock = asyncio.Lock()
        self.logger = logging.getLogger(f"goondan.agent.{self.agent_name}")
        self.status = "idle"
        self._chains: tuple[int, _Runner, _Runner, _Runner] | None = None
        self._params: dict[str, Any] = _NO_PARAMS
        self._model_name = ""
        self._provider_name = ""
        # the definition's limits and policies, referenced (not copied) for the hot path
        self._max_steps = definition.max_steps
        self._output_schema = definition.output_schema
        self._output_retries = definition.output_retries
        self._max_tool_calls = definition.max_tool_calls
        self._max_parallel_tools = definition.max_parallel_tools
        self._max_result_bytes = DEFAULT_MAX_RESULT_BYTES
        self._trace_llm_input = trace_llm_input()
        self._has_media = False  # the history holds image/file parts (set on load and on inbound)
        self._agent_info = definition.agent_info
        self.inbox: list[Message] = []
        self.started = False
        # set when a tool asked for a restart (``self-restart``); the runtime acts on it after the turn
        self.restart_requested: str | None = None
        self._approval = definition.approval
        # the turn paused for approvals (mirrors the store's paused-turn record), or None
        self._paused: dict[str, Any] | None = None
        # held results of a paused turn that was resuming when the process died: they ran, so the
        # start-up repair answers their calls with them instead of E_TOOL_INTERRUPTED
        self._recovered: Mapping[str, Message] = _NO_MESSAGES
        # the last turn was cancelled and its process killed because it did not stop (the process
        # executor's cancel escalation): the start-up repair answers its calls E_TOOL_CANCELLED
        self.killed_on_cancel = False
        # cancellation and steering (docs/architecture.md#cancellation-and-steering)
        self._turn_task: asyncio.Task[Any] | None = None  # the task running the current turn's chain
        self._cancel_requested = False
        self._turn_starting = False  # a turn runs but has not reached its chain: a cancel is kept for it
        self._turn_done: asyncio.Future[TurnResult] | None = None  # what steered requests wait for
        self._steering = definition.steering
        self._steer_open = False  # the running turn takes steered messages (before its next step)
        self._steered = False  # a steered message waits in the inbox for the next step
        # steered messages not yet in the history, by message id: the acknowledgement each gets once
        # it is (a message is accepted only when durable; one the turn ends without runs on its own);
        # made by the first steered message (only an agent with steering: inject gets any)
        self._steer_acks: dict[str, Callable[[], None] | None] = {}

    def _workdir(self) -> Path:
        """The instance's working directory (created on first use; ``ToolContext.workdir``)."""
        return self._definition.make_workdir(self.agent_name, self.instance_key, self.store)

    # --- start-up -------------------------------------------------------------------------

    async def start(self) -> None:
        loaded = self.store.load()
        for warning in loaded.warnings:
            self.logger.warning("[%s] %s", warning.get("code"), warning.get("message"))
        self.conversation = ConversationState(loaded.base, loaded.events, sink=self.store.append_event)
        self._has_media = any_media(self.conversation.to_llm_messages())
        if loaded.events:
            self.logger.info("replayed %d residual message event(s) of an interrupted turn", len(loaded.events))
        self._paused = self._load_paused_turn()
        repaired = self._repair_interrupted_tool_calls()
        if self.inbox and self._paused is None:  # kept by a paused turn that was resuming
            self._flush_inbox(None)
            repaired += 1
        self._load_model()
        self._load_tools()
        await self._load_extensions()
        self.store.write_metadata(agent_name=self.agent_name, instance_key=self.instance_key, status="idle")
        if loaded.events or repaired:
            await self._commit()
        self.started = True

    def _repair_interrupted_tool_calls(self) -> int:
        """Give every tool call without a result an ``E_TOOL_INTERRUPTED`` error result, so the next
        provider request is valid (``E_TOOL_CANCELLED`` when :attr:`killed_on_cancel`: the process
        was killed because its cancelled turn did not stop). Returns how many calls were answered.

        The usual case is the tail (the process died while a call ran): results are appended. A call
        unanswered in the middle of the history (left by an older version that aborted a turn between
        a call and its result) needs its result right after it, which only a rewrite can do: the
        history is truncated and re-appended with the results in place, once."""
        conversation = self.conversation
        assert conversation is not None
        found = conversation.unanswered_tool_calls()
        waiting = self._paused_call_ids()
        if waiting:  # calls paused for approval are unanswered on purpose
            found = [(i, [p for p in miss if p.get("toolCallId") not in waiting]) for i, miss in found]
            found = [(i, miss) for i, miss in found if miss]
        if not found:
            return 0
        messages = list(conversation.next_messages)
        total = sum(len(missing) for _, missing in found)
        answer = _cancelled_result if self.killed_on_cancel else _interrupted_result
        # where each group of results goes: after the tool messages that follow its assistant message
        insert_after: dict[int, list[Message]] = {}
        for index, missing in found:
            j = index + 1
            while j < len(messages) and messages[j].role == "tool":
                j += 1
            recovered = self._recovered
            insert_after[j - 1] = [recovered.get(str(p.get("toolCallId"))) or answer(p) for p in missing]
        if len(found) == 1 and max(insert_after) == len(messages) - 1:
            for message in insert_after[len(messages) - 1]:
                self._emit({"type": "append", "message": message}, trusted=True)
        else:
            self._emit({"type": "truncate"}, trusted=True)
            for i, message in enumerate(messages):
                self._emit({"type": "append", "message": message}, trusted=True)
                for result in insert_after.get(i, ()):
                    self._emit({"type": "append", "message": result}, trusted=True)
        code = "E_TOOL_CANCELLED" if self.killed_on_cancel else "E_TOOL_INTERRUPTED"
        self.logger.warning("answered %d interrupted tool call(s) with %s", total, code)
        return total

    def _load_model(self) -> None:
        from ..bundle import resolve_value_source

        model = self.plan.model
        spec: Any = model.spec
        env = self._definition.env
        api_key = resolve_value_source(spec.api_key, env, required=False, path=model.issue_path("spec.apiKey"))
        if spec.api_key is None:  # the provider's own variable, also from the bundle's .env
            api_key = default_api_key(spec.provider, env)
        self.model = create_model_adapter(
            spec.provider,
            model=spec.model,
            options=copy_json(spec.options),
            root=model.root,
            api_key=api_key,
            endpoint=spec.endpoint,
        )
        self._model_name = spec.model
        self._provider_name = spec.provider
        self._params = self._definition.model_params()

    def _load_tools(self) -> None:
        for res in self.plan.tools:
            entry = res.entry_path()
            try:
                module = import_path(entry)
            except Exception as exc:
                error = GoondanError(
                    "E_TOOL_LOAD",
                    import_failure(f"Tool/{res.name}", entry, exc),
                    suggestion=f"Fix {entry.name}: `gdn run -v` prints the traceback of its import, and `gdn logs -v` "
                    f"shows it from the tool.loadFailed event (or run `{reproduce_command(entry)}`).",
                )
                error.__cause__ = exc
                self._record_load_failure("tool.loadFailed", {"toolName": res.name}, error, f"importing {entry}")
                raise error from exc
            build = functools.partial(self._tool_entries, res, entry, module)
            self.tools.add_entries(self._definition.tool_entries(res.name, module, build))

    def _tool_entries(self, res: Any, entry: Path, module: Any) -> list[ToolEntry]:
        """The entries of one Tool resource (built once per agent definition, see tool_entries)."""
        tool_spec: Any = res.spec
        handlers = getattr(module, "handlers", None)
        if not isinstance(handlers, dict):
            raise GoondanError(
                "E_TOOL_LOAD",
                f"Tool/{res.name}: {entry.name} must define `handlers = {{'export': fn}}`",
                suggestion="Map every export name of the Tool resource to a handler(ctx, input).",
            )
        exports = [e.model_dump(by_alias=True, exclude_none=True) for e in tool_spec.exports]
        missing = [e["name"] for e in exports if not callable(handlers.get(e["name"]))]
        if missing:
            raise GoondanError(
                "E_TOOL_LOAD",
                f"Tool/{res.name}: no handler for export(s) {', '.join(missing)} in {entry.name}",
                suggestion="Add them to the module's `handlers` dict.",
            )
        for export in exports:
            handler = handlers[export["name"]]
            fname = str(getattr(handler, "__name__", export["name"]))
            problem = handler_call_problem(handler, fname)
            if problem is not None:
                raise GoondanError(
                    "E_TOOL_LOAD",
                    f"Tool/{res.name}: export {export['name']!r}: {problem}",
                    suggestion=f"Define it as `def {fname}(ctx, args): ...` (sync or async; ctx: the ToolContext, "
                    "args: the call's arguments); `gdn validate` reports this before a run "
                    "(E_CONFIG_TOOL_HANDLER_SIGNATURE).",
                )
        limit = tool_spec.error_message_limit or DEFAULT_ERROR_MESSAGE_LIMIT
        config = (getattr(self.plan, "tool_configs", None) or {}).get(res.name)
        return resource_tool_entries(res.name, exports, handlers, error_limit=limit, config=config)

    async def _load_extensions(self) -> None:
        bindings: list[tuple[str, Path, dict[str, Any]]] = [
            (b.resource.name, b.resource.entry_path(), dict(b.config)) for b in self.plan.extensions
        ]
        required = list(getattr(self.plan, "required_tools", None) or [])
        for i, (name, entry, config) in enumerate(bindings):
            if name == "required-tools-guard" and required and not config.get("requiredTools"):
                bindings[i] = (name, entry, {**config, "requiredTools": required})
        for name, entry, config in self._definition.implicit_extensions:
            binding = (name, entry, dict(config))  # register() may change its config: a copy each
            bindings.append(binding)
            self.logger.info(
                "agent %s: attaching @goondan/base %s implicitly (%s)",
                self.agent_name,
                binding[0],
                "spec.prompt must reach the model"
                if binding[0] == "context-message"
                else "spec.requiredTools must be enforced",
            )
        seen: set[str] = set()
        for name, entry, config in bindings:
            if name in seen:
                raise ExtensionError(
                    "E_EXT_CONFIG",
                    f"extension {name} is listed twice for agent {self.agent_name}",
                    extension_name=name,
                    suggestion="List each extension once in Agent.spec.extensions.",
                )
            seen.add(name)
            try:
                module = load_module(name, entry)
            except GoondanError as exc:
                self._record_load_failure("extension.failed", {"extensionName": name}, exc, f"importing {entry}")
                raise
            state = ExtensionState(self.store, name)
            self.states[name] = state
            api = ExtensionApi(name, pipeline=self.pipeline, tools=self.tools, state=state, bus=self.bus)
            try:
                await register_extension(name, module, api, config)
            except GoondanError as exc:
                self._record_load_failure("extension.failed", {"extensionName": name}, exc, "register()")
                raise

    def _record_load_failure(self, etype: str, fields: dict[str, Any], exc: GoondanError, doing: str) -> None:
        """Keep the traceback of the user's code that failed while the instance started (a Tool or
        Extension module's import, an extension's ``register()``): in runtime-events.jsonl (``gdn
        logs -v``, an ``extension.failed`` or ``tool.loadFailed`` event) and on the log at -v (INFO;
        agent processes forward it), as the error's suggestion promises. The error itself carries
        only the exception's last line."""
        trace = user_traceback(exc)
        if trace is None:
            return
        what = next(iter(fields.values()))
        self.logger.info("%s %s: %s failed:\n%s", etype.partition(".")[0], what, doing, trace)
        record = {
            **self._base_record(etype, new_trace_id(), new_span_id(), None),
            **fields,
            "errorMessage": exc.message,
            "error": {"code": exc.code, "traceback": trace},
        }
        try:
            self.flush_runtime_events()  # the buffered records come first
            self.store.append_runtime_event(record)
        except GoondanError:
            self.logger.exception("could not record the extension failure")

    # --- runtime events -------------------------------------------------------------------

    async def _runtime_event(self, record: dict[str, Any]) -> None:
        pending = self._record_event(record)
        if pending is not None:
            await pending

    def _record_event(self, record: dict[str, Any]) -> Coroutine[Any, Any, None] | None:
        """Store a runtime event and notify listeners. Returns a coroutine to await only when an
        extension subscribed to this event type: the hot path (nobody subscribed) stays synchronous,
        which saves a coroutine per event (8 per turn).

        With a store that takes batches the record joins a buffer instead of being written at once:
        a tool-using turn's eight records become two writes to runtime-events.jsonl (each write to
        the growing file is a system call with block allocation and an inode update; measured
        in-process A/B, an inline file-store turn spends 4-19 µs less CPU, median ~10). The first
        record of a batch schedules a flush with ``call_soon``, so the records are written as soon
        as the turn suspends (a model call waiting on the network has its step.started in the
        file); :meth:`_run_tool_call` (before the tool runs) and :meth:`run_turn` (before the result
        is returned) flush explicitly. Listeners and extensions still get each record at once; they
        must not change it (the store encodes it later)."""
        listeners = self._listeners
        if self._append_events is None:
            # with nobody else holding the record, the in-memory store may keep it without encoding it
            self.store.append_runtime_event(record, owned=not listeners)
        else:
            buffer = self._event_buffer
            if not buffer:
                _BUFFERING.add(self)  # see flush_all_runtime_events
            buffer.append(record)
            if not self._event_flush_due:
                self._schedule_flush()
        if self._bus_handlers.get(record["type"]):
            return self._deliver_event(record)
        if listeners:
            self._notify_listeners(record)
        return None

    def _schedule_flush(self) -> None:
        loop = asyncio.events._get_running_loop()
        if loop is None:  # not under a loop (nothing would run the callback): write through
            self.flush_runtime_events()
            return
        self._event_flush_due = True
        loop.call_soon(self._flush_soon)

    def _flush_soon(self) -> None:
        """The scheduled flush: nobody waits for it, so a failure is logged and the records are kept
        for the next flush (the next record schedules one, the turn's end flushes explicitly)."""
        self._event_flush_due = False
        try:
            self.flush_runtime_events()
        except Exception as exc:
            self.logger.warning(
                "could not write %d runtime event(s), kept for the next write: %s", len(self._event_buffer), exc
            )

    def flush_runtime_events(self) -> None:
        """Write the buffered runtime events (see :meth:`_record_event`). Raises what the store raises;
        the records then stay buffered, in order, for the next flush."""
        records = self._event_buffer
        if records:
            append_events = self._append_events
            assert append_events is not None
            # a new list before the call: the store may keep the one it gets
            self._event_buffer = []
            try:
                append_events(records)
            except BaseException:
                records.extend(self._event_buffer)
                self._event_buffer = records
                raise
            _BUFFERING.discard(self)

    def _flush_quietly(self) -> None:
        """Flush on a path that already raises (an interrupted or failed turn): log what fails."""
        try:
            self.flush_runtime_events()
        except Exception as exc:
            _log_failure(self.logger, f"could not write {len(self._event_buffer)} runtime event(s)", exc)

    async def _deliver_event(self, record: dict[str, Any]) -> None:
        await self.bus.deliver(record["type"], copy_json(record))
        self._notify_listeners(record)

    def _notify_listeners(self, record: dict[str, Any]) -> None:
        for listener in self._listeners:
            try:
                listener(record)
            except Exception:
                log.exception("runtime event listener failed")

    def _base_record(self, etype: str, trace_id: str, span_id: str, parent: str | None) -> dict[str, Any]:
        record: dict[str, Any] = {
            "type": etype,
            "timestamp": now_iso(),
            "agentName": self.agent_name,
            "instanceKey": self.instance_key,
            "traceId": trace_id,
            "spanId": span_id,
        }
        if parent is not None:
            record["parentSpanId"] = parent
        return record

    # --- chains ---------------------------------------------------------------------------

    def _get_chains(self) -> tuple[_Runner, _Runner, _Runner]:
        """What runs the turn, step and toolCall chains (see :meth:`Chain.runner`), rebuilt when
        the registered middlewares change."""
        cached = self._chains
        version = self.pipeline._version  # the attribute behind the property: read three times a turn
        if cached is None or cached[0] != version:
            cached = (
                version,
                self.pipeline.chain("turn", self._core_turn).runner(),
                self.pipeline.chain("step", self._core_step).runner(),
                self.pipeline.chain("toolCall", self._core_tool_call).runner(),
            )
            self._chains = cached
        return cached[1], cached[2], cached[3]

    # --- the turn ---------------------------------------------------------------------------

    async def run_turn(
        self,
        event: dict[str, Any],
        *,
        on_accepted: Callable[[], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> TurnResult:
        """Run one turn. ``on_accepted`` is called once the turn's user message is durable (an agent
        process tells its host then: before that, a death leaves nothing and the event is given to
        the next process; the message carries the event id, so a redelivered event is not stored
        twice). ``cancelled``: asked when the turn starts; true means it was cancelled while it was
        on its way (an agent process got ``cancel_turn`` for it before running it), so it records
        the user's message and commits as cancelled without running a step."""
        if self._steer_open and event.get("type") != approvals.APPROVAL_EVENT_TYPE:
            return await self._steer(event, on_accepted)
        # what ``async with self.lock`` does, without its __aenter__/__aexit__ coroutines
        lock = self.lock
        await lock.acquire()
        try:
            try:
                if event.get("type") == approvals.APPROVAL_EVENT_TYPE:
                    result = await self._decide(event, on_accepted)
                else:
                    result = await self._run_turn(event, on_accepted, None, cancelled)
            except BaseException:
                self._flush_quietly()
                raise
            # returning the result means the turn's runtime events are in the store (gdn logs,
            # tests and callers read them then)
            self.flush_runtime_events()
        finally:
            lock.release()
        if self.inbox and not self.lock.locked():
            await self._persist_inbox()
        return result

    async def deliver_inter_agent_response(self, message: Message) -> None:
        """An async inter-agent response: injected before the next step of the running turn, or,
        when no turn is running, committed to the conversation right away (never dropped)."""
        self.inbox.append(message)
        if len(self.inbox) > INBOX_LIMIT:
            dropped = self.inbox.pop(0)
            self.logger.warning("inbox full: dropped oldest inter-agent response %s", dropped.id)
        if not self.lock.locked():
            await self._persist_inbox()

    async def _persist_inbox(self) -> None:
        async with self.lock:
            # while calls wait for approval nothing may follow them: the inbox joins the resumed
            # turn, kept in the paused-turn record meanwhile (the instance may be evicted, the
            # host restarted before anyone decides)
            if self.inbox and self._paused is not None:
                self._keep_inbox(self._paused)
            elif self.inbox:
                self._flush_inbox(None)
                await self._commit()

    async def _run_turn(
        self,
        event: dict[str, Any],
        on_accepted: Callable[[], None] | None = None,
        resume: dict[str, Any] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> TurnResult:
        """``resume``: the paused-turn record of a turn whose approvals are all decided; the same
        turn (ids, inbound event) continues from its paused step instead of a new one starting."""
        # from here until the chain runs, cancel_turn() marks this turn instead of finding nothing
        self._cancel_requested = cancelled is not None and cancelled()
        self._turn_starting = True
        conversation = self.conversation
        assert conversation is not None
        started = time.perf_counter()
        self.status = "processing"
        self.store.write_metadata(agent_name=self.agent_name, instance_key=self.instance_key, status="processing")
        turn_id = str(resume["turnId"]) if resume is not None else new_id("turn")
        given_trace = resume.get("traceId") if resume is not None else event.get("traceId")
        trace_id = given_trace if isinstance(given_trace, str) and given_trace else new_trace_id()
        meta = event.get("metadata") or {}
        parent_span = meta.get("__goondanParentSpanId")
        if parent_span is not None and not is_span_id(parent_span):  # set by an inter-agent call only
            parent_span = None
        span_id = new_span_id()
        turn = Turn(turn_id, self.agent_name, event)
        turn_state = TurnState(  # positional, as every per-turn call with many arguments here
            self.agent_name,
            self.instance_key,
            turn_id,
            trace_id,
            event,
            conversation,
            self._emit,
            turn,
            None,
            None,
            self._resolve_turn_part,
        )
        run = _TurnRun(span_id)
        run.resume = resume
        turn_state.internal = run
        started_record = self._base_record("turn.started", trace_id, span_id, parent_span)
        started_record["turnId"] = turn_id
        if resume is not None:
            started_record["resumed"] = True
        pending = self._record_event(started_record)
        if pending is not None:
            await pending
        result: TurnResult
        failure: BaseException | None = None
        failure_trace: str | None = None
        failed_in: tuple[str, str | None] | None = None  # the middleware (label, extension) that raised
        renamed = False
        try:
            if self._paused is not None and resume is None:
                await self._supersede_paused(trace_id, span_id)
            if resume is None and _may_end_unanswered(conversation.last_stored()):
                self._repair_interrupted_tool_calls()  # a failed write left a call without its result
            crashing = _atomic.CRASH_AT is not None  # the crash tests' points (storage/_atomic.py)
            if crashing:
                crash_point("turn_before_inbound")
            if resume is None:
                self._append_inbound(event, conversation)
            if crashing:
                crash_point("turn_after_inbound")
            if on_accepted is not None:
                on_accepted()
            turn_chain, _, _ = self._get_chains()
            # the turn chain runs where cancel_turn() can stop it (inline rather than a coroutine
            # of its own: one coroutine less per turn)
            done = self._chain_starts()
            try:
                if self._cancel_requested:  # cancelled before it started: no step runs
                    raise asyncio.CancelledError
                result = await turn_chain(turn_state)
            except asyncio.CancelledError:
                cancelled_result = self._chain_cancelled(turn_state, done)
                if cancelled_result is None:
                    raise
                result = cancelled_result
            except BaseException:
                if done is not None:
                    done.cancel()
                raise
            finally:
                self._turn_task, self._cancel_requested, self._steer_open = None, False, False
                self._turn_done = None
            if done is not None and not done.done():
                done.set_result(result)
        except (asyncio.CancelledError, KeyboardInterrupt):
            # an interrupted turn (Ctrl+C, a cancelled task) must not leave "processing" on disk
            self._turn_starting = False
            self.status = "idle"
            with contextlib.suppress(Exception):
                self.store.write_metadata(agent_name=self.agent_name, instance_key=self.instance_key, status="idle")
            raise
        except Exception as exc:
            failure = exc
            failure_trace = user_traceback(exc)
            failed_in = raised_in(exc)  # the user's middleware: which one, of which extension and layer
            renamed = False  # the message names the middleware (a Goondan error keeps its own)
            if isinstance(exc, GoondanError):
                err = exc.to_dict()
            else:
                err = {"code": "E_TURN_FAILED", "message": f"{type(exc).__name__}: {exc}"}
                if failed_in is not None:
                    err["message"] = f"{failed_in[0]} raised {err['message']}"
                    renamed = True
            result = TurnResult(turn_id, None, "error", err, None)
            self.logger.error("turn %s failed: %s", turn_id, exc if isinstance(exc, GoondanError) else err["message"])
            if failure_trace:
                self.logger.info("traceback of turn %s:\n%s", turn_id, failure_trace)
        self._turn_starting = False
        turn.status = "failed" if failure else "completed"
        if self._paused is None:
            self._flush_inbox(None)
        try:
            await self._commit()
        finally:
            self.status = "idle"
            self.store.write_metadata(agent_name=self.agent_name, instance_key=self.instance_key, status="idle")
        duration = int((time.perf_counter() - started) * 1000)
        if failure is None:
            record = self._base_record("turn.completed", trace_id, span_id, parent_span)  # one dict, no merge
            record["turnId"] = turn_id
            record["stepCount"] = max(1, len(turn.steps))
            record["duration"] = duration
            usage = run.usage
            if usage["totalTokens"]:
                record["tokenUsage"] = dict(usage)
            if result.finish_reason == "cancelled":
                record["cancelled"] = True  # Runtime.cancel: the turn committed what it had
            pending = self._record_event(record)
            if pending is not None:
                await pending
        else:
            await self._runtime_event(
                {
                    **self._base_record("turn.failed", trace_id, span_id, parent_span),
                    "turnId": turn_id,
                    "duration": duration,
                    "errorMessage": result.error["message"] if renamed and result.error else str(failure),
                    **({"extensionName": failed_in[1]} if failed_in and failed_in[1] else {}),
                    "error": {
                        "code": getattr(failure, "code", None) or "E_TURN_FAILED",
                        **({"traceback": failure_trace} if failure_trace else {}),
                    },
                }
            )
        return result

    def _resolve_turn_part(self, turn_state: TurnState, name: str) -> Any:
        """Build ``ctx.runtime`` or ``ctx.agents`` of a turn the first time a middleware reads it."""
        if name == "agents":
            return self.hub.middleware_api(self, turn_state)
        event = turn_state.input_event
        return RuntimeInfo(
            agent=self._agent_info, swarm=self._swarm_info, inbound=inbound_info(event), call=call_info(event)
        )

    def _append_inbound(self, event: dict[str, Any], conversation: ConversationState) -> None:
        source = event.get("source") or {}
        inbound: dict[str, Any] = {
            "sourceKind": source.get("kind"),
            "sourceName": source.get("name"),
            "eventName": event.get("type"),
        }
        if event.get("instanceKey"):
            inbound["instanceKey"] = event["instanceKey"]
        event_id = event.get("id")
        event_id = event_id if isinstance(event_id, str) and event_id else None
        if event_id is not None and _is_inbound_of(conversation.last_stored(), event_id):
            return  # redelivered: a process stored it and died before its host heard the turn began
        conversation.append_owned(self._inbound_message(event, inbound, event_id))  # built frozen, kept nowhere else

    def _inbound_message(self, event: dict[str, Any], inbound: dict[str, Any], event_id: str | None) -> Message:
        """The user message of an inbound event (a new turn's, or one steered into a running turn)."""
        text = event.get("input")
        if isinstance(text, list):
            return inbound_message(self._inbound_parts(text), inbound, event_id)
        text = repair_text(text) if isinstance(text, str) and not text.isascii() else text
        return inbound_message(text if isinstance(text, str) else "", inbound, event_id)

    def _inbound_parts(self, parts: list[Any]) -> FrozenList:
        """Content parts of an inbound event, their image and file bytes stored by reference
        (engine/_media.py); the flag lets steps skip looking for media in media-free histories."""
        stored = store_parts(parts, self.store.put_attachment)
        self._has_media = self._has_media or has_media(stored)
        frozen: FrozenList = to_frozen_json(stored)
        return frozen

    def _emit(self, event: Any, *, trusted: bool = False) -> None:
        conversation = self.conversation
        assert conversation is not None
        before = len(conversation.warnings)
        conversation.emit(event, trusted=trusted)
        if not self._has_media and event_has_media(event):
            self._has_media = True
        if len(conversation.warnings) > before:
            for warning in conversation.warnings[before:]:
                self.logger.warning("[%s] %s", warning["code"], warning["message"])

    async def _commit(self) -> None:
        conversation = self.conversation
        assert conversation is not None
        if conversation.dirty:
            next_messages, appended = conversation.pending_commit()
            self.store.commit(next_messages, appended)
            conversation.fold()
        for state in self.states.values():
            try:
                state.save_if_changed()
            except Exception as exc:
                _log_failure(self.logger, "saving extension state failed", exc)
                raise

    # --- core turn: the step loop ------------------------------------------------------------

    async def _core_turn(self, turn_state: TurnState) -> TurnResult:
        turn = turn_state.turn
        run: _TurnRun = turn_state.internal
        _, step_chain, _ = self._get_chains()
        step_index = 0
        finish: str = "text_response"
        if run.resume is not None:
            step_index = await self._finish_paused_step(turn_state, run.resume) + 1
        agent_name, instance_key = self.agent_name, self.instance_key
        turn_id, trace_id, turn_span = turn_state.turn_id, turn_state.trace_id, run.span_id
        while True:
            if self._cancel_requested:  # code that swallowed the cancellation: stop at the step boundary
                raise asyncio.CancelledError
            if step_index >= self._max_steps:  # before the inbox: no step would answer what it holds
                finish = "max_steps"
                break
            if self.inbox:
                self._flush_inbox(turn_state)
            catalog = self.tools.catalog()
            step_state = StepState(turn_state, step_index, catalog)
            step_span = new_span_id()
            step_state.metadata["runtime.spanId"] = step_span
            step_id = f"{turn_id}-step-{step_index}"
            # The fields every step.* record of this step starts with, in order. It stays private
            # until it becomes the step's last record (step.completed or step.failed): step.started
            # is a copy (listeners may scribble on the records they get). A copy of one dict costs
            # less than {"type": ..., **fields} did, which made two and grew one.
            fields = {
                "type": "step.started",
                "timestamp": now_iso(),
                "agentName": agent_name,
                "instanceKey": instance_key,
                "traceId": trace_id,
                "spanId": step_span,
                "parentSpanId": turn_span,
                "stepId": step_id,
                "stepIndex": step_index,
                "turnId": turn_id,
            }
            started = fields.copy()
            if self._trace_llm_input:
                # opt-in: summarising the model input costs about as much as the rest of a step
                llm_input = llm_input_summary(turn_state.conversation_state.to_llm_messages())
                step_state.metadata["runtime.llmInputMessages"] = llm_input
                started["llmInputMessages"] = copy_json(llm_input)  # middleware may edit the metadata one
            pending = self._record_event(started)
            if pending is not None:
                await pending
            t0 = time.perf_counter()
            try:
                result = await step_chain(step_state)
            except Exception as exc:
                failed = fields  # type and timestamp replaced in place: the fields keep their order
                failed["type"] = "step.failed"
                failed["timestamp"] = now_iso()
                failed["duration"] = int((time.perf_counter() - t0) * 1000)
                failed["errorMessage"] = str(exc)
                failed["error"] = {"code": getattr(exc, "code", None) or "E_STEP_FAILED"}
                model_call = self._model_call_record(step_state.metadata, t0)
                if model_call is not None:
                    failed["model"] = model_call
                await self._runtime_event(failed)
                raise
            turn.steps.append(result)
            usage = result.metadata.get("runtime.tokenUsage")
            record = fields  # type and timestamp replaced in place: the fields keep their order
            record["type"] = "step.completed"
            record["timestamp"] = now_iso()
            record["toolCallCount"] = len(result.tool_calls)
            record["duration"] = int((time.perf_counter() - t0) * 1000)
            model_call = self._model_call_record(step_state.metadata, t0)
            if model_call is not None:
                record["model"] = model_call
            if isinstance(usage, dict):
                record["tokenUsage"] = dict(usage)
                total = run.usage
                for key in ("promptTokens", "completionTokens", "totalTokens"):
                    value = usage.get(key)
                    if isinstance(value, int):
                        total[key] += value
            pending = self._record_event(record)
            if pending is not None:
                await pending
            step_index += 1
            if run.pending:
                finish = "awaiting_approval"
                break
            if self._steered:
                continue  # a message was steered in during this step: the model answers it next
            if not result.should_continue and (self._output_schema is None or self._accept_output(run)):
                break
        self._steer_open = False  # from here on a message for this instance waits for the next turn
        if finish == "awaiting_approval":
            return await self._pause_turn(turn_state)
        text: str | None = run.last_text
        response: Message | None = run.last_text_message
        if text is None and finish == "text_response":
            text, response = self._answer_without_model(response)
        if finish == "max_steps":
            errors = recent_tool_errors(self.conversation.next_messages) if self.conversation else []
            self.logger.warning(  # or a model stuck calling a misspelt tool stops with no word why
                "the turn stopped at maxStepsPerTurn (%d) with the model still calling tools%s",
                self._max_steps,
                f"; the last step's errors: {', '.join(errors)}" if errors else "",
            )
            last = self.conversation.last_message() if self.conversation else None
            final = text.strip() if text and text.strip() else MAX_STEPS_TEXT.format(n=self._max_steps)
            if last is None or last.role != "assistant" or last.text.strip() != final:
                response = assistant_message(final, source={"type": "assistant", "stepId": "max-steps"})
                self._emit({"type": "append", "message": response}, trusted=True)
            text = final
        return TurnResult(turn_state.turn_id, response, finish, None, text, run.output)  # type: ignore[arg-type]

    def _answer_without_model(self, response: Message | None) -> tuple[str | None, Message | None]:
        """The turn's answer when no model step gave text: an assistant message a step middleware
        emitted in this turn instead of calling the model (it returns its own ``StepResult``), as
        the extension guide describes. The turn ended with no text, and ``gdn run`` printed
        nothing. Only reached when the turn has no text (rare): nothing is added to other turns."""
        conversation = self.conversation
        last = conversation.last_stored() if conversation is not None else None
        if conversation is None or last is None or last.role != "assistant" or not last.text:
            return None, response
        if any(m.id == last.id for m in conversation.base_messages):
            return None, response  # from an earlier turn
        return last.text, last

    def _model_call_record(self, metadata: dict[str, Any], t0: float) -> dict[str, Any] | None:
        """The ``model`` field of a step's end record: which model the step called, when (ms after
        the step began) and for how long, and why it stopped. Trace views and the OpenTelemetry
        export (goondan/_spans.py) show the model call as a span of its own, inside its step."""
        started = metadata.get("runtime.modelStart")
        if started is None:
            return None  # a step middleware answered without calling the model
        ended = metadata.get("runtime.modelEnd")
        out: dict[str, Any] = {
            "name": self._model_name,
            "provider": self._provider_name,
            # milliseconds with microseconds kept (int() then a division is cheaper than round())
            "start": int((started - t0) * 1_000_000) / 1000,
            "duration": int(((ended or time.perf_counter()) - started) * 1_000_000) / 1000,
        }
        if ended is None:
            out["failed"] = True  # the step failed while the model was being called
        reason = metadata.get("runtime.modelFinishReason")
        if reason:
            out["finishReason"] = reason
        return out

    def _accept_output(self, run: _TurnRun) -> bool:
        """Structured output: whether the turn may end with its last answer. A valid answer becomes
        ``run.output``; an invalid one is sent back with its problems (the turn goes on, a step per
        retry) until ``Agent.spec.output.retries`` is spent, then the turn fails (E_OUTPUT_INVALID)."""
        schema = self._output_schema
        assert schema is not None
        value, issues = validate_answer(schema, run.last_text)
        run.output_attempts += 1
        if not issues:
            run.output = value
            return True
        if run.output_attempts > self._output_retries:
            raise output_invalid(self.agent_name, run.output_attempts, issues)
        feedback = user_message(
            feedback_text(schema, issues), {"runtime.retryKind": "invalid_output"}, source={"type": "system"}
        )
        self._emit({"type": "append", "message": feedback}, trusted=True)
        return False

    def _flush_inbox(self, turn_state: TurnState | None) -> None:
        """Append what waits in the inbox. Before a step (``turn_state``) steered messages join the
        turn, each acknowledged once its append is durable; after a turn they stay: the turn ended
        without answering them, so each runs as a turn of its own (:meth:`_steer`)."""
        self._steered = False
        if not self.inbox:  # the usual case, at every turn's end
            return
        acks = self._steer_acks
        kept: list[Message] = []
        while self.inbox:
            message = self.inbox.pop(0)
            if turn_state is None and message.id in acks:
                kept.append(message)
                continue
            self._emit({"type": "append", "message": message})
            if acks:
                ack = acks.pop(message.id, None)
                if ack is not None:
                    ack()
        self.inbox.extend(kept)

    # --- streaming --------------------------------------------------------------------------

    def _delta_sink(self, turn_state: TurnState, step_index: int) -> Callable[[str], None] | None:
        """A callback for streaming adapters, or None when nobody listens (adapters may then skip
        streaming). Deltas go to ``api.events`` subscribers of ``text.delta`` and to runtime delta
        listeners (CLI, connectors); they are never persisted — the final message is."""
        if not self._delta_listeners and not self._bus_handlers.get("text.delta"):
            return None

        def sink(delta: str) -> None:
            if not delta:
                return
            payload = {
                "type": "text.delta",
                "agentName": self.agent_name,
                "instanceKey": self.instance_key,
                "turnId": turn_state.turn_id,
                "traceId": turn_state.trace_id,
                "stepIndex": step_index,
                "delta": delta,
            }
            self.bus.emit("text.delta", payload)
            with released():  # a streamed answer is the runtime's output, not the model code's
                for listener in self._delta_listeners:
                    try:
                        listener(payload)
                    except Exception:
                        log.exception("text delta listener failed")

        return sink

    # --- core step: one model call plus its tool calls ------------------------------------------

    async def _core_step(self, step_state: StepState) -> StepResult:
        turn_state = step_state.turn_state
        run: _TurnRun = turn_state.internal
        conversation = turn_state.conversation_state
        model = self.model
        assert model is not None
        catalog = step_state.tool_catalog
        messages: Sequence[dict[str, Any]] = conversation.to_llm_messages()  # O(1) snapshot
        if self._has_media:
            messages = resolve_media(messages, self.store.read_attachment)
        last_input = messages[-1] if messages else None
        # positional: a call with eight keywords costs twice what the call itself does
        request = ModelRequest(
            messages,
            catalog,
            self._params,
            self._model_name,
            self.agent_name,
            self.instance_key,
            # nobody listens (the usual case): no call; see _delta_sink
            None
            if not self._delta_listeners and not self._bus_handlers.get("text.delta")
            else self._delta_sink(turn_state, step_state.step_index),
            self._output_schema,
        )
        metadata = step_state.metadata
        metadata["runtime.modelStart"] = time.perf_counter()
        response: ModelResponse = await model.generate(request)
        metadata["runtime.modelEnd"] = time.perf_counter()
        metadata["runtime.modelFinishReason"] = response.finish_reason
        metadata["runtime.modelRawFinishReason"] = response.raw_finish_reason
        if response.usage:
            metadata["runtime.tokenUsage"] = response.usage
        step_id = f"{turn_state.turn_id}-step-{step_state.step_index}"
        text = response.text if response.text and response.text.strip() else None
        if text is not None and not text.isascii():
            text = repair_text(text)  # a lone surrogate could not be stored
        calls = response.tool_calls
        problems = list(response.issues) if response.issues else []
        too_deep: frozenset[int] = _NOTHING  # the usual case: no set made
        for index, call in enumerate(calls):
            if not isinstance(call.args, dict):
                problems.append(f"- {call.name}({call.id}): args must be a JSON object input={_preview(call.args)}")
            elif not is_plain_json(call.args):
                if json_problem(call.args, "args", MAX_VALUE_DEPTH) and not json_problem(
                    call.args, "args", MAX_RECORD_DEPTH * 1000
                ):
                    too_deep |= {index}  # valid JSON, only too deep: answered with E_TOOL_INVALID_ARGS
                    continue
                issue = json_problem(call.args, "args")
                if issue:
                    problems.append(f"- {call.name}({call.id}): {issue}")
        if not calls and response.finish_reason == "tool-calls" and not problems:
            problems.append("- the response finished with tool-calls but contained none")
        retry_kind: str | None = None
        if problems:
            retry_kind = "malformed_tool_calls"
        elif text is None and not calls:
            last_is_tool = bool(last_input and last_input.get("role") == "tool")
            if not last_is_tool:
                retry_kind = "empty_output"
        if retry_kind is not None:
            return self._retry_step(step_state, retry_kind, text, problems, step_id)
        run.retry_kind, run.retry_count = None, 0
        # a well-formed response: record it, then run its tool calls in order
        tool_calls: list[ToolCall] = []
        provider_meta: dict[str, Any] = {}
        deep_ids: frozenset[str] = _NOTHING  # the usual case: no set made
        if calls:
            ids_seen: set[str] = set()
            for index, raw_call in enumerate(calls):
                cid = raw_call.id if raw_call.id not in ids_seen else new_id("call")
                if getattr(raw_call, "metadata", None):
                    provider_meta[cid] = raw_call.metadata
                ids_seen.add(cid)
                if index in too_deep:
                    deep_ids |= {cid}  # recorded without its arguments, which could not be stored
                tool_calls.append(ToolCall(cid, raw_call.name, {} if index in too_deep else raw_call.args))
        assistant: Message | None = None
        if text is not None or tool_calls:
            assistant = model_message(text, tool_calls, provider_meta, step_id)
            if tool_calls and encoded_size(assistant.data) is None:
                # integers beyond 64 bits or lone surrogates in arguments: stored repaired (the
                # arguments the tools receive are the repaired ones, so history and effect agree)
                tool_calls = [ToolCall(c.id, c.name, repair_json(c.args)) for c in tool_calls]
                provider_meta = {k: repair_json(v, MAX_RECORD_DEPTH) for k, v in provider_meta.items()}
                assistant = model_message(text, tool_calls, provider_meta, step_id)
            conversation.append_owned(assistant)  # built frozen; what tools and the result see is a copy
            assistant = handle(assistant)
            run.last_assistant = assistant
            if text is not None:
                run.last_text = text
                run.last_text_message = assistant
        if len(tool_calls) > 1 and self._max_parallel_tools > 1:
            ran = await self._run_tool_calls_concurrently(step_state, tool_calls, deep_ids, assistant, step_id)
            return StepResult("completed", True, tool_calls, ran, metadata)
        results: list[ToolCallResult] = []
        if tool_calls:
            _, _, tool_chain = self._get_chains()
            step_span = metadata["runtime.spanId"]
            limit = self._max_tool_calls
            for index, tool_call in enumerate(tool_calls):
                hold = bool(run.pending)  # an earlier call waits for approval: its result goes first
                if index >= limit:
                    results.append(self._answer(turn_state, tool_call, _call_limit_error(tool_call, limit), True, hold))
                elif tool_call.id in deep_ids:
                    results.append(self._answer(turn_state, tool_call, _too_deep_error(tool_call), True, hold))
                else:
                    result = await self._run_tool_call(step_state, tool_chain, tool_call, assistant, step_span, step_id)
                    if result is not None:  # None: paused for approval, answered once decided
                        results.append(result)
        return StepResult("completed", bool(tool_calls), tool_calls, results, metadata)

    async def _run_tool_calls_concurrently(
        self,
        step_state: StepState,
        tool_calls: list[ToolCall],
        deep_ids: frozenset[str],
        assistant: Message | None,
        step_id: str,
    ) -> list[ToolCallResult]:
        """The calls of a step that made several, run at the same time (engine/_parallel.py), each
        through :meth:`_run_tool_call` as a lone call is. Results are appended in the order the
        model made the calls, each as soon as it and the calls before it are done; a call that
        returns None (paused for approval) is answered later. A lone call never comes here: a task
        per call would cost every one-call step."""
        _, _, tool_chain = self._get_chains()
        turn_state = step_state.turn_state
        step_span = step_state.metadata["runtime.spanId"]
        limit = self._max_tool_calls
        jobs: list[Job[ToolCallResult | None]] = []
        for index, call in enumerate(tool_calls):
            if index >= limit:
                jobs.append((False, ready(_call_limit_error(call, limit))))
            elif call.id in deep_ids:
                jobs.append((False, ready(_too_deep_error(call))))
            else:
                entry = self.tools.get(call.name)
                start = functools.partial(
                    self._run_tool_call, step_state, tool_chain, call, assistant, step_span, step_id
                )
                jobs.append((entry is not None and not entry.parallel, start))
        results: list[ToolCallResult] = []
        paused_before = False  # deliver runs in call order: a call after a paused one is held

        def deliver(index: int, result: ToolCallResult | None) -> None:
            nonlocal paused_before
            call = tool_calls[index]
            if result is None:
                paused_before = True
                return
            unrun = index >= limit or call.id in deep_ids
            results.append(self._answer(turn_state, call, result, unrun, paused_before))

        await run_jobs(jobs, self._max_parallel_tools, deliver, step_state)
        return results

    def _answer_unrun(self, conversation: ConversationState, call: ToolCall, result: ToolCallResult) -> ToolCallResult:
        """Answer a call that is not run (over the per-step limit, unusable arguments): every call
        of a recorded assistant message gets a result, or the next provider request is invalid."""
        conversation.append_owned(tool_result_message(call, result_output_part(result)))
        return result

    def _retry_step(
        self, step_state: StepState, kind: str, text: str | None, problems: list[str], step_id: str
    ) -> StepResult:
        run: _TurnRun = step_state.turn_state.internal
        count = run.retry_count + 1 if run.retry_kind == kind else 1
        run.retry_kind, run.retry_count = kind, count
        step_state.metadata["runtime.modelRetryKind"] = kind
        if text is not None:
            msg = assistant_message(text, source={"type": "assistant", "stepId": step_id})
            self._emit({"type": "append", "message": msg}, trusted=True)
            run.last_text = text
            run.last_text_message = msg
        # said in the log, or a model that keeps answering nothing (a python model returning {}) ends
        # turns with the placeholder answer below and nothing anywhere says why
        what = "an empty response" if kind == "empty_output" else "malformed tool calls"
        if problems:
            what += " (" + "; ".join(p.removeprefix("- ") for p in problems) + ")"
        if count > MAX_CONSECUTIVE_RETRIES:
            self.logger.warning(
                "the model gave %s %d times in a row; the turn ends with %r", what, count, RETRY_GIVE_UP_TEXT
            )
            give_up = assistant_message(RETRY_GIVE_UP_TEXT, source={"type": "assistant", "stepId": step_id})
            self._emit({"type": "append", "message": give_up}, trusted=True)
            if run.last_text is None:
                run.last_text = RETRY_GIVE_UP_TEXT
                run.last_text_message = give_up
            return StepResult("completed", False, [], [], step_state.metadata)
        if kind == "malformed_tool_calls":
            shown = problems[:3]
            if len(problems) > 3:
                shown.append(f"(+{len(problems) - 3} more)")
            body = MALFORMED_RETRY_TEXT.format(issues="\n".join(shown))
        else:
            body = EMPTY_RETRY_TEXT
        self.logger.info("the model gave %s; asking it again (retry %d of %d)", what, count, MAX_CONSECUTIVE_RETRIES)
        self._emit(
            {
                "type": "append",
                "message": user_message(body, {"runtime.retryKind": kind}, source={"type": "system"}),
            }
        )
        return StepResult("completed", True, [], [], step_state.metadata)

    async def _run_tool_call(
        self,
        step_state: StepState,
        tool_chain: _Runner,
        call: ToolCall,
        assistant: Message | None,
        step_span: str,
        step_id: str,
        approved: bool = False,
    ) -> ToolCallResult | None:
        """Run one call through the toolCall chain and append its result. Returns None, appending
        nothing, when the call needs approval first (``approved``: a person already gave it)."""
        if not approved and self._approval.requires(call.name):
            self._request_approval(step_state, call, None)
            return None
        turn_state = step_state.turn_state
        span = new_span_id()
        # The fields every tool.* record of this call starts with, in order; private until it
        # becomes the call's last record, tool.called is a copy (see _core_turn).
        fields: dict[str, Any] = {
            "type": "tool.called",
            "timestamp": now_iso(),
            "agentName": self.agent_name,
            "instanceKey": self.instance_key,
            "traceId": turn_state.trace_id,
            "spanId": span,
            "parentSpanId": step_span,
            "toolCallId": call.id,
            "toolName": call.name,
            "stepId": step_id,
            "turnId": turn_state.turn_id,
        }
        pending = self._record_event(fields.copy())
        if pending is not None:
            await pending
        # written before the tool runs: a tool may hold the event loop for minutes, and `gdn logs -f`
        # must show it running
        self.flush_runtime_events()
        state = ToolCallState(step_state, call.name, call.id, call.args)
        state.metadata["runtime.spanId"] = span
        state.approved = approved
        t0 = time.perf_counter()
        try:
            result: ToolCallResult = await tool_chain(state)
        except ApprovalRequired as asked:  # ctx.require_approval() in a toolCall middleware
            self._request_approval(step_state, ToolCall(call.id, call.name, state.args), asked.reason)
            return None
        except Exception as exc:
            # middleware failures become error results too: an orphaned tool call would make the
            # next provider request invalid
            trace = format_traceback(exc)
            source = raised_in(exc)  # which middleware, of which extension
            label = source[0] if source is not None else "toolCall middleware"
            self.logger.info("%s failed for %s (%s):\n%s", label, call.name, call.id, trace)
            failed = fields  # type and timestamp replaced in place: the fields keep their order
            failed["type"] = "tool.failed"
            failed["timestamp"] = now_iso()
            failed["duration"] = int((time.perf_counter() - t0) * 1000)
            named = source is not None and not isinstance(exc, GoondanError)  # a Goondan error keeps its message
            failed["errorMessage"] = f"{label} raised {type(exc).__name__}: {exc}" if named else str(exc)
            if source is not None and source[1]:
                failed["extensionName"] = source[1]
            failed["error"] = {"code": getattr(exc, "code", None) or "E_TOOL_ERROR", "traceback": trace}
            await self._runtime_event(failed)
            result = error_from_exception(exc, call.id, call.name, DEFAULT_ERROR_MESSAGE_LIMIT, keep_traceback=False)
        else:
            record = fields  # type and timestamp replaced in place: the fields keep their order
            record["type"] = "tool.completed"
            record["timestamp"] = now_iso()
            record["status"] = result.status
            record["duration"] = int((time.perf_counter() - t0) * 1000)
            if result.status == "error":
                record["error"] = self._tool_error_record(call, result)
            pending = self._record_event(record)
            if pending is not None:
                await pending
        if DEFERRED.get() is step_state:  # one of several calls running at once: the caller appends it in order
            return result
        run: _TurnRun = turn_state.internal
        return self._answer(turn_state, call, result, False, bool(run.pending))

    def _answer(
        self, turn_state: TurnState, call: ToolCall, result: ToolCallResult, unrun: bool, hold: bool
    ) -> ToolCallResult:
        """Answer a call in the history, or, when an earlier call of its step waits for approval
        (``hold``), keep its result message for the paused-turn record: results must follow the
        order the model made the calls, and the waiting call has none yet. A held call is never
        run again; its result is appended once the calls before it are answered."""
        if not hold:
            if unrun:
                return self._answer_unrun(turn_state.conversation_state, call, result)
            return self._append_tool_result(turn_state, call, result)
        if unrun:
            message = tool_result_message(call, result_output_part(result))
        else:
            result, message = self._result_message(call, result)
        run: _TurnRun = turn_state.internal
        run.held.append({"toolCallId": call.id, "toolName": call.name, "message": message.to_record()})
        return result

    def _append_tool_result(self, turn_state: TurnState, call: ToolCall, result: ToolCallResult) -> ToolCallResult:
        """Answer a finished call: its result, made storable and bounded, appended to the history."""
        result, message = self._result_message(call, result)
        turn_state.conversation_state.append_owned(message)  # built frozen here, kept nowhere else
        return result

    def _result_message(self, call: ToolCall, result: ToolCallResult) -> tuple[ToolCallResult, Message]:
        """A finished call's result made storable and bounded, and its ``role: tool`` message."""
        result, output = stored_output_part(result, self._max_result_bytes)
        if result.status == "ok":
            reason = restart_signal(result.output)
            if reason is not None:
                self.restart_requested = reason
        return result, tool_result_message(call, output)

    def _tool_error_record(self, call: ToolCall, result: ToolCallResult) -> dict[str, Any]:
        """The ``error`` of a ``tool.completed`` record with status error: code, message and, when a
        handler raised, its traceback (kept here and shown with -v; never sent to the model)."""
        err = result.error if isinstance(result.error, dict) else {}
        if result.error is not None and not err:  # a middleware's own ToolCallResult(..., error="denied")
            err = {"message": str(result.error)}
        record = {"code": err.get("code") or "E_TOOL_ERROR", "message": str(err.get("message", ""))}
        trace = err.get("traceback")
        if isinstance(trace, str) and trace:
            record["traceback"] = trace
            self.logger.info("tool %s (%s) raised:\n%s", call.name, call.id, trace)
        return record

    async def _core_tool_call(self, state: ToolCallState) -> ToolCallResult:
        step_state = state.step_state
        turn_state = step_state.turn_state
        assistant = turn_state.internal.last_assistant
        span = state.metadata.get("runtime.spanId")

        def make_context() -> ToolContext:
            return ToolContext(
                self.agent_name,
                self.instance_key,
                turn_state.turn_id,
                turn_state.trace_id,
                state.tool_call_id,
                assistant,
                self._workdir,
                self.logger,
                None,
                lambda: self.hub.tool_runtime(self, turn_state, span),
            )

        return await execute_tool(
            self.tools,
            step_state.tool_catalog,
            state.tool_name,
            state.tool_call_id,
            state.args,
            make_context,
            CONCURRENT.get() is step_state,
        )

    # --- cancellation and steering (docs/architecture.md#cancellation-and-steering) -----------

    @property
    def steering(self) -> bool:
        """``Agent.spec.steering: inject``: messages may join a running turn."""
        return self._steering

    @property
    def takes_steered(self) -> bool:
        """Whether a message arriving now joins the running turn (an executor hands it over at once
        instead of queueing it behind the turn)."""
        return self._steer_open

    def cancel_turn(self) -> bool:
        """Stop the running turn (``Runtime.cancel``). Returns False when no turn runs.

        The task running the turn is cancelled: an awaited model call closes its stream, a tool's
        process group is killed. :meth:`_chain_cancelled` turns that into a committed turn with
        ``finish_reason="cancelled"``, every call left without a result answered ``E_TOOL_CANCELLED``,
        so the next model request is valid."""
        task = self._turn_task
        if task is None or task.done():
            if not self._turn_starting:
                return False
            # the turn has not reached its chain yet: it records its message and ends cancelled
            self._cancel_requested = True
            return True
        self._cancel_requested = True
        task.cancel()
        return True

    def _chain_starts(self) -> asyncio.Future[TurnResult] | None:
        """The turn chain is about to run (in :meth:`_run_turn`) where :meth:`cancel_turn` can stop
        it: remember its task. Returns what steered requests wait for (only an agent with
        ``steering: inject`` gets one)."""
        self._turn_task, self._turn_starting = asyncio.current_task(), False
        done = self._turn_done = asyncio.get_running_loop().create_future() if self._steering else None
        self._steer_open = self._steering
        return done

    def _chain_cancelled(self, turn_state: TurnState, done: asyncio.Future[TurnResult] | None) -> TurnResult | None:
        """The turn chain was cancelled: by :meth:`cancel_turn`, the turn commits what it has
        (:meth:`_cancelled_result`); None for a cancellation that came from elsewhere (the runtime
        closing, Ctrl+C with ``--force``), which the caller lets propagate."""
        task = self._turn_task
        if not self._cancel_requested or task is None or task.uncancel() > 0:
            if done is not None:
                done.cancel()
            return None
        return self._cancelled_result(turn_state)

    def _cancelled_result(self, turn_state: TurnState) -> TurnResult:
        run: _TurnRun = turn_state.internal
        conversation = turn_state.conversation_state
        waiting = self._paused_call_ids()
        # a resumed turn cancelled before its held results were appended: those calls ran
        held = approvals.held_messages(run.resume) if run.resume is not None else {}
        answered = 0
        for _, missing in conversation.unanswered_tool_calls():
            for part in missing:
                if part.get("toolCallId") not in waiting:
                    answer = held.get(str(part.get("toolCallId"))) or _cancelled_result(part)
                    self._emit({"type": "append", "message": answer}, trusted=True)
                    answered += 1
        self.logger.info("turn %s cancelled (%d tool call(s) answered E_TOOL_CANCELLED)", turn_state.turn_id, answered)
        return TurnResult(turn_state.turn_id, run.last_text_message, "cancelled", None, run.last_text)

    async def _steer(self, event: dict[str, Any], on_accepted: Callable[[], None] | None) -> TurnResult:
        """``Agent.spec.steering: inject``: a message for an instance whose turn runs joins that turn
        before its next step; the caller gets the running turn's result, which answers it."""
        done = self._turn_done
        assert done is not None
        source = event.get("source") or {}
        inbound = {"sourceKind": source.get("kind"), "sourceName": source.get("name"), "eventName": event.get("type")}
        event_id = event.get("id")
        message = self._inbound_message(event, inbound, event_id if isinstance(event_id, str) and event_id else None)
        self.inbox.append(message)
        self._steered = True
        # accepted (on_accepted) only once it is in the history before a step: until then an agent
        # process that dies leaves the event to its host, which hands it to the next process
        self._steer_acks[message.id] = on_accepted
        self.logger.info("steered a message into the running turn")
        try:
            result = await asyncio.shield(done)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not done.cancelled() or (task is not None and task.cancelling()):
                raise  # this request itself was cancelled
            # the turn failed (or was interrupted): its own error is the caller's answer
            if message.id not in self._steer_acks:
                err = {"code": "E_TURN_FAILED", "message": "the running turn this message joined failed"}
                return TurnResult("", None, "error", err, None)
        else:
            if message.id not in self._steer_acks or self._paused is not None:
                return result  # answered by the turn (or joins the turn resumed after approvals)
        # the turn ended (its last step, max_steps, a cancel) before the message joined it
        del self._steer_acks[message.id]
        self.inbox.remove(message)
        return await self.run_turn(event, on_accepted=on_accepted)

    # --- approvals (docs/architecture.md#approvals) ------------------------------------------

    def _load_paused_turn(self) -> dict[str, Any] | None:
        """The store's paused-turn record. One whose calls are all decided was being resumed when
        the process died: it is dropped, and its calls without a result are answered as interrupted
        (they may have run), never run a second time."""
        record = self.store.read_paused_turn()
        if record is None:
            return None
        self.inbox[:0] = approvals.inbox_messages(record)
        if not approvals.undecided(record):
            self._recovered = approvals.held_messages(record)
            self.store.write_paused_turn(None)
            self.logger.warning(
                "dropped the paused turn %s: it was resuming when the runtime stopped", record.get("turnId")
            )
            return None
        return record

    def _paused_call_ids(self) -> set[str]:
        paused = self._paused
        if paused is None:
            return set()
        # the held calls ran, but their results wait for the paused ones before them
        return {str(a.get("toolCallId")) for a in approvals.answers(paused) if isinstance(a, dict)}

    def _request_approval(self, step_state: StepState, call: ToolCall, reason: str | None) -> None:
        """Keep ``call`` for a decision instead of running it (the turn pauses after this step)."""
        run: _TurnRun = step_state.turn_state.internal
        request = approvals.new_request(call, reason, self._approval.timeout, step_state.step_index)
        request["stepSpanId"] = step_state.metadata.get("runtime.spanId")
        run.pending.append(request)

    def _approval_base(self, etype: str, record: dict[str, Any]) -> dict[str, Any]:
        span = record.get("spanId")
        return {
            **self._base_record(
                etype, str(record.get("traceId") or new_trace_id()), new_span_id(), span if is_span_id(span) else None
            ),
            "turnId": record.get("turnId"),
        }

    async def _pause_turn(self, turn_state: TurnState) -> TurnResult:
        """End the turn with its calls waiting: the record is durable before the result says so,
        and nothing (no task, lock or process) waits for the decision."""
        run: _TurnRun = turn_state.internal
        event = turn_state.input_event
        # calls of one step may pause concurrently: keep them in the order the model made them
        content = run.last_assistant.data.get("content") if run.last_assistant is not None else None
        order = {p.get("toolCallId"): i for i, p in enumerate(content or ()) if isinstance(p, dict)}
        run.pending.sort(key=lambda a: order.get(a.get("toolCallId"), len(order)))
        record: dict[str, Any] = {
            "version": approvals.RECORD_VERSION,
            "turnId": turn_state.turn_id,
            "traceId": turn_state.trace_id,
            "spanId": run.span_id,
            # content parts are stored in the conversation already; the record keeps the rest
            "inputEvent": {k: v for k, v in event.items() if k != "input" or isinstance(v, str)},
            "stepIndex": run.pending[0]["stepIndex"],
            "pausedAt": now_iso(),
            "approvals": run.pending,
            "held": run.held,
            # inter-agent responses that came during the turn's last step wait with the calls
            "inbox": [message.to_record() for message in self.inbox],
        }
        self.store.write_paused_turn(record)
        self._paused = record
        for approval in run.pending:
            await self._runtime_event(
                approvals.request_record(approval, self._approval_base("approval.requested", record))
            )
        pending = approvals.pending_list(record, self.agent_name, self.instance_key)
        return TurnResult(
            turn_state.turn_id,
            run.last_text_message,
            "awaiting_approval",
            None,
            run.last_text,
            pending_approvals=pending,
        )

    async def _decide(self, event: dict[str, Any], on_accepted: Callable[[], None] | None) -> TurnResult:
        """Record one decision (and deny what expired); once every paused call is decided the
        same turn continues from its paused step, else the result lists what still waits."""
        paused = self._paused
        body: dict[str, Any] = event["approval"] if isinstance(event.get("approval"), dict) else {}
        approval_id = body.get("approvalId")
        changed: list[dict[str, Any]] = []
        problem: GoondanError | None = None
        if approval_id is not None:
            approval = approvals.find(paused, str(approval_id))
            earlier = approvals.earlier_decision([self.store], str(approval_id)) if approval is None else None
            if earlier is not None:  # decided by a runtime that held this instance a moment ago
                problem = approvals.already_decided(str(approval_id), earlier)
            elif approval is None:
                problem = approval_not_found(str(approval_id))
            elif approval.get("decision") is not None:
                problem = approvals.decided_in_record(str(approval_id), approval)
            else:
                approved = body.get("approved") is True
                args = body.get("args") if approved and isinstance(body.get("args"), dict) else None
                note = body.get("note") if isinstance(body.get("note"), str) else None
                approval["decision"] = approvals.decision(approved, note, args, str(body.get("by") or "api"))
                changed.append(approval)
        for approval in approvals.undecided(paused or {}):
            if approvals.is_expired(approval):
                note = approvals.EXPIRED_NOTE.format(seconds=float(approval.get("timeoutSeconds") or 0))
                approval["decision"] = approvals.decision(False, note, None, "expiry")
                changed.append(approval)
        if paused is not None and changed:
            self.store.write_paused_turn(paused)  # durable before anyone hears of the decision
        if on_accepted is not None:
            on_accepted()
        if paused is None or problem is not None:
            err = (problem or approval_not_found(str(approval_id))).to_dict()
            return TurnResult(str((paused or {}).get("turnId") or ""), None, "error", err, None)
        for approval in changed:
            await self._runtime_event(
                approvals.decision_record(approval, self._approval_base("approval.decided", paused))
            )
        if approvals.undecided(paused):
            pending = approvals.pending_list(paused, self.agent_name, self.instance_key)
            return TurnResult(str(paused["turnId"]), None, "awaiting_approval", None, None, pending_approvals=pending)
        # the record, every call decided, stays until the paused step is answered: a crash while an
        # approved call runs drops it on the next start, answering that call as interrupted (never
        # running it twice) and the held calls with the results they had
        self._paused = None
        inbound: dict[str, Any] = paused["inputEvent"] if isinstance(paused.get("inputEvent"), dict) else {}
        return await self._run_turn(inbound, None, resume=paused)

    async def _finish_paused_step(self, turn_state: TurnState, record: dict[str, Any]) -> int:
        """Answer the paused calls of a resumed turn in the order the model issued them: approved
        ones run through the toolCall pipeline (with edited arguments if given), denied ones get
        ``E_TOOL_DENIED`` with the note. Returns the paused step's index."""
        conversation = turn_state.conversation_state
        run: _TurnRun = turn_state.internal
        step_index = int(record.get("stepIndex") or 0)
        step_state = StepState(turn_state, step_index, self.tools.catalog())
        items = [a for a in record.get("approvals") or () if isinstance(a, dict)]
        span = items[0].get("stepSpanId") if items else None
        step_span = span if isinstance(span, str) and is_span_id(span) else new_span_id()
        step_state.metadata["runtime.spanId"] = step_span
        step_id = f"{turn_state.turn_id}-step-{step_index}"
        assistant = _assistant_of(conversation, str(items[0].get("toolCallId"))) if items else None
        run.last_assistant = assistant
        _, _, tool_chain = self._get_chains()
        for approval in approvals.answers(record, assistant):
            if "message" in approval:  # a held result: the call ran before the pause
                conversation.append_trusted(Message.from_record(approval["message"]))
                continue
            dec = approval.get("decision") or {}
            args = dec.get("args") if isinstance(dec.get("args"), dict) else approval.get("args")
            call = ToolCall(str(approval.get("toolCallId")), str(approval.get("toolName")), dict(args or {}))
            if dec.get("approved") is True:
                await self._run_tool_call(step_state, tool_chain, call, assistant, step_span, step_id, approved=True)
            else:
                self._answer_unrun(conversation, call, approvals.denied_result(approval))
        if self.inbox:  # what arrived while the calls waited follows their results, before the record goes
            self._flush_inbox(turn_state)
        self.store.write_paused_turn(None)  # every call of the step has its result in the history
        return step_index

    async def _supersede_paused(self, trace_id: str, span_id: str) -> None:
        """A new message while calls wait: they are answered as denied (never run), so the history
        stays valid and the new turn starts; the person's silence counts as a no."""
        paused = self._paused
        assert paused is not None
        conversation = self.conversation
        assert conversation is not None
        assistant = _assistant_of(conversation, str(approvals.answers(paused)[0].get("toolCallId")))
        for approval in approvals.answers(paused, assistant):
            if "message" in approval:  # a held result: the call ran before the pause
                conversation.append_trusted(Message.from_record(approval["message"]))
                continue
            if approval.get("decision") is None or approval["decision"].get("approved") is True:
                approval["decision"] = approvals.decision(False, approvals.SUPERSEDED_NOTE, None, "superseded")
            call = ToolCall(str(approval.get("toolCallId")), str(approval.get("toolName")), {})
            self._answer_unrun(conversation, call, approvals.denied_result(approval))
            await self._runtime_event(
                approvals.decision_record(approval, self._approval_base("approval.decided", paused))
            )
        if self.inbox:  # what arrived while the calls waited: durable before the record goes
            self._flush_inbox(None)
        self.store.write_paused_turn(None)
        self._paused = None

    def _keep_inbox(self, paused: dict[str, Any]) -> None:
        """Write what waits in the inbox into the paused-turn record, durable until the turn resumes."""
        paused["inbox"] = [message.to_record() for message in self.inbox]
        self.store.write_paused_turn(paused)

    # --- shutdown ----------------------------------------------------------------------------

    async def close(self) -> None:
        async with self.lock:
            await self.bus.drain(DRAIN_HANDLERS_SECONDS)  # async handlers of api.events.emit finish first
            # extensions holding resources (MCP sessions, sockets) release them here
            await self.bus.deliver(
                "extension.cleanup", {"agentName": self.agent_name, "instanceKey": self.instance_key}
            )
            for state in self.states.values():
                try:
                    state.save_if_changed()
                except Exception as exc:
                    _log_failure(self.logger, "saving extension state failed", exc)
            if self.model is not None:
                try:
                    await self.model.aclose()
                except Exception:
                    self.logger.exception("closing model adapter failed")
            self._flush_quietly()
            # what could not be written is dropped: a flush still scheduled must not write to the
            # store after it gave the instance's lease back
            self._event_buffer = []
            _BUFFERING.discard(self)
            self.store.close()


# the instances whose runtime events wait in their buffer: added by the first record of a batch,
# removed by the write that empties it (or by close()); for flush_all_runtime_events. Kept here
# rather than a registry of every instance: an idle instance costs nothing for it.
_BUFFERING: set[AgentInstance] = set()


def flush_all_runtime_events() -> None:
    """Write the runtime events every live instance has buffered (see
    :meth:`AgentInstance._record_event`), logging what fails. For a process about to end at once
    with ``os._exit`` (``gdn run`` on a second Ctrl+C, or when its loop is blocked by synchronous
    code): the scheduled flush would run only once the turn suspends, so records the turn already
    made (``turn.started``, ``step.started`` before a blocking model call) would be lost."""
    for instance in list(_BUFFERING):
        if instance._event_buffer:
            instance._flush_quietly()


def _is_inbound_of(message: Message | None, event_id: str) -> bool:
    """Whether ``message`` is the user message stored for the inbound event ``event_id``."""
    return message is not None and message.role == "user" and message.metadata.get(EVENT_ID_KEY) == event_id


def _may_end_unanswered(last: Message | None) -> bool:
    """Whether a history ending in ``last`` may hold an unanswered tool call (then it is looked
    for); a history ending in the usual assistant text does not."""
    if last is None:
        return False
    role = last.role
    if role == "user" or role == "system":
        return False
    if role == "tool":
        return True
    content = last.data.get("content")
    return isinstance(content, list) and any(p.get("type") == "tool-call" for p in content)


def _assistant_of(conversation: ConversationState, tool_call_id: str) -> Message | None:
    """The assistant message that made the call ``tool_call_id`` (what its tool's ``ctx.message`` is)."""
    messages = conversation.next_messages
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        content = message.data.get("content") if message.role == "assistant" else None
        if isinstance(content, list) and any(
            isinstance(p, dict) and p.get("toolCallId") == tool_call_id for p in content
        ):
            return message
    return None


def approval_not_found(approval_id: str) -> GoondanError:
    return GoondanError(
        "E_APPROVAL_NOT_FOUND",
        f"no pending approval {approval_id!r}",
        suggestion="List what waits with `gdn approvals list` (or Runtime.pending_approvals()).",
    )


def _cancelled_result(part: dict[str, Any]) -> Message:
    output = {
        "type": "error-json",
        "value": {
            "code": "E_TOOL_CANCELLED",
            "message": "The turn was cancelled before this tool call finished; it may or may not have taken effect.",
            "suggestion": "Check the tool's effect before calling it again.",
        },
    }
    return tool_message(part["toolCallId"], part["toolName"], output)


def _interrupted_result(part: dict[str, Any]) -> Message:
    output = {
        "type": "error-json",
        "value": {
            "code": "E_TOOL_INTERRUPTED",
            "message": "The runtime stopped before this tool call finished; it may or may not have taken effect.",
            "suggestion": "Check the tool's effect before calling it again.",
        },
    }
    return tool_message(part["toolCallId"], part["toolName"], output)


def _call_limit_error(call: ToolCall, limit: int) -> ToolCallResult:
    return ToolCallResult(
        call.id,
        call.name,
        None,
        "error",
        {
            "name": "ToolCallLimitError",
            "code": "E_TOOL_CALL_LIMIT",
            "message": f"Not run: one response may make at most {limit} tool calls; this was call number "
            f"{limit + 1} or later.",
            "suggestion": f"Make at most {limit} tool calls per response; call the rest in the next step.",
        },
    )


def _too_deep_error(call: ToolCall) -> ToolCallResult:
    return ToolCallResult(
        call.id,
        call.name,
        None,
        "error",
        {
            "name": "ToolInputValidationError",
            "code": "E_TOOL_INVALID_ARGS",
            "message": f"Not run: the arguments of '{call.name}' were nested deeper than {MAX_VALUE_DEPTH} "
            "levels, so they were not kept.",
            "suggestion": f"Pass arguments at most {MAX_VALUE_DEPTH} levels deep.",
        },
    )


__all__ = ["AgentInstance"]
_ = ModelError  # re-exported error type used by callers of run_turn
