"""The programmatic runtime: ``Runtime`` and the ``run`` convenience wrapper.

``Runtime`` is a facade. It loads the bundle, builds the events of ``request``/``send``, keeps the
bundle watcher and the restart lock, and hands everything that depends on where instances run to an
executor picked by name (``executor="process"`` by default, ``"inline"``; env ``GOONDAN_EXECUTOR``;
``isolation=`` / ``GOONDAN_ISOLATION`` are the old names). Every executor builds instances through
the engine's :class:`SwarmContext`, so a turn behaves the same in each.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._content import RequestInput, normalize_input
from .._ids import new_id, now_iso
from ..engine import AgentInstance, AgentLimits, RuntimeEventListener, SwarmContext
from ..errors import GoondanError
from ..executors import Executor, ExecutorOptions, open_executor, resolve_executor_name
from ..results import PendingApproval, TurnResult
from . import _approvals

if TYPE_CHECKING:
    from ..storage import InstanceInfo, StoreBackend, WorkspaceStore
    from ..telemetry import Telemetry


ENV_CANCEL_GRACE = "GOONDAN_CANCEL_GRACE_MS"


def _cancel_grace_ms(value: Any) -> int | None:
    """``cancel_grace_ms=``, else ``GOONDAN_CANCEL_GRACE_MS``, else ``None`` (the executor's default):
    a whole number of milliseconds, ``0`` for never."""
    what = "cancel_grace_ms"
    if value is None:
        raw = os.environ.get(ENV_CANCEL_GRACE, "").strip()
        if not raw:
            return None
        what, value = ENV_CANCEL_GRACE, int(raw) if raw.isdigit() else raw
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise GoondanError(
            "E_RUNTIME_OPTION",
            f"{what} must be a whole number of milliseconds (0 or more), got {value!r}",
            suggestion="Give how long a cancelled turn may take to stop before its agent process is "
            "killed, e.g. 3000 (the default); 0 never kills it.",
        )
    return value


class _Host:
    """The facade as its executor sees it (:class:`goondan.executors.ExecutorHost`)."""

    def __init__(self, runtime: Runtime) -> None:
        self._rt = runtime
        self.restart_lock = asyncio.Lock()

    @property
    def context(self) -> SwarmContext:
        ctx = self._rt._ctx
        assert ctx is not None
        return ctx

    async def reload_for_self_restart(self) -> None:
        await self._rt._reload_for_self_restart()


class Runtime:
    """Runs one swarm of a bundle. Use as ``async with goondan.Runtime(path) as rt: ...``.

    ``executor``: where instances run, ``"process"`` (default: one OS process each) or ``"inline"``
    (this process); ``isolation`` is its old name; env ``GOONDAN_EXECUTOR``. ``store``: where
    conversations are kept, a URL (``None`` or a directory path: the filesystem store,
    ``"memory:"``: in memory; env ``GOONDAN_STORE``; see :func:`goondan.storage.open_store`).
    ``persist=False`` is ``store="memory:"`` (nothing is written under the state root; agent
    processes are then never evicted). ``watch=True`` restarts the agents a changed bundle file
    affects. ``clock``, ``reconcile_interval_ms``, ``crash_threshold``,
    ``backoff_initial_ms``/``backoff_max_ms`` and ``grace_period_ms`` tune the process supervisor
    (tests inject a ``ManualClock``). ``cancel_grace_ms`` (env ``GOONDAN_CANCEL_GRACE_MS``, default
    3000, ``0``: never): how long a cancelled turn may take to stop before the process executor
    kills its agent process (see :meth:`cancel`).
    """

    def __init__(
        self,
        bundle: str | os.PathLike[str] | Any,
        *,
        state_root: str | os.PathLike[str] | None = None,
        swarm: str | None = None,
        executor: str | None = None,
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
        cancel_grace_ms: int | None = None,
    ) -> None:
        options = ExecutorOptions(
            clock=clock,
            reconcile_interval_ms=reconcile_interval_ms,
            crash_threshold=crash_threshold,
            backoff_initial_ms=backoff_initial_ms,
            backoff_max_ms=backoff_max_ms,
            grace_period_ms=grace_period_ms,
            cancel_grace_ms=_cancel_grace_ms(cancel_grace_ms),
        )
        self.executor: Executor = open_executor(resolve_executor_name(executor, isolation), options)
        self._bundle_arg = bundle
        self._state_root_arg = state_root
        self._swarm_arg = swarm
        self.persist = persist
        self._store_arg = store
        self.store: StoreBackend | None = None
        self._env = env
        self.watch = watch
        self._watch_interval_ms = watch_interval_ms
        self.log = logging.getLogger("goondan.runtime")
        self._host = _Host(self)
        self._ctx: SwarmContext | None = None
        self._old_contexts: list[SwarmContext] = []
        self._watch_task: asyncio.Task[None] | None = None
        self._fingerprints: dict[str, str] = {}
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
        # timers that deny approvals when they expire while this runtime runs
        self._approval_timers: set[asyncio.Task[None]] = set()
        self._telemetry: Telemetry | None = None  # OpenTelemetry export, when configured

    @property
    def isolation(self) -> str:
        """The executor's name (the old name of the setting)."""
        return self.executor.name

    @property
    def orchestrator(self) -> Any:
        """The process supervisor of the ``process`` executor (``None`` for executors without one)."""
        return getattr(self.executor, "orchestrator", None)

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
        # A runtime starts no connector (gdn run's connector supervisor resolves each Connection's
        # config itself), so a Connection's port and secrets need not be set: a program embedding the
        # runtime failed with E_CONFIG_ENV_MISSING for a webhook Connection's PORT it never uses.
        from ..bundle import Bundle, load_bundle_for_requests

        bundle = self._bundle_arg
        if isinstance(bundle, Bundle):
            if self._started:  # a reload: read the same directory again
                return load_bundle_for_requests(bundle.root, env=bundle.env, state_root=self.state_root)
            return bundle
        return load_bundle_for_requests(bundle, env=self._env, state_root=self.state_root)

    def _adopt(self, bundle: Any) -> None:
        assert self.state_root is not None
        old = self._ctx
        self._ctx = SwarmContext(
            bundle, swarm=self._swarm_arg, state_root=self.state_root, persist=self.persist, store=self.store
        )
        if old is not None:
            # instances that were not restarted still write through the old context's stores
            self._old_contexts.append(old)
        ctx = self._ctx
        self.bundle = bundle
        self.swarm = ctx.swarm
        self.swarm_name = ctx.swarm_name
        self.entry_agent = ctx.entry_agent
        self.agent_names = ctx.agent_names
        self.swarm_instance_key = ctx.swarm_instance_key
        self.workspace = ctx.workspace

    async def _reload(self) -> None:
        """Load the bundle again and hand the new swarm to the executor (raises on a broken bundle)."""
        self._adopt(self._load())
        await self.executor.reloaded()

    async def start(self) -> None:
        if self._started:
            return
        from ..storage import resolve_state_root, runtime_store

        self.state_root = Path(resolve_state_root(self._state_root_arg, self._env))
        self.store = runtime_store(self._store_arg, persist=self.persist, state_root=self.state_root, env=self._env)
        self.persist = self.store.durable
        self._adopt(self._load())
        self._start_telemetry()
        try:
            await self.executor.start(self._host)
        except BaseException:
            if self._telemetry is not None:  # never started: nobody will close() it
                self._telemetry.shutdown(0.5)
                self._telemetry = None
            raise
        self._started = True
        if self.watch:
            from ._watch import agent_fingerprints

            self._fingerprints = agent_fingerprints(self.bundle, self._swarm_arg)
            self._watch_task = asyncio.get_running_loop().create_task(self._watch_loop())

    def _start_telemetry(self) -> None:
        """OpenTelemetry export (goondan.telemetry): spans built from the runtime events every
        executor forwards to this process. Off unless the environment or the bundle names a
        receiver; off, nothing is imported and no event is looked at."""
        from ..telemetry import start_telemetry

        setting = getattr(getattr(self.swarm, "spec", None), "telemetry", None)
        env = getattr(self.bundle, "env", None)
        telemetry = start_telemetry(
            setting,
            os.environ if env is None else env,
            swarm=self.swarm_name,
            where=f"Swarm/{self.swarm_name} spec.telemetry",
        )
        if telemetry is not None:
            self._telemetry = telemetry
            self.executor.on_runtime_event(telemetry.on_event)

    @property
    def agent_limits(self) -> AgentLimits:
        """Inter-agent bounds of the swarm's policy (call depth, instance spawn rate and cap)."""
        return self._ctx.agent_limits if self._ctx is not None else AgentLimits()

    @property
    def max_call_depth(self) -> int:
        return self.agent_limits.max_call_depth

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
        for timer in list(self._approval_timers):
            timer.cancel()
        if self._watch_task is not None:
            self._watch_task.cancel()
            with contextlib.suppress(BaseException):
                await self._watch_task
        await self.executor.close(interrupt=interrupt)
        for ctx in [*self._old_contexts, self._ctx]:
            if ctx is not None:
                ctx.close()
        if self._telemetry is not None:  # after the executor: the last turns' spans are in
            # Ctrl+C promises an exit within about a second: the last batch gets half of one
            await asyncio.to_thread(self._telemetry.shutdown, 0.5 if interrupt else 3.0)

    def kill_now(self) -> None:
        """End every agent process at once (SIGKILL) and leave no instance ``processing`` on disk:
        for a host about to exit without closing (a second Ctrl+C). Their turns recover as after
        any crash on the next start. Does nothing inline, where the turns die with the host."""
        self.executor.kill_now()

    def _require_started(self) -> None:
        if not self._started:
            raise GoondanError(
                "E_RUNTIME_NOT_STARTED",
                "the runtime is not started",
                suggestion="Use `async with goondan.Runtime(path) as rt:` or await rt.start() first.",
            )
        if self._closed:
            raise GoondanError("E_RUNTIME_CLOSED", "the runtime is closed")

    async def get_instance(self, agent: str, instance_key: str) -> AgentInstance:
        """The running instance for (agent, key), started on first use, for executors that run
        instances in this process (``"inline"``)."""
        self._require_started()
        get = getattr(self.executor, "get_instance", None)
        if get is None:
            raise GoondanError(
                "E_RUNTIME_OPTION",
                f"get_instance() needs instances in this process; the {self.executor.name!r} executor runs "
                "them elsewhere",
                suggestion="Use executor='inline' to reach an AgentInstance object.",
            )
        instance: AgentInstance = await get(agent, instance_key)
        return instance

    def on_runtime_event(self, listener: RuntimeEventListener) -> Callable[[], None]:
        """Subscribe to every runtime event record of every instance (CLI, logs, tests)."""
        return self.executor.on_runtime_event(listener)

    def on_text_delta(self, listener: RuntimeEventListener) -> Callable[[], None]:
        """Subscribe to streamed model text (``{"type": "text.delta", "delta", "agentName", ...}``).
        With agent processes, subscribing switches running processes to forward their deltas (and
        unsubscribing back off), so a process sends no delta frames while nobody listens."""
        return self.executor.on_text_delta(listener)

    # --- requests ---------------------------------------------------------------------------

    def _event(  # request() passes these positionally (once per turn; keywords cost ~0.4k instructions each)
        self,
        text: RequestInput,
        event_type: str,
        instance_key: str,
        metadata: Mapping[str, Any] | None,
        trace_id: str | None,
        source: Mapping[str, Any] | None,
        auth: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        event: dict[str, Any] = {
            "id": new_id("evt"),
            "type": event_type,
            "createdAt": now_iso(),
            # content parts are checked (and paths read) here, where the caller's files are
            "input": text if type(text) is str else normalize_input(text),
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
        input: RequestInput,
        agent: str | None = None,
        instance_key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        trace_id: str | None = None,
        source: Mapping[str, Any] | None = None,
        auth: Mapping[str, Any] | None = None,
    ) -> TurnResult:
        """Run one turn on ``agent`` (default: the entry agent) and return its result.

        ``input`` is a string or a list of content parts: ``{"type": "text", "text"}``,
        ``{"type": "image", "mediaType", "path" | "url" | "data"}``, ``{"type": "file", "mediaType",
        "name", "path" | "url" | "data"}`` (``data`` base64; each part at most 20 MiB,
        ``GOONDAN_MAX_ATTACHMENT_BYTES``). Bad parts raise ``GoondanError`` (``E_CONTENT_*``).

        Turn failures come back as ``TurnResult(finish_reason="error")``; an instance that cannot
        start (e.g. an extension fails to register) raises its :class:`GoondanError`."""
        name, key = self._resolve_target(agent, instance_key)
        event = self._event(input, "message", key, metadata, trace_id, source, auth)
        # _approvals.submit inlined: one coroutine less on every request
        result: TurnResult = await self.executor.submit(name, key, event)
        if result.finish_reason == "awaiting_approval":  # the only results watch_expiry acts on
            _approvals.watch_expiry(self, name, key, result)
        return result

    async def approve(
        self,
        approval_id: str,
        approved: bool = True,
        note: str | None = None,
        args: dict[str, Any] | None = None,
        *,
        by: str = "api",
    ) -> TurnResult:
        """Decide a paused tool call and resume its turn; returns the turn's result, which may wait
        again (``awaiting_approval``: other calls of the step, or a later step). ``approved=False``
        gives the model an ``E_TOOL_DENIED`` result with ``note``; ``args`` approves the call with
        edited arguments. Works on turns paused by an earlier runtime: nothing waited in memory.

        Raises ``GoondanError``: ``E_APPROVAL_NOT_FOUND`` for an id nothing waits on,
        ``E_APPROVAL_DECIDED`` for one decided already (naming by whom and when), and
        ``E_APPROVAL_INVALID`` for a field of the wrong type or ``args`` that do not fit the tool's
        parameters; then nothing is decided."""
        self._require_started()
        return await _approvals.approve(self, approval_id, approved, note, args, by)

    async def pending_approvals(
        self, agent: str | None = None, instance_key: str | None = None
    ) -> list[PendingApproval]:
        """The tool calls of this swarm waiting for a decision, oldest first (read from the store,
        so the instances need not be running). Approvals past their expiry are denied first."""
        self._require_started()
        return await _approvals.pending(self, agent, instance_key)

    async def cancel(self, agent: str | None = None, instance_key: str | None = None) -> bool:
        """Stop the running turn of ``agent`` (default: the entry agent) within about a second, in
        every executor: the model call is cancelled, tool processes are killed, every call left
        without a result gets ``E_TOOL_CANCELLED``, and the turn commits with
        ``finish_reason="cancelled"`` (its awaited request returns that result). Returns False when
        no turn was running there. Returns at once: with the process executor, a turn still running
        ``cancel_grace_ms`` later (code that ignores cancellation, such as a synchronous tool) has
        its agent process killed, and its request resolves ``cancelled`` once a fresh process has
        answered its calls; the inline executor cannot stop such code (docs/guides/approvals.md)."""
        name, key = self._resolve_target(agent, instance_key)
        return await self.executor.cancel(name, key)

    async def send(
        self,
        input: RequestInput,
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
        return await self.executor.send(name, key, event)

    async def wait_idle(self) -> None:
        """Wait until every queued send and inter-agent call has finished."""
        await self.executor.wait_idle()

    # --- instances ------------------------------------------------------------------------------

    async def instances(self) -> list[InstanceInfo]:
        """Instances of this swarm's workspace (from the store when persisting, else the live ones)."""
        self._require_started()
        if self.persist and self.workspace is not None:
            return list(self.workspace.list_instances())
        return await self.executor.instances()

    def process_status(self, agent: str, instance_key: str) -> str | None:
        """The executor's status of one instance (``spawning``, ``idle``, ``processing``,
        ``draining``, ``terminated``, ``crashed``, ``crashLoopBackOff``), or None if never started."""
        return self.executor.status(agent, instance_key)

    async def delete_instance(self, agent: str, instance_key: str) -> bool:
        """Remove one instance's history and extension state; a running instance is stopped first
        (its current turn finishes)."""
        self._require_started()
        existed = await self.executor.delete(agent, instance_key)
        if self.workspace is not None:
            deleted = self.workspace.delete_instance(agent, instance_key)
            if self.persist:
                return bool(deleted)
        return existed

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
        async with self._host.restart_lock:
            await self._reload()
            return await self.executor.restart({agent} if agent else None, fresh=fresh)

    async def _reload_for_self_restart(self) -> None:
        """A self-restarting agent may have edited its own bundle files: load them again (a broken
        bundle is logged and the instance restarts on the configuration it had)."""
        try:
            bundle = self._load()
        except GoondanError as exc:
            self.log.error("self-restart: the bundle no longer loads, keeping the old configuration: %s", exc)
            return
        self._adopt(bundle)
        await self.executor.reloaded()

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
                try:
                    async with self._host.restart_lock:
                        self._adopt(bundle)
                        await self.executor.reloaded()
                        await self.executor.restart(set(changed), fresh=False)
                except GoondanError as exc:
                    report.failed(exc)
                    continue
            report.applied(changed)


def run(
    bundle: str | os.PathLike[str],
    input: RequestInput,
    *,
    state_root: str | os.PathLike[str] | None = None,
    swarm: str | None = None,
    agent: str | None = None,
    instance_key: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    executor: str | None = None,
    isolation: str | None = None,
    persist: bool = True,
    store: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> TurnResult:
    """Synchronous one-shot: start a runtime, run one request, close."""

    async def main() -> TurnResult:
        async with Runtime(
            bundle,
            state_root=state_root,
            swarm=swarm,
            executor=executor,
            isolation=isolation,
            persist=persist,
            store=store,
            env=env,
        ) as rt:
            return await rt.request(input, agent=agent, instance_key=instance_key, metadata=metadata)

    return asyncio.run(main())


__all__ = ["Runtime", "run"]
