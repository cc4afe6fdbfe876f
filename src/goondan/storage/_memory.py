"""The in-memory store (``store="memory:"``, and what ``persist=False`` means).

Nothing touches the disk, but the store keeps the same rules as the filesystem store so that code
written against one behaves the same on the other (both pass :mod:`goondan.testing.store_conformance`):

* Instances live in a :class:`MemorySpace`. ``memory:`` gives every runtime a private space (two
  runtimes never see each other's conversations, as with ``persist=False`` before); ``memory://NAME``
  names a space shared by every runtime of this process.
* The conversation is ``base`` + residual ``events`` exactly like on disk: a store dropped without
  commit leaves its events to be replayed by the next ``load()``.
* The single-writer lease is an entry in the space's lock table keyed by (workspace, agent, instance
  key), with the holder's pid/host/since and a fencing token incremented on every acquisition (also
  across deletion). A store that is closed or garbage-collected gives it back, as a dead process does.
* Extension state, metadata and runtime events are kept as JSON copies (runtime events capped at the
  most recent 10,000 per instance), so values behave as if they had round-tripped through a file.

The hot path stays a handful of list operations: an event append is one ``list.append``, an append
commit extends ``base`` by the turn's messages (never a copy of the whole history).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .._ids import now_iso, parse_iso
from .._json import copy_json
from ..errors import StorageError
from ..messages import Message, event_to_record
from ._attachments import attachment_id, check_id, not_found
from ._identity import WorkspaceIdentity
from ._instance import CODE_NOT_LOADED, LoadedConversation, _encode_json
from ._lease import _host, locked_error, lost_error
from ._reader import fold_events
from ._workspace import InstanceInfo

MAX_RUNTIME_EVENTS = 10_000


@dataclass(slots=True, eq=False)
class _Instance:
    """Everything one instance holds; replaced by a fresh record when the instance is deleted."""

    base: list[Message] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    # made by the first runtime event: an empty bounded deque is ~880 bytes, and most instances of a
    # large swarm sit idle (the per-agent memory the peers bench measures)
    runtime_events: deque[bytes | dict[str, Any]] | None = None
    extension_state: dict[str, bytes] = field(default_factory=dict)
    attachments: dict[str, bytes] = field(default_factory=dict)
    metadata: dict[str, Any] | None = None
    paused_turn: bytes | None = None
    # runtime events ever appended (readers' cursor; the deque keeps the most recent ones)
    runtime_appended: int = 0
    # the lease: the holding store (weakly: a dropped store frees it) and its holder record
    holder: weakref.ReferenceType[MemoryInstanceStore] | None = None
    holder_info: dict[str, Any] | None = None

    def is_empty(self) -> bool:
        """Nothing was ever stored (a store was only constructed for it)."""
        return not (
            self.base
            or self.events
            or self.runtime_events
            or self.extension_state
            or self.attachments
            or self.metadata is not None
        )


class MemorySpace:
    """A set of in-memory workspaces (what one ``memory:`` URL opens)."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self.instances: dict[tuple[str, str, str], _Instance] = {}
        # fencing tokens survive deletion, so a writer of the deleted instance can never match again
        self.tokens: dict[tuple[str, str, str], int] = {}
        self.lock = threading.Lock()
        self.workspace_records: dict[str, dict[str, Any]] = {}

    def workspace_ids(self) -> list[str]:
        """Workspaces with a record or an instance that stored something, sorted."""
        with self.lock:
            ids = set(self.workspace_records)
            ids.update(key[0] for key, rec in self.instances.items() if not rec.is_empty())
        return sorted(ids)

    def record_of(self, key: tuple[str, str, str]) -> _Instance:
        rec = self.instances.get(key)
        if rec is None:
            rec = self.instances[key] = _Instance()
        return rec


_NAMED: dict[str, MemorySpace] = {}
_NAMED_LOCK = threading.Lock()


def named_space(name: str) -> MemorySpace:
    """The process-wide space called ``name`` (``memory://NAME``), created on first use."""
    with _NAMED_LOCK:
        space = _NAMED.get(name)
        if space is None:
            space = _NAMED[name] = MemorySpace(name)
        return space


class MemoryInstanceStore:
    """One agent instance in a :class:`MemorySpace` (see the module docstring).

    Constructed without a space (``MemoryInstanceStore()``) it gets a private one of its own.
    """

    MAX_RUNTIME_EVENTS = MAX_RUNTIME_EVENTS

    path: Path | None

    def __init__(
        self,
        *,
        agent_name: str | None = None,
        instance_key: str | None = None,
        space: MemorySpace | None = None,
        workspace_id: str = "default",
    ) -> None:
        self.path = None
        self.agent_name = agent_name
        self.instance_key = instance_key
        self._space = space if space is not None else MemorySpace()
        self._key = (workspace_id, agent_name or "", instance_key or "")
        self._rec = self._space.record_of(self._key)
        self._token: int | None = None
        self._loaded = False
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def lease_token(self) -> int | None:
        return self._token if self._holds() else None

    def __enter__(self) -> MemoryInstanceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._release()
        except Exception:
            pass

    # ------------------------------------------------------------------ lease

    def _name(self) -> str:
        return f"{self._key[1]}:{self._key[2]} (in memory)"

    def _holds(self) -> bool:
        rec = self._rec
        holder = rec.holder
        return (
            self._token is not None
            and holder is not None
            and holder() is self
            and self._space.instances.get(self._key) is rec
            and self._space.tokens.get(self._key) == self._token
        )

    def _take_lease(self) -> None:
        space = self._space
        with space.lock:
            rec = space.record_of(self._key)
            if rec is not self._rec:
                # the instance was deleted since this store was made: start on its new record
                self._rec = rec
                self._token = None
            if self._holds():
                return
            holder = rec.holder() if rec.holder is not None else None
            busy = holder is not None and holder is not self and not holder._closed
            holder = None  # a kept traceback of the error below must not keep the holder alive
            if busy:
                raise locked_error(self._name(), rec.holder_info, elsewhere="another --instance-key")
            token = space.tokens.get(self._key, 0) + 1
            space.tokens[self._key] = token
            rec.holder = weakref.ref(self)
            rec.holder_info = {"pid": os.getpid(), "host": _host(), "since": now_iso(), "token": token}
            self._token = token

    def _check_lease(self) -> None:
        if self._holds():
            return
        if self._token is None:
            self._take_lease()
            return
        current = self._space.instances.get(self._key)
        raise lost_error(self._name(), self._token, current.holder_info if current is not None else None)

    def _release(self) -> None:
        rec = self._rec
        if self._token is not None and rec.holder is not None and rec.holder() is self:
            rec.holder = None
            rec.holder_info = None
        self._token = None

    # ------------------------------------------------------------------ conversation

    def load(self) -> LoadedConversation:
        self._take_lease()
        self._closed = False
        self._loaded = True
        rec = self._rec
        return LoadedConversation(list(rec.base), list(rec.events), [])

    def _require_loaded(self) -> None:
        rec = self._rec
        if rec.base or rec.events:
            raise StorageError(
                CODE_NOT_LOADED,
                f"memory instance {self._name()} holds a conversation that was not loaded",
                suggestion="Call load() before appending or committing.",
            )
        self._take_lease()
        self._loaded = True

    def append_event(self, event: Mapping[str, Any]) -> None:
        if not self._loaded:
            self._require_loaded()
        self._rec.events.append(dict(event))

    def commit(self, next_messages: Sequence[Message], appended: Sequence[Message] | None) -> None:
        if not self._loaded:
            self._require_loaded()
        self._check_lease()
        rec = self._rec
        base, events = rec.base, rec.events
        n = len(base)
        # the delta hint is used only when it is exactly the append events of this turn (as on disk)
        delta = appended is not None and len(events) == len(appended) and len(next_messages) == n + len(events)
        if delta:
            assert appended is not None
            i = n
            for e, a in zip(events, appended, strict=True):  # a plain loop: this runs every turn
                m = e.get("message")
                b = next_messages[i]
                i += 1
                if (
                    e["type"] != "append"
                    or not (m is a or (m is not None and m.id == a.id))
                    or not (b is a or b.id == a.id)
                ):
                    delta = False
                    break
        if delta:
            base.extend(appended)  # type: ignore[arg-type]
        else:
            rec.base = list(next_messages)
        rec.events.clear()

    # ------------------------------------------------------------------ runtime events

    def append_runtime_event(self, record: Mapping[str, Any], *, owned: bool = False) -> None:
        """Keep one runtime event. ``owned=True`` means the caller hands the record over (a fresh
        dict of JSON values nobody else references), so it is kept as it is; any other record is
        encoded at once, a snapshot its holders cannot change afterwards. A turn records eight."""
        rec = self._rec
        kept = rec.runtime_events
        if kept is None:
            kept = rec.runtime_events = deque(maxlen=MAX_RUNTIME_EVENTS)
        if owned and type(record) is dict:
            kept.append(record)
            rec.runtime_appended += 1
            return
        try:
            data = orjson.dumps(record)
        except TypeError:
            data = _encode_json(record, "runtime event")  # raises the storage error with its hint
        kept.append(data)
        rec.runtime_appended += 1

    def read_runtime_events(self) -> list[dict[str, Any]]:
        kept = self._rec.runtime_events or ()
        return [copy_json(item) if isinstance(item, dict) else orjson.loads(item) for item in kept]

    # ------------------------------------------------------------------ extension state

    def load_extension_state(self, extension_name: str) -> Any | None:
        data = self._rec.extension_state.get(extension_name)
        return None if data is None else orjson.loads(data)

    def save_extension_state(self, extension_name: str, value: Any) -> None:
        self._rec.extension_state[extension_name] = _encode_json(value, f"state of extension {extension_name!r}")

    def clear_extension_state(self, extension_name: str) -> None:
        self._rec.extension_state.pop(extension_name, None)

    # ------------------------------------------------------------------ attachments

    def put_attachment(self, data: bytes) -> str:
        digest = attachment_id(data)
        self._rec.attachments.setdefault(digest, bytes(data))
        return digest

    def read_attachment(self, attachment_id: str) -> bytes:
        data = self._rec.attachments.get(check_id(attachment_id))
        if data is None:
            raise not_found(attachment_id)
        return data

    # ------------------------------------------------------------------ paused turn (approvals)

    def read_paused_turn(self) -> dict[str, Any] | None:
        data = self._rec.paused_turn
        return None if data is None else orjson.loads(data)

    def write_paused_turn(self, record: Mapping[str, Any] | None) -> None:
        self._check_lease()
        self._rec.paused_turn = None if record is None else _encode_json(dict(record), "paused turn")

    # ------------------------------------------------------------------ metadata

    def read_metadata(self) -> dict[str, Any] | None:
        metadata = self._rec.metadata
        return None if metadata is None else dict(metadata)

    def write_metadata(self, *, agent_name: str, instance_key: str, status: str) -> None:
        now = now_iso()
        metadata = self._rec.metadata
        if metadata is None:
            self._rec.metadata = {
                "agentName": agent_name,
                "instanceKey": instance_key,
                "status": status,
                "createdAt": now,
                "updatedAt": now,
            }
        else:  # twice per turn: update in place (read_metadata hands out copies)
            metadata["agentName"] = agent_name
            metadata["instanceKey"] = instance_key
            metadata["status"] = status
            metadata["updatedAt"] = now

    # ------------------------------------------------------------------ fresh start / close

    def clear_history(self) -> None:
        """A fresh start: conversation, runtime events and extension state go; metadata stays."""
        self._check_lease()
        rec = self._rec
        rec.base = []
        rec.events.clear()
        rec.runtime_events = None
        rec.extension_state.clear()
        rec.paused_turn = None
        rec.attachments.clear()
        self._loaded = True
        self._closed = False

    def close(self) -> None:
        self._release()
        self._loaded = False
        self._closed = True


def _event_record(event: Mapping[str, Any]) -> dict[str, Any]:
    """A stored event as its ``events.jsonl`` line would read (a copy the caller may change)."""
    out: dict[str, Any] = copy_json(event_to_record(event))
    return out


class MemoryInstanceReader:
    """A read-only view of one in-memory instance (:class:`~goondan.storage.InstanceReader`):
    it looks the instance up at every call and never creates, locks or changes it."""

    def __init__(self, space: MemorySpace, key: tuple[str, str, str]) -> None:
        self._space = space
        self._key = key
        self.agent_name = key[1]
        self.instance_key = key[2]

    def _rec(self) -> _Instance | None:
        return self._space.instances.get(self._key)

    def metadata(self) -> dict[str, Any] | None:
        rec = self._rec()
        return None if rec is None or rec.metadata is None else dict(rec.metadata)

    def version(self) -> Hashable:
        rec = self._rec()
        if rec is None:
            return None
        meta = rec.metadata or {}
        return (
            id(rec),
            id(rec.base),
            len(rec.base),
            len(rec.events),
            rec.runtime_appended,
            meta.get("status"),
            meta.get("updatedAt"),
        )

    def _folded(self) -> list[Message]:
        rec = self._rec()
        if rec is None:
            return []
        base, events = rec.base, list(rec.events)
        if all(e["type"] == "append" for e in events):
            return [*base, *(e["message"] for e in events)]
        return fold_events(list(base), events)

    def message_count(self) -> int:
        rec = self._rec()
        if rec is None:
            return 0
        if all(e["type"] == "append" for e in rec.events):
            return len(rec.base) + len(rec.events)
        return len(self._folded())

    def messages(self, offset: int = 0, limit: int | None = None) -> list[Message]:
        offset = max(0, offset)
        rec = self._rec()
        if rec is None:
            return []
        if not rec.events:  # the common case: slice the base without copying it
            page = rec.base[offset:] if limit is None else rec.base[offset : offset + max(0, limit)]
        else:
            folded = self._folded()
            page = folded[offset:] if limit is None else folded[offset : offset + max(0, limit)]
        return [m.copy() for m in page]

    def message_events(self) -> list[dict[str, Any]]:
        rec = self._rec()
        return [] if rec is None else [_event_record(e) for e in rec.events]

    def runtime_events(self, after: int = 0, limit: int | None = None) -> tuple[list[dict[str, Any]], int]:
        rec = self._rec()
        if rec is None:
            return [], 0
        total = rec.runtime_appended
        kept = list(rec.runtime_events or ())
        first = total - len(kept)  # the number of the oldest kept event
        if after > total:
            after = 0  # another record (deleted and recreated): start over
        start = max(after, first)
        items = kept[start - first :]
        if limit is not None:
            items = items[: max(0, limit)]
        out = [copy_json(i) if isinstance(i, dict) else orjson.loads(i) for i in items]
        return out, start + len(items)

    def close(self) -> None:
        return None


class MemoryWorkspaceStore:
    """The instances of one workspace in a :class:`MemorySpace`."""

    path: Path | None = None

    def __init__(
        self,
        space: MemorySpace | None = None,
        workspace_id: str = "default",
        *,
        identity: WorkspaceIdentity | None = None,
    ) -> None:
        self.space = space if space is not None else MemorySpace()
        self.workspace_id = workspace_id
        self.identity = identity
        self._stores: dict[tuple[str, str], MemoryInstanceStore] = {}

    def record(self) -> dict[str, Any] | None:
        record = self.space.workspace_records.get(self.workspace_id)
        return dict(record) if record is not None else None

    def instance(self, agent_name: str, instance_key: str) -> MemoryInstanceStore:
        key = (agent_name, instance_key)
        store = self._stores.get(key)
        if store is None or store.closed:
            if self.identity is not None:
                self.space.workspace_records[self.workspace_id] = self.identity.record()
            store = MemoryInstanceStore(
                agent_name=agent_name, instance_key=instance_key, space=self.space, workspace_id=self.workspace_id
            )
            self._stores[key] = store
        return store

    def instance_path(self, agent_name: str, instance_key: str) -> Path | None:
        return None

    def reader(self, agent_name: str, instance_key: str) -> MemoryInstanceReader:
        return MemoryInstanceReader(self.space, (self.workspace_id, agent_name, instance_key))

    def list_instances(self) -> list[InstanceInfo]:
        """Every instance of this workspace that wrote its metadata, sorted by (agent, key)."""
        out: list[InstanceInfo] = []
        for (ws, agent, key), rec in list(self.space.instances.items()):
            meta = rec.metadata
            if ws != self.workspace_id or meta is None:
                continue
            out.append(
                InstanceInfo(
                    agent_name=agent,
                    instance_key=key,
                    status=str(meta["status"]),
                    created_at=parse_iso(meta["createdAt"]),
                    updated_at=parse_iso(meta["updatedAt"]),
                    path=Path(),
                )
            )
        out.sort(key=lambda i: (i.agent_name, i.instance_key))
        return out

    def delete_instance(self, agent_name: str, instance_key: str, *, force: bool = False) -> bool:
        """Forget the instance. A held instance raises ``E_INSTANCE_LOCKED`` unless ``force`` (its
        writer then fails its next commit with ``E_INSTANCE_LEASE_LOST``)."""
        store = self._stores.pop((agent_name, instance_key), None)
        if store is not None:
            store.close()
        space = self.space
        key = (self.workspace_id, agent_name, instance_key)
        with space.lock:
            rec = space.instances.get(key)
            if rec is None:
                return False
            holder = rec.holder() if rec.holder is not None else None
            held = holder is not None and not holder.closed
            holder = None  # a kept traceback of the error below must not keep the holder alive
            if held and not force:
                raise locked_error(
                    f"{agent_name}:{instance_key} (in memory)", rec.holder_info, elsewhere="another --instance-key"
                )
            del space.instances[key]
            # a forced delete fences the holder out: the next holder gets a higher token
            if held:
                space.tokens[key] = space.tokens.get(key, 0) + 1
        return not rec.is_empty()

    def close(self) -> None:
        for store in self._stores.values():
            store.close()
        self._stores.clear()


__all__ = ["MemoryInstanceReader", "MemoryInstanceStore", "MemorySpace", "MemoryWorkspaceStore", "named_space"]
