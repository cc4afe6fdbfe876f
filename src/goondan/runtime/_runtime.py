"""The programmatic runtime (CONTRACT §7): ``Runtime`` and the ``run`` convenience wrapper.

``isolation="process"`` (the default; override with ``GOONDAN_ISOLATION=inline``) runs every agent
instance in its own OS process under :class:`goondan.executors.process.Orchestrator`; ``"inline"`` runs
the same instances in this process. Both build instances through :class:`SwarmContext` and route
inter-agent calls through :class:`AgentsHub`, so a turn behaves the same in either.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._ids import new_id, now_iso
from .._modules import forget_path
from ..engine._agents import AgentLimits, AgentsHub, SpawnLimiter, SpawnRegistry, delivery_failed, request_failed
from ..engine._instance import AgentInstance, RuntimeEventListener
from ..engine._swarm import SwarmContext
from ..errors import GoondanError
from ..messages import Message
from ..results import TurnResult

if TYPE_CHECKING:
    from ..storage import StoreBackend, WorkspaceStore

ISOLATIONS = ("inline", "process")
BASE_PACKAGE = "@goondan/base"
ISOLATION_ENV = "GOONDAN_ISOLATION"


def default_isolation() -> str:
    value = os.environ.get(ISOLATION_ENV, "").strip().lower()
    return value if value in ISOLATIONS else "process"


def turn_result_from_dict(data: dict[str, Any]) -> TurnResult:
    record = data.get("responseMessage")
    return TurnResult(
        turn_id=str(data.get("turnId") or ""),
        response_message=Message.from_record(record) if isinstance(record, dict) else None,
        finish_reason=data.get("finishReason") or "error",
        error=data.get("error"),
        text=data.get("text"),
    )


class InlineBackend:
    """Inter-agent routing when every instance lives in this process."""

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime
        self.registry = SpawnRegistry()
        self.limiter = SpawnLimiter(AgentLimits())

    async def _instance(self, target: str, key: str) -> AgentInstance:
        rt = self._rt
        if (target, key) not in rt._instances and (target, key) not in rt._starting:
            self.limiter.update(rt.agent_limits)
            self.limiter.admit(target, key, len(rt._instances) + len(rt._starting))
        try:
            return await self._rt.get_instance(target, key)
        except GoondanError as exc:
            raise delivery_failed(target, exc) from exc

    async def run_request(self, target: str, key: str, event: dict[str, Any]) -> str:
        instance = await self._instance(target, key)
        result = await asyncio.shield(self._rt._run_inline(instance, event))
        if result.finish_reason == "error":
            raise request_failed(target, str((result.error or {}).get("message", "unknown error")))
        return result.text or ""

    async def run_send(self, target: str, key: str, event: dict[str, Any]) -> None:
        instance = await self._instance(target, key)
        await self._rt._run_inline(instance, event)

    async def spawn(self, owner: tuple[str, str], target: str, key: str, cwd: str | None) -> dict[str, Any]:
        await self._instance(target, key)
        fresh = self.registry.record(owner, target, key, cwd)
        return {"target": target, "instanceKey": key, "spawned": fresh, "cwd": cwd}

    async def list(self, owner: tuple[str, str], include_all: bool) -> dict[str, Any]:
        return self.registry.list(owner, include_all)


class Runtime:
    """Runs one swarm of a bundle. Use as ``async with goondan.Runtime(path) as rt: ...``.

    ``isolation``: ``"process"`` (default) or ``"inline"``. ``store``: where conversations are kept,
    a URL (``None`` or a directory path: the filesystem store, ``"memory:"``: in memory; env
    ``GOONDAN_STORE``; see :func:`goondan.storage.open_store`). ``persist=False`` is ``store="memory:"``
    (nothing is written under the state root; process mode then never evicts).
    ``watch=True`` restarts the agents a changed bundle file affects. ``clock``,
    ``reconcile_interval_ms``, ``crash_threshold``, ``backoff_initial_ms``/``backoff_max_ms`` and
    ``grace_period_ms`` tune the process supervisor (tests inject a ``ManualClock``).
    """

    def __init__(
        self,
        bundle: str | os.PathLike[str] | Any,
        *,
        state_root: str | os.PathLike[str] | None = None,
        swarm: str | None = None,
        isolation: str | None = None,
        persist: bool = True,
        store: str | os.PathLike[str] | StoreBackend | None = None,
        env: Mapping[str, str] | None = None,
        watch: bool = False,
        clock: Any = None,
        reconcile_interval_ms: float = 5000,
        crash_threshold: int = 5,
        backoff_initial_ms: int = 1000,
        backoff_max_ms: int = 300000,
        grace_period_ms: int | None = None,
        watch_interval_ms: float = 300,
    ) -> None:
        isolation = isolation or default_isolation()
        if isolation not in ISOLATIONS:
            raise GoondanError(
                "E_RUNTIME_OPTION",
                f"isolation must be 'inline' or 'process', got {isolation!r}",
            )
        self._bundle_arg = bundle
        self._state_root_arg = state_root
        self._swarm_arg = swarm
        self.isolation = isolation
        self.persist = persist
        self._store_arg = store
        self.store: StoreBackend | None = None
        self._env = env
        self.watch = watch
        self._clock = clock
        self._reconcile_interval_ms = reconcile_interval_ms
        self._crash_threshold = crash_threshold
        self._backoff = (backoff_initial_ms, backoff_max_ms)
        self._grace_arg = grace_period_ms
        self._watch_interval_ms = watch_interval_ms
        self.log = logging.getLogger("goondan.runtime")
        self._instances: dict[tuple[str, str], AgentInstance] = {}
        self._starting: dict[tuple[str, str], asyncio.Future[AgentInstance]] = {}
        self._listeners: list[RuntimeEventListener] = []
        self._delta_listeners: list[RuntimeEventListener] = []
        self._hub = AgentsHub(self, InlineBackend(self))
        self._orch: Any = None
        self._ctx: SwarmContext | None = None
        self._old_contexts: list[SwarmContext] = []
        self._watch_task: asyncio.Task[None] | None = None
        self._fingerprints: dict[str, str] = {}
        self._restart_lock: asyncio.Lock | None = None
        self._started = False
        self._closed = False
        self.bundle: Any = None
        self.swarm: Any = None
        self.swarm_name = ""
        self.entry_agent = ""
        self.agent_names: frozenset[str] = frozenset()
        self.swarm_instance_key = ""
        self.workspace: WorkspaceStore | None = None
        self.state_root: Path | None = None

    # --- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        # left by cancellation or Ctrl+C: whoever owned the runtime gave up on its turns, so they are
        # stopped now rather than waited for (see close())
        interrupted = exc_type is not None and issubclass(exc_type, asyncio.CancelledError | KeyboardInterrupt)
        await self.close(interrupt=interrupted)

    def _load(self) -> Any:
        from ..bundle import Bundle, load_bundle

        bundle = self._bundle_arg
        if isinstance(bundle, Bundle):
            if self._started:  # a reload: read the same directory again
                return load_bundle(bundle.root, env=bundle.env, state_root=self.state_root)
            return bundle
        return load_bundle(bundle, env=self._env, state_root=self.state_root)

    def _adopt(self, bundle: Any) -> None:
        assert self.state_root is not None
        old = self._ctx
        self._ctx = SwarmContext(
            bundle, swarm=self._swarm_arg, state_root=self.state_root, persist=self.persist, store=self.store
        )
        if old is not None:
            # inline instances that were not restarted still write through the old context's stores
            self._old_contexts.append(old)
        ctx = self._ctx
        self.bundle = bundle
        self.swarm = ctx.swarm
        self.swarm_name = ctx.swarm_name
        self.entry_agent = ctx.entry_agent
        self.agent_names = ctx.agent_names
        self.swarm_instance_key = ctx.swarm_instance_key
        self.workspace = ctx.workspace

    async def start(self) -> None:
        if self._started:
            return
        from ..storage import resolve_state_root, runtime_store

        self.state_root = Path(resolve_state_root(self._state_root_arg, self._env))
        self.store = runtime_store(self._store_arg, persist=self.persist, state_root=self.state_root, env=self._env)
        self.persist = self.store.durable
        self._adopt(self._load())
        self._restart_lock = asyncio.Lock()
        if self.isolation == "process":
            await self._start_orchestrator()
        self._started = True
        if self.watch:
            from ._watch import agent_fingerprints

            self._fingerprints = agent_fingerprints(self.bundle, self._swarm_arg)
            self._watch_task = asyncio.get_running_loop().create_task(self._watch_loop())

    async def _start_orchestrator(self) -> None:
        from ..executors.process import Orchestrator
        from ..executors.process._spawner import ForkServer

        assert self._ctx is not None
        ctx = self._ctx

        def factory(on_exit: Callable[[int, int], None]) -> ForkServer:
            init = {
                "bundle": str(self.bundle.root),
                "env": dict(self.bundle.env),
                "stateRoot": str(self.state_root),
                "swarm": self._swarm_arg,
                "persist": self.persist,
                "store": self.store.url if self.store is not None else None,
                "sysPath": list(sys.path),
            }
            return ForkServer(init, on_exit)

        ttl = ctx.ttl_seconds
        self._orch = Orchestrator(
            spawner_factory=factory,
            swarm_name=ctx.swarm_name,
            agent_names=ctx.agent_names,
            clock=self._clock,
            crash_threshold=self._crash_threshold,
            backoff_initial_ms=self._backoff[0],
            backoff_max_ms=self._backoff[1],
            grace_period_ms=self._grace_arg if self._grace_arg is not None else ctx.grace_period_ms,
            ttl_ms=ttl * 1000.0 if ttl is not None and self.persist else None,
            reconcile_interval_ms=self._reconcile_interval_ms,
            listeners=self._listeners,
            delta_listeners=self._delta_listeners,
            on_restart_request=self._self_restart,
            on_process_gone=self._process_gone,
            limits=ctx.agent_limits,
            output_path=self._output_path,
        )
        await self._orch.start()

    def _output_path(self, agent: str, key: str) -> Path | None:
        """Where an agent process's raw output (fds 1 and 2) is kept, bounded: next to its
        conversation. Without persistence it is read and dropped."""
        if not self.persist or self.workspace is None:
            return None
        from ..executors.process._output import OUTPUT_FILE

        path = self.workspace.instance_path(agent, key)
        return None if path is None else path / OUTPUT_FILE

    @property
    def agent_limits(self) -> AgentLimits:
        """Inter-agent bounds of the swarm's policy (call depth, instance spawn rate and cap)."""
        return self._ctx.agent_limits if self._ctx is not None else AgentLimits()

    @property
    def max_call_depth(self) -> int:
        return self.agent_limits.max_call_depth

    @property
    def orchestrator(self) -> Any:
        """The process supervisor (``isolation="process"``), else ``None``."""
        return self._orch

    async def close(self, *, interrupt: bool = False) -> None:
        """Stop the runtime. By default running turns, queued sends and inter-agent work finish
        first (for at most the grace period; then agent processes are stopped, SIGKILLed if they do
        not acknowledge). ``interrupt=True`` is Ctrl+C: running turns are cancelled instead — what
        they made durable stays, the instance is left ``idle``, and tool calls they left unfinished
        are answered with ``E_TOOL_INTERRUPTED`` on the next start — and agent processes that do
        not stop within about 1.5 s are SIGKILLed. Leaving ``async with`` by cancellation or
        ``KeyboardInterrupt`` closes this way; cancelling a graceful close() switches to it."""
        if self._closed:
            return
        self._closed = True
        if self._watch_task is not None:
            self._watch_task.cancel()
            with contextlib.suppress(BaseException):
                await self._watch_task
        if self._orch is not None:
            await self._close_processes(interrupt)
        elif interrupt:
            await self._cancel_inline()
        else:
            try:
                await self._hub.drain()
            except asyncio.CancelledError:
                await self._cancel_inline()
                raise
        for instance in list(self._instances.values()):
            try:
                await instance.close()
            except Exception:
                self.log.exception("closing %s@%s failed", instance.agent_name, instance.instance_key)
        self._instances.clear()
        for ctx in [*self._old_contexts, self._ctx]:
            if ctx is not None:
                ctx.close()

    async def _close_processes(self, interrupt: bool) -> None:
        assert self._orch is not None
        if interrupt:
            await self._orch.close(interrupt=True)
            return
        # a stuck turn must not hang close(): after the grace period the processes are stopped
        try:
            await asyncio.wait_for(self._orch.wait_idle(), self._orch.grace_period_ms / 1000)
        except TimeoutError:
            self.log.warning("closing with work still running: stopping the agent processes")
        except asyncio.CancelledError:
            await self._orch.close(interrupt=True)
            raise
        await self._orch.close()

    async def _cancel_inline(self) -> None:
        """Inline turns of the caller's task are already cancelled with it; background ones (sends,
        async inter-agent requests) are cancelled here so that closing the instances does not wait."""
        tasks = self._hub.tasks()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _require_started(self) -> None:
        if not self._started:
            raise GoondanError(
                "E_RUNTIME_NOT_STARTED",
                "the runtime is not started",
                suggestion="Use `async with goondan.Runtime(path) as rt:` or await rt.start() first.",
            )
        if self._closed:
            raise GoondanError("E_RUNTIME_CLOSED", "the runtime is closed")

    # --- inline instances -------------------------------------------------------------------

    async def get_instance(self, agent: str, instance_key: str) -> AgentInstance:
        """The running instance for (agent, key), started on first use (``isolation="inline"``)."""
        self._require_started()
        if self.isolation != "inline":
            raise GoondanError("E_RUNTIME_OPTION", "get_instance() exists only with isolation='inline'")
        key = (agent, instance_key)
        instance = self._instances.get(key)
        if instance is not None:
            return instance
        pending = self._starting.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        assert self._ctx is not None
        self._ctx.check_agent(agent)
        future: asyncio.Future[AgentInstance] = asyncio.get_running_loop().create_future()
        self._starting[key] = future
        try:
            instance = self._ctx.build_instance(
                agent, instance_key, hub=self._hub, listeners=self._listeners, delta_listeners=self._delta_listeners
            )
            try:
                await instance.start()
            except BaseException:
                instance.store.close()
                raise
            self._instances[key] = instance
            future.set_result(instance)
            return instance
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            self._starting.pop(key, None)

    async def _run_inline(self, instance: AgentInstance, event: dict[str, Any]) -> TurnResult:
        result = await instance.run_turn(event)
        reason = instance.restart_requested
        if reason is not None:
            instance.restart_requested = None
            self.log.info("%s@%s requested a restart (%s)", instance.agent_name, instance.instance_key, reason)
            assert self._restart_lock is not None
            async with self._restart_lock:
                await self._reload_for_self_restart()
                await self._drop_inline(instance)
        return result

    async def _drop_inline(self, instance: AgentInstance) -> None:
        key = (instance.agent_name, instance.instance_key)
        if self._instances.get(key) is instance:
            del self._instances[key]
        await instance.close()
        assert self._ctx is not None
        for path in self._ctx.entry_paths(instance.agent_name):
            forget_path(path)

    def on_runtime_event(self, listener: RuntimeEventListener) -> Callable[[], None]:
        """Subscribe to every runtime event record of every instance (CLI, logs, tests)."""
        self._listeners.append(listener)

        def off() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return off

    def on_text_delta(self, listener: RuntimeEventListener) -> Callable[[], None]:
        """Subscribe to streamed model text (``{"type": "text.delta", "delta", "agentName", ...}``).
        In process mode, register before the first request: running processes keep their setting."""
        self._delta_listeners.append(listener)

        def off() -> None:
            if listener in self._delta_listeners:
                self._delta_listeners.remove(listener)

        return off

    # --- requests ---------------------------------------------------------------------------

    def _event(
        self,
        text: str,
        *,
        event_type: str,
        instance_key: str,
        metadata: Mapping[str, Any] | None,
        trace_id: str | None,
        source: Mapping[str, Any] | None,
        auth: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        if not isinstance(text, str):
            raise GoondanError("E_REQUEST_INVALID", f"input must be a string, got {type(text).__name__}")
        event: dict[str, Any] = {
            "id": new_id("evt"),
            "type": event_type,
            "createdAt": now_iso(),
            "input": text,
            "instanceKey": instance_key,
            "source": dict(source) if source else {"kind": "connector", "name": "api"},
            "metadata": dict(metadata) if metadata else {},
        }
        if trace_id:
            event["traceId"] = trace_id
        if auth is not None:
            event["auth"] = dict(auth)
        return event

    def _resolve_target(self, agent: str | None, instance_key: str | None) -> tuple[str, str]:
        self._require_started()
        name = agent or self.entry_agent
        if name not in self.agent_names:
            raise GoondanError(
                "E_AGENT_NOT_FOUND",
                f"agent '{name}' is not part of swarm '{self.swarm_name}'",
                suggestion=f"Use one of: {', '.join(sorted(self.agent_names))}.",
            )
        return name, instance_key or self.swarm_instance_key

    async def request(
        self,
        input: str,
        agent: str | None = None,
        instance_key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        trace_id: str | None = None,
        source: Mapping[str, Any] | None = None,
        auth: Mapping[str, Any] | None = None,
    ) -> TurnResult:
        """Run one turn on ``agent`` (default: the entry agent) and return its result.

        Turn failures come back as ``TurnResult(finish_reason="error")``; an instance that cannot
        start (e.g. an extension fails to register) raises its :class:`GoondanError`."""
        name, key = self._resolve_target(agent, instance_key)
        event = self._event(
            input,
            event_type="message",
            instance_key=key,
            metadata=metadata,
            trace_id=trace_id,
            source=source,
            auth=auth,
        )
        if self._orch is not None:
            return turn_result_from_dict(await self._orch.submit(name, key, event))
        instance = await self.get_instance(name, key)
        return await self._run_inline(instance, event)

    async def send(
        self,
        input: str,
        agent: str | None = None,
        instance_key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        """Queue a turn without waiting for it; returns whether the event was accepted."""
        name, key = self._resolve_target(agent, instance_key)
        event = self._event(
            input,
            event_type="notification",
            instance_key=key,
            metadata=metadata,
            trace_id=None,
            source=None,
            auth=None,
        )
        if self._orch is not None:
            future = self._orch.submit(name, key, event)
            future.add_done_callback(lambda f: f.exception())
            return True
        instance = await self.get_instance(name, key)

        async def run() -> None:
            try:
                await self._run_inline(instance, event)
            except Exception:
                self.log.exception("send to %s@%s failed", name, key)

        self._hub.track(asyncio.get_running_loop().create_task(run()))
        return True

    async def wait_idle(self) -> None:
        """Wait until every queued send and inter-agent call has finished."""
        if self._orch is not None:
            await self._orch.wait_idle()
        else:
            await self._hub.drain()

    # --- instances ------------------------------------------------------------------------------

    async def instances(self) -> list[Any]:
        """Instances of this swarm's workspace (from disk when persisting, else in memory)."""
        self._require_started()
        if self.persist and self.workspace is not None:
            return list(self.workspace.list_instances())
        from .._ids import parse_iso, utc_now
        from ..storage import InstanceInfo

        out = []
        if self._orch is not None:
            for (agent, key), handle in sorted(self._orch.handles.items()):
                now = utc_now()
                out.append(
                    InstanceInfo(
                        agent_name=agent,
                        instance_key=key,
                        status=handle.status,
                        created_at=now,
                        updated_at=now,
                        path=Path(),
                    )
                )
            return out
        for (agent, key), inst in sorted(self._instances.items()):
            meta = inst.store.read_metadata() or {}
            created = meta.get("createdAt")
            updated = meta.get("updatedAt")
            out.append(
                InstanceInfo(
                    agent_name=agent,
                    instance_key=key,
                    status=inst.status,
                    created_at=parse_iso(created) if isinstance(created, str) else utc_now(),
                    updated_at=parse_iso(updated) if isinstance(updated, str) else utc_now(),
                    path=Path(),
                )
            )
        return out

    def process_status(self, agent: str, instance_key: str) -> str | None:
        """The supervisor status of one instance (``spawning``, ``idle``, ``processing``,
        ``draining``, ``terminated``, ``crashed``, ``crashLoopBackOff``), or None if never started."""
        if self._orch is not None:
            status: str | None = self._orch.status(agent, instance_key)
            return status
        instance = self._instances.get((agent, instance_key))
        return instance.status if instance is not None else None

    async def delete_instance(self, agent: str, instance_key: str) -> bool:
        """Remove one instance's history and extension state; a running instance is stopped first
        (its current turn finishes)."""
        self._require_started()
        key = (agent, instance_key)
        existed = False
        if self._orch is not None:
            handle = self._orch.handles.get(key)
            if handle is not None:
                existed = True
                await self._orch.stop(handle, "restart")
                self._orch.handles.pop(key, None)
        instance = self._instances.pop(key, None)
        if instance is not None:
            existed = True
            await instance.close()
        if self.workspace is not None:
            deleted = self.workspace.delete_instance(agent, instance_key)
            if self.persist:
                return bool(deleted)
        return existed

    def kill_now(self) -> None:
        """End every agent process at once (SIGKILL) and leave no instance ``processing`` on disk:
        for a host about to exit without closing (a second Ctrl+C). Their turns recover as after
        any crash on the next start. Does nothing inline, where the turns die with the host."""
        if self._orch is None:
            return
        import time

        killed = self._orch.kill_now()
        deadline = time.monotonic() + 0.5
        for handle in killed:  # a dead process cannot write "processing" after us
            while time.monotonic() < deadline and _pid_alive(handle.pid):
                time.sleep(0.005)
            with contextlib.suppress(Exception):
                self._mark_idle(handle)

    def _process_gone(self, handle: Any) -> None:
        """A process died without finishing its turn: metadata.json must not say ``processing``."""
        if not self.persist or handle.status not in ("crashed", "crashLoopBackOff", "terminated"):
            return
        self._mark_idle(handle)

    def _mark_idle(self, handle: Any) -> None:
        if not self.persist:
            return
        assert self.workspace is not None
        store = self.workspace.instance(handle.agent, handle.key)
        meta = store.read_metadata()
        if meta is not None and meta.get("status") != "idle":
            with contextlib.suppress(Exception):
                store.write_metadata(agent_name=handle.agent, instance_key=handle.key, status="idle")
        store.close()

    # --- restart / watch ------------------------------------------------------------------------------

    async def restart(self, agent: str | None = None, *, fresh: bool = False) -> list[str]:
        """Restart one agent's instances (or all): the bundle is reloaded (a broken bundle raises
        :class:`ConfigError` and nothing restarts), running instances finish their turn and stop, and
        come back on the new configuration. ``fresh=True`` also clears their conversation history
        and their extensions' saved state. Returns the restarted ``agent:instanceKey`` names."""
        self._require_started()
        if agent is not None:
            assert self._ctx is not None
            self._ctx.check_agent(agent)
        assert self._restart_lock is not None
        async with self._restart_lock:
            return await self._restart_locked([agent] if agent else None, fresh=fresh, reload=True)

    async def _restart_locked(self, agents: list[str] | None, *, fresh: bool, reload: bool) -> list[str]:
        if reload:
            bundle = self._load()
            self._adopt(bundle)
            if self._orch is not None:
                self._orch.agent_names = self.agent_names
                self._orch.limiter.update(self.agent_limits)
                await self._orch.replace_spawner()
        wanted = set(agents) if agents is not None else None
        restarted: list[str] = []
        if self._orch is not None:
            handles = [
                h for h in list(self._orch.handles.values()) if (wanted is None or h.agent in wanted) and h.alive
            ]
            await asyncio.gather(*(self._orch.stop(h, "restart") for h in handles))
            for h in list(self._orch.handles.values()):
                if (wanted is None or h.agent in wanted) and h.status in ("crashed", "crashLoopBackOff"):
                    # a restart forgives earlier crashes: the next event starts it at once
                    h.status, h.consecutive_crashes, h.next_spawn_allowed_at = "terminated", 0, 0.0
            if fresh:
                self._clear_histories(wanted)
            for h in handles:
                h.consecutive_crashes = 0
                restarted.append(h.name)
                with contextlib.suppress(GoondanError):
                    await self._orch.ensure_started(h.agent, h.key)
        else:
            instances = [i for i in list(self._instances.values()) if wanted is None or i.agent_name in wanted]
            for instance in instances:
                async with instance.lock:
                    pass
                await self._drop_inline(instance)
                restarted.append(f"{instance.agent_name}:{instance.instance_key}")
            if fresh:
                self._clear_histories(wanted)
        return restarted

    def _clear_histories(self, agents: set[str] | None) -> None:
        if self.workspace is None:
            return
        for info in self.workspace.list_instances():
            if agents is None or info.agent_name in agents:
                store = self.workspace.instance(info.agent_name, info.instance_key)
                try:
                    store.clear_history()
                finally:
                    store.close()

    async def _reload_for_self_restart(self) -> None:
        """A self-restarting agent may have edited its own bundle files: load them again (a broken
        bundle is logged and the instance restarts on the configuration it had)."""
        try:
            bundle = self._load()
        except GoondanError as exc:
            self.log.error("self-restart: the bundle no longer loads, keeping the old configuration: %s", exc)
            return
        self._adopt(bundle)
        if self._orch is not None:
            self._orch.agent_names = self.agent_names
            self._orch.limiter.update(self.agent_limits)
            await self._orch.replace_spawner()

    async def _self_restart(self, handle: Any, reason: str) -> None:
        self.log.info("%s requested a restart (%s)", handle.name, reason)
        assert self._orch is not None and self._restart_lock is not None
        async with self._restart_lock:
            await self._reload_for_self_restart()
            await self._orch.stop(handle, "restart")
            with contextlib.suppress(GoondanError):
                await self._orch.ensure_started(handle.agent, handle.key)

    async def _watch_loop(self) -> None:
        from ._watch import WatchReport, agent_fingerprints, changed_agents, scan

        root = Path(self.bundle.root)
        files = scan(root)
        report = WatchReport(root)
        while True:
            await asyncio.sleep(self._watch_interval_ms / 1000)
            now = scan(root)
            if now == files:
                continue
            report.touched(files, now)
            files = now
            try:
                bundle = self._load()
                after = agent_fingerprints(bundle, self._swarm_arg)
            except GoondanError as exc:
                report.failed(exc)  # not applied: the agents keep the last good version
                continue
            changed = changed_agents(self._fingerprints, after)
            self._fingerprints = after
            if changed:
                assert self._restart_lock is not None
                try:
                    async with self._restart_lock:
                        await self._restart_locked(changed, fresh=False, reload=True)
                except GoondanError as exc:
                    report.failed(exc)
                    continue
            report.applied(changed)


def _pid_alive(pid: int | None) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its parent to reap it does not)."""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def run(
    bundle: str | os.PathLike[str],
    input: str,
    *,
    state_root: str | os.PathLike[str] | None = None,
    swarm: str | None = None,
    agent: str | None = None,
    instance_key: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    isolation: str | None = None,
    persist: bool = True,
    store: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> TurnResult:
    """Synchronous one-shot: start a runtime, run one request, close."""

    async def main() -> TurnResult:
        async with Runtime(
            bundle, state_root=state_root, swarm=swarm, isolation=isolation, persist=persist, store=store, env=env
        ) as rt:
            return await rt.request(input, agent=agent, instance_key=instance_key, metadata=metadata)

    return asyncio.run(main())


__all__ = ["Runtime", "run"]
