"""The process executor: one OS process per agent instance, supervised by the :class:`Orchestrator`.

This module adapts the orchestrator to the :class:`~goondan.executors.Executor` protocol and keeps
what only a process boundary needs: the fork server's start parameters (read from the host's current
swarm context, so a reload forks from the new bundle), where a process's raw output is kept, the
grace period of a graceful close, and marking instances ``idle`` on disk when their process died
mid-turn (a dead process cannot do it itself).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import dataclasses
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...engine import UNANSWERED, SwarmContext, delivery_failed, request_failed, request_unanswered
from ...errors import AgentRequestError, GoondanError
from ...messages import Message
from ...results import PendingApproval, TurnResult
from .._listeners import Listeners
from .._protocol import ExecutorHost, ExecutorOptions, RuntimeEventListener
from ._orchestrator import CANCEL_GRACE_MS, InstanceHandle, Orchestrator

if TYPE_CHECKING:
    from ...storage import InstanceInfo

log = logging.getLogger("goondan.runtime")


def turn_result_from_dict(data: dict[str, Any]) -> TurnResult:
    """A turn result as an agent process reports it (JSON over IPC). Its response message is
    checked like a stored one (the agent process runs user code: a turn middleware may have put
    anything there). Called once per process-isolated turn: TurnResult's fields go positionally
    (turn_id, response_message, finish_reason, error, text, output, pending_approvals), which
    costs less than half of the keyword call."""
    record = data.get("responseMessage")
    approvals = data.get("pendingApprovals")
    return TurnResult(
        str(data.get("turnId") or ""),
        Message.from_record(record) if isinstance(record, dict) else None,
        data.get("finishReason") or "error",
        data.get("error"),
        data.get("text"),
        data.get("output"),
        [PendingApproval.from_dict(p) for p in approvals if isinstance(p, dict)] if approvals else [],
    )


@dataclasses.dataclass(slots=True)
class DirectTarget:
    """A streamed connector event whose turn sends its text deltas from its agent process straight
    to the connector host (see ``_direct_stream``). ``used``: a turn was dispatched with it;
    ``broken``: that turn could not deliver every delta and its end marker (the connector must not
    wait for them). ``fallback``: where its deltas go when the agent process cannot open the
    stream (they come through here instead, see ``_direct_stream``)."""

    wire: dict[str, Any]
    key: tuple[str, str, str]  # (trace id, agent, instance key) of its turn
    used: bool = False
    broken: bool = False
    fallback: Callable[[dict[str, Any]], None] | None = None


class ProcessExecutor:
    """Runs every instance in its own OS process (``executor="process"``, the default)."""

    name = "process"

    def __init__(self, options: ExecutorOptions | None = None) -> None:
        self.options = options or ExecutorOptions()
        self._host: ExecutorHost | None = None
        self._orch: Orchestrator | None = None
        self._listeners = Listeners()
        # direct streams waiting for their turn, by (trace id, agent, instance key)
        self._direct: dict[tuple[str, str, str], DirectTarget] = {}
        # agent processes are forked on this machine (not actors elsewhere): they can reach a
        # connector's Unix socket
        self._local = type(self)._make_spawner is ProcessExecutor._make_spawner

    @property
    def orchestrator(self) -> Orchestrator | None:
        """The process supervisor (``None`` before start); tests and benchmarks inspect it."""
        return self._orch

    @property
    def _context(self) -> SwarmContext:
        if self._host is None:
            raise GoondanError("E_RUNTIME_NOT_STARTED", "the executor is not started")
        return self._host.context

    def _supervisor(self) -> Orchestrator:
        if self._orch is None:
            raise GoondanError("E_RUNTIME_NOT_STARTED", "the executor is not started")
        return self._orch

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self, host: ExecutorHost) -> None:
        self._host = host
        ctx = host.context
        opts = self.options
        ttl = ctx.ttl_seconds
        # a cancelled turn that does not stop has its process killed; not when the conversation
        # lives only in that process's memory (persist off): killing it would lose the conversation
        cancel_grace = opts.cancel_grace_ms if opts.cancel_grace_ms is not None else CANCEL_GRACE_MS
        self._orch = Orchestrator(
            spawner_factory=self._make_spawner,
            swarm_name=ctx.swarm_name,
            agent_names=ctx.agent_names,
            clock=opts.clock,
            crash_threshold=opts.crash_threshold,
            backoff_initial_ms=opts.backoff_initial_ms,
            backoff_max_ms=opts.backoff_max_ms,
            grace_period_ms=opts.grace_period_ms if opts.grace_period_ms is not None else ctx.grace_period_ms,
            ttl_ms=ttl * 1000.0 if ttl is not None and ctx.persist else None,
            reconcile_interval_ms=opts.reconcile_interval_ms,
            listeners=self._listeners.events,
            delta_listeners=self._listeners.deltas,
            on_restart_request=self._self_restart,
            on_process_gone=self._process_gone,
            limits=ctx.agent_limits,
            output_path=self._output_path,
            cancel_grace_ms=cancel_grace if ctx.persist else None,
        )
        # agent processes send runtime events and text deltas only while someone here listens
        self._listeners.changed = self._orch.listeners_changed
        await self._orch.start()

    def _spawner_init(self) -> dict[str, Any]:
        """What a new agent process needs to build its swarm, read from the host's current context
        (a spawner made after a reload starts from the reloaded bundle)."""
        now = self._context
        return {
            "bundle": str(now.bundle.root),
            "env": dict(now.bundle.env),
            "stateRoot": str(now.state_root),
            "swarm": now.swarm_name,
            "persist": now.persist,
            "store": now.store_backend.url,
            "sysPath": list(sys.path),
        }

    def _make_spawner(self, on_exit: Callable[[int, int], None]) -> Any:
        """The orchestrator's spawner (``start``, ``spawn``, ``kill``, ``children``, ``close``):
        here the fork server; the Ray executor overrides it with named actors."""
        from ._spawner import ForkServer

        return ForkServer(self._spawner_init(), on_exit)

    async def close(self, *, interrupt: bool = False) -> None:
        orch = self._orch
        if orch is None:
            return
        if interrupt:
            await orch.close(interrupt=True)
            return
        # a stuck turn must not hang close(): after the grace period the processes are stopped
        try:
            await asyncio.wait_for(orch.wait_idle(), orch.grace_period_ms / 1000)
        except TimeoutError:
            log.warning("closing with work still running: stopping the agent processes")
        except asyncio.CancelledError:
            await orch.close(interrupt=True)
            raise
        await orch.close()

    def kill_now(self) -> None:
        """SIGKILL every agent process and, once each is gone, mark its instance ``idle`` on disk
        (a dead process cannot write ``processing`` after that)."""
        if self._orch is None:
            return
        killed = self._orch.kill_now()
        deadline = time.monotonic() + 0.5
        for handle in killed:
            while time.monotonic() < deadline and _pid_alive(handle.pid):
                time.sleep(0.005)
            with contextlib.suppress(Exception):
                self._mark_idle(handle)

    def _output_path(self, agent: str, key: str) -> Path | None:
        """Where an agent process's raw output (fds 1 and 2) is kept, bounded: next to its
        conversation. Without persistence it is read and dropped."""
        ctx = self._context
        if not ctx.persist:
            return None
        from ._output import OUTPUT_FILE

        path = ctx.workspace.instance_path(agent, key)
        return None if path is None else path / OUTPUT_FILE

    def _process_gone(self, handle: InstanceHandle) -> None:
        """A process died without finishing its turn: metadata.json must not say ``processing``."""
        if handle.status in ("crashed", "crashLoopBackOff", "terminated"):
            self._mark_idle(handle)

    def _mark_idle(self, handle: InstanceHandle) -> None:
        ctx = self._context
        if not ctx.persist:
            return
        # the store may be out of reach (a database that is down, which may be why the process
        # died): the caller already has the failure of the turn itself, and listings show a stale
        # ``processing`` whose holder is gone as ``interrupted`` (storage._lease.shown_status)
        try:
            store = ctx.workspace.instance(handle.agent, handle.key)
        except GoondanError as exc:
            log.debug("could not mark %s idle: %s", handle.name, exc.message)
            return
        try:
            meta = store.read_metadata()
            if meta is not None and meta.get("status") != "idle":
                store.write_metadata(agent_name=handle.agent, instance_key=handle.key, status="idle")
        except GoondanError as exc:
            log.debug("could not mark %s idle: %s", handle.name, exc.message)
        finally:
            store.close()

    async def _self_restart(self, handle: InstanceHandle, reason: str) -> None:
        log.info("%s requested a restart (%s)", handle.name, reason)
        assert self._host is not None
        async with self._host.restart_lock:
            await self._host.reload_for_self_restart()
            await self._supervisor().restart_one(handle)

    # --- turns ----------------------------------------------------------------------------------

    async def submit(self, agent: str, instance_key: str, event: dict[str, Any]) -> TurnResult:
        if self._direct:
            target = self._direct.pop((event.get("traceId"), agent, instance_key), None)  # type: ignore[arg-type]
            if target is not None:
                return await self._submit_direct(agent, instance_key, event, target)
        return turn_result_from_dict(await self._supervisor().submit(agent, instance_key, event))

    async def _submit_direct(
        self, agent: str, instance_key: str, event: dict[str, Any], target: DirectTarget
    ) -> TurnResult:
        target.used = True
        orch = self._supervisor()
        trace = target.key[0]
        if target.fallback is not None:
            orch.direct_fallbacks[trace] = target.fallback
        try:
            result = await orch.submit(agent, instance_key, event, target.wire)
        except BaseException:
            # the process died or the turn never ran: whatever it sent is already in the
            # connector's queue, and no end marker will follow
            target.broken = True
            raise
        finally:
            if target.fallback is not None and orch.direct_fallbacks.get(trace) is target.fallback:
                del orch.direct_fallbacks[trace]
        if result.pop("directStream", None) is not None:
            target.broken = True
        return turn_result_from_dict(result)

    # --- direct streams (private: gdn run's connector supervisor) -------------------------------

    def _stream_direct(
        self,
        trace_id: str,
        agent: str,
        instance_key: str,
        address: str,
        event_id: str,
        fallback: Callable[[dict[str, Any]], None] | None = None,
    ) -> Any:
        """Send the text deltas of the next turn of ``agent@instance_key`` under ``trace_id``
        straight from its agent process to the connector host at ``address`` (event ``event_id``);
        ``fallback`` gets them instead if the agent process cannot open that stream.
        Returns the :class:`DirectTarget` to pass to :meth:`_stream_done` after the turn, or
        ``None`` when it cannot be done here (agent processes elsewhere, no address, or another
        stream already waits on that turn): the caller then listens with ``on_text_delta``."""
        key = (trace_id, agent, instance_key)
        if not self._local or not address or key in self._direct:
            return None
        target = DirectTarget({"address": address, "id": event_id}, key, fallback=fallback)
        self._direct[key] = target
        return target

    def _stream_done(self, target: DirectTarget) -> None:
        """Forget a target whose turn never came (the request failed before it was dispatched)."""
        if self._direct.get(target.key) is target:
            del self._direct[target.key]

    async def send(self, agent: str, instance_key: str, event: dict[str, Any]) -> bool:
        future = self._supervisor().submit(agent, instance_key, event)
        future.add_done_callback(lambda f: f.exception())
        return True

    async def cancel(self, agent: str, instance_key: str) -> bool:
        return self._orch is not None and self._orch.cancel(agent, instance_key)

    async def wait_idle(self) -> None:
        if self._orch is not None:
            await self._orch.wait_idle()

    # --- inter-agent routing ----------------------------------------------------------------------
    # Agent processes reach each other through the orchestrator's IPC routing; these are the same
    # routes taken from the host's side of the boundary.

    async def run_request(self, target: str, key: str, event: dict[str, Any]) -> str:
        orch = self._supervisor()
        orch.admit(target, key)
        try:
            future = orch.submit(target, key, event)
        except GoondanError as exc:
            raise delivery_failed(target, exc) from exc
        try:
            result = await asyncio.shield(future)  # a caller that gives up leaves the turn running
        except GoondanError as exc:
            raise delivery_failed(target, exc) from exc
        if result.get("finishReason") == "error":
            raise request_failed(target, result.get("error"))
        if result.get("finishReason") in UNANSWERED:
            raise request_unanswered(target, result["finishReason"], result.get("pendingApprovals") or ())
        return str(result.get("text") or "")

    async def run_send(self, target: str, key: str, event: dict[str, Any]) -> None:
        orch = self._supervisor()
        orch.admit(target, key)
        try:
            await orch.submit(target, key, event)
        except GoondanError as exc:
            raise delivery_failed(target, exc) from exc

    async def spawn(self, owner: tuple[str, str], target: str, key: str, cwd: str | None) -> dict[str, Any]:
        orch = self._supervisor()
        orch.admit(target, key)
        try:
            await orch.ensure_started(target, key)
        except GoondanError as exc:
            raise AgentRequestError(
                "IPC_DELIVERY_FAILED",
                f"agent '{target}' could not start: [{exc.code}] {exc.message}",
                target=target,
            ) from exc
        fresh = orch.registry.record(owner, target, key, cwd)
        return {"target": target, "instanceKey": key, "spawned": fresh, "cwd": cwd}

    async def list(self, owner: tuple[str, str], include_all: bool) -> dict[str, Any]:
        return self._supervisor().registry.list(owner, include_all)

    # --- instances ------------------------------------------------------------------------------

    async def instances(self) -> builtins.list[InstanceInfo]:
        from ..._ids import utc_now
        from ...storage import InstanceInfo

        out = []
        for agent, key, status in self._supervisor().live():
            now = utc_now()
            out.append(
                InstanceInfo(
                    agent_name=agent, instance_key=key, status=status, created_at=now, updated_at=now, path=Path()
                )
            )
        return out

    def status(self, agent: str, instance_key: str) -> str | None:
        return self._orch.status(agent, instance_key) if self._orch is not None else None

    async def restart(self, agents: set[str] | None, *, fresh: bool) -> builtins.list[str]:
        ctx = self._context

        def clear() -> None:
            if fresh:
                ctx.clear_histories(agents)

        return await self._supervisor().restart(agents, before_start=clear)

    async def delete(self, agent: str, instance_key: str) -> bool:
        return await self._supervisor().delete(agent, instance_key)

    async def reloaded(self) -> None:
        """The bundle changed: new processes fork from a fresh fork server that loaded it."""
        orch = self._supervisor()
        ctx = self._context
        orch.agent_names = ctx.agent_names
        orch.limiter.update(ctx.agent_limits)
        await orch.replace_spawner()

    # --- listeners ------------------------------------------------------------------------------

    def on_runtime_event(self, listener: RuntimeEventListener) -> Callable[[], None]:
        return self._listeners.on_runtime_event(listener)

    def on_text_delta(self, listener: RuntimeEventListener) -> Callable[[], None]:
        return self._listeners.on_text_delta(listener)


def _pid_alive(pid: int | None) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its parent to reap it does not)."""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


__all__ = ["ProcessExecutor", "turn_result_from_dict"]
