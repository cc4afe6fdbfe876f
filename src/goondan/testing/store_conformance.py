"""The store conformance suite: the rules every :class:`~goondan.storage.InstanceStore` backend keeps.

The same tests run against the filesystem store, the in-memory store and any third-party backend
(a database store, say) through one fixture, so a new backend proves itself by passing them. It
needs ``pytest``.

Use it from a test module of your own::

    import pytest
    from goondan.testing.store_conformance import StoreConformance

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def store_backend(self, tmp_path):
            return MyStoreBackend(dsn=..., schema=f"t_{tmp_path.name}")

        @pytest.fixture
        def store_factory(self, store_backend):
            return lambda workspace_id="conformance": store_backend.workspace(workspace_id)

``store_backend`` is the backend those handles come from (its ``list_workspaces`` is checked).

``store_factory(workspace_id)`` must return a *new* :class:`~goondan.storage.WorkspaceStore` handle on
the same stored data at every call (as a second runtime would open it), empty at the start of each
test. Two handles are how the suite plays two runtimes: the lease tests expect the second one to be
refused while the first holds an instance.

Optional capability, crash points: a backend that can kill its writer at chosen points of its write
protocol sets :attr:`StoreConformance.crash_points` (point name -> phase: ``"event_append"``,
``"append_commit"`` or ``"rewrite_commit"``) and implements
:meth:`StoreConformance.run_turns_killed_at`, which runs :func:`run_turns` in another process that
dies at the point. The suite then checks that a reload loses nothing and applies nothing twice.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol

import pytest

from ..errors import GoondanError, StorageError
from ..messages import (
    Message,
    MessageEvent,
    append_event,
    remove_event,
    replace_event,
    truncate_event,
    user_message,
)
from ..storage import InstanceStore, StoreBackend, WorkspaceStore

_FIXED_TIME = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)

#: A turn as JSON-friendly data: ``["append", id]``, ``["replace", target, id]``, ``["remove", target]``,
#: ``["truncate"]`` - so that a child process can be given the same turn.
TurnSpec = Sequence[Sequence[str]]


class StoreFactory(Protocol):
    def __call__(self, workspace_id: str = ...) -> WorkspaceStore: ...


def msg(mid: str) -> Message:
    """A message with a fixed id and timestamp (records compare equal across processes)."""
    return dataclasses.replace(user_message(f"text of {mid}", id=mid), created_at=_FIXED_TIME)


def build_events(spec: TurnSpec) -> list[MessageEvent]:
    out: list[MessageEvent] = []
    for item in spec:
        if item[0] == "append":
            out.append(append_event(msg(item[1])))
        elif item[0] == "replace":
            out.append(replace_event(item[1], msg(item[2])))
        elif item[0] == "remove":
            out.append(remove_event(item[1]))
        else:
            out.append(truncate_event())
    return out


def fold(base: Sequence[Message], events: Sequence[Any]) -> list[Message]:
    """The reference fold: append at the end, replace/remove by id (a missing target is skipped),
    truncate empties."""
    out = list(base)
    for e in events:
        kind = e["type"]
        if kind == "append":
            out.append(e["message"])
        elif kind == "truncate":
            out = []
        else:
            idx = next((i for i, m in enumerate(out) if m.id == e["targetId"]), None)
            if idx is None:
                continue
            if kind == "replace":
                out[idx] = e["message"]
            else:
                del out[idx]
    return out


def records(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [m.to_record() for m in messages]


def run_turn(store: InstanceStore, base: Sequence[Message], events: Sequence[MessageEvent]) -> list[Message]:
    """Append each event, then commit the fold as the runtime does (the delta hint when the turn only
    appended)."""
    for e in events:
        store.append_event(e)
    nxt = fold(base, events)
    only_appends = all(e["type"] == "append" for e in events) and len(nxt) == len(base) + len(events)
    appended = [e["message"] for e in events if e["type"] == "append" and isinstance(e["message"], Message)]
    store.commit(nxt, appended if only_appends else None)
    return nxt


def run_turns(store: InstanceStore, turns: Sequence[TurnSpec]) -> list[Message]:
    """Load (replaying residual events) and run ``turns``; what a crash-point child process runs."""
    loaded = store.load()
    conv = fold(loaded.base, loaded.events)
    for spec in turns:
        conv = run_turn(store, conv, build_events(spec))
    return conv


def expected(*turns: TurnSpec) -> list[dict[str, Any]]:
    conv: list[Message] = []
    for spec in turns:
        conv = fold(conv, build_events(spec))
    return records(conv)


SETUP: TurnSpec = [["append", "a1"], ["append", "a2"]]
APPEND_TURN: TurnSpec = [["append", "b1"], ["append", "b2"], ["append", "b3"]]
REWRITE_TURN: TurnSpec = [["append", "c1"], ["replace", "a1", "a1v2"], ["remove", "a2"]]
NEXT_TURN: TurnSpec = [["append", "n1"], ["remove", "a1"]]


def _random_turns(seed: int, n_turns: int) -> list[list[list[str]]]:
    rng = random.Random(seed)
    ids: list[str] = []
    turns: list[list[list[str]]] = []
    for t in range(n_turns):
        turn: list[list[str]] = []
        for i in range(rng.randint(1, 4)):
            roll, new = rng.random(), f"r{t}-{i}"
            if roll < 0.75 or not ids:
                turn.append(["append", new])
                ids.append(new)
            elif roll < 0.87:
                turn.append(["replace", rng.choice(ids), new])
                ids.append(new)
            elif roll < 0.98:
                turn.append(["remove", rng.choice(ids)])
            else:
                turn.append(["truncate"])
        turns.append(turn)
    return turns


class StoreConformance:
    """Subclass it in a test module and provide the ``store_factory`` fixture (module docstring)."""

    AGENT: ClassVar[str] = "agent"
    KEY: ClassVar[str] = "key-1"

    #: Crash points this backend can die at (name -> phase); empty: the crash tests skip.
    crash_points: ClassVar[dict[str, str]] = {}

    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        raise NotImplementedError("a StoreConformance subclass provides the store_factory fixture")

    @pytest.fixture
    def store_backend(self) -> StoreBackend:
        """The backend ``store_factory`` opens its workspaces from (for ``list_workspaces``)."""
        raise NotImplementedError("a StoreConformance subclass provides the store_backend fixture")

    def run_turns_killed_at(
        self, factory: StoreFactory, agent: str, key: str, turns: list[TurnSpec], point: str
    ) -> None:
        """Run ``run_turns(<the instance>, turns)`` in another process that dies at crash point
        ``point``; return once that process is gone (it must not finish the turns)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers

    def _open(self, factory: StoreFactory, key: str | None = None) -> InstanceStore:
        return factory().instance(self.AGENT, key or self.KEY)

    def _reload(self, factory: StoreFactory, key: str | None = None) -> tuple[list[dict[str, Any]], Any]:
        ws = factory()
        store = ws.instance(self.AGENT, key or self.KEY)
        try:
            loaded = store.load()
        finally:
            store.close()
            ws.close()
        return records(fold(loaded.base, loaded.events)), loaded

    def _commit_turns(self, factory: StoreFactory, *turns: TurnSpec, key: str | None = None) -> None:
        ws = factory()
        store = ws.instance(self.AGENT, key or self.KEY)
        try:
            run_turns(store, turns)
        finally:
            store.close()
            ws.close()

    # ------------------------------------------------------------------ conversation

    def test_a_new_instance_loads_empty(self, store_factory: StoreFactory) -> None:
        store = self._open(store_factory)
        loaded = store.load()
        assert (loaded.base, loaded.events) == ([], [])
        store.close()

    def test_events_appended_without_commit_are_replayed_by_the_next_load(self, store_factory: StoreFactory) -> None:
        self._commit_turns(store_factory, SETUP)
        store = self._open(store_factory)
        store.load()
        for e in build_events(REWRITE_TURN):
            store.append_event(e)
        store.close()  # the turn never committed, as when its process dies
        conv, loaded = self._reload(store_factory)
        assert records(loaded.base) == expected(SETUP)
        assert [e["type"] for e in loaded.events] == ["append", "replace", "remove"]
        assert conv == expected(SETUP, REWRITE_TURN)

    def test_commit_folds_the_events_into_base_and_clears_them(self, store_factory: StoreFactory) -> None:
        self._commit_turns(store_factory, SETUP, REWRITE_TURN)
        _conv, loaded = self._reload(store_factory)
        assert records(loaded.base) == expected(SETUP, REWRITE_TURN)
        assert loaded.events == []

    def test_append_only_commits_with_the_delta_hint_keep_every_message_in_order(
        self, store_factory: StoreFactory
    ) -> None:
        turns = [[["append", f"m{t}-{i}"] for i in range(3)] for t in range(20)]
        self._commit_turns(store_factory, *turns)
        _conv, loaded = self._reload(store_factory)
        assert records(loaded.base) == expected(*turns) and loaded.events == []

    def test_a_delta_hint_that_is_not_the_turns_appends_falls_back_to_a_full_rewrite(
        self, store_factory: StoreFactory
    ) -> None:
        self._commit_turns(store_factory, SETUP)
        store = self._open(store_factory)
        _a1, a2 = store.load().base
        b1, a1x = msg("b1"), msg("a1x")
        store.append_event(append_event(b1))
        store.append_event(replace_event("a1", a1x))
        # the turn also replaced a1, but the caller claims it only appended b1
        nxt = [a1x, a2, b1]
        store.commit(nxt, [b1])
        store.close()
        conv, loaded = self._reload(store_factory)
        assert conv == records(nxt) and records(loaded.base) == records(nxt)

    def test_commit_after_reopen_continues_on_the_stored_base(self, store_factory: StoreFactory) -> None:
        self._commit_turns(store_factory, SETUP)
        self._commit_turns(store_factory, APPEND_TURN)
        self._commit_turns(store_factory, NEXT_TURN)
        conv, loaded = self._reload(store_factory)
        assert conv == expected(SETUP, APPEND_TURN, NEXT_TURN) and loaded.events == []

    def test_random_turns_reload_to_the_reference_fold(self, store_factory: StoreFactory) -> None:
        turns = _random_turns(7, 60)
        for start in range(0, len(turns), 15):  # a new opener every 15 turns
            self._commit_turns(store_factory, *turns[start : start + 15])
            conv, loaded = self._reload(store_factory)
            assert conv == expected(*turns[: start + 15]) and loaded.events == []

    def test_writing_without_loading_a_stored_conversation_is_refused(self, store_factory: StoreFactory) -> None:
        self._commit_turns(store_factory, SETUP)
        store = self._open(store_factory)
        with pytest.raises(StorageError) as info:
            store.commit([msg("x")], None)
        assert info.value.code == "E_STORAGE_NOT_LOADED"
        store.close()
        conv, _ = self._reload(store_factory)
        assert conv == expected(SETUP)

    # ------------------------------------------------------------------ runtime events

    def test_runtime_events_are_read_back_in_append_order_after_reopen(self, store_factory: StoreFactory) -> None:
        store = self._open(store_factory)
        store.load()
        for i in range(5):
            store.append_runtime_event({"type": "turn.started", "n": i})
        store.append_runtime_event({"type": "owned", "n": 5}, owned=True)
        store.close()
        store = self._open(store_factory)
        assert [e["n"] for e in store.read_runtime_events()] == [0, 1, 2, 3, 4, 5]
        store.close()

    def test_runtime_events_are_snapshots_of_what_was_appended(self, store_factory: StoreFactory) -> None:
        store = self._open(store_factory)
        record = {"type": "t", "data": {"n": 1}}
        store.append_runtime_event(record)
        record["data"] = {"n": 2}
        read = store.read_runtime_events()
        read[0]["data"]["n"] = 3
        assert store.read_runtime_events() == [{"type": "t", "data": {"n": 1}}]
        store.close()

    def test_runtime_event_batches_keep_their_order_among_single_appends(self, store_factory: StoreFactory) -> None:
        """Optional capability (``append_runtime_events``, see ``storage._protocol.RuntimeEventBatches``):
        a batch is its records appended one after the other, between the single appends around it,
        and what it keeps does not change when the caller reuses its list and records."""
        store = self._open(store_factory)
        append_batch = getattr(store, "append_runtime_events", None)
        if append_batch is None:
            store.close()
            return  # not offered: the engine appends one record at a time
        store.load()
        store.append_runtime_event({"type": "single", "n": 0})
        batch: list[dict[str, Any]] = [{"type": "batched", "n": n} for n in (1, 2, 3)]
        append_batch(batch)
        batch[0]["n"] = 99
        batch.clear()
        append_batch(batch)  # an empty batch keeps nothing
        store.append_runtime_event({"type": "single", "n": 4})
        append_batch([{"type": "batched", "n": 5}])
        append_batch([{"type": "batched", "n": 6}, {"type": "batched", "n": 7}])
        store.close()
        store = self._open(store_factory)
        assert [e["n"] for e in store.read_runtime_events()] == [0, 1, 2, 3, 4, 5, 6, 7]
        store.close()

    # ------------------------------------------------------------------ extension state

    def test_extension_state_round_trips_as_json_per_extension(self, store_factory: StoreFactory) -> None:
        store = self._open(store_factory)
        items = [1, 2]
        value: dict[str, Any] = {"list": items, "nested": {"s": "é"}, "none": None, "f": 1.5, "b": True}
        store.save_extension_state("memory", value)
        store.save_extension_state("other", [1])
        items.append(3)  # a later change of the caller's value is not what was saved
        store.close()
        store = self._open(store_factory)
        assert store.load_extension_state("memory") == {
            "list": [1, 2],
            "nested": {"s": "é"},
            "none": None,
            "f": 1.5,
            "b": True,
        }
        assert store.load_extension_state("other") == [1]
        assert store.load_extension_state("never-saved") is None
        store.close()

    def test_extension_state_that_is_not_json_is_refused(self, store_factory: StoreFactory) -> None:
        store = self._open(store_factory)
        with pytest.raises(StorageError) as info:
            store.save_extension_state("e", {"x": object()})
        assert info.value.code == "E_STORAGE_NOT_JSON"
        assert store.load_extension_state("e") is None
        store.close()

    def test_clearing_one_extension_state_keeps_the_others(self, store_factory: StoreFactory) -> None:
        store = self._open(store_factory)
        store.save_extension_state("a", 1)
        store.save_extension_state("b", 2)
        store.clear_extension_state("a")
        store.clear_extension_state("never-saved")
        assert (store.load_extension_state("a"), store.load_extension_state("b")) == (None, 2)
        store.close()

    def test_fresh_start_clears_history_runtime_events_and_extension_state_but_keeps_metadata(
        self, store_factory: StoreFactory
    ) -> None:
        self._commit_turns(store_factory, SETUP)
        store = self._open(store_factory)
        store.load()
        store.append_event(append_event(msg("pending")))
        store.append_runtime_event({"type": "t"})
        store.save_extension_state("memory", {"summary": "old"})
        store.write_metadata(agent_name=self.AGENT, instance_key=self.KEY, status="idle")
        store.clear_history()
        run_turn(store, [], build_events([["append", "new"]]))
        store.close()
        conv, loaded = self._reload(store_factory)
        assert conv == expected([["append", "new"]]) and loaded.events == []
        store = self._open(store_factory)
        assert store.read_runtime_events() == []
        assert store.load_extension_state("memory") is None
        meta = store.read_metadata()
        assert meta is not None and meta["agentName"] == self.AGENT
        store.close()

    # ------------------------------------------------------------------ attachments

    def test_attachments_round_trip_by_their_sha256_after_reopen(self, store_factory: StoreFactory) -> None:
        data = bytes(range(256)) * 5
        store = self._open(store_factory)
        store.load()
        digest = store.put_attachment(data)
        assert digest == hashlib.sha256(data).hexdigest()
        assert store.put_attachment(data) == digest  # the same bytes are one attachment
        store.close()
        store = self._open(store_factory)
        assert store.read_attachment(digest) == data
        store.close()

    def test_an_unknown_or_malformed_attachment_id_is_not_found(self, store_factory: StoreFactory) -> None:
        store = self._open(store_factory)
        for bad in ("0" * 64, "../metadata.json", "ABC"):
            with pytest.raises(GoondanError) as info:
                store.read_attachment(bad)
            assert info.value.code == "E_ATTACHMENT_NOT_FOUND"
        store.close()

    def test_fresh_start_deletes_the_attachments(self, store_factory: StoreFactory) -> None:
        store = self._open(store_factory)
        store.load()
        digest = store.put_attachment(b"old image")
        store.clear_history()
        with pytest.raises(GoondanError):
            store.read_attachment(digest)
        store.close()

    def test_deleting_the_instance_deletes_its_attachments(self, store_factory: StoreFactory) -> None:
        ws = store_factory()
        store = ws.instance(self.AGENT, self.KEY)
        store.load()
        digest = store.put_attachment(b"an image")
        store.write_metadata(agent_name=self.AGENT, instance_key=self.KEY, status="idle")
        store.close()
        assert ws.delete_instance(self.AGENT, self.KEY) is True
        ws.close()
        store = self._open(store_factory)
        with pytest.raises(GoondanError) as info:
            store.read_attachment(digest)
        assert info.value.code == "E_ATTACHMENT_NOT_FOUND"
        store.close()

    # ------------------------------------------------------------------ paused turn (approvals)

    def test_a_paused_turn_record_survives_reopen_and_is_readable_while_another_holds_the_lease(
        self, store_factory: StoreFactory
    ) -> None:
        record = {"turnId": "turn-1", "approvals": [{"approvalId": "appr-1", "args": {"cmd": "ls"}}]}
        store = self._open(store_factory)
        assert store.read_paused_turn() is None
        store.load()
        store.write_paused_turn(record)
        holder_ws = store_factory()  # a second handle reads it while the first still holds the lease
        assert holder_ws.instance(self.AGENT, self.KEY).read_paused_turn() == record
        holder_ws.close()
        store.close()
        store = self._open(store_factory)
        assert store.read_paused_turn() == record
        store.load()
        store.write_paused_turn(None)
        assert store.read_paused_turn() is None
        store.close()

    def test_a_paused_turn_record_keeps_held_results_and_inbox_messages_exactly(
        self, store_factory: StoreFactory
    ) -> None:
        """A paused turn keeps messages in its record (results held back for call order, inter-agent
        responses that came while calls wait): they must come back unchanged after a reopen."""
        message = {
            "id": "msg-1",
            "data": {"role": "user", "content": [{"type": "text", "text": 'réponse \u2603 \n"q"'}]},
            "metadata": {"__goondanInterAgentResponse": {"async": True, "status": "ok", "n": 2**53}},
            "createdAt": "2026-01-01T00:00:00.000Z",
            "source": {"type": "system"},
        }
        record = {"turnId": "turn-1", "approvals": [], "held": [{"toolCallId": "c2", "message": message}]}
        record["inbox"] = [message, {**message, "id": "msg-2"}]
        store = self._open(store_factory)
        store.load()
        store.write_paused_turn(record)
        store.close()
        store = self._open(store_factory)
        assert store.read_paused_turn() == record
        store.close()

    def test_writing_a_paused_turn_needs_the_lease(self, store_factory: StoreFactory) -> None:
        holder = self._open(store_factory)
        holder.load()
        other_ws = store_factory()
        other = other_ws.instance(self.AGENT, self.KEY)
        with pytest.raises(GoondanError) as info:
            other.write_paused_turn({"turnId": "t"})
        assert info.value.code == "E_INSTANCE_LOCKED"
        assert holder.read_paused_turn() is None
        other_ws.close()
        holder.close()

    def test_fresh_start_drops_the_paused_turn(self, store_factory: StoreFactory) -> None:
        store = self._open(store_factory)
        store.load()
        store.write_paused_turn({"turnId": "t"})
        store.clear_history()
        assert store.read_paused_turn() is None
        store.close()

    # ------------------------------------------------------------------ metadata, list, delete

    def test_metadata_round_trips_and_keeps_created_at(self, store_factory: StoreFactory) -> None:
        store = self._open(store_factory)
        assert store.read_metadata() is None
        store.write_metadata(agent_name=self.AGENT, instance_key=self.KEY, status="processing")
        first = store.read_metadata()
        store.close()
        store = self._open(store_factory)
        store.write_metadata(agent_name=self.AGENT, instance_key=self.KEY, status="idle")
        meta = store.read_metadata()
        store.close()
        assert first is not None and meta is not None
        assert meta["status"] == "idle" and first["status"] == "processing"
        assert meta["createdAt"] == first["createdAt"]
        assert meta["updatedAt"] >= first["updatedAt"]
        assert (meta["agentName"], meta["instanceKey"]) == (self.AGENT, self.KEY)

    def test_list_instances_shows_every_instance_with_metadata_sorted(self, store_factory: StoreFactory) -> None:
        ws = store_factory()
        for agent, key, status in [("b", "k1", "idle"), ("a", "k2", "processing"), ("a", "k1", "idle")]:
            ws.instance(agent, key).write_metadata(agent_name=agent, instance_key=key, status=status)
        ws.instance("c", "no-metadata").load()  # an instance that never wrote metadata is not listed
        ws.close()
        infos = store_factory().list_instances()
        assert [(i.agent_name, i.instance_key, i.status) for i in infos] == [
            ("a", "k1", "idle"),
            ("a", "k2", "processing"),
            ("b", "k1", "idle"),
        ]
        assert all(i.created_at <= i.updated_at for i in infos)

    def test_workspaces_never_share_an_instance(self, store_factory: StoreFactory) -> None:
        self._commit_turns(store_factory, SETUP)
        ws = store_factory("another-workspace")
        store = ws.instance(self.AGENT, self.KEY)
        assert store.load().base == []
        store.write_metadata(agent_name=self.AGENT, instance_key=self.KEY, status="idle")
        store.close()
        assert store_factory().list_instances() == []

    def test_delete_instance_removes_conversation_state_and_metadata(self, store_factory: StoreFactory) -> None:
        self._commit_turns(store_factory, SETUP)
        ws = store_factory()
        store = ws.instance(self.AGENT, self.KEY)
        store.save_extension_state("e", 1)
        store.write_metadata(agent_name=self.AGENT, instance_key=self.KEY, status="idle")
        store.append_runtime_event({"type": "t"})
        store.close()
        assert ws.delete_instance(self.AGENT, self.KEY) is True
        assert ws.delete_instance(self.AGENT, self.KEY) is False
        assert ws.list_instances() == []
        ws.close()
        store = self._open(store_factory)
        assert store.load().base == []
        assert store.load_extension_state("e") is None
        assert store.read_metadata() is None and store.read_runtime_events() == []
        store.close()

    def test_an_open_instance_is_the_same_store_until_it_is_closed(self, store_factory: StoreFactory) -> None:
        ws = store_factory()
        first = ws.instance(self.AGENT, self.KEY)
        assert ws.instance(self.AGENT, self.KEY) is first
        first.close()
        assert first.closed
        second = ws.instance(self.AGENT, self.KEY)
        assert second is not first and not second.closed
        ws.close()

    # ------------------------------------------------------------------ the single-writer lease

    def test_a_second_opener_gets_instance_locked_naming_the_holder(self, store_factory: StoreFactory) -> None:
        holder = self._open(store_factory)
        holder.load()
        other = self._open(store_factory)
        with pytest.raises(GoondanError) as info:
            other.load()
        assert info.value.code == "E_INSTANCE_LOCKED"
        assert f"pid {os.getpid()}" in str(info.value) and "since" in str(info.value)
        assert info.value.suggestion
        holder.load()  # the holder itself may load again
        holder.close()
        other.close()

    def test_closing_the_holder_lets_the_next_opener_in_with_a_higher_token(self, store_factory: StoreFactory) -> None:
        first = self._open(store_factory)
        first.load()
        token = first.lease_token
        assert isinstance(token, int)
        first.close()
        assert first.lease_token is None
        second = self._open(store_factory)
        second.load()
        assert isinstance(second.lease_token, int) and second.lease_token > token
        second.close()

    def test_a_commit_of_a_stale_holder_fails_with_lease_lost_and_writes_nothing(
        self, store_factory: StoreFactory
    ) -> None:
        stale = self._open(store_factory)
        base = run_turn(stale, stale.load().base, build_events([["append", "a1"]]))
        # another runtime deletes the instance by force and starts it over
        assert store_factory().delete_instance(self.AGENT, self.KEY, force=True) is True
        self._commit_turns(store_factory, [["append", "b1"]])
        fresh = self._open(store_factory)
        fresh.load()  # the new holder is live while the stale one tries to write
        stale.append_event(append_event(msg("a2")))
        with pytest.raises(StorageError) as info:
            stale.commit([*base, msg("a2")], [msg("a2")])
        assert info.value.code == "E_INSTANCE_LEASE_LOST"
        with pytest.raises(StorageError) as info:
            stale.commit([*base, msg("a2")], None)
        assert info.value.code == "E_INSTANCE_LEASE_LOST"
        stale.close()
        fresh.close()
        conv, loaded = self._reload(store_factory)
        assert conv == expected([["append", "b1"]]) and loaded.events == []

    def test_deleting_a_held_instance_is_refused_unless_forced(self, store_factory: StoreFactory) -> None:
        holder = self._open(store_factory)
        run_turn(holder, holder.load().base, build_events(SETUP))
        with pytest.raises(GoondanError) as info:
            store_factory().delete_instance(self.AGENT, self.KEY)
        assert info.value.code == "E_INSTANCE_LOCKED"
        holder.close()
        conv, _ = self._reload(store_factory)
        assert conv == expected(SETUP)

    def test_closing_the_workspace_frees_the_leases_of_its_stores(self, store_factory: StoreFactory) -> None:
        ws = store_factory()
        ws.instance(self.AGENT, self.KEY).load()
        ws.close()  # closes its open stores, as a runtime does on shutdown
        store = self._open(store_factory)
        store.load()
        store.close()

    # ------------------------------------------------------------------ read-only readers

    def test_a_reader_of_a_missing_instance_reads_empty_and_creates_nothing(
        self, store_factory: StoreFactory, store_backend: StoreBackend
    ) -> None:
        reader = store_factory().reader(self.AGENT, self.KEY)
        assert (reader.agent_name, reader.instance_key) == (self.AGENT, self.KEY)
        assert reader.metadata() is None and reader.message_count() == 0
        assert reader.messages() == [] and reader.message_events() == []
        assert reader.runtime_events() == ([], 0)
        reader.close()
        assert store_factory().list_instances() == []
        assert store_backend.list_workspaces() == []

    def test_a_reader_never_takes_the_lease_of_a_live_writer(self, store_factory: StoreFactory) -> None:
        self._commit_turns(store_factory, SETUP)
        reader = store_factory().reader(self.AGENT, self.KEY)
        assert [m.id for m in reader.messages()] == ["a1", "a2"]  # before the writer opens
        writer = self._open(store_factory)
        writer.load()  # not refused: the reader holds nothing
        run_turn(writer, [msg("a1"), msg("a2")], build_events(APPEND_TURN))
        assert [m.id for m in reader.messages()] == ["a1", "a2", "b1", "b2", "b3"]  # while it holds
        writer.close()
        reader.close()

    def test_a_reader_pages_the_conversation_in_order(self, store_factory: StoreFactory) -> None:
        turns = [[["append", f"p{t}-{i}"] for i in range(5)] for t in range(5)]
        self._commit_turns(store_factory, *turns)
        reader = store_factory().reader(self.AGENT, self.KEY)
        assert reader.message_count() == 25
        pages = [reader.messages(offset, 10) for offset in (0, 10, 20)]
        assert [len(p) for p in pages] == [10, 10, 5]
        assert records([m for page in pages for m in page]) == expected(*turns)
        assert records(reader.messages(7, 3)) == expected(*turns)[7:10]
        assert reader.messages(25, 10) == [] and reader.messages(99) == []
        assert records(reader.messages()) == expected(*turns)

    def test_a_reader_shows_the_pending_events_of_a_turn_in_progress(self, store_factory: StoreFactory) -> None:
        self._commit_turns(store_factory, SETUP)
        writer = self._open(store_factory)
        writer.load()
        reader = store_factory().reader(self.AGENT, self.KEY)
        for e in build_events(APPEND_TURN)[:2]:
            writer.append_event(e)
        assert [m.id for m in reader.messages()] == ["a1", "a2", "b1", "b2"] and reader.message_count() == 4
        assert [m.id for m in reader.messages(3, 5)] == ["b2"]
        pending = reader.message_events()
        assert [(e["type"], e["message"]["id"]) for e in pending] == [("append", "b1"), ("append", "b2")]
        writer.commit([msg("a1"), msg("a2"), msg("b1"), msg("b2")], [msg("b1"), msg("b2")])
        assert reader.message_events() == []
        assert [m.id for m in reader.messages()] == ["a1", "a2", "b1", "b2"]
        writer.close()

    def test_a_reader_folds_a_pending_rewrite_turn_and_follows_its_commit(self, store_factory: StoreFactory) -> None:
        self._commit_turns(store_factory, SETUP, APPEND_TURN)
        reader = store_factory().reader(self.AGENT, self.KEY)
        assert reader.message_count() == 5  # the reader is kept across the commits below
        writer = self._open(store_factory)
        writer.load()
        for e in build_events(REWRITE_TURN):
            writer.append_event(e)
        assert records(reader.messages()) == expected(SETUP, APPEND_TURN, REWRITE_TURN)
        assert [e["type"] for e in reader.message_events()] == ["append", "replace", "remove"]
        writer.close()
        self._commit_turns(store_factory, NEXT_TURN)  # replays the pending turn, then rewrites
        want = expected(SETUP, APPEND_TURN, REWRITE_TURN, NEXT_TURN)
        assert records(reader.messages()) == want and reader.message_count() == len(want)
        self._commit_turns(store_factory, [["append", "z1"]])
        assert [m.id for m in reader.messages(len(want))] == ["z1"]

    def test_a_reader_tails_runtime_events_from_its_cursor(self, store_factory: StoreFactory) -> None:
        writer = self._open(store_factory)
        writer.load()
        for i in range(3):
            writer.append_runtime_event({"type": "turn.started", "n": i})
        reader = store_factory().reader(self.AGENT, self.KEY)
        events, cursor = reader.runtime_events()
        assert [e["n"] for e in events] == [0, 1, 2]
        assert reader.runtime_events(cursor) == ([], cursor)
        writer.append_runtime_event({"type": "turn.completed", "n": 3})
        writer.append_runtime_event({"type": "turn.started", "n": 4}, owned=True)
        events, cursor2 = reader.runtime_events(cursor)
        assert [e["n"] for e in events] == [3, 4]
        one, c1 = reader.runtime_events(0, limit=1)
        two, c2 = reader.runtime_events(c1, limit=2)
        rest, c3 = reader.runtime_events(c2)
        assert [e["n"] for e in one + two + rest] == [0, 1, 2, 3, 4] and c3 == cursor2
        events[0]["n"] = 99  # the caller's copy
        assert [e["n"] for e in reader.runtime_events()[0]] == [0, 1, 2, 3, 4]
        writer.clear_history()  # a fresh start: the old cursor starts over
        writer.append_runtime_event({"type": "turn.started", "n": 5})
        assert [e["n"] for e in reader.runtime_events(cursor2)[0]] == [5]
        writer.close()

    def test_a_readers_version_changes_with_every_write_and_only_then(self, store_factory: StoreFactory) -> None:
        writer = self._open(store_factory)
        writer.load()
        reader = store_factory().reader(self.AGENT, self.KEY)
        seen = [reader.version()]

        def changed() -> bool:
            now = reader.version()
            fresh = now != seen[-1]
            seen.append(now)
            return fresh

        assert not changed()
        writer.write_metadata(agent_name=self.AGENT, instance_key=self.KEY, status="processing")
        assert changed() and reader.metadata() is not None
        writer.append_event(append_event(msg("v1")))
        assert changed()
        writer.commit([msg("v1")], [msg("v1")])
        assert changed()
        writer.append_runtime_event({"type": "turn.completed"})
        assert changed()
        assert not changed()
        writer.close()

    def test_list_workspaces_names_every_workspace_that_stored_something(
        self, store_factory: StoreFactory, store_backend: StoreBackend
    ) -> None:
        for ws_id in ("ws-b", "ws-a"):
            ws = store_factory(ws_id)
            ws.instance(self.AGENT, self.KEY).write_metadata(
                agent_name=self.AGENT, instance_key=self.KEY, status="idle"
            )
            ws.close()
        store_factory("ws-untouched").reader(self.AGENT, self.KEY).messages()
        assert store_backend.list_workspaces() == ["ws-a", "ws-b"]

    # ------------------------------------------------------------------ crash points (optional)

    def test_a_writer_killed_at_any_crash_point_loses_nothing_and_applies_nothing_twice(
        self, store_factory: StoreFactory
    ) -> None:
        if not self.crash_points:
            pytest.skip("this backend declares no crash points")
        for n, (point, phase) in enumerate(sorted(self.crash_points.items())):
            key = f"crash-{n}"
            self._commit_turns(store_factory, SETUP, key=key)
            turn = REWRITE_TURN if phase == "rewrite_commit" else APPEND_TURN
            self.run_turns_killed_at(store_factory, self.AGENT, key, [turn], point)
            conv, _ = self._reload(store_factory, key)
            wanted = expected(SETUP) if phase == "event_append" else expected(SETUP, turn)
            assert conv == wanted, f"after a crash at {point}"
            # the next writer continues on top of it and commits cleanly
            self._commit_turns(store_factory, NEXT_TURN, key=key)
            conv, loaded = self._reload(store_factory, key)
            assert records(loaded.base) == conv and loaded.events == [], point
            done = (SETUP,) if phase == "event_append" else (SETUP, turn)
            assert conv == expected(*done, NEXT_TURN), f"after a crash at {point}"


__all__ = [
    "APPEND_TURN",
    "NEXT_TURN",
    "REWRITE_TURN",
    "SETUP",
    "StoreConformance",
    "StoreFactory",
    "build_events",
    "expected",
    "fold",
    "msg",
    "records",
    "run_turn",
    "run_turns",
]
