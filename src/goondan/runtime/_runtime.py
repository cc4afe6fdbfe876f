"""The programmatic runtime (CONTRACT §7): ``Runtime`` and the ``run`` convenience wrapper."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._ids import new_id, now_iso
from ..errors import GoondanError
from ..results import TurnResult
from ._agents import AgentsHub
from ._info import SwarmInfo
from ._instance import AgentInstance, RuntimeEventListener

ISOLATIONS = ("inline", "process")
BASE_PACKAGE = "@goondan/base"


class Runtime:
    """Runs one swarm of a bundle. Use as ``async with goondan.Runtime(path) as rt: ...``.

    ``isolation="inline"`` runs every agent instance inside this process. ``persist=False`` keeps
    conversations in memory only (nothing is written under the state root).
    """

    def __init__(
        self,
        bundle: str | os.PathLike[str] | Any,
        *,
        state_root: str | os.PathLike[str] | None = None,
        swarm: str | None = None,
        isolation: str = "inline",
        persist: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if isolation not in ISOLATIONS:
            raise GoondanError(
                "E_RUNTIME_OPTION",
                f"isolation must be 'inline' or 'process', got {isolation!r}",
            )
        if isolation == "process":
            raise GoondanError(
                "E_ISOLATION_UNAVAILABLE",
                "process isolation (one OS process per agent instance) is not available in this version",
                suggestion="Use isolation='inline' (the same semantics inside one process).",
            )
        self._bundle_arg = bundle
        self._state_root_arg = state_root
        self._swarm_arg = swarm
        self.isolation = isolation
        self.persist = persist
        self._env = env
        self.log = logging.getLogger("goondan.runtime")
        self._instances: dict[tuple[str, str], AgentInstance] = {}
        self._starting: dict[tuple[str, str], asyncio.Future[AgentInstance]] = {}
        self._listeners: list[RuntimeEventListener] = []
        self._delta_listeners: list[RuntimeEventListener] = []
        self._hub = AgentsHub(self)
        self._started = False
        self._closed = False
        self._tmpdir: str | None = None
        self.bundle: Any = None
        self.swarm: Any = None
        self.swarm_name = ""
        self.entry_agent = ""
        self.agent_names: frozenset[str] = frozenset()
        self.swarm_instance_key = ""
        self.workspace: Any = None
        self.state_root: Path | None = None
        self._plans: dict[str, Any] = {}

    # --- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        if self._started:
            return
        from ..bundle import Bundle, load_bundle
        from ..storage import WorkspaceStore, resolve_state_root, workspace_id

        bundle = self._bundle_arg
        if not isinstance(bundle, Bundle):
            bundle = load_bundle(bundle, env=self._env)
        self.bundle = bundle
        self.swarm = bundle.select_swarm(self._swarm_arg)
        spec = self.swarm.spec
        self.swarm_name = self.swarm.name
        self.entry_agent = bundle.resolve_ref(spec.entry_agent, self.swarm, "Agent").name
        self.agent_names = frozenset(bundle.resolve_ref(a, self.swarm, "Agent").name for a in spec.agents)
        self.swarm_instance_key = spec.instance_key or self.swarm_name
        self.state_root = resolve_state_root(self._state_root_arg, self._env)
        if self.persist:
            self.workspace = WorkspaceStore(self.state_root, workspace_id(self.swarm_instance_key))
        self._started = True

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._hub.drain()
        for instance in list(self._instances.values()):
            try:
                await instance.close()
            except Exception:
                self.log.exception("closing %s@%s failed", instance.agent_name, instance.instance_key)
        self._instances.clear()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)

    def _require_started(self) -> None:
        if not self._started:
            raise GoondanError(
                "E_RUNTIME_NOT_STARTED",
                "the runtime is not started",
                suggestion="Use `async with goondan.Runtime(path) as rt:` or await rt.start() first.",
            )
        if self._closed:
            raise GoondanError("E_RUNTIME_CLOSED", "the runtime is closed")

    # --- instances --------------------------------------------------------------------------

    def _plan(self, agent: str) -> Any:
        plan = self._plans.get(agent)
        if plan is None:
            plan = self.bundle.agent_plan(agent, self.swarm)
            self._plans[agent] = plan
        return plan

    def _implicit_context_message(self, plan: Any) -> tuple[str, Path, dict[str, Any]] | None:
        if not plan.prompt_system:
            return None
        if any(b.resource.name == "context-message" for b in plan.extensions):
            return None
        builtin = self.bundle.get("Extension", "context-message", package=BASE_PACKAGE)
        if builtin is None:
            return None
        config = getattr(builtin.spec, "config", None) or {}
        return ("context-message", builtin.entry_path(), dict(config))

    def _workdir_factory(self, agent: str, key: str, store: Any) -> Callable[[], Path]:
        def make() -> Path:
            if self.persist:
                path = Path(store.path) / "workdir"
            else:
                if self._tmpdir is None:
                    self._tmpdir = tempfile.mkdtemp(prefix="goondan-")
                from ..storage import instance_dir_name

                path = Path(self._tmpdir) / instance_dir_name(agent, key)
            path.mkdir(parents=True, exist_ok=True)
            return path

        return make

    async def get_instance(self, agent: str, instance_key: str) -> AgentInstance:
        """The running instance for (agent, key), started on first use."""
        self._require_started()
        key = (agent, instance_key)
        instance = self._instances.get(key)
        if instance is not None:
            return instance
        pending = self._starting.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        if agent not in self.agent_names:
            raise GoondanError(
                "E_AGENT_NOT_FOUND",
                f"agent '{agent}' is not part of swarm '{self.swarm_name}'",
                suggestion=f"Use one of: {', '.join(sorted(self.agent_names))}.",
            )
        future: asyncio.Future[AgentInstance] = asyncio.get_running_loop().create_future()
        self._starting[key] = future
        try:
            plan = self._plan(agent)
            if self.persist:
                store = self.workspace.instance(agent, instance_key)
            else:
                from ..storage import MemoryInstanceStore

                store = MemoryInstanceStore()
            instance = AgentInstance(
                plan=plan,
                instance_key=instance_key,
                store=store,
                swarm_info=SwarmInfo(
                    swarm_name=self.swarm_name,
                    entry_agent=self.entry_agent,
                    self_agent=agent,
                    available_agents=tuple(sorted(self.agent_names)),
                    callable_agents=tuple(sorted(a for a in self.agent_names if a != agent)),
                ),
                hub=self._hub,
                bundle_root=Path(self.bundle.root),
                workdir=self._workdir_factory(agent, instance_key, store),
                listeners=self._listeners,
                implicit_context_message=self._implicit_context_message(plan),
                env=self.bundle.env,
                delta_listeners=self._delta_listeners,
            )
            try:
                await instance.start()
            except BaseException:
                store.close()
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

    def on_runtime_event(self, listener: RuntimeEventListener) -> Callable[[], None]:
        """Subscribe to every runtime event record of every instance (CLI, logs, tests)."""
        self._listeners.append(listener)

        def off() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return off

    def on_text_delta(self, listener: RuntimeEventListener) -> Callable[[], None]:
        """Subscribe to streamed model text (``{"type": "text.delta", "delta", "agentName", ...}``)."""
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
        instance = await self.get_instance(name, key)
        return await instance.run_turn(event)

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
        instance = await self.get_instance(name, key)

        async def run() -> None:
            try:
                await instance.run_turn(event)
            except Exception:
                self.log.exception("send to %s@%s failed", name, key)

        task = asyncio.get_running_loop().create_task(run())
        self._hub._tasks.add(task)
        task.add_done_callback(self._hub._tasks.discard)
        return True

    async def wait_idle(self) -> None:
        """Wait until every queued send and inter-agent call has finished."""
        await self._hub.drain()

    async def instances(self) -> list[Any]:
        """Instances of this swarm's workspace (from disk when persisting, else in memory)."""
        self._require_started()
        if self.persist:
            return list(self.workspace.list_instances())
        from ..storage import InstanceInfo

        out = []
        for (agent, key), inst in sorted(self._instances.items()):
            meta = inst.store.read_metadata() or {}
            from .._ids import parse_iso, utc_now

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

    async def delete_instance(self, agent: str, instance_key: str) -> bool:
        """Remove one instance's history and extension state (the instance must be idle)."""
        self._require_started()
        key = (agent, instance_key)
        instance = self._instances.pop(key, None)
        if instance is not None:
            await instance.close()
        if self.persist:
            return bool(self.workspace.delete_instance(agent, instance_key))
        return instance is not None


def run(
    bundle: str | os.PathLike[str],
    input: str,
    *,
    state_root: str | os.PathLike[str] | None = None,
    swarm: str | None = None,
    agent: str | None = None,
    instance_key: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    isolation: str = "inline",
    persist: bool = True,
    env: Mapping[str, str] | None = None,
) -> TurnResult:
    """Synchronous one-shot: start a runtime, run one request, close."""

    async def main() -> TurnResult:
        async with Runtime(
            bundle, state_root=state_root, swarm=swarm, isolation=isolation, persist=persist, env=env
        ) as rt:
            return await rt.request(input, agent=agent, instance_key=instance_key, metadata=metadata)

    return asyncio.run(main())


__all__ = ["Runtime", "run"]
