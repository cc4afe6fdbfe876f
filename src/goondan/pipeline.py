"""The three onion middleware chains: ``turn``, ``step`` and ``toolCall`` (docs/architecture.md#the-three-chains).

Ordering: ascending ``priority`` (lower is outer), then registration order — and since extensions
register in ``Agent.spec.extensions`` order, the first extension's middleware is outermost.

Each layer gets its own small context object that shares one state record with the other layers of
the same call, so mutations of ``tool_catalog``, ``args`` and ``metadata`` are seen by every layer
and by the core, while ``next()`` stays bound to the layer that received it (and may be called at
most once). The chain is walked with plain coroutines — no task, no closure per layer — because it
runs for every turn, every step and every tool call.
"""

from __future__ import annotations

import asyncio
import bisect
import inspect
import logging
from collections.abc import Awaitable, Callable
from types import CoroutineType, FunctionType
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast, overload

from ._api_types import AgentsApi, RuntimeInfo, ToolCatalogItem
from ._usercode import _Capture, exit_error, interrupt_error, stray_cancel
from ._usercode import _current as _user_output
from ._usercode import install as _install_capture
from .errors import ExtensionError, GoondanError
from .results import StepResult, ToolCallResult, TurnResult

if TYPE_CHECKING:
    from .conversation import ConversationState
    from .messages import MessageEvent

MiddlewareType = Literal["turn", "step", "toolCall"]
MIDDLEWARE_TYPES: tuple[MiddlewareType, ...] = ("turn", "step", "toolCall")

R = TypeVar("R", TurnResult, StepResult, ToolCallResult)
S = TypeVar("S")


class _Entry:
    __slots__ = ("capture", "extension", "fn", "label", "logger", "priority", "seq")

    def __init__(self, fn: Callable[[Any], Any], priority: int, seq: int, extension: str | None) -> None:
        self.fn = fn
        self.priority = priority
        self.seq = seq
        self.extension = extension
        self.label = ""  # set by PipelineRegistry.register, which knows the middleware type
        self.logger = logging.getLogger(f"goondan.extension.{extension}" if extension else "goondan.pipeline")
        self.capture = _Capture("", self.logger)

    def sort_key(self) -> tuple[int, int]:
        return (self.priority, self.seq)


class _LayerOutput(_Capture):
    """Where the middlewares of one chain run print to (goondan._usercode): the proxies hand every
    write to :attr:`current`, the capture of the middleware that runs now.

    One context-variable set per chain run, and an attribute swap per layer, instead of a set and a
    reset per layer (about 0.35 µs each time). The core runs with the variable released (what the
    runtime prints there is not a middleware's output); a task a middleware started keeps this
    object, so what it prints is still kept from the answer stream, attributed to the middleware
    running when it writes (the outermost one once the run is over)."""

    __slots__ = ("current",)

    current: _Capture

    def add(self, stream: str, text: str) -> None:
        self.current.add(stream, text)


_new_object = object.__new__


def _report(capture: _Capture) -> None:
    """Log what a middleware printed, with nothing captured meanwhile (a handler writing to
    ``sys.stderr`` would otherwise write into the capture being reported)."""
    token = _user_output.set(None)
    try:
        capture.report()
        capture.clear()
    finally:
        _user_output.reset(token)


_RAISED_IN = "_goondan_raised_in"


def _mark_raised(exc: BaseException, entry: _Entry | None) -> None:
    """Remember which middleware ``exc`` came out of (None: the core), unless a layer further in did.

    Done as the exception passes out of a layer, so a run that raises nothing pays nothing for it."""
    attrs = getattr(exc, "__dict__", None)
    if attrs is not None and _RAISED_IN not in attrs:
        attrs[_RAISED_IN] = entry


def raised_in(exc: BaseException) -> tuple[str, str | None] | None:
    """The middleware an exception came out of, as ``(label, extension name)`` (the label reads
    ``step middleware mw of extension 'audit'``), or None when it came from no middleware."""
    entry = getattr(exc, "__dict__", {}).get(_RAISED_IN)
    if not isinstance(entry, _Entry):
        return None
    return entry.label, entry.extension


_RESULT_TYPES: dict[str, type] = {"turn": TurnResult, "step": StepResult, "toolCall": ToolCallResult}


class Chain(Generic[S, R]):
    """One middleware chain around a core function ``core(state) -> awaitable result``."""

    __slots__ = ("_core", "_ctx_cls", "_entries", "_n", "_result_type", "_type")

    _core: Callable[[S], Awaitable[R]]
    _ctx_cls: type[_LayerContext[Any, Any]]

    def __init__(
        self,
        mtype: MiddlewareType,
        entries: list[_Entry],
        ctx_cls: type[_LayerContext[Any, Any]],
        core: Callable[[S], Awaitable[R]],
    ) -> None:
        self._type = mtype
        self._entries = entries
        self._n = len(entries)
        self._ctx_cls = ctx_cls
        self._core = core
        self._result_type = _RESULT_TYPES[mtype]

    def run(self, state: S) -> Awaitable[R]:
        if self._n == 0:
            return self._core(state)
        return self._run(state)

    def runner(self) -> Callable[[S], Awaitable[R]]:
        """What :meth:`run` calls for a state, for callers that keep it: the core itself when no
        middleware is registered (a Python call less per run), else :meth:`run`."""
        return self._core if self._n == 0 else self.run

    async def _run(self, state: S) -> R:
        root: _LayerContext[S, R] = _new_object(self._ctx_cls)  # a context "outside" the outermost layer
        root._s = state
        root._chain = self
        root._pos = 0
        root._used = False
        # what this run's middlewares print goes through one router (see _LayerOutput)
        out = root._out = _new_object(_LayerOutput)
        out.current = self._entries[0].capture
        token = _user_output.set(out)
        try:
            return await root.next()
        finally:
            _user_output.reset(token)

    def bad_result(self, entry: _Entry, result: Any) -> GoondanError:
        if inspect.iscoroutine(result):
            # `return ctx.next()` without await: closed here, or Python warns "coroutine was never
            # awaited" on stderr whenever it collects it (inline only: an agent process has no stderr)
            result.close()
            return GoondanError(
                "E_PIPELINE_BAD_RESULT",
                f"{self._type} middleware {_describe(entry)} returned a coroutine, expected "
                f"{self._result_type.__name__}: an `await` is missing",
                suggestion="Write `return await ctx.next()` (or await the coroutine you return).",
            )
        return GoondanError(
            "E_PIPELINE_BAD_RESULT",
            f"{self._type} middleware {_describe(entry)} returned {type(result).__name__}, "
            f"expected {self._result_type.__name__}",
            suggestion="Return the value of `await ctx.next()` (or a dataclasses.replace of it).",
        )

    def next_twice(self, pos: int) -> GoondanError:
        """The error of a second ``ctx.next()`` by the middleware at ``pos``, named like the others."""
        return GoondanError(
            "E_PIPELINE_NEXT_TWICE",
            f"{self._type} middleware {_describe(self._entries[pos])} called ctx.next() twice in one invocation",
            suggestion="Call next() once; express retries by returning a changed result or raising.",
        )


def _describe(entry: _Entry) -> str:
    name = getattr(entry.fn, "__qualname__", repr(entry.fn))
    if entry.extension:
        return f"{name!s} of extension '{entry.extension}'"
    return str(name)


class _LayerContext(Generic[S, R]):
    """Base of the three context types: the per-layer ``next()`` and the shared state record."""

    __slots__ = ("_chain", "_out", "_pos", "_s", "_used")

    _chain: Chain[S, R]
    _out: _LayerOutput  # where this chain run's middlewares print to

    def __init__(self, state: S, chain: Chain[S, R], pos: int) -> None:
        self._s = state
        self._chain = chain
        self._pos = pos
        self._used = False
        self._out = _new_object(_LayerOutput)
        self._out.current = _Capture("", logging.getLogger("goondan.pipeline"))

    async def next(self) -> R:
        """Run the inner layers (and finally the core) and return their result. At most once.

        This coroutine is also what calls the next layer and checks its result, so a layer costs
        two coroutines (this one and the middleware's own) and one context object, nothing more."""
        if self._used:  # only a middleware's context can be used twice: the one at _pos - 1 calls it
            raise self._chain.next_twice(self._pos - 1)
        self._used = True
        chain = self._chain
        pos = self._pos
        if pos == chain._n:
            # the core is not the calling middleware's code: what it prints is not that
            # middleware's output (see goondan._usercode)
            released = _user_output.set(None)
            try:
                return await chain._core(self._s)
            except Exception as exc:  # raised by the runtime (or an inner chain): no middleware's doing
                _mark_raised(exc, None)
                raise
            except asyncio.CancelledError as exc:  # the core's: never taken for a middleware's own (below)
                _mark_raised(exc, None)
                raise
            finally:
                _user_output.reset(released)
        entry = chain._entries[pos]
        ctx: _LayerContext[S, R] = _new_object(chain._ctx_cls)  # no Python-level __init__ on this path
        ctx._s = self._s
        ctx._chain = chain
        ctx._pos = pos + 1
        ctx._used = False
        out = ctx._out = self._out
        capture = entry.capture  # one per middleware: an instance runs its layers one at a time
        outer = out.current
        out.current = capture
        try:
            result: Any = entry.fn(ctx)
            if type(result) is CoroutineType or inspect.isawaitable(result):  # exact type first: async def
                result = await result
        except SystemExit as exc:  # sys.exit() in a middleware fails its turn or tool call, not the host
            error: Exception = exit_error(entry.label, exc)
            _mark_raised(error, entry)  # raised here, past the clause below: the outer layers must not claim it
            raise error from exc
        except KeyboardInterrupt as exc:  # so does a KeyboardInterrupt it raised itself (not a Ctrl+C)
            interrupt = interrupt_error(entry.label, exc)
            if interrupt is None:
                raise
            _mark_raised(interrupt, entry)
            raise interrupt from exc
        except asyncio.CancelledError as exc:
            # a CancelledError this middleware raised itself (not one from the core or an inner layer,
            # nor a cancellation of the task) fails its turn or tool call like any exception: it used
            # to end gdn run with a traceback inline and hang the run in an agent process
            stray = None if _RAISED_IN in exc.__dict__ else stray_cancel(entry.label, "E_USER_CODE_CANCELLED", exc)
            if stray is None:
                raise
            _mark_raised(stray, entry)
            raise stray from exc
        except Exception as exc:  # the innermost layer it passes names it (the exception path only)
            _mark_raised(exc, entry)
            raise
        finally:
            out.current = outer
            if capture.parts or capture.dropped:
                _report(capture)
        expected = chain._result_type
        if type(result) is not expected and not isinstance(result, expected):
            error = chain.bad_result(entry, result)
            _mark_raised(error, entry)
            raise error
        return cast(R, result)


# --- shared state records ------------------------------------------------------------------


class TurnState:
    """Everything one turn's contexts share."""

    __slots__ = (
        "_agents",
        "_resolve",
        "_runtime",
        "agent_name",
        "conversation_state",
        "emit_message_event",
        "input_event",
        "instance_key",
        "internal",
        "metadata",
        "trace_id",
        "turn",
        "turn_id",
    )

    def __init__(  # the engine passes these positionally (one per turn; keywords cost ~0.4k instructions each)
        self,
        agent_name: str,
        instance_key: str,
        turn_id: str,
        trace_id: str,
        input_event: dict[str, Any],
        conversation_state: ConversationState,
        emit_message_event: Callable[[Any], None],
        turn: Turn,
        agents: Any = None,
        runtime: Any = None,
        resolve: Callable[[TurnState, str], Any] | None = None,
    ) -> None:
        self.agent_name = agent_name
        self.instance_key = instance_key
        self.turn_id = turn_id
        self.trace_id = trace_id
        self.input_event = input_event
        self.conversation_state = conversation_state
        self.emit_message_event = emit_message_event
        self._agents = agents
        self._runtime = runtime
        self._resolve = resolve
        self.metadata: dict[str, Any] = {}
        self.turn = turn
        self.internal: Any = None  # the runtime's private per-turn bookkeeping

    # ``runtime`` (ctx.runtime) and ``agents`` (ctx.agents) are built on first use by ``resolve``:
    # most turns run no middleware that reads them, and building them costs more than a layer.

    @property
    def runtime(self) -> Any:
        value = self._runtime
        if value is None and self._resolve is not None:
            value = self._runtime = self._resolve(self, "runtime")
        return value

    @runtime.setter
    def runtime(self, value: Any) -> None:
        self._runtime = value

    @property
    def agents(self) -> Any:
        value = self._agents
        if value is None and self._resolve is not None:
            value = self._agents = self._resolve(self, "agents")
        return value

    @agents.setter
    def agents(self, value: Any) -> None:
        self._agents = value


class Turn:
    """The turn as seen from a step (``ctx.turn``)."""

    __slots__ = ("agent_name", "id", "input_event", "metadata", "status", "steps")

    def __init__(self, turn_id: str, agent_name: str, input_event: dict[str, Any]) -> None:
        self.id = turn_id
        self.agent_name = agent_name
        self.input_event = input_event
        self.steps: list[StepResult] = []
        self.status = "running"
        self.metadata: dict[str, Any] = {}

    @property
    def step_count(self) -> int:
        return len(self.steps)


class StepState:
    __slots__ = ("metadata", "step_index", "tool_catalog", "turn_state")

    def __init__(self, turn_state: TurnState, step_index: int, tool_catalog: list[ToolCatalogItem]) -> None:
        self.turn_state = turn_state
        self.step_index = step_index
        self.tool_catalog = tool_catalog
        self.metadata: dict[str, Any] = {}


class ApprovalRequired(Exception):
    """Raised by ``ctx.require_approval()``: the engine pauses the turn before this call runs and
    persists it until a person decides (never reaches the model or the logs as a failure)."""

    def __init__(self, reason: str | None = None) -> None:
        super().__init__(reason or "approval required")
        self.reason = reason


class ToolCallState:
    __slots__ = ("approved", "args", "metadata", "step_state", "tool_call_id", "tool_name")

    def __init__(self, step_state: StepState, tool_name: str, tool_call_id: str, args: dict[str, Any]) -> None:
        self.step_state = step_state
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self.args = args
        self.metadata: dict[str, Any] = {}
        self.approved = False  # a person approved this call: require_approval() lets it run


# --- contexts --------------------------------------------------------------------------------


class TurnContext(_LayerContext[TurnState, TurnResult]):
    """Context of a ``turn`` middleware."""

    __slots__ = ()

    @property
    def agent_name(self) -> str:
        return self._s.agent_name

    @property
    def instance_key(self) -> str:
        return self._s.instance_key

    @property
    def turn_id(self) -> str:
        return self._s.turn_id

    @property
    def trace_id(self) -> str:
        return self._s.trace_id

    @property
    def input_event(self) -> dict[str, Any]:
        return self._s.input_event

    @property
    def conversation_state(self) -> ConversationState:
        return self._s.conversation_state

    def emit_message_event(self, event: MessageEvent) -> None:
        self._s.emit_message_event(event)

    @property
    def metadata(self) -> dict[str, Any]:
        return self._s.metadata

    @metadata.setter
    def metadata(self, value: dict[str, Any]) -> None:
        self._s.metadata = _require_dict(value, "metadata")

    @property
    def agents(self) -> AgentsApi:
        """Requests and sends to other agents of the swarm."""
        return self._s.agents  # type: ignore[no-any-return]

    @property
    def runtime(self) -> RuntimeInfo:
        """This agent, its swarm, the inbound event and (for an inter-agent call) the caller."""
        return self._s.runtime  # type: ignore[no-any-return]


class StepContext(_LayerContext[StepState, StepResult]):
    """Context of a ``step`` middleware. ``tool_catalog`` may be replaced or edited before
    ``next()``; the model call of this step sees the result."""

    __slots__ = ()

    @property
    def agent_name(self) -> str:
        return self._s.turn_state.agent_name

    @property
    def instance_key(self) -> str:
        return self._s.turn_state.instance_key

    @property
    def turn_id(self) -> str:
        return self._s.turn_state.turn_id

    @property
    def trace_id(self) -> str:
        return self._s.turn_state.trace_id

    @property
    def turn(self) -> Turn:
        return self._s.turn_state.turn

    @property
    def step_index(self) -> int:
        return self._s.step_index

    @property
    def input_event(self) -> dict[str, Any]:
        return self._s.turn_state.input_event

    @property
    def conversation_state(self) -> ConversationState:
        return self._s.turn_state.conversation_state

    def emit_message_event(self, event: MessageEvent) -> None:
        self._s.turn_state.emit_message_event(event)

    @property
    def tool_catalog(self) -> list[ToolCatalogItem]:
        return self._s.tool_catalog

    @tool_catalog.setter
    def tool_catalog(self, value: list[ToolCatalogItem]) -> None:
        if not isinstance(value, list):
            try:
                value = list(value)
            except TypeError:
                raise TypeError(
                    f"ctx.tool_catalog must be a list of catalog items, got {type(value).__name__}; "
                    "to offer no tools, set []"
                ) from None
        for i, item in enumerate(value):  # a list of names failed later, in the model call or provider
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise TypeError(
                    f"ctx.tool_catalog[{i}] is {type(item).__name__} {item!r:.60}, not a catalog item "
                    "({'name', 'description', 'parameters'}); keep the items you want: "
                    "ctx.tool_catalog = [t for t in ctx.tool_catalog if t['name'] != ...]"
                )
        self._s.tool_catalog = value

    @property
    def metadata(self) -> dict[str, Any]:
        return self._s.metadata

    @metadata.setter
    def metadata(self, value: dict[str, Any]) -> None:
        self._s.metadata = _require_dict(value, "metadata")

    @property
    def agents(self) -> AgentsApi:
        """Requests and sends to other agents of the swarm."""
        return self._s.turn_state.agents  # type: ignore[no-any-return]

    @property
    def runtime(self) -> RuntimeInfo:
        """This agent, its swarm, the inbound event and (for an inter-agent call) the caller."""
        return self._s.turn_state.runtime  # type: ignore[no-any-return]


class ToolCallContext(_LayerContext[ToolCallState, ToolCallResult]):
    """Context of a ``toolCall`` middleware. ``args`` may be replaced or edited before ``next()``;
    the handler receives the result. Deliberately no ``agents`` here (docs/architecture.md#the-three-chains)."""

    __slots__ = ()

    @property
    def agent_name(self) -> str:
        return self._s.step_state.turn_state.agent_name

    @property
    def instance_key(self) -> str:
        return self._s.step_state.turn_state.instance_key

    @property
    def turn_id(self) -> str:
        return self._s.step_state.turn_state.turn_id

    @property
    def trace_id(self) -> str:
        return self._s.step_state.turn_state.trace_id

    @property
    def step_index(self) -> int:
        return self._s.step_state.step_index

    @property
    def tool_name(self) -> str:
        return self._s.tool_name

    @property
    def tool_call_id(self) -> str:
        return self._s.tool_call_id

    @property
    def args(self) -> dict[str, Any]:
        return self._s.args

    @args.setter
    def args(self, value: dict[str, Any]) -> None:
        self._s.args = _require_dict(value, "args")

    @property
    def metadata(self) -> dict[str, Any]:
        return self._s.metadata

    @metadata.setter
    def metadata(self, value: dict[str, Any]) -> None:
        self._s.metadata = _require_dict(value, "metadata")

    @property
    def approved(self) -> bool:
        """Whether a person approved this call (the turn paused for it and was resumed)."""
        return self._s.approved

    def require_approval(self, reason: str | None = None) -> None:
        """Ask a person before this call runs: the turn pauses (``finish_reason="awaiting_approval"``)
        and resumes from here once the call is approved or denied. Once approved, the call runs
        through the pipeline again and this returns without pausing, so call it before ``next()``."""
        if not self._s.approved:
            raise ApprovalRequired(reason if isinstance(reason, str) and reason else None)


def _require_dict(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"ctx.{name} must be a dict, got {type(value).__name__}")
    return value


_CTX_CLASSES: dict[str, type[_LayerContext[Any, Any]]] = {
    "turn": TurnContext,
    "step": StepContext,
    "toolCall": ToolCallContext,
}

_REMOVED_PIPELINE_API = {
    "mutate": "api.pipeline.mutate(point, fn) was removed in goondan.ai/v1",
    "wrap": "api.pipeline.wrap(point, fn) was removed in goondan.ai/v1",
}


def _takes_one_argument(fn: Any) -> bool:
    """Whether a plain function can be called as ``fn(ctx)``, read from its code object (about a
    microsecond: extensions register per instance). Anything else (a partial, a callable object) is
    left to the full signature check; a middleware that cannot take the call failed every turn as
    E_TURN_FAILED TypeError, never reaching the user's code."""
    if type(fn) is not FunctionType:
        return False
    code = fn.__code__
    required = code.co_argcount - len(fn.__defaults__ or ())
    kw_required = code.co_kwonlyargcount - len(fn.__kwdefaults__ or {})
    return required <= 1 and kw_required == 0 and (code.co_argcount >= 1 or bool(code.co_flags & 0x04))


_GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_ASYNC_GENERATOR

# the table of a registry nothing was registered in (never changed: register() replaces it)
_NO_ENTRIES: dict[str, list[_Entry]] = {t: [] for t in MIDDLEWARE_TYPES}


class PipelineRegistry:
    """All middleware of one agent instance, kept sorted per type."""

    __slots__ = ("_entries", "_seq", "_version")

    def __init__(self) -> None:
        # most instances register no middleware at all: they share one empty table until they do
        self._entries: dict[str, list[_Entry]] = _NO_ENTRIES
        self._seq = 0
        self._version = 0

    def register(
        self,
        type: str,
        fn: Callable[[Any], Any],
        *,
        priority: int = 0,
        extension: str | None = None,
    ) -> None:
        if type not in self._entries:
            from ._hints import did_you_mean, join_hints  # the error path only

            where = f"extension '{extension}': " if extension else ""
            raise ExtensionError(
                "E_EXT_COMPAT",
                f"{where}unknown middleware type {type!r}",
                extension_name=extension,
                suggestion=join_hints(
                    did_you_mean(str(type), MIDDLEWARE_TYPES),
                    "register 'turn', 'step' or 'toolCall' middleware (the v0.9 pipeline points "
                    "such as 'step.pre' or 'toolCall.exec' map onto these three).",
                ),
            )
        if not callable(fn):
            raise ExtensionError(
                "E_EXT_INIT",
                f"{type} middleware must be callable, got {fn!r}",
                extension_name=extension,
                suggestion="Pass an `async def mw(ctx)` function.",
            )
        if isinstance(priority, bool) or not isinstance(priority, int | float):
            where = f"extension '{extension}': " if extension else ""
            meant = priority.get("priority", 0) if isinstance(priority, dict) else 5  # the v0.9 {priority: 5}
            raise ExtensionError(
                "E_EXT_INIT",
                f"{where}{type} middleware priority must be a number, got {priority!r}",
                extension_name=extension,
                suggestion=f"Pass a number: api.pipeline.register({type!r}, {getattr(fn, '__name__', 'mw')}, "
                f"priority={meant!r}) (lower is outer).",
            )
        if not _takes_one_argument(fn):
            from .tools import handler_call_problem  # the error path only

            name = str(getattr(fn, "__name__", "middleware"))
            problem = handler_call_problem(fn, name, ("ctx",))
            if problem is not None:
                where = f"extension '{extension}': " if extension else ""
                raise ExtensionError(
                    "E_EXT_INIT",
                    f"{where}{type} middleware {problem.removeprefix('handler ')}",
                    extension_name=extension,
                    suggestion=f"Define it as `async def {name}(ctx): ...` and call `await ctx.next()` inside (the "
                    "v0.9 `next` argument is `ctx.next` in goondan.ai/v1).",
                )
        code = fn.__code__ if fn.__class__ is FunctionType else None
        if code is None or code.co_flags & _GENERATOR_FLAGS:  # ``type`` is the middleware type here
            from .tools import generator_problem  # the error path, or a callable that is no plain function

            problem = generator_problem(fn, str(getattr(fn, "__name__", "middleware")))
            if problem is not None:  # every run of it returned a generator: E_PIPELINE_BAD_RESULT per turn
                where = f"extension '{extension}': " if extension else ""
                raise ExtensionError(
                    "E_EXT_INIT",
                    f"{where}{type} middleware {problem.removeprefix('handler ')}",
                    extension_name=extension,
                    suggestion="Return instead of yielding: `return await ctx.next()` (or a changed copy of it).",
                )
        if self._entries is _NO_ENTRIES:
            self._entries = {t: [] for t in MIDDLEWARE_TYPES}
        self._seq += 1
        entry = _Entry(fn, int(priority), self._seq, extension)
        entry.label = entry.capture.label = f"{type} middleware {_describe(entry)}"
        entries = self._entries[type]
        bisect.insort(entries, entry, key=_Entry.sort_key)
        self._version += 1

    def entries(self, mtype: MiddlewareType) -> list[_Entry]:
        return list(self._entries[mtype])

    def describe(self, mtype: MiddlewareType) -> list[tuple[str | None, int]]:
        """``(extension, priority)`` of each middleware, outermost first."""
        return [(e.extension, e.priority) for e in self._entries[mtype]]

    @property
    def version(self) -> int:
        return self._version

    def chain(self, mtype: MiddlewareType, core: Callable[[Any], Awaitable[Any]]) -> Chain[Any, Any]:
        if self._entries[mtype]:
            _install_capture()  # middleware output is kept from the answer stream (goondan._usercode)
        return Chain(mtype, list(self._entries[mtype]), _CTX_CLASSES[mtype], core)


# What each middleware type is: a (usually ``async def``) function of its context that returns the
# result of ``await ctx.next()`` or a changed copy of it.
TurnMiddleware = Callable[[TurnContext], Awaitable[TurnResult]]
StepMiddleware = Callable[[StepContext], Awaitable[StepResult]]
ToolCallMiddleware = Callable[[ToolCallContext], Awaitable[ToolCallResult]]


class ExtensionPipeline:
    """``api.pipeline``: one extension's view of the registry."""

    __slots__ = ("_extension", "_registry")

    def __init__(self, registry: PipelineRegistry, extension: str) -> None:
        self._registry = registry
        self._extension = extension

    # one overload per middleware type, so a type checker pairs each type with its context
    # priority may also be passed by position: register("step", fn, 5), or the v0.9 register("step",
    # fn, {"priority": 5}), which is refused naming the number to pass (it was a TypeError about
    # positional arguments, reported as an error raised inside register())
    @overload
    def register(self, type: Literal["turn"], fn: TurnMiddleware, priority: int = 0) -> None: ...
    @overload
    def register(self, type: Literal["step"], fn: StepMiddleware, priority: int = 0) -> None: ...
    @overload
    def register(self, type: Literal["toolCall"], fn: ToolCallMiddleware, priority: int = 0) -> None: ...

    def register(self, type: str, fn: Callable[[Any], Any], priority: int = 0) -> None:
        """Add a middleware; lower ``priority`` is outer, ties keep registration order."""
        self._registry.register(type, fn, priority=priority, extension=self._extension)

    if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelled attribute is flagged

        def __getattr__(self, name: str) -> Any:
            if name in _REMOVED_PIPELINE_API:
                raise ExtensionError(
                    "E_EXT_COMPAT",
                    _REMOVED_PIPELINE_API[name],
                    extension_name=self._extension,
                    suggestion="Use api.pipeline.register('turn' | 'step' | 'toolCall', middleware) and do the "
                    "work before or after `await ctx.next()`.",
                )
            raise AttributeError(name)


__all__ = [
    "MIDDLEWARE_TYPES",
    "ApprovalRequired",
    "Chain",
    "ExtensionPipeline",
    "PipelineRegistry",
    "StepContext",
    "StepMiddleware",
    "StepState",
    "ToolCallContext",
    "ToolCallMiddleware",
    "ToolCallState",
    "Turn",
    "TurnContext",
    "TurnMiddleware",
    "TurnState",
]
