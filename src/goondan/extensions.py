"""The extension API (``pipeline``, ``tools``, ``state``, ``events``, ``logger``) and the loader.

Extensions load in ``Agent.spec.extensions`` order and each ``register`` is awaited before the next
one starts, so an extension can rely on everything registered before it. Failures
are :class:`~goondan.errors.ExtensionError` with the standard codes and the extension's name.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import weakref
from collections.abc import Awaitable, Callable, Generator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args, overload

from ._api_types import (
    RuntimeEventType,
    StepCompletedEvent,
    StepFailedEvent,
    StepStartedEvent,
    ToolCalledEvent,
    ToolCompletedEvent,
    ToolDefinition,
    ToolFailedEvent,
    TurnCompletedEvent,
    TurnFailedEvent,
    TurnStartedEvent,
)
from ._json import copy_json, dumps, json_problem
from ._modules import import_path, reproduce_command
from ._usercode import captured, exit_error, format_traceback, import_failure, interrupt_error, stray_cancel
from .errors import ExtensionError, GoondanError
from .pipeline import ExtensionPipeline, PipelineRegistry, _takes_one_argument
from .tools import ToolHandler, ToolRegistry

log = logging.getLogger("goondan.extensions")

RUNTIME_EVENT_TYPES = (
    "turn.started",
    "turn.completed",
    "turn.failed",
    "step.started",
    "step.completed",
    "step.failed",
    "tool.called",
    "tool.completed",
    "tool.failed",
)

# how deep handlers may emit events from within handlers (see EventBus.emit)
MAX_EMIT_DEPTH = 32

# what api.events.emit refuses: every runtime event type (goondan.types.RuntimeEventType)
_RESERVED_EVENTS = frozenset(get_args(RuntimeEventType))

_REMOVED_API = {
    "pipelines": "api.pipelines (mutate/wrap pipeline points) was removed in goondan.ai/v1",
    "extState": "api.extState was replaced by api.state in goondan.ai/v1",
    "ext_state": "api.extState was replaced by api.state in goondan.ai/v1",
    "swarmBundle": "api.swarmBundle was removed in goondan.ai/v1",
    "swarm_bundle": "api.swarmBundle was removed in goondan.ai/v1",
    "instance": "api.instance (shared instance state) was removed in goondan.ai/v1",
    "oauth": "api.oauth was removed in goondan.ai/v1",
}


# --- events -------------------------------------------------------------------------------------


class EventBus:
    """In-process pub/sub shared by the extensions of one agent instance. Handler errors are logged
    and never reach the emitter or other handlers."""

    __slots__ = ("_depth", "_handlers", "_tasks")

    def __init__(self) -> None:
        self._handlers: dict[str, list[tuple[str | None, Callable[..., Any]]]] = {}
        self._tasks: set[asyncio.Task[Any]] | None = None  # running async handlers; made by the first one
        self._depth = 0  # emits under way on this stack: handlers emitting events

    def on(self, event: str, handler: Callable[..., Any], owner: str | None = None) -> Callable[[], None]:
        if not isinstance(event, str) or not event:
            raise GoondanError("E_EVENT_NAME_INVALID", "api.events.on needs a non-empty event name")
        if not callable(handler):
            raise GoondanError("E_EVENT_HANDLER_INVALID", f"handler for {event!r} is not callable")
        entry = (owner, handler)
        self._handlers.setdefault(event, []).append(entry)

        def unsubscribe() -> None:
            handlers = self._handlers.get(event)
            if handlers and entry in handlers:
                handlers.remove(entry)

        return unsubscribe

    @property
    def handlers_by_event(self) -> Mapping[str, list[tuple[str | None, Callable[..., Any]]]]:
        """The live subscription table (event name -> handlers), read-only by convention; the
        runtime looks events up in it directly on its hot path."""
        return self._handlers

    def has_handlers(self, event: str) -> bool:
        return bool(self._handlers.get(event))

    def emit(self, event: str, *args: Any, emitter: str | None = None) -> None:
        """Fire-and-forget: sync handlers run now, async handlers are scheduled.

        Handlers that emit (the event they handle, or two emitting each other's) nest on the stack;
        at :data:`MAX_EMIT_DEPTH` the emit is refused (E_EVENT_RECURSION). Without that the loop ran
        until RecursionError, caught and logged at every level near the stack's limit, where the
        logging itself fails: an agent process stopped answering (gdn run hung)."""
        handlers = self._handlers.get(event)
        if not handlers:
            return
        if self._depth >= MAX_EMIT_DEPTH:
            who = f"extension '{emitter}'" if emitter else "an extension"
            raise GoondanError(
                "E_EVENT_RECURSION",
                f"{who} emitted {event!r} {MAX_EMIT_DEPTH} levels deep from event handlers: a handler emits the "
                "event it handles (or handlers emit each other's events), which never ends",
                suggestion="Emit a different event from the handler, or emit only when something changed.",
            )
        self._depth += 1
        try:
            for owner, handler in list(handlers):
                try:
                    result = handler(*args)
                    if inspect.isawaitable(result):
                        self._schedule(result, event, owner)
                except (Exception, SystemExit) as exc:  # sys.exit() in a handler must not end the host
                    _handler_failed(event, owner, handler, exc)
                except KeyboardInterrupt as exc:  # nor its own KeyboardInterrupt (not a Ctrl+C)
                    _handler_interrupted(event, owner, handler, exc)
        finally:
            self._depth -= 1

    async def deliver(self, event: str, *args: Any) -> None:
        """Like :meth:`emit` but awaits async handlers, so runtime events reach subscribers in order."""
        handlers = self._handlers.get(event)
        if not handlers:
            return
        for owner, handler in list(handlers):
            try:
                result = handler(*args)
                if inspect.isawaitable(result):
                    await result
            except (Exception, SystemExit) as exc:  # sys.exit() in a handler must not end the host
                _handler_failed(event, owner, handler, exc)
            except KeyboardInterrupt as exc:
                _handler_interrupted(event, owner, handler, exc)
            except asyncio.CancelledError as exc:  # raised by the handler itself, unless the task is cancelled
                if stray_cancel("", "", exc) is None:
                    raise
                _handler_failed(event, owner, handler, exc)

    def _schedule(self, awaitable: Any, event: str, owner: str | None) -> None:
        async def run() -> None:
            try:
                await awaitable
            except (Exception, SystemExit) as exc:  # sys.exit() in a handler must not end the host
                _handler_failed(event, owner, awaitable, exc)
            except KeyboardInterrupt as exc:
                _handler_interrupted(event, owner, awaitable, exc)
            except asyncio.CancelledError as exc:
                if stray_cancel("", "", exc) is None:
                    raise
                _handler_failed(event, owner, awaitable, exc)

        try:
            task = asyncio.get_running_loop().create_task(run(), name=f"extension {owner}: handler of {event!r}")
        except RuntimeError:
            log.error("async handler for %r (extension %s) emitted outside an event loop", event, owner)
            awaitable.close() if hasattr(awaitable, "close") else None
            return
        tasks = self._tasks
        if tasks is None:
            tasks = self._tasks = set()
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def drain(self, timeout: float) -> None:
        """Let the async handlers :meth:`emit` scheduled finish, up to ``timeout`` seconds, then cancel
        what still runs with a warning naming it. Called when the instance closes: they were cancelled
        there without a word, so an extension's last ``emit`` (an audit record written by an async
        handler) was lost at the end of every ``gdn run --input``."""
        tasks = self._tasks
        if not tasks:
            return
        _done, pending = await asyncio.wait(set(tasks), timeout=timeout)
        for task in pending:
            log.warning("%s still ran %g s after its instance began closing: cancelled", task.get_name(), timeout)
            task.cancel()


def _handler_interrupted(event: str, owner: str | None, handler: Any, exc: KeyboardInterrupt) -> None:
    """A handler's own ``KeyboardInterrupt`` is reported like any failure; a real Ctrl+C propagates."""
    if interrupt_error("", exc) is None:
        raise exc
    _handler_failed(event, owner, handler, exc)


def _handler_failed(event: str, owner: str | None, handler: Any, exc: BaseException) -> None:
    """Log an event handler's exception the way a failed tool or middleware is shown: one ERROR line
    naming it, and its traceback from the handler's own frame at INFO (``gdn run -v``). It was a
    full traceback at ERROR starting in the event bus, printed on every ``gdn run`` without -v.
    ``sys.exit()`` in a handler is reported the same way: it ended ``gdn run`` (inline, with the
    handler's exit status and the turn's answer unprinted) or the agent process mid-turn."""
    name = getattr(handler, "__qualname__", None) or type(handler).__name__
    if isinstance(exc, SystemExit):
        what = f"called sys.exit({exc.code!r}); exiting is not allowed in user code"
    elif isinstance(exc, asyncio.CancelledError):
        what = "raised asyncio.CancelledError, but nothing cancelled it"
    elif isinstance(exc, KeyboardInterrupt):
        what = "raised KeyboardInterrupt, but nothing interrupted the process"
    else:
        what = f"raised {type(exc).__name__}: {exc}"
    where = f"event handler {name} for {event!r} of extension {owner}"
    # with -v the traceback follows at once: pointing at -v then reads as if it had not been given
    hint = "" if log.isEnabledFor(logging.INFO) else " (`gdn run -v` prints its traceback)"
    log.error("%s %s%s", where, what, hint)
    if exc.__traceback__ is not None and exc.__traceback__.tb_next is not None:
        exc = exc.with_traceback(exc.__traceback__.tb_next)  # from the handler's frame on
    log.info("%s:\n%s", where, format_traceback(exc))


class ExtensionEvents:
    """``api.events`` for one extension."""

    __slots__ = ("_bus", "_name")

    def __init__(self, bus: EventBus, name: str) -> None:
        self._bus = bus
        self._name = name

    # the runtime events have typed records (one overload each); any other name is an event the
    # extensions of this instance emit to each other, with whatever arguments they agree on
    @overload
    def on(
        self, event: Literal["turn.started"], handler: Callable[[TurnStartedEvent], object]
    ) -> Callable[[], None]: ...
    @overload
    def on(
        self, event: Literal["turn.completed"], handler: Callable[[TurnCompletedEvent], object]
    ) -> Callable[[], None]: ...
    @overload
    def on(self, event: Literal["turn.failed"], handler: Callable[[TurnFailedEvent], object]) -> Callable[[], None]: ...
    @overload
    def on(
        self, event: Literal["step.started"], handler: Callable[[StepStartedEvent], object]
    ) -> Callable[[], None]: ...
    @overload
    def on(
        self, event: Literal["step.completed"], handler: Callable[[StepCompletedEvent], object]
    ) -> Callable[[], None]: ...
    @overload
    def on(self, event: Literal["step.failed"], handler: Callable[[StepFailedEvent], object]) -> Callable[[], None]: ...
    @overload
    def on(self, event: Literal["tool.called"], handler: Callable[[ToolCalledEvent], object]) -> Callable[[], None]: ...
    @overload
    def on(
        self, event: Literal["tool.completed"], handler: Callable[[ToolCompletedEvent], object]
    ) -> Callable[[], None]: ...
    @overload
    def on(self, event: Literal["tool.failed"], handler: Callable[[ToolFailedEvent], object]) -> Callable[[], None]: ...
    @overload
    def on(self, event: str, handler: Callable[..., object]) -> Callable[[], None]: ...

    def on(self, event: str, handler: Callable[..., object]) -> Callable[[], None]:
        """Subscribe; returns the function that unsubscribes. Async handlers are awaited in order
        for runtime events; a handler's exception is logged, never raised to the emitter."""
        if isinstance(event, str) and event not in _RESERVED_EVENTS:
            _warn_if_misspelt(self._name, event)
        if (event in _RESERVED_EVENTS or event == "extension.cleanup") and not _takes_one_argument(handler):
            # the runtime calls it handler(record): one that cannot take that failed on every event,
            # logged as a TypeError each time, and never ran
            from .tools import handler_call_problem  # the error path, or a callable that is no plain function

            name = str(getattr(handler, "__name__", "handler"))
            problem = handler_call_problem(handler, name, ("event",))
            if problem is not None:
                raise GoondanError(
                    "E_EVENT_HANDLER_INVALID",
                    f"extension '{self._name}': {event!r} {problem}",
                    suggestion=f"Define it as `def {name}(event): ...` (sync or async): the runtime passes the "
                    "event's record.",
                )
        return self._bus.on(event, handler, self._name)

    def emit(self, event: str, *args: Any) -> None:
        """Call this instance's handlers of ``event`` (an event of the extensions' own). The runtime's
        event names are refused: their handlers are typed for the runtime's records (TurnCompletedEvent,
        ...) and would get whatever the emitter passed (v0.0.3: their names and payloads are the runtime's)."""
        if event in _RESERVED_EVENTS or not isinstance(event, str) or not event:
            raise GoondanError(
                "E_EVENT_NAME_INVALID",
                f"extension '{self._name}' emitted {event!r}, which "
                + ("is a runtime event: only the runtime emits it" if event in _RESERVED_EVENTS else "is not a name"),
                suggestion=f"Emit an event of your own, named after the extension (e.g. '{self._name}.done'); "
                "subscribe to runtime events with api.events.on.",
            )
        self._bus.emit(event, *args, emitter=self._name)


def _warn_if_misspelt(extension: str, event: str) -> None:
    """``api.events.on("turn.complete", ...)`` subscribed to an event nobody emits, silently: the
    handler never ran. A name close to a runtime event's, or in its namespace (``turn.``, ``step.``,
    ``tool.``; an extension's own events are named after it), is logged as a warning with the name
    meant. Once per subscription, at register() time."""
    import difflib

    near = difflib.get_close_matches(event, RUNTIME_EVENT_TYPES, n=1, cutoff=0.8)
    if not near and not event.startswith(("turn.", "step.", "tool.")):
        return
    hint = f"did you mean {near[0]!r}? " if near else ""
    log.warning(
        "extension '%s' subscribed to %r, which is no runtime event: its handler runs only if an extension "
        "emits it. %sRuntime events: %s",
        extension,
        event,
        hint,
        ", ".join(RUNTIME_EVENT_TYPES),
    )


# --- state --------------------------------------------------------------------------------------


class StateBackend(Protocol):
    def load_extension_state(self, extension_name: str) -> Any | None: ...

    def save_extension_state(self, extension_name: str, value: Any) -> None: ...


_NULL = b"null"


def _compact(data: bytes) -> bytes:
    """``data`` in a bytes object of its own size: orjson's result keeps the 4 KiB buffer it wrote
    into, and a snapshot lives as long as its agent instance."""
    return _NULL if data == _NULL else memoryview(data).tobytes()


def _snapshot(value: Any) -> bytes:
    """What :attr:`ExtensionState.dirty` compares with: shared for the usual no-state-yet (``None``)."""
    return _NULL if value is None else _compact(dumps(value))


class _Ready:
    """What ``api.state.set()`` returns (and the base of what ``get()`` returns): the work is done
    when the call returns, and awaiting gives its result. ``api.state.set(value)`` without ``await``
    was a coroutine never run: the state was silently not saved, with no word in an agent process.

    It also has a coroutine's ``send``/``throw``/``close``, so ``asyncio.run``, ``create_task`` and
    ``gather`` take it like the coroutine these methods returned before."""

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        self._value = value

    def __await__(self) -> Generator[Any, None, Any]:
        return self._value
        yield  # a generator: awaiting it returns at once, without suspending

    def send(self, _value: Any) -> Any:
        raise StopIteration(self._value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        raise typ if val is None else val

    def close(self) -> None:
        return None


_DONE = _Ready(None)

_GET_NOT_AWAITED = "api.state.get() must be awaited: write `value = await api.state.get()`"


class _StateValue(_Ready):
    """What ``api.state.get()`` returns: awaiting it gives the value (a copy taken at the call). Used
    as the value without ``await`` (``api.state.get() or {}``, ``s["n"] = 1``) it says so, where the
    coroutine it was said ``'coroutine' object does not support item assignment``."""

    __slots__ = ()

    def _not_awaited(self, *_args: Any) -> Any:
        raise TypeError(_GET_NOT_AWAITED)

    __bool__ = __len__ = __iter__ = __contains__ = __getitem__ = __setitem__ = __delitem__ = _not_awaited

    def __getattr__(self, name: str) -> Any:  # value.get(...), value.items(): not found, so named
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(f"{_GET_NOT_AWAITED} (its result has no attribute {name!r})")

    def __repr__(self) -> str:
        return "<api.state.get() not awaited>"


class ExtensionState:
    """``api.state``: one JSON value per extension per agent instance. Restored when the instance
    starts, written at turn end only when it changed.

    ``get`` and ``set`` do their work when called and return an awaitable of the result, so
    ``await api.state.set(v)`` is the documented call and a forgotten ``await`` loses nothing."""

    __slots__ = ("_backend", "_name", "_saved", "_value")

    def __init__(self, backend: StateBackend, name: str) -> None:
        self._backend = backend
        self._name = name
        self._value: Any = backend.load_extension_state(name)
        self._saved: bytes = _snapshot(self._value)

    def get(self) -> Awaitable[Any]:
        """The current value (a copy: changing it changes nothing until ``set``), or ``None``."""
        return _StateValue(copy_json(self._value))

    def set(self, value: Any) -> Awaitable[None]:
        """Store ``value`` (any JSON value); saved when the turn ends. Raises E_EXT_STATE_INVALID
        for anything else."""
        problem = json_problem(value, "state")
        if problem:
            if isinstance(value, _StateValue):
                problem = _GET_NOT_AWAITED
            raise GoondanError(
                "E_EXT_STATE_INVALID",
                f"extension '{self._name}' state must be JSON: {problem}",
                suggestion="Store only dicts, lists, strings, numbers, booleans and None.",
            )
        self._value = copy_json(value)
        return _DONE

    def value(self) -> Any:
        return self._value

    @property
    def dirty(self) -> bool:
        return dumps(self._value) != self._saved

    def save_if_changed(self) -> bool:
        data = dumps(self._value)
        if data == self._saved:
            return False
        self._backend.save_extension_state(self._name, self._value)
        self._saved = _compact(data)
        return True


# --- tools --------------------------------------------------------------------------------------


class ExtensionTools:
    """``api.tools`` for one extension."""

    __slots__ = ("_name", "_registry")

    def __init__(self, registry: ToolRegistry, name: str) -> None:
        self._registry = registry
        self._name = name

    def register(self, item: ToolDefinition, handler: ToolHandler) -> None:
        """Add the tool ``item["name"]`` (``<extension>__<tool>``); a later registration of the same
        name replaces it."""
        self._registry.register_dynamic(self._name, item, handler)

    def unregister(self, name: str) -> None:
        """Remove a tool this extension registered (e.g. one an MCP server withdrew). Steps whose
        catalog is built afterwards no longer list it; an unknown name is ignored. Tools of other
        extensions or Tool resources cannot be removed this way."""
        if not isinstance(name, str) or not name.startswith(f"{self._name}__"):
            raise GoondanError(
                "E_TOOL_NAME_INVALID",
                f"extension '{self._name}' cannot unregister {name!r}: only its own '{self._name}__<tool>' tools",
                suggestion="Hide other tools from a step with step middleware (ctx.tool_catalog) instead.",
            )
        self._registry.remove(name)


# --- the API object -------------------------------------------------------------------------------


class ExtensionApi:
    """What ``register(api)`` receives. Only these five parts exist (docs/architecture.md#extensions)."""

    __slots__ = ("_name", "events", "logger", "pipeline", "state", "tools")

    def __init__(
        self,
        name: str,
        *,
        pipeline: PipelineRegistry,
        tools: ToolRegistry,
        state: ExtensionState,
        bus: EventBus,
        logger: logging.Logger | None = None,
    ) -> None:
        self._name = name
        self.pipeline = ExtensionPipeline(pipeline, name)
        self.tools = ExtensionTools(tools, name)
        self.state = state
        self.events = ExtensionEvents(bus, name)
        self.logger = logger or logging.getLogger(f"goondan.extension.{name}")

    pipeline: ExtensionPipeline
    tools: ExtensionTools
    state: ExtensionState
    events: ExtensionEvents
    logger: logging.Logger

    if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelled part is flagged

        def __getattr__(self, attr: str) -> Any:
            if attr in _REMOVED_API:
                raise ExtensionError(
                    "E_EXT_COMPAT",
                    _REMOVED_API[attr],
                    extension_name=self._name,
                    suggestion="Use the five goondan.ai/v1 parts: api.pipeline.register(...), "
                    "api.tools.register(...), api.state.get()/set(), api.events.on()/emit() and api.logger.",
                )
            raise AttributeError(
                f"ExtensionApi has no attribute {attr!r}; it offers pipeline, tools, state, events and logger"
            )


# --- loading ------------------------------------------------------------------------------------


def _wrap_register_error(name: str, exc: BaseException) -> ExtensionError:
    if isinstance(exc, ExtensionError):
        if exc.extension_name is None:
            exc.extension_name = name
        return exc
    if isinstance(exc, GoondanError):
        return ExtensionError(
            "E_EXT_INIT",
            f"failed to initialize extension {name}: [{exc.code}] {exc.message}",
            extension_name=name,
            suggestion=exc.suggestion or "Fix the error raised inside register().",
        )
    return ExtensionError(
        "E_EXT_INIT",
        f"failed to initialize extension {name}: {type(exc).__name__}: {exc}",
        extension_name=name,
        suggestion="Fix the error raised inside register(); `gdn run -v` prints its traceback, and "
        "`gdn logs -v` shows it from the extension.failed event.",
    )


def _check_config(name: str, module: Any, config: dict[str, Any]) -> None:
    schema = getattr(module, "CONFIG_SCHEMA", None)
    if schema is None:
        return
    from ._argcheck import check_args, schema_problem

    problem = schema_problem(schema)
    if problem is not None:  # checking the config with it raised jsonschema's own error (INTERNAL_ERROR inline)
        raise ExtensionError(
            "E_EXT_LOAD",
            f"extension {name}: its CONFIG_SCHEMA is not a valid JSON Schema {problem}",
            extension_name=name,
            suggestion="Fix CONFIG_SCHEMA in the extension module; it is JSON Schema Draft 2020-12 "
            "(https://json-schema.org/understanding-json-schema/reference).",
        )
    issues = [i.replace("args", "config", 1) for i in check_args(schema, config)]
    if issues:
        raise ExtensionError(
            "E_EXT_CONFIG",
            f"invalid config for extension {name}: " + "; ".join(issues[:5]),
            extension_name=name,
            suggestion="Fix the Extension's spec.config (or the agent's per-reference config).",
        )


def load_module(name: str, entry: Path) -> Any:
    try:
        module = import_path(entry)
    except FileNotFoundError as exc:
        raise ExtensionError(
            "E_EXT_LOAD",
            f"extension {name}: entry {entry} not found",
            extension_name=name,
            suggestion="Check spec.entry of the Extension resource.",
        ) from exc
    except Exception as exc:
        # the caller logs the user's traceback for `gdn run -v` and keeps it in an extension.failed
        # event (the error itself carries only its last line)
        suggestion = (
            f"Fix {entry.name}: `gdn run -v` prints the traceback of its import, and `gdn logs -v` shows "
            f"it from the extension.failed event (or run `{reproduce_command(entry)}`)."
        )
        if isinstance(exc, NameError) and exc.name == "api":  # api.pipeline.register(...) at the module's top level
            suggestion = (
                "`api` exists only inside register(api): move the api.pipeline/tools/events calls into "
                f"`def register(api): ...` in {entry.name}."
            )
        error = ExtensionError(
            "E_EXT_LOAD",
            import_failure(f"extension {name}", entry, exc),
            extension_name=name,
            suggestion=suggestion,
        )
        raise error from exc
    return module


_REGISTER_CALLS: weakref.WeakKeyDictionary[Callable[..., Any], tuple[bool, str | None]] = weakref.WeakKeyDictionary()


def _register_call(register: Callable[..., Any]) -> tuple[bool, str | None]:
    """Whether ``register`` takes ``(api, config)``, and why it can take neither that nor ``(api)``
    (None when it can). Looked up once per function, not per instance (an agent's every instance
    registers the same extensions).

    Checked before the call: the TypeError of the call itself was reported as E_EXT_INIT with "fix the
    error raised inside register()", though nothing inside ran (``def register():``)."""
    try:
        return _REGISTER_CALLS[register]
    except (KeyError, TypeError):  # TypeError: not weakly referenceable
        pass
    problem: str | None = None
    try:
        signature = inspect.signature(register)
    except (TypeError, ValueError):  # no signature to read (some builtins): the call decides
        verdict: tuple[bool, str | None] = (False, None)
    else:
        params = [
            p
            for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        ]
        takes = len(params) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)
        try:
            signature.bind(None, None) if takes else signature.bind(None)
        except TypeError as exc:
            call = "register(api, config)" if takes else "register(api)"
            bare = signature.replace(  # annotations only clutter it ("-> 'None'" under future annotations)
                parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
                return_annotation=signature.empty,
            )
            problem = f"register{bare} cannot be called as {call}: {exc}"
        verdict = (takes, problem)
    with contextlib.suppress(TypeError):
        _REGISTER_CALLS[register] = verdict
    return verdict


SLOW_REGISTER_SECONDS = 10.0

_CONFIG_UNUSED_WARNED: set[str] = set()  # extensions warned about (once per process, not per instance)


def _slow_register(name: str) -> None:
    log.warning(
        "extension %s: register() has not returned after %g s; the agent starts only when it does. If it waits "
        "for something that may never answer, give that wait a timeout (`gdn run -v` shows what it logs)",
        name,
        SLOW_REGISTER_SECONDS,
    )


async def register_extension(name: str, module: Any, api: ExtensionApi, config: dict[str, Any]) -> None:
    register = getattr(module, "register", None)
    if not callable(register):
        raise ExtensionError(
            "E_EXT_LOAD",
            f"extension {name} does not define register(api)"
            + ("" if register is None else f": its register is {type(register).__name__}, not a function"),
            extension_name=name,
            suggestion="Add `def register(api, config): ...` (sync or async) to the extension module.",
        )
    _check_config(name, module, config)
    takes_config, problem = _register_call(register)
    if problem is not None:
        raise ExtensionError(
            "E_EXT_LOAD",
            f"extension {name}: {problem}",
            extension_name=name,
            suggestion="Define it as `def register(api, config): ...` (or `def register(api): ...`), sync or "
            "async; `gdn validate` reports this before a run (E_CONFIG_EXTENSION_REGISTER_SIGNATURE).",
        )
    if not takes_config and config and name not in _CONFIG_UNUSED_WARNED:
        # the YAML's config reached nothing: register(api) is the only way an extension gets it
        _CONFIG_UNUSED_WARNED.add(name)
        log.warning(
            "extension %s: its config (%s) is not used: register(api) takes none; define register(api, config) "
            "to read it",
            name,
            ", ".join(map(str, config)),
        )
    try:
        with captured(f"extension {name} register()", api.logger):
            result = register(api, copy_json(config)) if takes_config else register(api)
            if inspect.isawaitable(result):
                # an async register() awaiting something that never answers held the agent's start
                # without a word, for good; the warning says which one waits (it is not cancelled)
                timer = asyncio.get_running_loop().call_later(SLOW_REGISTER_SECONDS, _slow_register, name)
                try:
                    await result
                finally:
                    timer.cancel()
    except BaseException as exc:
        if isinstance(exc, asyncio.CancelledError):
            stray = stray_cancel(f"register() of extension {name}", "E_USER_CODE_CANCELLED", exc)
            if stray is None:  # the start really is being cancelled
                raise
            raise _wrap_register_error(name, stray) from exc
        if isinstance(exc, KeyboardInterrupt):
            interrupt = interrupt_error(f"register() of extension {name}", exc)
            if interrupt is None:  # a real Ctrl+C
                raise
            raise _wrap_register_error(name, interrupt) from exc
        if isinstance(exc, SystemExit):  # sys.exit() in register() must not end the host
            raise _wrap_register_error(name, exit_error(f"register() of extension {name}", exc)) from exc
        raise _wrap_register_error(name, exc) from exc


__all__ = [
    "RUNTIME_EVENT_TYPES",
    "EventBus",
    "ExtensionApi",
    "ExtensionEvents",
    "ExtensionState",
    "ExtensionTools",
    "register_extension",
]
