"""Inter-agent calls: ``ctx.agents`` (turn/step middleware) and ``ctx.runtime`` of tool handlers.

Both go through one routing path (:meth:`AgentsHub.request`), so the rules are the same whichever
way a call starts: the target instance is spawned on demand, the caller's trace id and ``auth`` are
carried over, the callee turn's parent span is the caller's span, and every call carries the call
stack so that a cycle of waiting calls (A→B→A, through tools, middleware or both, and self-calls)
fails at once with ``CIRCULAR_CALL_DETECTED`` instead of deadlocking until a timeout. A send or an
async request waits on nobody, so it never closes a cycle, and the agents before it on the stack do
not wait on what follows (a worker may answer a coordinator's ``agents__send`` with a request or a
send of its own).

The call stack also bounds how deep a chain may go (``Swarm.spec.policy.maxCallDepth``, default 8
hops): without it a chain that uses a new instance key on every hop never closes a cycle and forks
an instance per hop. Wherever instances live, a :class:`SpawnLimiter` holds agents to a swarm-wide
rate of new instances and a cap on live ones; the host's own requests are not limited (they are the
operator's traffic, not a runaway swarm).

Where the target runs is the :class:`HubBackend`'s business, which the executors
(``goondan.executors``) provide: the inline executor runs it in this process, an agent process hands
the event to the host's executor, which routes it to the target. Event shapes, the call stack,
timeouts and the async inbox are handled here, once, for all of them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from .._hints import did_you_mean, join_hints
from .._ids import new_id, now_iso
from .._json import copy_json
from ..errors import AgentRequestError, GoondanError
from ..messages import user_message
from ._output import validate_answer

if TYPE_CHECKING:
    from ..pipeline import TurnState
    from ._instance import AgentInstance

log = logging.getLogger("goondan.runtime")

DEFAULT_TIMEOUT_MS = 60000
INBOX_LIMIT = 256
DEFAULT_MAX_CALL_DEPTH = 8
DEFAULT_SPAWNS_PER_SECOND = 20.0
DEFAULT_MAX_INSTANCES = 1024


@dataclasses.dataclass(frozen=True, slots=True)
class AgentLimits:
    """Bounds on inter-agent calls, from ``Swarm.spec.policy`` (``maxCallDepth``,
    ``maxInstanceSpawnsPerSecond``, ``maxInstances``)."""

    max_call_depth: int = DEFAULT_MAX_CALL_DEPTH
    spawns_per_second: float = DEFAULT_SPAWNS_PER_SECOND
    max_instances: int = DEFAULT_MAX_INSTANCES

    @classmethod
    def from_policy(cls, policy: Any) -> AgentLimits:
        if policy is None:
            return cls()
        depth = getattr(policy, "max_call_depth", None)
        rate = getattr(policy, "max_instance_spawns_per_second", None)
        cap = getattr(policy, "max_instances", None)
        return cls(
            max_call_depth=int(depth) if depth is not None else DEFAULT_MAX_CALL_DEPTH,
            spawns_per_second=float(rate) if rate is not None else DEFAULT_SPAWNS_PER_SECOND,
            max_instances=int(cap) if cap is not None else DEFAULT_MAX_INSTANCES,
        )


def check_call_depth(chain: list[str], target_node: str, limit: int, target: str) -> None:
    """``chain`` holds every agent the call passed through, the caller last: its length is the hop
    count the new call would make."""
    if len(chain) > limit:
        shown = chain if len(chain) <= 6 else [*chain[:2], "...", *chain[-3:]]
        raise AgentRequestError(
            "E_AGENT_CALL_DEPTH",
            f"the inter-agent call to '{target}' would be hop {len(chain)} of a chain limited to {limit} "
            f"(maxCallDepth): {' -> '.join([*shown, target_node])}",
            target=target,
            suggestion="Answer without delegating further, or raise Swarm.spec.policy.maxCallDepth if the "
            "swarm really needs deeper chains.",
        )


class SpawnLimiter:
    """Swarm-wide admission of new instances that agents ask for: a token bucket (capacity one
    second's worth, at least one) for the rate and a cap on live instances. One limiter serves the
    whole swarm: its executor's."""

    def __init__(self, limits: AgentLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.limits = limits
        self._tokens = max(1.0, limits.spawns_per_second)
        self._at = clock()

    def update(self, limits: AgentLimits) -> None:
        self.limits = limits
        self._tokens = min(self._tokens, max(1.0, limits.spawns_per_second))

    def admit(self, target: str, key: str, live: int) -> None:
        """Take one new instance ``target@key`` (``live`` instances exist now) or raise
        ``E_AGENT_SPAWN_LIMIT``."""
        limits = self.limits
        if live >= limits.max_instances:
            raise AgentRequestError(
                "E_AGENT_SPAWN_LIMIT",
                f"agent '{target}' instance '{key}' not created: {live} instances are live and the swarm "
                f"allows {limits.max_instances} (maxInstances)",
                target=target,
                suggestion="Reuse an existing instance key, let idle instances be evicted "
                "(policy.lifecycle.ttlSeconds), or raise Swarm.spec.policy.maxInstances.",
            )
        now = self._clock()
        rate = limits.spawns_per_second
        self._tokens = min(max(1.0, rate), self._tokens + (now - self._at) * rate)
        self._at = now
        if self._tokens < 1.0:
            raise AgentRequestError(
                "E_AGENT_SPAWN_LIMIT",
                f"agent '{target}' instance '{key}' not created: agents may create {rate:g} new instances "
                "per second in this swarm (maxInstanceSpawnsPerSecond)",
                target=target,
                suggestion="Reuse instance keys, create instances more slowly, or raise "
                "Swarm.spec.policy.maxInstanceSpawnsPerSecond.",
            )
        self._tokens -= 1.0


def normalize_timeout(value: Any) -> int:
    """Positive finite integers are kept; anything else means the default (60 s)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return DEFAULT_TIMEOUT_MS
    if not math.isfinite(value) or value <= 0 or int(value) != value:
        return DEFAULT_TIMEOUT_MS
    return int(value)


@dataclasses.dataclass(slots=True)
class AgentRequestResult:
    target: str
    response: str
    correlation_id: str
    accepted: bool = True
    async_: bool = False
    event_id: str = ""
    instance_key: str = ""
    # the target's parsed JSON answer when it has Agent.spec.output (its ``response`` is that JSON)
    output: Any = None


@dataclasses.dataclass(slots=True)
class AgentSendResult:
    accepted: bool
    target: str = ""
    event_id: str = ""


def _node(agent: str, key: str) -> str:
    return f"{agent}@{key}"


# An event's metadata key: how many leading entries of its call stack do not wait for its turn
# (the entries up to and including the sender of an agents__send or of an async request). Absent
# when every entry waits.
WAITS_FROM_KEY = "__goondanAgentCallWaitsFrom"


def waiting_from(meta: Mapping[str, Any]) -> int:
    """Where the agents that wait on this event's turn start in its call stack (0: all of them)."""
    value = meta.get(WAITS_FROM_KEY)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class SwarmDirectory(Protocol):
    @property
    def swarm_name(self) -> str: ...

    @property
    def entry_agent(self) -> str: ...

    @property
    def agent_names(self) -> frozenset[str]: ...

    @property
    def max_call_depth(self) -> int: ...

    def output_schema(self, agent: str) -> dict[str, Any] | None: ...


class HubBackend(Protocol):
    """Where inter-agent events go. ``run_request`` returns the callee's final text or raises
    :class:`AgentRequestError`; it must not cancel the callee's turn when it is itself cancelled
    (a timed-out caller leaves the callee running, as a separate process would)."""

    async def run_request(self, target: str, key: str, event: dict[str, Any]) -> str: ...

    async def run_send(self, target: str, key: str, event: dict[str, Any]) -> None: ...

    async def spawn(self, owner: tuple[str, str], target: str, key: str, cwd: str | None) -> dict[str, Any]: ...

    async def list(self, owner: tuple[str, str], include_all: bool) -> dict[str, Any]: ...


class WaitGraph:
    """Whose running turn waits on whom: an edge ``a -> b`` for each synchronous request under way
    from instance ``a`` (``agent@key``) to ``b``. A request ``x -> y`` while ``y`` (through others)
    waits on ``x`` can never be answered: ``x``'s request queues behind ``y``'s turn, which waits on
    ``x``'s turn. The call stack cannot see it when the two chains started apart (a send, an async
    request); this graph can. Touched only by inter-agent requests."""

    def __init__(self) -> None:
        self._edges: dict[str, list[str]] = {}

    def path(self, start: str, goal: str) -> list[str] | None:
        """The nodes from ``start`` to ``goal`` along waits (both included), or None."""
        if not self._edges:
            return None
        came: dict[str, str | None] = {start: None}
        todo = [start]
        while todo:
            node = todo.pop()
            if node == goal:
                out = [node]
                while (prev := came[out[-1]]) is not None:
                    out.append(prev)
                return out[::-1]
            for nxt in self._edges.get(node, ()):
                if nxt not in came:
                    came[nxt] = node
                    todo.append(nxt)
        return None

    def add(self, waiter: str, target: str) -> None:
        self._edges.setdefault(waiter, []).append(target)

    def remove(self, waiter: str, target: str) -> None:
        targets = self._edges.get(waiter)
        if targets is not None and target in targets:
            targets.remove(target)
            if not targets:
                del self._edges[waiter]

    def drop(self, waiter: str) -> None:
        """``waiter``'s turn is gone (its process ended): it waits on nothing any more."""
        self._edges.pop(waiter, None)


def waiting_cycle(target: str, caller_node: str, path: list[str]) -> AgentRequestError:
    """The error of a synchronous request to ``target`` whose turn (``path[0]``) already waits, along
    ``path``, on the caller."""
    chain = " -> ".join([caller_node, *path])
    return AgentRequestError(
        "CIRCULAR_CALL_DETECTED",
        f"Circular call detected: {chain} ('{path[0]}' is waiting on '{caller_node}')",
        target=target,
        suggestion="An agent cannot (indirectly) call itself while the first call is still open; "
        "use agents__send for fire-and-forget, or restructure the delegation.",
    )


class SpawnRegistry:
    """``agents__spawn`` / ``agents__list`` bookkeeping: which instances each owner spawned."""

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], list[dict[str, Any]]] = {}

    def record(self, owner: tuple[str, str], target: str, key: str, cwd: str | None) -> bool:
        """Record a spawn; ``False`` when this owner already had that instance."""
        records = self._records.setdefault(owner, [])
        if any(r["target"] == target and r["instanceKey"] == key for r in records):
            return False
        records.append(
            {
                "target": target,
                "instanceKey": key,
                "ownerAgent": owner[0],
                "ownerInstanceKey": owner[1],
                "createdAt": now_iso(),
                "cwd": cwd,
            }
        )
        return True

    def list(self, owner: tuple[str, str], include_all: bool) -> dict[str, Any]:
        if include_all:
            agents = [r for records in self._records.values() for r in records]
        else:
            agents = list(self._records.get(owner, []))
        agents.sort(key=lambda r: r["createdAt"])
        return {"agents": copy_json(agents)}


def delivery_failed(target: str, exc: BaseException) -> AgentRequestError:
    if isinstance(exc, GoondanError) and exc.code == "E_AGENT_PROCESS_EXITED":
        # the target took the request and its process died under the turn: not a start failure
        return AgentRequestError(
            "AGENT_REQUEST_FAILED",
            f"agent '{target}' failed to handle the request: [{exc.code}] {exc.message}",
            target=target,
            suggestion=f"`gdn logs --agent {target} -v` shows that turn up to where the process ended (a tool "
            "or model that exits it: os._exit, a signal, the OOM killer); the next request starts a new one.",
        )
    detail = exc.message if isinstance(exc, GoondanError) else f"{type(exc).__name__}: {exc}"
    code = f" [{exc.code}]" if isinstance(exc, GoondanError) else ""
    return AgentRequestError(
        "IPC_DELIVERY_FAILED",
        f"agent '{target}' could not take the request{code}: {detail}",
        target=target,
        suggestion=f"Check that agent '{target}' starts: its tools, extensions and model load "
        f"(`gdn logs --agent {target} -v` shows a tool.loadFailed or extension.failed event with the traceback).",
    )


def send_failed(target: str, key: str, exc: BaseException) -> None:
    """Log a send that could not be delivered (nobody waits for it): a coded error in one line with
    its suggestion, its traceback only at debug level; anything else is a bug, logged with it."""
    if not isinstance(exc, GoondanError):
        log.error("a send to %s@%s failed", target, key, exc_info=exc)
        return
    err = exc if exc.code == "IPC_DELIVERY_FAILED" else delivery_failed(target, exc)
    quiet = exc.code == "E_RUNTIME_CLOSED"  # sent while the runtime closes: expected
    tail = f" ({err.suggestion})" if err.suggestion else ""
    log.log(
        logging.DEBUG if quiet else logging.WARNING,
        "a send to %s@%s was not delivered: [%s] %s%s",
        target,
        key,
        err.code,
        err.message,
        tail,
    )
    log.debug("the send's error", exc_info=exc)


def request_failed(target: str, error: Mapping[str, Any] | None) -> AgentRequestError:
    """The error a caller gets for a request whose turn on ``target`` failed with ``error`` (its
    TurnResult error): the callee's own code leads the message, and the suggestion says where its
    traceback is, since the caller's log does not have it (the same from every executor)."""
    error = error or {}
    code = error.get("code")
    detail = f"[{code}] " if code else ""
    suggestion = f"`gdn logs --agent {target} -v` shows what failed (its turn.failed event, with the traceback)."
    if code == "E_IPC_FRAME_TOO_LARGE" and error.get("suggestion"):
        # the turn itself completed (there is no turn.failed): its answer could not reach the caller
        suggestion = str(error["suggestion"])
    return AgentRequestError(
        "AGENT_REQUEST_FAILED",
        f"agent '{target}' failed to handle the request: {detail}{error.get('message') or 'unknown error'}",
        target=target,
        suggestion=suggestion,
    )


def agent_not_found(target: str, swarm: str, names: Iterable[str]) -> AgentRequestError:
    """A call to an agent the swarm does not have: the near name first (a typo), then all of them."""
    names = sorted(names)
    return AgentRequestError(
        "AGENT_NOT_FOUND",
        f"agent '{target}' is not part of swarm '{swarm}'",
        target=target,
        suggestion=join_hints(did_you_mean(target, names), f"Call one of: {', '.join(names)}."),
    )


# turn endings that leave a request without an answer (besides "error", see request_failed)
UNANSWERED = frozenset({"cancelled", "awaiting_approval"})


def request_unanswered(target: str, finish_reason: str, pending: Iterable[Any] = ()) -> AgentRequestError:
    """The error a caller gets when the target's turn ended without an answer: it was cancelled, or
    it paused for a person's approval (``pending``: its PendingApproval objects or their dicts).
    Without it the caller read an empty response as if the target had answered."""
    if finish_reason == "awaiting_approval":
        calls = []
        for item in pending:
            data = item.to_dict() if hasattr(item, "to_dict") else item
            if isinstance(data, Mapping):
                calls.append(f"{data.get('toolName')} (approval {data.get('approvalId')})")
        waiting = ", ".join(calls) or "a tool call"
        return AgentRequestError(
            "AGENT_AWAITING_APPROVAL",
            f"agent '{target}' has not answered: its turn waits for a person to approve {waiting}",
            target=target,
            suggestion="A person decides with `gdn approvals list` and `gdn approvals approve ID` (or deny); the "
            f"turn then finishes in {target}'s own conversation, not as the answer to this call. Do not ask "
            f"{target} again before that: a new request denies the waiting call.",
        )
    return AgentRequestError(
        "AGENT_REQUEST_CANCELLED",
        f"agent '{target}' has not answered: its turn was cancelled",
        target=target,
        suggestion="Someone cancelled that turn (rt.cancel, Ctrl+C in gdn run, a connector's /cancel); ask again "
        "if the work is still needed.",
    )


class AgentsHub:
    """Routes inter-agent events from the instances of one process through a backend."""

    def __init__(self, directory: SwarmDirectory, backend: HubBackend) -> None:
        self._directory = directory
        self.backend = backend
        self._tasks: set[asyncio.Task[Any]] = set()
        self.waits = WaitGraph()

    def track(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def busy(self) -> bool:
        return bool(self._tasks)

    def tasks(self) -> list[asyncio.Task[Any]]:
        """The background deliveries and async requests under way (an interrupt cancels them)."""
        return list(self._tasks)

    def middleware_api(self, instance: AgentInstance, turn_state: TurnState) -> MiddlewareAgents:
        return MiddlewareAgents(self, instance, turn_state)

    def tool_runtime(self, instance: AgentInstance, turn_state: TurnState, span_id: str | None) -> ToolRuntime:
        return ToolRuntime(self, instance, turn_state, span_id)

    # --- routing ------------------------------------------------------------------------------

    def _build_event(
        self,
        caller: AgentInstance,
        turn_state: TurnState,
        target: str,
        text: Any,
        key: str,
        metadata: dict[str, Any] | None,
        *,
        event_type: str,
        call_source: str,
        parent_span: str | None,
        correlation_id: str | None,
        waits: bool,
    ) -> dict[str, Any]:
        inbound = turn_state.input_event
        inbound_meta = inbound.get("metadata") or {}
        stack = inbound_meta.get("__goondanAgentCallStack")
        stack = [str(s) for s in stack] if isinstance(stack, list) else []
        stack = [*stack, _node(caller.agent_name, caller.instance_key)]
        target_node = _node(target, key)
        # Only the agents that wait on this call can close a cycle: the stack's entries from
        # ``waits_from`` on (a send or an async request before them waits on nobody). A call that does
        # not wait itself (send, async request) cannot deadlock: it starts a new run of waiters.
        waits_from = waiting_from(inbound_meta)
        if waits and target_node in stack[waits_from:]:
            chain = " -> ".join([*stack, target_node])
            raise AgentRequestError(
                "CIRCULAR_CALL_DETECTED",
                f"Circular call detected: {chain}",
                target=target,
                suggestion="An agent cannot (indirectly) call itself while the first call is still open; "
                "use agents__send for fire-and-forget, or restructure the delegation.",
            )
        check_call_depth(stack, target_node, self._directory.max_call_depth, target)
        meta: dict[str, Any] = copy_json(metadata) if isinstance(metadata, dict) else {}
        if not waits:
            meta[WAITS_FROM_KEY] = len(stack)
        elif waits_from:
            meta[WAITS_FROM_KEY] = waits_from
        meta.update(
            {
                "__goondanAgentCallStack": stack,
                "callerAgent": caller.agent_name,
                "callerInstanceKey": caller.instance_key,
                "callerTurnId": turn_state.turn_id,
                "callSource": call_source,
            }
        )
        if parent_span:
            meta["__goondanParentSpanId"] = parent_span
        event: dict[str, Any] = {
            "id": new_id("evt"),
            "type": event_type,
            "createdAt": now_iso(),
            "traceId": turn_state.trace_id,
            "input": text if isinstance(text, str) else ("" if text is None else str(text)),
            "instanceKey": key,
            "source": {"kind": "agent", "name": caller.agent_name},
            "metadata": meta,
        }
        if "auth" in inbound:
            event["auth"] = copy_json(inbound["auth"])
        if correlation_id is not None:
            event["replyTo"] = {"target": caller.agent_name, "correlationId": correlation_id}
        return event

    def _check_target(self, target: Any) -> str:
        if not isinstance(target, str) or not target:
            raise AgentRequestError("AGENT_NOT_FOUND", "target must be a non-empty agent name", target=None)
        names = self._directory.agent_names
        if target not in names:
            raise agent_not_found(target, self._directory.swarm_name, names)
        return target

    async def request(
        self,
        caller: AgentInstance,
        turn_state: TurnState,
        target: Any,
        text: Any,
        *,
        instance_key: str | None,
        timeout_ms: Any,
        async_: bool,
        metadata: dict[str, Any] | None,
        call_source: str,
        parent_span: str | None,
    ) -> AgentRequestResult:
        target = self._check_target(target)
        key = instance_key or caller.instance_key
        correlation_id = f"corr_{new_id('r')[2:]}"
        event = self._build_event(
            caller,
            turn_state,
            target,
            text,
            key,
            metadata,
            event_type="agent.request",
            call_source=call_source,
            parent_span=parent_span,
            correlation_id=correlation_id,
            waits=not async_,
        )
        timeout = normalize_timeout(timeout_ms)
        if async_:
            task = asyncio.get_running_loop().create_task(
                self._async_request(caller, turn_state.turn_id, target, key, event, timeout, correlation_id)
            )
            self.track(task)
            return AgentRequestResult(target, "", correlation_id, True, True, event["id"], key)
        caller_node, target_node = _node(caller.agent_name, caller.instance_key), _node(target, key)
        path = self.waits.path(target_node, caller_node)
        if path is not None:
            raise waiting_cycle(target, caller_node, path)
        self.waits.add(caller_node, target_node)
        try:
            response = await self._run(target, key, event, timeout)
        finally:
            self.waits.remove(caller_node, target_node)
        output = self._structured_output(target, response)
        return AgentRequestResult(target, response, correlation_id, True, False, event["id"], key, output)

    def _structured_output(self, target: str, response: str) -> Any:
        """The parsed answer of a target with ``Agent.spec.output``, else None: callers get the
        value, not only its text. Checked again here because a turn that stopped at maxStepsPerTurn
        returns its last text unvalidated."""
        schema = self._directory.output_schema(target)
        if schema is None:
            return None
        value, issues = validate_answer(schema, response)
        return None if issues else value

    async def _run(self, target: str, key: str, event: dict[str, Any], timeout_ms: int) -> str:
        """The target's reply, or AGENT_REQUEST_TIMEOUT once ``timeout_ms`` has passed.

        The deadline is checked again when the request ends: inline, a target whose tool or model
        blocks the event loop (synchronous code) keeps the timer from firing until it returns, and
        its turn may then finish before the timer's callback runs; its late reply (or error) must
        not reach the caller as if in time. The target's turn itself runs on (see docs: timeoutMs)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        try:
            async with asyncio.timeout_at(deadline):
                response = await self.backend.run_request(target, key, event)
        except TimeoutError:
            raise self._timed_out(target, timeout_ms) from None
        except Exception:
            if loop.time() >= deadline:
                raise self._timed_out(target, timeout_ms) from None
            raise
        if loop.time() >= deadline:
            raise self._timed_out(target, timeout_ms)
        return response

    @staticmethod
    def _timed_out(target: str, timeout_ms: int) -> AgentRequestError:
        return AgentRequestError(
            "AGENT_REQUEST_TIMEOUT",
            f"Agent request to '{target}' timed out after {timeout_ms}ms",
            target=target,
            suggestion="Raise timeoutMs, or use an async request and read the reply later.",
        )

    async def _async_request(
        self,
        caller: AgentInstance,
        caller_turn_id: str,
        target: str,
        key: str,
        event: dict[str, Any],
        timeout_ms: int,
        correlation_id: str,
    ) -> None:
        status = "ok"
        payload: dict[str, Any] = {}
        try:
            payload["response"] = await self._run(target, key, event, timeout_ms)
            output = self._structured_output(target, payload["response"])
            if output is not None:
                payload["output"] = output
        except AgentRequestError as exc:
            status = "timeout" if exc.code == "AGENT_REQUEST_TIMEOUT" else "error"
            payload["error"] = {"code": exc.code, "message": exc.message}
        except Exception as exc:
            status = "error"
            payload["error"] = {"code": "AGENT_REQUEST_ERROR", "message": str(exc)}
        marker: dict[str, Any] = {
            "kind": "inter_agent_response",
            "version": 1,
            "requestId": correlation_id,
            "requestEventId": event["id"],
            "fromAgentId": target,
            "toAgentId": caller.agent_name,
            "async": True,
            "status": status,
            "receivedAt": now_iso(),
            "traceId": event.get("traceId"),
            "requestEventType": event.get("type"),
        }
        _internal = ("callerAgent", "callerInstanceKey", "callerTurnId", "callSource")
        request_meta = {
            k: v for k, v in (event.get("metadata") or {}).items() if not k.startswith("__") and k not in _internal
        }
        if request_meta:
            marker["requestMetadata"] = request_meta
        if "error" in payload:
            marker["errorCode"] = payload["error"]["code"]
            marker["errorMessage"] = payload["error"]["message"]
        content = {
            "type": "inter_agent_response",
            "requestId": correlation_id,
            "fromAgentId": target,
            "toAgentId": caller.agent_name,
            "status": status,
            **payload,
        }
        from .._json import dumps_str

        message = user_message(
            dumps_str(content),
            {"__goondanInterAgentResponse": marker, "traceId": event.get("traceId")},
            source={"type": "system"},
        )
        await caller.deliver_inter_agent_response(message)

    async def send(
        self,
        caller: AgentInstance,
        turn_state: TurnState,
        target: Any,
        text: Any,
        *,
        instance_key: str | None,
        metadata: dict[str, Any] | None,
        call_source: str,
        parent_span: str | None,
    ) -> AgentSendResult:
        try:
            target = self._check_target(target)
        except AgentRequestError:
            return AgentSendResult(False, str(target))
        key = instance_key or caller.instance_key
        event = self._build_event(
            caller,
            turn_state,
            target,
            text,
            key,
            metadata,
            event_type="agent.send",
            call_source=call_source,
            parent_span=parent_span,
            correlation_id=None,
            waits=False,
        )
        task = asyncio.get_running_loop().create_task(self._run_send(target, key, event))
        self.track(task)
        return AgentSendResult(True, target, event["id"])

    async def _run_send(self, target: str, key: str, event: dict[str, Any]) -> None:
        try:
            await self.backend.run_send(target, key, event)
        except Exception as exc:
            send_failed(target, key, exc)

    async def spawn(
        self, caller: AgentInstance, target: Any, instance_key: str | None, cwd: str | None
    ) -> dict[str, Any]:
        target = self._check_target(target)
        key = instance_key or f"{target}-instance-{new_id('k')[2:14]}"
        return await self.backend.spawn((caller.agent_name, caller.instance_key), target, key, cwd)

    async def list(self, caller: AgentInstance, include_all: bool = False) -> dict[str, Any]:
        return await self.backend.list((caller.agent_name, caller.instance_key), include_all)

    def catalog(self, caller: AgentInstance) -> dict[str, Any]:
        available = sorted(self._directory.agent_names)
        return {
            "swarmName": self._directory.swarm_name,
            "entryAgent": self._directory.entry_agent,
            "selfAgent": caller.agent_name,
            "availableAgents": available,
            "callableAgents": [a for a in available if a != caller.agent_name],
        }

    async def drain(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


class _AgentsCaller:
    """request/send for one turn, tagged with where the call comes from and the span it hangs under;
    middleware and tools use the same routing path and differ only in those two."""

    __slots__ = ("_hub", "_instance", "_source", "_span", "_turn_state")

    def __init__(
        self, hub: AgentsHub, instance: AgentInstance, turn_state: TurnState, span: str | None, source: str
    ) -> None:
        self._hub = hub
        self._instance = instance
        self._turn_state = turn_state
        self._span = span
        self._source = source

    def _parent_span(self) -> str | None:
        return self._span

    async def request(
        self,
        target: str,
        input: str | None = None,
        *,
        instance_key: str | None = None,
        timeout_ms: int | None = None,
        async_: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> AgentRequestResult:
        return await self._hub.request(
            self._instance,
            self._turn_state,
            target,
            input,
            instance_key=instance_key,
            timeout_ms=timeout_ms,
            async_=async_,
            metadata=metadata,
            call_source=self._source,
            parent_span=self._parent_span(),
        )

    async def send(
        self,
        target: str,
        input: str | None = None,
        *,
        instance_key: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> AgentSendResult:
        return await self._hub.send(
            self._instance,
            self._turn_state,
            target,
            input,
            instance_key=instance_key,
            metadata=metadata,
            call_source=self._source,
            parent_span=self._parent_span(),
        )


class MiddlewareAgents(_AgentsCaller):
    """``ctx.agents`` in turn and step middleware. Failures raise :class:`AgentRequestError`."""

    __slots__ = ()

    def __init__(self, hub: AgentsHub, instance: AgentInstance, turn_state: TurnState) -> None:
        super().__init__(hub, instance, turn_state, None, "extension-middleware")

    def _parent_span(self) -> str | None:
        # the turn span is known only once the turn has started
        return getattr(self._turn_state.internal, "span_id", None)


class ToolRuntime(_AgentsCaller):
    """``ctx.runtime`` of tool handlers: request/send/spawn/list/catalog over the same routing path."""

    __slots__ = ()

    def __init__(self, hub: AgentsHub, instance: AgentInstance, turn_state: TurnState, span: str | None) -> None:
        super().__init__(hub, instance, turn_state, span, "tool")

    async def spawn(self, target: str, *, instance_key: str | None = None, cwd: str | None = None) -> dict[str, Any]:
        return await self._hub.spawn(self._instance, target, instance_key, cwd)

    async def list(self, *, include_all: bool = False) -> dict[str, Any]:
        return await self._hub.list(self._instance, include_all)

    async def catalog(self) -> dict[str, Any]:
        return self._hub.catalog(self._instance)


__all__ = [
    "WAITS_FROM_KEY",
    "AgentLimits",
    "AgentRequestResult",
    "AgentSendResult",
    "AgentsHub",
    "HubBackend",
    "MiddlewareAgents",
    "SpawnLimiter",
    "SpawnRegistry",
    "ToolRuntime",
    "WaitGraph",
    "check_call_depth",
    "delivery_failed",
    "request_failed",
    "request_unanswered",
    "send_failed",
    "waiting_cycle",
    "waiting_from",
]
