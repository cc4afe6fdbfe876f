"""The store seam: what the runtime needs from a place that keeps agent instances.

Three levels, each a :class:`typing.Protocol` so a backend implements them without inheriting
anything:

* :class:`StoreBackend` - what a ``store=`` URL opens (``file:``, ``memory:``, a third party's scheme).
  It hands out one :class:`WorkspaceStore` per workspace (bundle + swarm).
* :class:`WorkspaceStore` - the instances of one workspace: open, list (with metadata), delete.
* :class:`InstanceStore` - one agent instance: the conversation as ``base`` + residual ``events``, the
  turn commit, runtime events, extension state, metadata, fresh start, and the single-writer lease.

The rules every backend keeps are the ones :mod:`goondan.testing.store_conformance` checks; a new
backend proves itself by passing that suite. In short:

* ``load()`` takes the instance's single-writer lease (or raises ``E_INSTANCE_LOCKED`` naming the
  holder) and returns the committed base plus the events of an unfinished turn, which the caller
  replays. ``close()`` gives the lease back; a holder that dies loses it.
* ``append_event`` makes one message event durable (for the backend's notion of durable) before it
  returns; a turn that never commits is replayed by the next ``load()``.
* ``commit(next_messages, appended)`` folds the turn into base and clears the events, after checking
  the lease's fencing token: a writer whose lease was taken over fails with ``E_INSTANCE_LEASE_LOST``
  and writes nothing. ``appended`` is a hint (the turn only appended these) that allows a cheaper
  commit; a backend must fall back to a full rewrite whenever it cannot prove the hint right.
* Runtime events are observability records, not conversation state: ``append_runtime_event`` need
  not be durable. A backend may also offer :class:`RuntimeEventBatches` (``append_runtime_events``):
  the engine then hands it a turn's records a few at a time instead of one call each. Without it the
  engine calls ``append_runtime_event`` per record, so a backend that does not offer it keeps working.

Read-only viewers (``gdn studio``, ``gdn logs``) must not take the lease: a live run holds it. They use
:meth:`StoreBackend.list_workspaces` and :meth:`WorkspaceStore.reader`, which hands out an
:class:`InstanceReader` - a view that never locks, writes or creates anything, and may race a live
writer, so it shows each commit either before or after, never a message twice.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..messages import Message
    from ._identity import WorkspaceIdentity
    from ._instance import LoadedConversation
    from ._workspace import InstanceInfo


@runtime_checkable
class RuntimeEventBatches(Protocol):
    """Optional capability of an :class:`InstanceStore`: keep several runtime events at once.

    ``append_runtime_events(records)`` means calling ``append_runtime_event`` for each record, in
    order, interleaved correctly with single appends before and after it. It is worth offering when
    each append costs a system call or a round trip: the engine buffers a turn's records and writes
    them when the turn suspends (a model call waiting on the network), before a tool runs, and
    before the turn's result is returned, so a turn of eight records costs two or three calls.
    On an error the call should leave none of the records stored (the engine keeps them and passes
    them again with the next batch); the records are the caller's (a store must copy or encode
    what it keeps). :mod:`goondan.testing.store_conformance` checks it when a store offers it."""

    def append_runtime_events(self, records: Sequence[Mapping[str, Any]]) -> None: ...


@runtime_checkable
class InstanceStore(Protocol):
    """Storage of one agent instance, written by one holder of its lease at a time."""

    @property
    def path(self) -> Path | None:
        """A local directory that belongs to the instance (its ``workdir`` and agent output log
        live there), or ``None`` for a store without one (the runtime then uses a temporary one)."""
        ...

    @property
    def agent_name(self) -> str | None: ...

    @property
    def instance_key(self) -> str | None: ...

    @property
    def closed(self) -> bool: ...

    @property
    def lease_token(self) -> int | None:
        """The fencing token of the lease while this store holds it (grows with every acquisition)."""
        ...

    def load(self) -> LoadedConversation: ...

    def append_event(self, event: Mapping[str, Any]) -> None: ...

    def commit(self, next_messages: Sequence[Message], appended: Sequence[Message] | None) -> None: ...

    def append_runtime_event(self, record: Mapping[str, Any], *, owned: bool = False) -> None: ...

    def read_runtime_events(self) -> list[dict[str, Any]]: ...

    def load_extension_state(self, extension_name: str) -> Any | None: ...

    def save_extension_state(self, extension_name: str, value: Any) -> None: ...

    def clear_extension_state(self, extension_name: str) -> None: ...

    def put_attachment(self, data: bytes) -> str:
        """Keep the bytes of an image or file part durably, beside the conversation, and return
        their id (the lowercase hex sha256 of ``data``; storing the same bytes twice is one copy).
        Messages refer to it by id, so the conversation never carries the bytes."""
        ...

    def read_attachment(self, attachment_id: str) -> bytes:
        """The bytes :meth:`put_attachment` returned ``attachment_id`` for; a missing one raises
        ``StorageError`` with code ``E_ATTACHMENT_NOT_FOUND``."""
        ...

    def read_paused_turn(self) -> dict[str, Any] | None:
        """The record of a turn paused for approvals (its pending tool calls and what resuming
        needs), or ``None``. Readable without the lease, so approvals can be listed while no
        runtime holds the instance."""
        ...

    def write_paused_turn(self, record: Mapping[str, Any] | None) -> None:
        """Replace the paused-turn record atomically (``None`` removes it); durable on return, so
        a turn waiting for a decision holds no process and survives a restart."""
        ...

    def read_metadata(self) -> dict[str, Any] | None: ...

    def write_metadata(self, *, agent_name: str, instance_key: str, status: str) -> None: ...

    def clear_history(self) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> InstanceStore: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class InstanceReader(Protocol):
    """A read-only view of one stored instance, safe beside its live writer (in another process).

    It never takes the lease, never writes and never creates the instance; an instance that does not
    exist reads as empty (``metadata()`` is ``None``). It is cheap to keep open and meant to be
    polled: :meth:`version` is a few ``stat`` calls (or one query), and the readers page and tail
    instead of loading the whole history, so a viewer stays fast on a 10,000-message conversation.
    Readers are not thread-safe (a reader may cache indexes of what it has read).
    """

    @property
    def agent_name(self) -> str: ...

    @property
    def instance_key(self) -> str: ...

    def metadata(self) -> dict[str, Any] | None:
        """The instance's metadata record (``{agentName, instanceKey, status, createdAt,
        updatedAt}``), or ``None`` when it never wrote one."""
        ...

    def version(self) -> Hashable:
        """A cheap token that changes whenever the conversation, the pending events, the runtime
        events or the metadata change (compare it with ``!=``; its form is the backend's own)."""
        ...

    def message_count(self) -> int:
        """How many messages :meth:`messages` holds right now."""
        ...

    def messages(self, offset: int = 0, limit: int | None = None) -> list[Message]:
        """The conversation (committed base folded with the pending events of a turn in progress),
        in order, from ``offset`` (0-based), at most ``limit`` messages (all when ``None``)."""
        ...

    def message_events(self) -> list[dict[str, Any]]:
        """The pending message events of a turn in progress as stored (JSON records, the lines of
        ``events.jsonl``: ``{"type": "append", "message": {...}}``, ...); empty between turns."""
        ...

    def runtime_events(self, after: int = 0, limit: int | None = None) -> tuple[list[dict[str, Any]], int]:
        """Runtime events appended after the cursor ``after`` (``0``: from the first), at most
        ``limit``, and the cursor to pass next time. Cursors are opaque non-negative integers of
        this reader's backend; a fresh start of the instance (its events cleared) makes the next
        call start again from the first event. Undecodable records (a torn last line) are skipped."""
        ...

    def close(self) -> None:
        """Forget cached indexes and release what the reader holds (files, connections)."""
        ...


@runtime_checkable
class WorkspaceStore(Protocol):
    """The instances of one workspace. Opening an instance that is already open in this workspace
    returns the same store (one process never holds two writers on one instance through it)."""

    @property
    def workspace_id(self) -> str: ...

    def instance(self, agent_name: str, instance_key: str) -> InstanceStore: ...

    def instance_path(self, agent_name: str, instance_key: str) -> Path | None: ...

    def list_instances(self) -> list[InstanceInfo]: ...

    def reader(self, agent_name: str, instance_key: str) -> InstanceReader:
        """A read-only view of one instance (:class:`InstanceReader`): no lease, no writes, and
        nothing is created for an instance that does not exist."""
        ...

    def delete_instance(self, agent_name: str, instance_key: str, *, force: bool = False) -> bool: ...

    def record(self) -> dict[str, Any] | None: ...

    def close(self) -> None: ...


@runtime_checkable
class StoreBackend(Protocol):
    """What a ``store=`` URL opens."""

    @property
    def url(self) -> str:
        """The URL that opens this backend again (agent processes receive it)."""
        ...

    @property
    def durable(self) -> bool:
        """``True`` when conversations outlive the process (they can be listed, evicted and
        reloaded by other processes); ``False`` for the in-memory store."""
        ...

    def workspace(self, workspace_id: str, *, identity: WorkspaceIdentity | None = None) -> WorkspaceStore: ...

    def list_workspaces(self) -> list[str]:
        """The ids of the workspaces that hold at least one instance or a workspace record, sorted;
        read-only (a viewer lists them without opening anything)."""
        ...


__all__ = ["InstanceReader", "InstanceStore", "StoreBackend", "WorkspaceStore"]
