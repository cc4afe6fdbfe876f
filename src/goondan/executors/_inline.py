"""The inline executor: every agent instance runs in the caller's process and event loop.

No process boundary, so no supervisor: an instance is built on first use and lives until a restart,
a delete or close. Inter-agent calls run the target's turn in this loop too; a caller that gives up
(timeout, cancellation) leaves the callee's turn running, as a separate process would.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._modules import forget_path
from ..engine import (
    UNANSWERED,
    AgentInstance,
    AgentLimits,
    AgentsHub,
    SpawnLimiter,
    SpawnRegistry,
    SwarmContext,
    delivery_failed,
    request_failed,
    request_unanswered,
)
from ..errors import GoondanError
from ._listeners import Listeners
from ._protocol import ExecutorHost, ExecutorOptions, RuntimeEventListener

if TYPE_CHECKING:
    from ..results import TurnResult
    from ..storage import InstanceInfo

log = logging.getLogger("goondan.runtime")


class _Directory:
    """The swarm as the hub sees it, read from the host's current context (a reload replaces it)."""

    def __init__(self, host: ExecutorHost) -> None:
        self._host = host

    @property
    def swarm_name(self) -> str:
        return self._host.context.swarm_name

    @property
    def entry_agent(self) -> str:
        return self._host.context.entry_agent

    @property
    def agent_names(self) -> frozenset[str]:
        return self._host.context.agent_names

    @property
    def max_call_depth(self) -> int:
        return self._host.context.max_call_depth

    def output_schema(self, agent: str) -> dict[str, Any] | None:
        return self._host.context.output_schema(agent)


class InlineExecutor:
    """Runs the swarm's instances in this process (``executor="inline"``)."""

    name = "inline"

    def __init__(self, options: ExecutorOptions | None = None) -> None:
        self.options = options or ExecutorOptions()
        self._host: ExecutorHost | None = None
        self._hub: AgentsHub | None = None
        self._instances: dict[tuple[str, str], AgentInstance] = {}
        self._starting: dict[tuple[str, str], asyncio.Future[AgentInstance]] = {}
        self._listeners = Listeners()
        self.registry = SpawnRegistry()
        self.limiter = SpawnLimiter(AgentLimits())

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self, host: ExecutorHost) -> None:
        self._host = host
        self._hub = AgentsHub(_Directory(host), self)

    async def close(self, *, interrupt: bool = False) -> None:
        hub = self._hub
        if hub is None:
            return
        if interrupt:
            await self._cancel_background()
            # turns the caller's task does not own run on: a worker's turn a cancelled request was
            # waiting on (run shielded, so that a caller that gives up leaves it running). Cancelled
            # here, or closing its instance would wait for it to finish
            for instance in list(self._instances.values()):
                instance.cancel_turn()
        else:
            try:
                await hub.drain()
            except asyncio.CancelledError:
                await self._cancel_background()
                raise
        for instance in list(self._instances.values()):
            try:
                await instance.close()
            except Exception:
                log.exception("closing %s@%s failed", instance.agent_name, instance.instance_key)
        self._instances.clear()

    async def _cancel_background(self) -> None:
        """Turns of the caller's task are already cancelled with it; background ones (sends, async
        inter-agent requests) are cancelled here so that closing the instances does not wait."""
        assert self._hub is not None
        tasks = self._hub.tasks()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def kill_now(self) -> None:
        """Nothing to kill: the turns die with the host."""

    @property
    def _context(self) -> SwarmContext:
        if self._host is None:
            raise GoondanError("E_RUNTIME_NOT_STARTED", "the executor is not started")
        return self._host.context

    # --- instances ------------------------------------------------------------------------------

    async def get_instance(self, agent: str, instance_key: str) -> AgentInstance:
        """The running instance for (agent, key), started on first use; concurrent first uses share
        one start."""
        key = (agent, instance_key)
        instance = self._instances.get(key)
        if instance is not None:
            return instance
        pending = self._starting.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        ctx = self._context
        ctx.check_agent(agent)
        assert self._hub is not None
        future: asyncio.Future[AgentInstance] = asyncio.get_running_loop().create_future()
        self._starting[key] = future
        try:
            instance = ctx.build_instance(
                agent,
                instance_key,
                hub=self._hub,
                listeners=self._listeners.events,
                delta_listeners=self._listeners.deltas,
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

    async def _run(self, instance: AgentInstance, event: dict[str, Any]) -> TurnResult:
        result = await instance.run_turn(event)
        if instance.restart_requested is not None:
            await self._restart_requested(instance)
        return result

    async def _restart_requested(self, instance: AgentInstance) -> None:
        """A tool of the turn asked for a restart (``self-restart``): reload, then drop the instance."""
        reason = instance.restart_requested
        instance.restart_requested = None
        log.info("%s@%s requested a restart (%s)", instance.agent_name, instance.instance_key, reason)
        assert self._host is not None
        async with self._host.restart_lock:
            await self._host.reload_for_self_restart()
            await self._drop(instance)

    async def _drop(self, instance: AgentInstance) -> None:
        key = (instance.agent_name, instance.instance_key)
        if self._instances.get(key) is instance:
            del self._instances[key]
        await instance.close()
        for path in self._context.entry_paths(instance.agent_name):
            forget_path(path)

    async def instances(self) -> builtins.list[InstanceInfo]:
        from .._ids import parse_iso, utc_now
        from ..storage import InstanceInfo

        out = []
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

    def status(self, agent: str, instance_key: str) -> str | None:
        instance = self._instances.get((agent, instance_key))
        return instance.status if instance is not None else None

    async def restart(self, agents: set[str] | None, *, fresh: bool) -> builtins.list[str]:
        restarted: list[str] = []
        for instance in [i for i in list(self._instances.values()) if agents is None or i.agent_name in agents]:
            async with instance.lock:  # its current turn finishes first
                pass
            await self._drop(instance)
            restarted.append(f"{instance.agent_name}:{instance.instance_key}")
        if fresh:
            self._context.clear_histories(agents)
        return restarted

    async def delete(self, agent: str, instance_key: str) -> bool:
        instance = self._instances.pop((agent, instance_key), None)
        if instance is None:
            return False
        await instance.close()
        return True

    async def reloaded(self) -> None:
        """Instances built from now on use the new context; running ones keep theirs until restarted."""

    # --- turns ----------------------------------------------------------------------------------

    async def submit(self, agent: str, instance_key: str, event: dict[str, Any]) -> TurnResult:
        # a running instance is run here, without the coroutines of get_instance() and _run()
        instance = self._instances.get((agent, instance_key))
        if instance is None:
            instance = await self.get_instance(agent, instance_key)
        result = await instance.run_turn(event)
        if instance.restart_requested is not None:
            await self._restart_requested(instance)
        return result

    async def send(self, agent: str, instance_key: str, event: dict[str, Any]) -> bool:
        instance = await self.get_instance(agent, instance_key)
        assert self._hub is not None

        async def run() -> None:
            try:
                await self._run(instance, event)
            except Exception:
                log.exception("send to %s@%s failed", agent, instance_key)

        self._hub.track(asyncio.get_running_loop().create_task(run()))
        return True

    async def cancel(self, agent: str, instance_key: str) -> bool:
        instance = self._instances.get((agent, instance_key))
        return instance is not None and instance.cancel_turn()

    async def wait_idle(self) -> None:
        if self._hub is not None:
            await self._hub.drain()

    # --- inter-agent routing (the hub's backend) ------------------------------------------------------

    async def _target(self, target: str, key: str) -> AgentInstance:
        if (target, key) not in self._instances and (target, key) not in self._starting:
            self.limiter.update(self._context.agent_limits)
            self.limiter.admit(target, key, len(self._instances) + len(self._starting))
        try:
            return await self.get_instance(target, key)
        except GoondanError as exc:
            raise delivery_failed(target, exc) from exc

    async def run_request(self, target: str, key: str, event: dict[str, Any]) -> str:
        instance = await self._target(target, key)
        result = await asyncio.shield(self._run(instance, event))
        if result.finish_reason == "error":
            raise request_failed(target, result.error)
        if result.finish_reason in UNANSWERED:
            raise request_unanswered(target, result.finish_reason, result.pending_approvals)
        return result.text or ""

    async def run_send(self, target: str, key: str, event: dict[str, Any]) -> None:
        instance = await self._target(target, key)
        await self._run(instance, event)

    async def spawn(self, owner: tuple[str, str], target: str, key: str, cwd: str | None) -> dict[str, Any]:
        await self._target(target, key)
        fresh = self.registry.record(owner, target, key, cwd)
        return {"target": target, "instanceKey": key, "spawned": fresh, "cwd": cwd}

    async def list(self, owner: tuple[str, str], include_all: bool) -> dict[str, Any]:
        return self.registry.list(owner, include_all)

    # --- listeners ------------------------------------------------------------------------------

    def on_runtime_event(self, listener: RuntimeEventListener) -> Callable[[], None]:
        return self._listeners.on_runtime_event(listener)

    def on_text_delta(self, listener: RuntimeEventListener) -> Callable[[], None]:
        return self._listeners.on_text_delta(listener)


__all__ = ["InlineExecutor"]
