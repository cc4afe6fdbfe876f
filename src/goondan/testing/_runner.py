"""Running a user's real bundle in a test: real tools and extensions, chosen Models replaced, a
throwaway state root, and each turn handed back as a :class:`~goondan.testing.Turn`.

:class:`AsyncAgentRunner` is the asyncio form (``async with``); :class:`AgentRunner` runs the same
thing on a private event loop in a background thread, so plain synchronous tests (and the pytest
fixture) can use it without an async test plugin.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .._content import RequestInput
from ..errors import ConfigError, GoondanError
from ..messages import Message
from ..results import PendingApproval, TurnResult
from ..storage._events import current_records
from ..storage._jsonl import read_bytes
from ._cassette import Cassette, CassetteMismatch, CassetteProxy, redirect_models
from ._models import ModelOverrides, OverrideValue
from ._turn import Turn

T = TypeVar("T")

REPLAY_PLACEHOLDER_KEY = "goondan-replay-placeholder-key"
_ENV_MISSING = re.compile(r"required environment variable (\S+) is not set")


class _PlaceholderEnv(Mapping[str, str]):
    """The environment with placeholders for API-key variables a replayed cassette does not need (CI
    runs replays without provider keys; the bundle loader checks them at load)."""

    def __init__(self, base: Mapping[str, str], names: set[str]) -> None:
        self._base = base
        self._names = names

    def __getitem__(self, key: str) -> str:
        if key in self._base:
            return self._base[key]
        if key in self._names:
            return REPLAY_PLACEHOLDER_KEY
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        yield from self._base
        yield from (n for n in self._names if n not in self._base)

    def __len__(self) -> int:
        return len(set(self._base) | self._names)


class AsyncAgentRunner:
    """Runs one swarm of a bundle for a test.

    ``override_models`` maps Model names to a function ``fn(request) -> dict | str`` (sync or async),
    a list of replies (one per model call, in order), ``"provider/model"`` or a dict of Model spec
    fields. ``cassette`` (a path or :class:`Cassette`) records or replays the HTTP traffic of the
    bundle's network Models. ``env`` defaults to what ``gdn run`` uses (the process environment, then
    the bundle's ``.env`` and ``.env.local``). ``state_root=None`` uses a fresh temporary directory,
    removed at close unless ``keep_state=True``. Overrides and cassettes change the loaded bundle, not its files, so
    they need the turns to run in this process: ``executor="inline"`` (the default here).
    """

    def __init__(
        self,
        bundle: str | os.PathLike[str],
        *,
        override_models: Mapping[str, OverrideValue] | None = None,
        state_root: str | os.PathLike[str] | None = None,
        keep_state: bool = False,
        executor: str = "inline",
        swarm: str | None = None,
        env: Mapping[str, str] | None = None,
        cassette: str | os.PathLike[str] | Cassette | None = None,
        cassette_mode: str = "auto",
    ) -> None:
        self.bundle_path = Path(bundle)
        self._overrides = dict(override_models or {})
        self._own_root = state_root is None
        self._keep = keep_state
        self._scratch = Path(tempfile.mkdtemp(prefix="goondan-test-"))
        self.state_root = Path(state_root) if state_root is not None else self._scratch / "state"
        self._executor = executor
        self._swarm = swarm
        self._env: Mapping[str, str] = _bundle_env(self.bundle_path) if env is None else env
        if cassette is not None and not isinstance(cassette, Cassette):
            cassette = Cassette(cassette, cassette_mode)
        self.cassette: Cassette | None = cassette
        self.proxy: CassetteProxy | None = None
        self._models = ModelOverrides(self._scratch / "models")
        self.runtime: Any = None
        self.turns: list[Turn] = []

    async def __aenter__(self) -> AsyncAgentRunner:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _load(self) -> Any:
        # a test sends requests and starts no connector: a Connection's port and secrets need not be set
        from ..bundle import load_bundle_for_requests as load_bundle

        env = self._env
        if self.cassette is None or self.cassette.recording:
            return load_bundle(self.bundle_path, env=env, state_root=self.state_root)
        names: set[str] = set()
        while True:
            try:
                return load_bundle(self.bundle_path, env=_PlaceholderEnv(env, names), state_root=self.state_root)
            except ConfigError as exc:
                missing = {
                    m.group(1)
                    for issue in exc.errors
                    if issue.code == "E_CONFIG_ENV_MISSING" and (m := _ENV_MISSING.search(issue.message))
                }
                if not missing or missing <= names:
                    raise
                names |= missing

    async def start(self) -> None:
        try:
            await self._start()
        except GoondanError as exc:
            explain(exc)
            raise

    async def _start(self) -> None:
        from ..runtime import Runtime

        if self._executor != "inline" and (self._overrides or self.cassette is not None):
            raise GoondanError(
                "E_MODEL_OVERRIDE",
                f"model overrides and cassettes need executor='inline', not {self._executor!r}",
                suggestion="They change the loaded bundle, which agent processes would load again from disk; "
                "leave executor at its default.",
            )
        bundle = self._load()
        self._models.apply(bundle, self._overrides)
        if self.cassette is not None:
            self.proxy = CassetteProxy(self.cassette, {}).start()
            proxy = self.proxy
            for name, upstream in redirect_models(bundle, proxy.endpoint_for, set(self._overrides)):
                proxy.upstreams[name] = upstream
        self.state_root.mkdir(parents=True, exist_ok=True)
        self.runtime = Runtime(
            bundle,
            state_root=self.state_root,
            swarm=self._swarm,
            executor=self._executor,
            env=bundle.env,
        )
        await self.runtime.start()

    async def request(
        self,
        input: RequestInput,
        *,
        agent: str | None = None,
        instance_key: str | None = None,
        metadata: dict[str, Any] | None = None,
        stream: bool = False,
    ) -> Turn:
        """Run one turn and return it; a cassette mismatch fails here with the diff. ``stream=True``
        listens to text deltas as ``gdn run`` does (providers then stream) and keeps them in
        :attr:`Turn.text_deltas`."""
        rt = await self._started()
        return await self._turn(
            lambda: rt.request(input, agent=agent, instance_key=instance_key, metadata=metadata),
            agent,
            instance_key,
            stream,
        )

    async def approve(
        self,
        approval: str | PendingApproval,
        approved: bool = True,
        *,
        note: str | None = None,
        args: dict[str, Any] | None = None,
        stream: bool = False,
    ) -> Turn:
        """Decide a call the agent waits on, as a person would with ``gdn approvals``, and return the
        turn that resumes (it may wait again: see :attr:`Turn.pending_approvals`).

        ``approval`` is an item of ``turn.pending_approvals`` or its id; ``approved=False`` with a
        ``note`` denies it (the model gets ``E_TOOL_DENIED`` and the note), ``args`` replaces the
        call's arguments. An id that waits for nothing raises ``GoondanError``
        (``E_APPROVAL_NOT_FOUND`` / ``E_APPROVAL_DECIDED``) as ``Runtime.approve`` does."""
        rt = await self._started()
        approval_id = approval if isinstance(approval, str) else approval.approval_id
        waiting = next((p for p in await rt.pending_approvals() if p.approval_id == approval_id), None)
        agent, key = (waiting.agent_name, waiting.instance_key) if waiting is not None else (None, None)
        return await self._turn(lambda: rt.approve(approval_id, approved, note, args), agent, key, stream)

    async def _started(self) -> Any:
        if self.runtime is None:
            await self.start()
        return self.runtime

    async def _turn(
        self,
        run: Callable[[], Awaitable[TurnResult]],
        agent: str | None,
        instance_key: str | None,
        stream: bool,
    ) -> Turn:
        """``run()`` (a request, or a decision that resumes a turn) with the turn's runtime events
        (and, with ``stream``, text deltas) collected, as a :class:`Turn`."""
        rt = self.runtime
        events: list[dict[str, Any]] = []
        deltas: list[str] = []
        off = rt.on_runtime_event(lambda record: events.append(dict(record)))
        off_deltas = rt.on_text_delta(lambda record: deltas.append(str(record.get("delta", "")))) if stream else None
        started = time.perf_counter()
        try:
            result = await run()
            await asyncio.sleep(0)  # let listeners scheduled by the turn's last events run
        finally:
            off()
            if off_deltas is not None:
                off_deltas()
        latency = (time.perf_counter() - started) * 1000
        agent_name, key = rt._resolve_target(agent, instance_key)
        turn = Turn(result, agent_name, key, events, await self.conversation(agent_name, key), latency, deltas)
        self.turns.append(turn)
        if self.proxy is not None:
            mismatches = self.proxy.take_mismatches()
            if mismatches:
                details = "\n\n".join(m.describe() for m in mismatches)
                raise CassetteMismatch(
                    f"the cassette {self.cassette.path if self.cassette else ''} has no recording of "
                    f"{len(mismatches)} request(s) this turn sent (re-record with --goondan-record if the "
                    f"change is intended):\n{details}\n\n{turn.transcript()}"
                )
        return turn

    async def conversation(self, agent: str | None = None, instance_key: str | None = None) -> list[Message]:
        """The instance's conversation as stored (folded from its files, as a restart would load it)."""
        from ..conversation import ConversationState

        rt = self.runtime
        agent_name, key = rt._resolve_target(agent, instance_key)
        path = rt.workspace.instance_path(agent_name, key) if rt.workspace is not None else None
        if path is None or not Path(path).exists():
            if rt.executor.name != "inline":
                return []
            instance = await rt.get_instance(agent_name, key)
            state = instance.conversation
            return [m.copy() for m in state.next_messages] if state is not None else []
        base = [Message.from_record(r) for r in _jsonl(Path(path) / "messages" / "base.jsonl")]
        # the pending turn's events only (lines carry the base they apply on top of; see storage._events)
        raw = read_bytes(Path(path) / "messages" / "events.jsonl")
        events = [_event(r) for r in current_records(raw, len(base))]
        return list(ConversationState(base, events).next_messages)

    async def close(self) -> None:
        try:
            if self.runtime is not None:
                await self.runtime.close()
        finally:
            self.runtime = None
            self._models.close()
            if self.proxy is not None:
                self.proxy.close()
                self.proxy = None
            # a kept state root of our own stays (with its directory); the generated model modules never do
            shutil.rmtree(
                self._scratch / "models" if self._keep and self._own_root else self._scratch, ignore_errors=True
            )


def explain(exc: GoondanError) -> None:
    """Add where and how to fix to an error a test sees (PEP 678 notes, which pytest prints): its
    ``str()`` is only ``[CODE] message``, so a test failed on ``cannot override Model/scriptd``
    without the "did you mean 'scripted'?" that ``gdn`` prints, and on the first problem of a bundle
    without the others."""
    notes: list[str] = []
    issues = exc.errors if isinstance(exc, ConfigError) else []
    if len(issues) > 1:
        notes.append(f"{len(issues)} problems:")
        for issue in issues:
            where = f" ({issue.location})" if issue.location else ""
            notes.append(f"  [{issue.code}] {issue.message}{where}")
            if issue.suggestion:
                notes.append(f"    suggestion: {issue.suggestion}")
    elif exc.suggestion:  # a ConfigError's str() has its file:line already
        notes.append(f"suggestion: {exc.suggestion}")
    if notes and not any(note in getattr(exc, "__notes__", ()) for note in notes):
        for note in notes:
            exc.add_note(note)


def _bundle_env(bundle: Path) -> dict[str, str]:
    """The environment ``gdn run`` would use: the process's, then the bundle's ``.env`` and
    ``.env.local`` (where a developer keeps the provider key a recording needs)."""
    from ..cli._env import load_env

    return load_env(bundle.parent if bundle.suffix in (".yaml", ".yml") else bundle, None)


def _jsonl(path: Path) -> list[Any]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _event(record: dict[str, Any]) -> dict[str, Any]:
    if "message" in record:
        return {**record, "message": Message.from_record(record["message"])}
    return record


class AgentRunner:
    """The synchronous form of :class:`AsyncAgentRunner` (same arguments): its runtime lives on an
    event loop in a background thread, so it works in plain ``def test_...`` functions."""

    def __init__(self, bundle: str | os.PathLike[str], **options: Any) -> None:
        self._async = AsyncAgentRunner(bundle, **options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="goondan-test-runner", daemon=True)
        self._thread.start()
        self._closed = False

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            return asyncio.run_coroutine_threadsafe(coro, self._loop).result()
        except GoondanError as exc:
            explain(exc)
            raise

    @property
    def state_root(self) -> Path:
        return self._async.state_root

    @property
    def runtime(self) -> Any:
        return self._async.runtime

    @property
    def cassette(self) -> Cassette | None:
        return self._async.cassette

    @property
    def turns(self) -> list[Turn]:
        return self._async.turns

    def start(self) -> AgentRunner:
        self._run(self._async.start())
        return self

    def request(
        self,
        input: RequestInput,
        *,
        agent: str | None = None,
        instance_key: str | None = None,
        metadata: dict[str, Any] | None = None,
        stream: bool = False,
    ) -> Turn:
        return self._run(
            self._async.request(input, agent=agent, instance_key=instance_key, metadata=metadata, stream=stream)
        )

    def approve(
        self,
        approval: str | PendingApproval,
        approved: bool = True,
        *,
        note: str | None = None,
        args: dict[str, Any] | None = None,
        stream: bool = False,
    ) -> Turn:
        """See :meth:`AsyncAgentRunner.approve`."""
        return self._run(self._async.approve(approval, approved, note=note, args=args, stream=stream))

    def conversation(self, agent: str | None = None, instance_key: str | None = None) -> list[Message]:
        return self._run(self._async.conversation(agent, instance_key))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._run(self._async.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()

    def __enter__(self) -> AgentRunner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["AgentRunner", "AsyncAgentRunner"]
