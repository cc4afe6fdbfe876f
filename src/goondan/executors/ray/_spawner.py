"""The orchestrator's spawner for the Ray executor: one named Ray actor per agent instance.

It offers what the orchestrator asks of the process executor's fork server (``start``,
``spawn(spec) -> (pid, Connection)``, ``kill(pid, sig)``, ``children``, ``close`` and the exit
callback), so supervision is the same code. A "pid" here is a number of this spawner's own (a Ray
actor may move between nodes; its worker pid means nothing on the head). Each spawn:

1. creates the actor ``"<agent>@<key>"`` in the workspace's namespace (``goondan-<workspace id>``),
   placed by Ray (``SPREAD`` by default) with ``max_restarts=0``: a dead actor is restarted by the
   orchestrator, with its crash counting and backoff, as a new actor wherever Ray finds room — on
   another node when its node is gone;
2. calls ``serve`` on it, which connects back to this spawner's TCP listener on the head and
   presents the spawn's random token, then speaks the IPC records of the process executor;
3. watches the ``serve`` result: a return value is the exit code, a dead actor (killed, crashed,
   node lost) exit code -9.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
from collections.abc import Callable
from typing import Any

from ..._dist import install_command
from ...errors import GoondanError
from ..process._ipc import Connection
from ._actor import TOKEN_BYTES, AgentActor

log = logging.getLogger("goondan.executors.ray")

ExitCallback = Callable[[int, int], None]
KILLED = -9  # the exit code of an actor whose worker (or node) died
START_TIMEOUT_S = 120.0  # a new actor may wait for a worker process and import goondan first
NAME_RETRY_S = 10.0  # a killed actor's name is released asynchronously by Ray's control store
IPC_LIMIT = 64 * 1024 * 1024
PLACEMENT_ATTEMPTS = 5
# how long an actor may be unconnected before the cluster is asked whether any node could ever
# hold it (an actor that only waits for a worker process to start connects well within this)
UNPLACED_CHECK_S = 3.0
# "pids" are unique in the process: the orchestrator keeps a reloaded runtime's old spawner next to
# the new one until its actors are gone, and maps exits by pid
_PIDS = itertools.count(1)
# (namespace, name) of the actors this process ended: Ray may hold their names a moment longer
_RELEASING: set[tuple[str, str]] = set()


def import_ray() -> Any:
    """``ray``, or a clear error naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise GoondanError(
            "E_RAY_NOT_INSTALLED",
            "the Ray executor needs the 'ray' package, which is not installed",
            suggestion=install_command("ray"),
        ) from None
    return ray


def namespace_for(workspace_id: str) -> str:
    """One Ray namespace per workspace: two swarms on one cluster never share an actor name."""
    return f"goondan-{workspace_id}"


def actor_name(agent: str, key: str) -> str:
    return f"{agent}@{key}"


class RaySpawner:
    """Spawns agent instances as named Ray actors (see the module docstring)."""

    def __init__(
        self,
        init: dict[str, Any],
        on_exit: ExitCallback,
        *,
        namespace: str,
        actor_options: dict[str, Any],
        bind_host: str,
    ) -> None:
        self._init = init
        self._on_exit = on_exit
        self.namespace = namespace
        self._actor_options = actor_options
        self._bind_host = bind_host
        self._server: asyncio.Server | None = None
        self._address: tuple[str, int] | None = None
        self._pending: dict[str, asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]]] = {}
        self._handles: dict[int, Any] = {}
        self._names: dict[int, str] = {}
        self._watchers: dict[int, asyncio.Task[None]] = {}
        self._remote_cls: Any = None
        self.children: set[int] = set()
        self.alive = False
        # actor name -> why no node of the cluster can hold it (found while it waited)
        self._unplaceable: dict[str, str] = {}

    async def start(self) -> None:
        ray = import_ray()
        self._remote_cls = ray.remote(AgentActor)
        self._server = await asyncio.start_server(self._on_connect, self._bind_host, 0, limit=IPC_LIMIT)
        sockname = self._server.sockets[0].getsockname()
        self._address = (str(sockname[0]), int(sockname[1]))
        self.alive = True

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            raw = await asyncio.wait_for(reader.readexactly(TOKEN_BYTES), 10.0)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        fut = self._pending.pop(raw.decode("ascii", "replace"), None)
        if fut is None or fut.done():
            writer.close()
            return
        fut.set_result((reader, writer))

    def handle(self, pid: int) -> Any:
        """The Ray actor handle behind ``pid`` (``None`` once it exited)."""
        return self._handles.get(pid)

    async def _create(self, name: str) -> Any:
        """The named actor. Its name may still be held by an actor of this process that is going
        away (Ray releases a name asynchronously): that is waited for, up to ``NAME_RETRY_S``. A
        name held by anyone else is another runtime serving the same workspace on this cluster:
        ``E_INSTANCE_LOCKED`` at once, naming the holder, as the store's lease would."""
        deadline = asyncio.get_running_loop().time() + NAME_RETRY_S
        opts = {"scheduling_strategy": "SPREAD", **self._actor_options}
        while True:
            try:
                return self._remote_cls.options(
                    name=name, namespace=self.namespace, max_restarts=0, max_task_retries=0, **opts
                ).remote(list(self._init.get("sysPath") or []))
            except ValueError as exc:  # the name is taken
                log.debug("ray actor name %s still taken: %s", name, exc)
                ours = (self.namespace, name) in _RELEASING
                if not ours or asyncio.get_running_loop().time() > deadline:
                    raise await self._locked(name, ours) from None
                await asyncio.sleep(0.05)

    async def _locked(self, name: str, ours: bool) -> GoondanError:
        ray = import_ray()
        holder = "an actor that is still going away" if ours else "another runtime"
        with contextlib.suppress(Exception):
            actor = ray.get_actor(name, namespace=self.namespace)
            where = await asyncio.wait_for(asyncio.wrap_future(actor.where.remote().future()), 5.0)
            holder += f" (Ray actor {name!r}: pid {where['pid']} on {where['host']}, node {where['nodeId'][:12]})"
        return GoondanError(
            "E_INSTANCE_LOCKED",
            f"agent instance {name} is in use by {holder} in Ray namespace {self.namespace!r}",
            suggestion="Another runtime (a `gdn run`, a program using goondan.Runtime) serves this workspace "
            "on the same Ray cluster. Send the request through it, stop it first, or use another "
            "--instance-key.",
        )

    async def spawn(self, spec: dict[str, Any]) -> tuple[int, Connection]:
        """A new actor for the instance, connected back to this head. An actor that dies before it
        ran at all was placed on a node that is going away (Ray learns of a lost node from missed
        heartbeats): it is placed again, up to ``PLACEMENT_ATTEMPTS`` times."""
        if not self.alive or self._address is None:
            raise GoondanError("E_RAY_SPAWNER_CLOSED", "the Ray executor is not running")
        name = actor_name(str(spec["agent"]), str(spec["instanceKey"]))
        deadline = asyncio.get_running_loop().time() + START_TIMEOUT_S
        for attempt in range(1, PLACEMENT_ATTEMPTS + 1):
            pid, served, connected = await self._place(name, spec, deadline)
            if connected is not None:
                self._watchers[pid] = asyncio.get_running_loop().create_task(self._watch(pid, served))
                return pid, Connection(*connected)
            reason = f"did not connect within {START_TIMEOUT_S:.0f} s" if not served.done() else _why(served)
            if not served.done() or attempt == PLACEMENT_ATTEMPTS or not _never_ran(served):
                break
            log.info("ray actor %s was lost before it ran (%s); placing it again", name, reason)
        unplaced = self._unplaceable.pop(name, None)
        if unplaced is not None and not served.done():
            raise GoondanError(
                "E_RAY_ACTOR_START",
                f"the Ray actor {name!r} was never placed within {START_TIMEOUT_S:.0f} s: {unplaced}",
                suggestion="Ask for what a node has in GOONDAN_RAY_ACTOR_OPTIONS (or the executor's "
                "actor_options: num_cpus, num_gpus, memory, resources), or add a node that has it.",
            )
        raise GoondanError(
            "E_RAY_ACTOR_START",
            f"the Ray actor {name!r} could not start: {reason}",
            suggestion="Check that goondan and the bundle's dependencies are installed on every node, "
            "the bundle directory exists at the same path there, and the node can reach the head.",
        )

    async def _place(
        self, name: str, spec: dict[str, Any], deadline: float
    ) -> tuple[int, asyncio.Future[Any], tuple[asyncio.StreamReader, asyncio.StreamWriter] | None]:
        """One actor for ``name``: its pid, its ``serve`` result and its stream (``None`` when it
        ended or timed out before connecting; it is killed then)."""
        assert self._address is not None
        loop = asyncio.get_running_loop()
        token = secrets.token_hex(TOKEN_BYTES // 2)
        connected: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = loop.create_future()
        self._pending[token] = connected
        try:
            handle = await self._create(name)
            ref = handle.serve.remote(self._address, token, self._init, spec)
        except BaseException:
            self._pending.pop(token, None)
            raise
        pid = next(_PIDS)
        _RELEASING.discard((self.namespace, name))
        served: asyncio.Future[Any] = asyncio.wrap_future(ref.future())
        self._handles[pid] = handle
        self._names[pid] = name
        self.children.add(pid)
        try:
            waiting = {connected, served}
            first = min(UNPLACED_CHECK_S, max(0.0, deadline - loop.time()))
            done, _ = await asyncio.wait(waiting, timeout=first, return_when=asyncio.FIRST_COMPLETED)
            if not done:
                await self._check_placeable(name)
                await asyncio.wait(
                    waiting, timeout=max(0.0, deadline - loop.time()), return_when=asyncio.FIRST_COMPLETED
                )
        except BaseException:
            self._pending.pop(token, None)
            self._forget(pid, kill=True)
            raise
        if not connected.done():
            self._pending.pop(token, None)
            self._forget(pid, kill=True)
            return pid, served, None
        log.debug("ray actor %s connected as pid %d", name, pid)
        return pid, served, connected.result()

    async def _check_placeable(self, name: str) -> None:
        """An actor that asks for more than any node has (``{"num_gpus": 1}`` on a cluster without
        GPUs, a typo in a custom resource's name) waits in Ray's queue without a word until the
        start timeout: say so now, once, with what it asks and what the nodes offer. Only a
        warning: an autoscaler may still add such a node."""
        demand = resource_demand(self._actor_options)
        if not demand:
            return
        ray = import_ray()
        try:
            nodes = await asyncio.to_thread(ray.nodes)
        except Exception:  # the check is advice; a cluster that cannot list nodes fails elsewhere
            return
        reason = unplaceable(demand, [n.get("Resources") or {} for n in nodes if n.get("Alive")])
        if reason is not None:
            self._unplaceable[name] = reason
            log.warning(
                "Ray actor %r cannot be placed: %s; waiting up to %.0f s for such a node to join",
                name,
                reason,
                START_TIMEOUT_S,
            )

    async def _watch(self, pid: int, served: asyncio.Future[Any]) -> None:
        try:
            code = await served
            code = code if isinstance(code, int) else 0
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            code = KILLED
            log.info("ray actor of pid %d ended: %s", pid, type(exc).__name__)
        self._watchers.pop(pid, None)
        self._forget(pid, kill=True)
        self._on_exit(pid, code)

    def _forget(self, pid: int, *, kill: bool) -> None:
        handle = self._handles.pop(pid, None)
        self.children.discard(pid)
        name = self._names.pop(pid, None)
        if name is not None:
            _RELEASING.add((self.namespace, name))
        if kill and handle is not None:
            ray = import_ray()
            with contextlib.suppress(Exception):
                ray.kill(handle, no_restart=True)

    def kill(self, pid: int, sig: int) -> None:
        """Any signal ends the actor (Ray has no graceful kill; the graceful part is the IPC
        ``shutdown`` the orchestrator sent before). Its watcher reports the exit."""
        handle = self._handles.get(pid)
        if handle is None:
            return
        ray = import_ray()
        with contextlib.suppress(Exception):
            ray.kill(handle, no_restart=True)

    async def close(self, timeout: float = 10.0) -> None:
        """Kill every actor still alive (a graceful stop already happened over IPC) and stop
        listening; each exit is reported."""
        self.alive = False
        for fut in self._pending.values():
            if not fut.done():
                fut.cancel()
        self._pending.clear()
        for pid in list(self._handles):
            self.kill(pid, 9)
        watchers = list(self._watchers.values())
        if watchers:
            await asyncio.wait(watchers, timeout=timeout)
        for pid, task in list(self._watchers.items()):
            task.cancel()
            self._watchers.pop(pid, None)
            self._forget(pid, kill=False)
            self._on_exit(pid, KILLED)
        if self._server is not None:
            self._server.close()
            self._server = None


def resource_demand(options: dict[str, Any]) -> dict[str, float]:
    """What an actor created with ``options`` needs from one node to be placed: Ray reserves one
    CPU to place an actor unless ``num_cpus`` says otherwise. Empty when the options place it some
    other way (a placement group, a node-affinity strategy) this check cannot reason about."""
    strategy = options.get("scheduling_strategy", "SPREAD")
    if not isinstance(strategy, str) or options.get("placement_group") is not None:
        return {}
    try:
        demand = {"CPU": float(options.get("num_cpus", 1))}
        if options.get("num_gpus"):
            demand["GPU"] = float(options["num_gpus"])
        if options.get("memory"):
            demand["memory"] = float(options["memory"])
        for key, value in (options.get("resources") or {}).items():
            demand[str(key)] = float(value)
    except (TypeError, ValueError, AttributeError):
        return {}  # Ray itself refuses such options when the actor is created
    return {k: v for k, v in demand.items() if v > 0}


def unplaceable(demand: dict[str, float], nodes: list[dict[str, float]]) -> str | None:
    """Why no node in ``nodes`` (their total resources) can ever hold ``demand``; None if one can."""
    if any(all(node.get(k, 0.0) >= v for k, v in demand.items()) for node in nodes):
        return None
    asked = ", ".join(f"{k} {v:g}" for k, v in demand.items())
    offers = [", ".join(f"{k} {node.get(k, 0.0):g}" for k in demand) for node in nodes[:4]]
    more = f" and {len(nodes) - 4} more" if len(nodes) > 4 else ""
    have = "; ".join(f"[{o}]" for o in offers) + more if nodes else "no node is alive"
    return f"it asks for {asked} and no node of the cluster has that (nodes: {have})"


def _never_ran(served: asyncio.Future[Any]) -> bool:
    """Whether ``serve`` failed because its actor died before running anything (placed on a node
    that was lost, or cancelled by Ray), as opposed to our code failing in it."""
    if served.cancelled():
        return False
    exc = served.exception()
    if exc is None:
        return False
    ray = import_ray()
    return isinstance(exc, ray.exceptions.RayActorError) and not isinstance(exc, ray.exceptions.RayTaskError)


def _why(served: asyncio.Future[Any]) -> str:
    if served.cancelled():
        return "cancelled"
    exc = served.exception()
    if exc is None:
        return f"it exited with code {served.result()!r} before connecting"
    detail = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {detail[:400]}"


__all__ = ["KILLED", "RaySpawner", "actor_name", "import_ray", "namespace_for"]
