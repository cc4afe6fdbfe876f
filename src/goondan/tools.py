"""Tool registry, per-step catalog and the executor behind the ``toolCall`` chain (docs/architecture.md#tools).

Names are ``<resource>__<export>`` for Tool resources and ``<extension>__<tool>`` for tools an
extension registers. The executor never raises into the turn: every failure becomes an error
:class:`~goondan.results.ToolCallResult` that goes back to the model, because a model can recover from
a bad call while an aborted turn recovers nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import logging
import os
import queue
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import CoroutineType
from typing import Any

from . import _argcheck
from ._api_types import ToolCatalogItem, ToolRuntimeApi
from ._json import (
    MAX_RECORD_DEPTH,
    MAX_VALUE_DEPTH,
    FrozenDict,
    JsonDepthError,
    encoded_size,
    freeze_json,
    freeze_schema,
    json_problem,
    repair_json,
    to_frozen_json,
    to_json_value,
)
from ._usercode import captured, exit_error, format_traceback, interrupt_error, stray_cancel, user_output
from ._usercode import install as install_capture
from .errors import GoondanError
from .messages import Message
from .results import ToolCallResult

# A tool handler: ``handler(ctx, args)``, sync or ``async``, returning a JSON value.
ToolHandler = Callable[["ToolContext", dict[str, Any]], Any]

DEFAULT_ERROR_MESSAGE_LIMIT = 1000
# The most a tool result may take in the conversation, as stored JSON. A bigger result would be
# resent to the model at every later step (and could not cross the agent-process channel); it is
# replaced by an E_TOOL_RESULT_TOO_LARGE error result the model can act on.
DEFAULT_MAX_RESULT_BYTES = 1024 * 1024
_NAME_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


def truncate_message(message: str, limit: int) -> str:
    """Cut an error message to ``limit`` characters, marking the cut."""
    if len(message) <= limit:
        return message
    if limit <= 15:
        return message[:limit]
    return message[: limit - 15] + "... (truncated)"


def split_tool_name(name: str) -> tuple[str, str] | None:
    """``("resource", "export")`` if ``name`` has exactly one ``__`` with both sides non-empty."""
    if name.count("__") != 1:
        return None
    left, right = name.split("__")
    if not left or not right or left.endswith("_") or right.startswith("_"):
        return None
    return left, right


def handler_call_problem(handler: Any, name: str, params: tuple[str, ...] = ("ctx", "args")) -> str | None:
    """Why ``handler(ctx, args)`` -- how every tool handler is called -- cannot work, or None
    (``params``: the arguments of another call, e.g. ``("request",)`` for a python model's generate).

    Checked when the tool is loaded: a handler that cannot take the call (``def add(args)``, a third
    required parameter, a required keyword-only one) failed every call as E_TOOL_ERROR, which the
    model saw and ``gdn run`` answered around with exit 0, though nothing of the handler ran. Binding
    two positional arguments to its signature accepts whatever the call accepts: sync or async,
    any parameter names, ``*args``/``**kwargs``, defaults, ``functools.partial``, bound methods and
    callable objects. A callable whose signature cannot be read (some builtins) is left to the call."""
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*(None for _ in params))
    except TypeError as exc:
        bare = signature.replace(  # annotations only clutter it ("-> 'dict'" under future annotations)
            parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
            return_annotation=signature.empty,
        )
        where = _defined_at(handler)
        call = f"{name}({', '.join(params)})"
        return f"handler {name}{bare}{f' ({where})' if where else ''} cannot be called as {call}: {exc}"
    return None


# the suggestion of a handler refused by generator_problem()
GENERATOR_FIX = "Return the result instead of yielding it: collect the items (`return list(...)`) or join the text."


# JSON Schema keywords (Draft 2020-12 and common annotations): a parameters schema made only of other
# keys whose values are objects is properties written without their object (register_dynamic)
_SCHEMA_WORDS = frozenset((
    "type", "properties", "required", "items", "prefixItems", "additionalProperties", "patternProperties", "enum",
    "const", "description", "title", "default", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "minLength", "maxLength", "pattern", "format", "minItems", "maxItems", "uniqueItems", "minProperties",
    "maxProperties", "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "contains", "dependentRequired",
    "dependentSchemas", "propertyNames", "multipleOf", "examples", "deprecated", "readOnly", "writeOnly", "nullable",
    "unevaluatedProperties", "unevaluatedItems", "definitions",
))  # fmt: skip


def generator_problem(handler: Any, name: str) -> str | None:
    """Why a generator function (sync or async, also behind a partial or bound method) cannot be a
    tool handler, or None. Its calls return a generator, which reached the model as the text
    ``<generator object ...>`` (an unknown object is coerced to its ``str``); refused at load instead."""
    target = inspect.unwrap(handler)
    while isinstance(target, functools.partial):
        target = inspect.unwrap(target.func)
    if not (inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target)):
        return None
    where = _defined_at(handler)
    return (
        f"handler {name}{f' ({where})' if where else ''} is a generator function (it uses `yield`), so a "
        "call would return a generator, not a result"
    )


def _defined_at(handler: Any) -> str | None:
    """``calc.py:3`` for the function behind a handler (a partial's, a bound method's, an object's
    ``__call__``), when it has Python code."""
    target = handler
    for _ in range(8):  # partials of partials, methods of partials...
        if isinstance(target, functools.partial):
            target = target.func
        elif inspect.ismethod(target):
            target = target.__func__
        else:
            break
    if not inspect.isfunction(target) and not isinstance(target, type):
        target = type(target).__call__  # a callable object: its class's __call__
    code = getattr(inspect.unwrap(target), "__code__", None)
    if code is None:
        return None
    return f"{Path(code.co_filename).name}:{code.co_firstlineno}"


class ToolEntry:
    """One runnable tool. ``parallel=False`` makes its calls run alone in a step (no other call of
    the step runs meanwhile); ``is_async`` is worked out once here because a step with several
    calls runs synchronous handlers in worker threads and must know which ones those are."""

    __slots__ = ("config", "error_limit", "handler", "is_async", "item", "name", "parallel", "source")

    def __init__(
        self,
        name: str,
        item: ToolCatalogItem,
        handler: ToolHandler | None,
        *,
        error_limit: int = DEFAULT_ERROR_MESSAGE_LIMIT,
        source: dict[str, Any],
        config: Mapping[str, Any] | None = None,
        parallel: bool = True,
    ) -> None:
        self.name = name
        self.item = item
        self.handler = handler
        self.error_limit = error_limit
        self.source = source
        self.config: Mapping[str, Any] = config or {}
        self.parallel = parallel
        self.is_async = handler is not None and _is_async_callable(handler)


class ToolContext:
    """What a tool handler receives as ``ctx``."""

    __slots__ = (
        "_make_runtime",
        "_runtime",
        "_workdir",
        "agent_name",
        "config",
        "instance_key",
        "logger",
        "message",
        "tool_call_id",
        "trace_id",
        "turn_id",
    )

    def __init__(  # the engine passes these positionally (once per call; keywords cost ~0.4k instructions each)
        self,
        agent_name: str,
        instance_key: str,
        turn_id: str,
        trace_id: str,
        tool_call_id: str,
        message: Message | None,
        workdir: Path | Callable[[], Path],
        logger: logging.Logger,
        runtime: ToolRuntimeApi | None = None,
        runtime_factory: Callable[[], ToolRuntimeApi] | None = None,
    ) -> None:
        self.agent_name = agent_name
        self.instance_key = instance_key
        self.turn_id = turn_id
        self.trace_id = trace_id
        self.tool_call_id = tool_call_id
        self.message = message
        self._workdir = workdir
        self.logger = logger
        self._runtime = runtime
        self._make_runtime = runtime_factory
        # the Tool's spec.config with the agent's tools[].config over it (set per call by the executor)
        self.config: Mapping[str, Any] = {}

    agent_name: str
    instance_key: str
    turn_id: str
    trace_id: str
    tool_call_id: str
    message: Message | None  # the assistant message that made this call
    logger: logging.Logger
    config: Mapping[str, Any]
    _runtime: ToolRuntimeApi | None

    @property
    def runtime(self) -> ToolRuntimeApi:
        """Inter-agent calls (request/send/spawn/list/catalog). Built on first use: most tool
        calls never touch it. The runtime always provides it; a context built by hand without one
        (in a unit test of a handler) raises ``E_TOOL_RUNTIME_UNAVAILABLE``."""
        value = self._runtime
        if value is None:
            if self._make_runtime is None:
                raise GoondanError(
                    "E_TOOL_RUNTIME_UNAVAILABLE",
                    "this tool context has no inter-agent runtime (ctx.runtime)",
                    suggestion="Run the tool inside a goondan Runtime, or pass runtime= to ToolContext.",
                )
            value = self._runtime = self._make_runtime()
        return value

    @runtime.setter
    def runtime(self, value: ToolRuntimeApi) -> None:
        self._runtime = value

    @property
    def workdir(self) -> Path:
        """The instance's working directory (created on first use)."""
        wd = self._workdir
        if callable(wd):
            wd = wd()
            self._workdir = wd
        return wd


def resource_tool_entries(
    resource_name: str,
    exports: list[dict[str, Any]],
    handlers: Mapping[str, Any],
    *,
    error_limit: int = DEFAULT_ERROR_MESSAGE_LIMIT,
    config: Mapping[str, Any] | None = None,
) -> list[ToolEntry]:
    """The entries of one Tool resource's exports (``<resource>__<export>``), parameters frozen."""
    entries: list[ToolEntry] = []
    source = {"type": "config", "name": resource_name}
    for export in exports:
        ename = export["name"]
        name = f"{resource_name}__{ename}"
        handler = handlers.get(ename)
        problem = generator_problem(handler, str(getattr(handler, "__name__", ename))) if handler else None
        if problem is not None:
            raise GoondanError(
                "E_TOOL_LOAD", f"Tool/{resource_name}: export {ename!r}: {problem}", suggestion=GENERATOR_FIX
            )
        item: ToolCatalogItem = {
            "name": name,
            "description": export.get("description", ""),
            "parameters": freeze_schema(export.get("parameters") or {"type": "object", "properties": {}}),
        }
        entries.append(
            ToolEntry(
                name,
                item,
                handler if callable(handler) else None,
                error_limit=error_limit,
                source=source,
                config=config,
                parallel=export.get("parallel") is not False,
            )
        )
    return entries


class ToolRegistry:
    """Every tool one agent instance can run: its Tool resources' exports plus extension tools."""

    __slots__ = ("_catalog_cache", "_entries", "_version")

    def __init__(self) -> None:
        self._entries: dict[str, ToolEntry] = {}
        self._version = 0
        self._catalog_cache: tuple[int, list[ToolCatalogItem]] | None = None

    # --- registration --------------------------------------------------------------------

    def add(self, entry: ToolEntry) -> None:
        self._entries.pop(entry.name, None)  # re-registration moves the tool to the end
        self._entries[entry.name] = entry
        self._version += 1

    def remove(self, name: str) -> bool:
        """Drop a tool, e.g. one an MCP server withdrew; ``False`` if it was not registered.

        Catalogs built from now on lack it (the version bump invalidates the cached one). A step
        whose catalog was built before still lists it, and calling it there is ``E_TOOL_NOT_FOUND``.
        """
        if self._entries.pop(name, None) is None:
            return False
        self._version += 1
        return True

    def add_resource_tools(
        self,
        resource_name: str,
        exports: list[dict[str, Any]],
        handlers: Mapping[str, Any],
        *,
        error_limit: int = DEFAULT_ERROR_MESSAGE_LIMIT,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.add_entries(
            resource_tool_entries(resource_name, exports, handlers, error_limit=error_limit, config=config)
        )

    def add_entries(self, entries: list[ToolEntry]) -> None:
        """Add built entries; they are immutable, so the instances of one agent share them."""
        for entry in entries:
            self.add(entry)

    def register_dynamic(self, extension_name: str, item: Any, handler: Any) -> None:
        """``api.tools.register``: later registration of the same name wins."""
        if not isinstance(item, Mapping):
            raise GoondanError(
                "E_TOOL_DEFINITION_INVALID",
                f"api.tools.register expects a catalog item dict, got {type(item).__name__}",
                suggestion="Pass {'name': 'ext__tool', 'description': '...', 'parameters': {...}}.",
            )
        name = item.get("name")
        parts = split_tool_name(name) if isinstance(name, str) else None
        if parts is None or parts[0] != extension_name or not _NAME_PART.match(parts[1]):
            raise GoondanError(
                "E_TOOL_NAME_INVALID",
                f"extension '{extension_name}' registered tool name {name!r}; tool names must be "
                f"'{extension_name}__<tool>' with exactly one '__'",
                suggestion=f"Rename the tool to '{extension_name}__<tool>' (letters, digits, '-' and '_').",
            )
        if not callable(handler):
            raise GoondanError(
                "E_TOOL_DEFINITION_INVALID",
                f"tool {name!r} needs a callable handler(ctx, input)",
            )
        fname = str(getattr(handler, "__name__", "handler"))
        problem = handler_call_problem(handler, fname)
        if problem is not None:  # refused here, not at every call of the tool
            raise GoondanError(
                "E_TOOL_DEFINITION_INVALID",
                f"tool {name!r}: {problem}",
                suggestion="Give api.tools.register a handler(ctx, args) (sync or async).",
            )
        problem = generator_problem(handler, fname)
        if problem is not None:
            raise GoondanError("E_TOOL_DEFINITION_INVALID", f"tool {name!r}: {problem}", suggestion=GENERATOR_FIX)
        params = item.get("parameters")
        if params is None:
            params = {"type": "object", "properties": {}}
        if (
            isinstance(params, Mapping)
            and params
            and all(isinstance(v, Mapping) for v in params.values())
            and not any(k in _SCHEMA_WORDS or str(k).startswith(("$", "x-")) for k in params)
        ):
            # {"a": {"type": "number"}}: properties written without their object; it registered, the
            # model saw a schema of unknown keywords, and no call's arguments were ever checked
            names = ", ".join(repr(k) for k in params)
            raise GoondanError(
                "E_TOOL_DEFINITION_INVALID",
                f"tool {name!r} parameters has no 'type' or 'properties', only {names}: they look like "
                "properties written without their object",
                suggestion=f"Write {{'type': 'object', 'properties': {{{names.split(', ')[0]}: ...}}}}.",
            )
        if not isinstance(params, Mapping) or params.get("type", "object") != "object":
            found = type(params).__name__ if not isinstance(params, Mapping) else f"type {params['type']!r}"
            raise GoondanError(
                "E_TOOL_DEFINITION_INVALID",
                f"tool {name!r} parameters must be a JSON Schema of type 'object'; this one is {found}",
                suggestion="Write {'type': 'object', 'properties': {...}}; put a single value in a property.",
            )
        problem = json_problem(dict(params), "parameters")
        if problem:
            raise GoondanError("E_TOOL_DEFINITION_INVALID", f"tool {name!r}: {problem}")
        from ._argcheck import schema_problem

        problem = schema_problem(params)  # kept per distinct schema: instances register the same tools
        if problem is not None:  # else every call failed with jsonschema's own "Unknown type ..." error
            raise GoondanError(
                "E_TOOL_DEFINITION_INVALID",
                f"tool {name!r}: parameters is not a valid JSON Schema {problem}",
                suggestion="Fix the schema; it is JSON Schema Draft 2020-12 "
                "(https://json-schema.org/understanding-json-schema/reference).",
            )
        description = item.get("description", "")
        catalog_item: ToolCatalogItem = {
            "name": str(name),
            "description": description if isinstance(description, str) else str(description),
            "parameters": freeze_schema(dict(params)),
        }
        limit = item.get("errorMessageLimit", DEFAULT_ERROR_MESSAGE_LIMIT)
        self.add(
            ToolEntry(
                str(name),
                catalog_item,
                handler,
                error_limit=limit if isinstance(limit, int) and limit > 0 else DEFAULT_ERROR_MESSAGE_LIMIT,
                source={"type": "extension", "name": extension_name},
                parallel=item.get("parallel") is not False,
            )
        )

    # --- lookup --------------------------------------------------------------------------

    def get(self, name: str) -> ToolEntry | None:
        return self._entries.get(name)

    def names(self) -> list[str]:
        return list(self._entries)

    @property
    def version(self) -> int:
        return self._version

    def catalog(self) -> list[ToolCatalogItem]:
        """A fresh, mutable catalog list for one step. Items are new dicts; their ``parameters``
        schemas are shared frozen objects (replace them rather than editing in place)."""
        cache = self._catalog_cache
        if cache is None or cache[0] != self._version:
            cache = (self._version, [e.item for e in self._entries.values()])
            self._catalog_cache = cache
        return [item.copy() for item in cache[1]]


def _error(tool_call_id: str, tool_name: str, name: str, code: str, message: str, **extra: Any) -> ToolCallResult:
    err: dict[str, Any] = {"name": name, "code": code, "message": message}
    err.update({k: v for k, v in extra.items() if v is not None})
    return ToolCallResult(tool_call_id, tool_name, None, "error", err)


def error_from_exception(
    exc: BaseException, tool_call_id: str, tool_name: str, limit: int, *, keep_traceback: bool = True
) -> ToolCallResult:
    """Shape a handler exception as an error result, copying ``code``/``suggestion``/``helpUrl``.

    The traceback is kept in ``error["traceback"]`` for the runtime event and ``-v`` (the model gets
    only code, message and suggestion: see :func:`result_output_part`)."""
    if isinstance(exc, Exception):
        message = str(exc) or type(exc).__name__
        if isinstance(exc, KeyError) and not isinstance(exc, GoondanError):
            # str(KeyError('x')) is "'x'": the model and `gdn logs` got a bare quoted word
            message = f"{type(exc).__name__}: {message}"
        err: dict[str, Any] = {"name": type(exc).__name__, "message": truncate_message(message, limit)}
        for attr, key in (
            ("code", "code"),
            ("suggestion", "suggestion"),
            ("help_url", "helpUrl"),
            ("helpUrl", "helpUrl"),
        ):
            value = getattr(exc, attr, None)
            if isinstance(value, str) and value and key not in err:
                err[key] = value
        if isinstance(exc, GoondanError):
            err["message"] = truncate_message(exc.message, limit)
        if keep_traceback:
            err["traceback"] = format_traceback(exc)
        return ToolCallResult(tool_call_id, tool_name, None, "error", err)
    return ToolCallResult(
        tool_call_id, tool_name, None, "error", {"name": "Error", "message": "Unknown tool execution error"}
    )


class _ToolThreads:
    """Daemon worker threads for synchronous tool handlers.

    Not the loop's default executor (``asyncio.to_thread``): it is shared with the runtime's own
    blocking work (the local model, process waits), which a few slow tools would starve, and its
    threads are joined at exit, so a tool stuck in a blocking call would keep the host from exiting.
    Not a thread per call either: starting one costs more than handing work to a waiting one. A
    worker is started when none is idle (so calls never queue behind a slow one; the step's
    concurrency bound limits how many run) and leaves after :data:`IDLE_SECONDS` without work."""

    IDLE_SECONDS = 30.0

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget every worker: a forked child has none of its parent's threads."""
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0

    def submit(self, work: Callable[[], None]) -> None:
        with self._lock:  # the job is queued under the lock, so an idle worker counted here takes it
            if self._idle:
                self._idle -= 1
                self._jobs.put(work)
                return
        threading.Thread(target=self._worker, args=(work,), name="goondan-tool", daemon=True).start()

    def _worker(self, work: Callable[[], None]) -> None:
        while True:
            work()
            with self._lock:
                self._idle += 1
            while True:
                try:
                    work = self._jobs.get(timeout=self.IDLE_SECONDS)
                    break
                except queue.Empty:
                    with self._lock:
                        if self._jobs.empty():
                            self._idle -= 1
                            return


_THREADS = _ToolThreads()
os.register_at_fork(after_in_child=_THREADS.reset)


async def _in_thread(handler: Callable[..., Any], ctx: ToolContext, args: Any) -> Any:
    """``handler(ctx, args)`` on a tool worker thread (:class:`_ToolThreads`), in a copy of the
    current context (the output capture of :func:`~goondan._usercode.captured` follows it). A
    cancelled call stops waiting at once; the handler finishes on its own (threads cannot be stopped)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(error: BaseException | None, value: Any) -> None:
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        error: BaseException | None = None
        value: Any = None
        try:
            value = context.run(handler, ctx, args)
        except BaseException as exc:  # handed to the awaiting call, which shapes it like any failure
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
            loop.call_soon_threadsafe(settle, error, value)

    _THREADS.submit(work)
    return await future


def _is_async_callable(handler: Any) -> bool:
    """An ``async def`` function (or partial of one, or an object whose ``__call__`` is one)."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(type(handler).__call__)


# results of sync handlers that are certainly not awaitable (``inspect.isawaitable`` is slow for them)
_PLAIN_RESULTS = frozenset({dict, list, str, int, float, bool, type(None)})


async def execute_tool(
    registry: ToolRegistry,
    catalog: list[ToolCatalogItem],
    tool_name: str,
    tool_call_id: str,
    args: Any,
    make_context: Callable[[], ToolContext],
    in_thread: bool = False,  # positional from the engine: once per call
) -> ToolCallResult:
    """The core of the ``toolCall`` chain: the checks of docs/architecture.md#tools, in order, then the handler.

    With ``in_thread`` (set while other calls of the step run at the same time) a synchronous handler
    runs in a thread of its own (:func:`_in_thread`) so it cannot stall the event loop and the calls
    beside it. The thread runs in a copy of the current context, so the output capture set up here
    follows it. A lone
    call runs a synchronous handler in place: a thread hop would cost every one-call step."""
    item = None
    for candidate in catalog:
        if candidate.get("name") == tool_name:
            item = candidate
            break
    if item is None:
        return _error(
            tool_call_id,
            tool_name,
            "ToolNotInCatalogError",
            "E_TOOL_NOT_IN_CATALOG",
            f"Tool '{tool_name}' is not available in the current Tool Catalog.",
            suggestion=_catalog_hint(tool_name, catalog),
        )
    schema = item.get("parameters")
    issues = _argcheck.check_args(schema if isinstance(schema, dict) else None, args)
    entry = registry.get(tool_name)
    limit = entry.error_limit if entry is not None else DEFAULT_ERROR_MESSAGE_LIMIT
    if issues:
        return _error(
            tool_call_id,
            tool_name,
            "ToolInputValidationError",
            "E_TOOL_INVALID_ARGS",
            truncate_message(_argcheck.invalid_args_message(tool_name, issues), limit),
            suggestion=_argcheck.schema_hint(schema if isinstance(schema, dict) else None),
        )
    if entry is None or entry.handler is None:
        return _error(
            tool_call_id,
            tool_name,
            "ToolNotFoundError",
            "E_TOOL_NOT_FOUND",
            f"Tool '{tool_name}' has no handler.",
            suggestion="Export a handler for it in the Tool entry's `handlers` dict, or register it with "
            "api.tools.register.",
        )
    ctx = make_context()
    ctx.config = entry.config
    capture = captured(f"tool {tool_name}", ctx.logger)
    try:
        # ``with capture:`` spelled out (its __enter__ and __exit__ calls cost about a third of it)
        install_capture()
        token = user_output.set(capture)
        try:
            if in_thread and not entry.is_async:
                output = await _in_thread(entry.handler, ctx, args)
            else:
                output = entry.handler(ctx, args)
            if type(output) is CoroutineType or (type(output) not in _PLAIN_RESULTS and inspect.isawaitable(output)):
                output = await output
        finally:
            user_output.reset(token)
            if capture.parts or capture.dropped:
                capture.report()
    except Exception as exc:  # a tool failure never aborts the turn
        return error_from_exception(exc, tool_call_id, tool_name, limit)
    except SystemExit as exc:  # nor does sys.exit() in a tool end the host
        return error_from_exception(exit_error(f"tool '{tool_name}'", exc), tool_call_id, tool_name, limit)
    except KeyboardInterrupt as exc:  # nor a KeyboardInterrupt the tool raised itself (not a Ctrl+C)
        interrupt = interrupt_error(f"tool '{tool_name}'", exc)
        if interrupt is None:
            raise
        return error_from_exception(interrupt, tool_call_id, tool_name, limit)
    except asyncio.CancelledError as exc:  # nor a CancelledError the tool raised itself (not a cancellation)
        stray = stray_cancel(f"tool '{tool_name}'", "E_USER_CODE_CANCELLED", exc)
        if stray is None:
            raise
        return error_from_exception(stray, tool_call_id, tool_name, limit)
    try:
        value = to_json_value(output)
    except JsonDepthError:
        return not_json_result(tool_call_id, tool_name)
    return ToolCallResult(tool_call_id, tool_name, value, "ok", None)


def _catalog_hint(tool_name: str, catalog: list[ToolCatalogItem]) -> str:
    """The suggestion for a call of a tool the catalog lacks: the near name and what there is (a
    misspelt name in a python model or a script was answered 'call only tools listed' and nothing
    more, step after step, until maxStepsPerTurn)."""
    from ._hints import did_you_mean, join_hints  # the error path only

    names = [str(c.get("name")) for c in catalog]
    listing = ", ".join(names[:20]) + (f" (+{len(names) - 20} more)" if len(names) > 20 else "")
    return (
        join_hints(
            did_you_mean(tool_name, names),
            f"Call only tools listed in this step's tool catalog: {listing}" if names else "This step offers no tools.",
        )
        or ""
    )


def recent_tool_errors(messages: Any, limit: int = 3) -> list[str]:
    """``name: CODE`` of the error results among the trailing tool messages of ``messages`` (what
    the last step's calls got), at most ``limit``: said when a turn stops at maxStepsPerTurn."""
    found: list[str] = []
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role != "tool":
            break
        content = message.data.get("content")
        for part in content if isinstance(content, list) else ():
            output = part.get("output") if isinstance(part, Mapping) else None
            if isinstance(output, Mapping) and output.get("type") == "error-json":
                value = output.get("value")
                code = value.get("code") if isinstance(value, Mapping) else None
                found.append(f"{part.get('toolName')}: {code}")
    return found[::-1][:limit]


def not_json_result(tool_call_id: str, tool_name: str) -> ToolCallResult:
    return _error(
        tool_call_id,
        tool_name,
        "ToolResultError",
        "E_TOOL_RESULT_NOT_JSON",
        f"Tool '{tool_name}' returned a value nested deeper than {MAX_VALUE_DEPTH} levels; it cannot be stored.",
        suggestion=f"Return JSON at most {MAX_VALUE_DEPTH} levels deep (flatten the result).",
    )


def stored_output_part(result: ToolCallResult, max_bytes: int) -> tuple[ToolCallResult, dict[str, Any]]:
    """The result to record for a finished tool call and its frozen ``output`` part, guaranteed
    storable and at most ``max_bytes`` of JSON, so that the call is always answered.

    Whatever the handler or a middleware returned, one of three things happens: it is stored as it
    is (the fast path: one encode, which also gives the size); it is repaired (integers beyond 64
    bits become decimal strings, lone surrogates U+FFFD — see :func:`~goondan._json.repair_json`);
    or it becomes an error result (``E_TOOL_RESULT_NOT_JSON`` for nesting deeper than
    ``MAX_VALUE_DEPTH``, ``E_TOOL_RESULT_TOO_LARGE`` above ``max_bytes``)."""
    part: dict[str, Any] | None
    try:
        part = result_output_part(result)
    except JsonDepthError:
        part = None
    size = None if part is None else encoded_size(part)
    if part is not None and size is None:
        try:
            part = freeze_json(repair_json(part, MAX_RECORD_DEPTH))
        except JsonDepthError:
            part = None
        else:
            size = encoded_size(part)
    if part is None or size is None:
        result = not_json_result(result.tool_call_id, result.tool_name)
        return result, result_output_part(result)
    if size > max_bytes:
        result = _error(
            result.tool_call_id,
            result.tool_name,
            "ToolResultError",
            "E_TOOL_RESULT_TOO_LARGE",
            f"Tool '{result.tool_name}' returned {size} bytes of JSON; the limit is {max_bytes} bytes. "
            "The result was not kept.",
            suggestion="Ask for less (a narrower query, a line range, a page of results) or have the tool "
            "write large data to a file in its working directory and return the path.",
        )
        part = result_output_part(result)
    return result, part


def result_output_part(result: ToolCallResult) -> dict[str, Any]:
    """The ``output`` of the tool-result part recorded in the conversation (docs/architecture.md#messages), frozen:
    ``error-json`` for errors, ``text`` for strings, ``json`` for anything else (an output already
    shaped ``{type: text|json, value}`` is kept). Middleware may have replaced the executor's output
    with any value, so it is coerced to JSON here, in the same pass that freezes it."""
    if result.status == "error":
        err: Any = result.error
        if not isinstance(err, Mapping):  # a middleware's own ToolCallResult(..., error="denied"): its text
            err = {} if err is None else {"message": str(err)}
        value: dict[str, Any] = {"code": err.get("code") or "E_TOOL_ERROR", "message": err.get("message", "")}
        if err.get("suggestion"):
            value["suggestion"] = err["suggestion"]
        return to_frozen_json({"type": "error-json", "value": value})  # type: ignore[no-any-return]
    out = to_frozen_json(result.output)
    if isinstance(out, str):
        return FrozenDict({"type": "text", "value": out})
    if isinstance(out, dict) and len(out) == 2 and "value" in out and out.get("type") in ("text", "json"):
        return out
    return FrozenDict({"type": "json", "value": out})


__all__ = [
    "ToolContext",
    "ToolEntry",
    "ToolRegistry",
    "error_from_exception",
    "execute_tool",
    "not_json_result",
    "recent_tool_errors",
    "result_output_part",
    "split_tool_name",
    "stored_output_part",
    "truncate_message",
]
