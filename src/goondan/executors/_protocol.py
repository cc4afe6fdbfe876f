"""The seam between the ``Runtime`` facade and the places agent instances run.

An executor decides where an instance lives (the caller's process, one OS process per instance, a
cluster) and carries events to it; the engine (``goondan.engine``) runs the turn wherever that is.
The facade loads the bundle, builds events and picks an executor by name; everything that depends
on where instances live goes through :class:`Executor`, so a new executor plugs in without a branch
in the facade. What an executor needs from the facade in return is :class:`ExecutorHost`: it never
imports the facade itself.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..engine import SwarmContext
    from ..results import TurnResult
    from ..storage import InstanceInfo

RuntimeEventListener = Callable[[dict[str, Any]], Any]


@dataclasses.dataclass(frozen=True, slots=True)
class ExecutorOptions:
    """Tuning every executor receives (those that do not supervise processes ignore most of it).

    ``grace_period_ms`` ``None`` means the swarm's ``policy.shutdown.gracePeriodSeconds``; ``clock``
    is the supervisor's clock (tests inject a ``ManualClock``). ``cancel_grace_ms``: how long a
    cancelled turn gets to stop before the process executor kills its process (``None``: the
    default, 3000; ``0``: never)."""

    clock: Any = None
    reconcile_interval_ms: float = 5000
    crash_threshold: int = 5
    backoff_initial_ms: int = 1000
    backoff_max_ms: int = 300000
    grace_period_ms: int | None = None
    cancel_grace_ms: int | None = None


class ExecutorHost(Protocol):
    """What the facade offers the executor it drives.

    ``context`` is the swarm as loaded now (a restart or a watched change replaces it);
    ``restart_lock`` serialises restarts (the facade's, the watcher's and an agent's own); an agent
    that asks to restart itself may have edited its bundle, so the executor has the facade load it
    again with :meth:`reload_for_self_restart` (a broken bundle is logged and the old one kept)."""

    @property
    def context(self) -> SwarmContext: ...

    @property
    def restart_lock(self) -> asyncio.Lock: ...

    async def reload_for_self_restart(self) -> None: ...


@runtime_checkable
class Executor(Protocol):
    """Where the instances of one swarm run. One executor serves one runtime, started once.

    Lifecycle: :meth:`start` (after the facade loaded the bundle) … :meth:`close` (graceful: running
    turns and queued work finish within the grace period; ``interrupt=True``: running turns are
    cancelled, what they made durable stays). :meth:`kill_now` ends everything synchronously for a
    host that exits this instant.

    Turns: :meth:`submit` runs one event on ``(agent, instance_key)`` (started on first use) and
    returns its result; :meth:`send` queues one without waiting; :meth:`cancel` stops the running
    turn of an instance (it commits with ``finish_reason="cancelled"``), False when none runs. Turn
    failures are results with ``finish_reason="error"``; an instance that cannot start raises its
    ``GoondanError``.

    Inter-agent routing (the hub of ``ctx.agents`` and the ``agents__*`` tools): :meth:`run_request`,
    :meth:`run_send`, :meth:`spawn` and :meth:`list` — the calls an instance makes to reach another
    one, wherever it lives (the engine's ``HubBackend``).

    Instances: :meth:`instances` (the live ones, for a runtime that keeps nothing on disk),
    :meth:`status`, :meth:`restart`, :meth:`delete`. Reload: :meth:`reloaded` runs after the facade
    adopted a changed bundle (restart, watch, self-restart). Listeners registered with
    :meth:`on_runtime_event` / :meth:`on_text_delta` see every instance's records."""

    name: str

    async def start(self, host: ExecutorHost) -> None: ...

    async def close(self, *, interrupt: bool = False) -> None: ...

    def kill_now(self) -> None: ...

    async def submit(self, agent: str, instance_key: str, event: dict[str, Any]) -> TurnResult: ...

    async def send(self, agent: str, instance_key: str, event: dict[str, Any]) -> bool: ...

    async def cancel(self, agent: str, instance_key: str) -> bool: ...

    async def wait_idle(self) -> None: ...

    async def run_request(self, target: str, key: str, event: dict[str, Any]) -> str: ...

    async def run_send(self, target: str, key: str, event: dict[str, Any]) -> None: ...

    async def spawn(self, owner: tuple[str, str], target: str, key: str, cwd: str | None) -> dict[str, Any]: ...

    async def list(self, owner: tuple[str, str], include_all: bool) -> dict[str, Any]: ...

    async def instances(self) -> builtins.list[InstanceInfo]: ...

    def status(self, agent: str, instance_key: str) -> str | None: ...

    async def restart(self, agents: set[str] | None, *, fresh: bool) -> builtins.list[str]: ...

    async def delete(self, agent: str, instance_key: str) -> bool: ...

    async def reloaded(self) -> None: ...

    def on_runtime_event(self, listener: RuntimeEventListener) -> Callable[[], None]: ...

    def on_text_delta(self, listener: RuntimeEventListener) -> Callable[[], None]: ...


ExecutorFactory = Callable[[ExecutorOptions], Executor]

__all__ = ["Executor", "ExecutorFactory", "ExecutorHost", "ExecutorOptions", "RuntimeEventListener"]
