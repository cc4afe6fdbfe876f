"""One agent instance in PostgreSQL: the same rules as the filesystem store, in tables.

* ``append_event`` is one autocommit call of ``goondan_append_event`` (fence + insert): with
  ``synchronous_commit`` on, the event is in the WAL on disk before the call returns - the
  filesystem store's guarantee (an emitted event survives the writer's death), stronger against
  power loss.
* ``commit`` is ONE transaction and one round trip, the ``goondan_commit`` function: it locks the
  instance row FOR UPDATE and compares the fencing token (a stale writer gets
  ``E_INSTANCE_LEASE_LOST`` and the transaction writes nothing), then the turn's messages are
  appended to (or replace) the base and the events are deleted. A crash anywhere leaves either the
  old base + events or the new base: there is no recovery protocol to run at load.
* Runtime events and status flips are observability, written with ``synchronous_commit = off``
  (they survive the writer's death, like the filesystem store's unsynced appends; a server crash
  may lose the last few hundred milliseconds of them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ..._ids import now_iso
from ..._json import dumps_line
from ...errors import StorageError
from ...messages import Message, event_from_record, event_to_record
from .. import _atomic
from .._atomic import crash_point
from .._attachments import attachment_id, check_id, not_found
from .._instance import CODE_NOT_LOADED, LoadedConversation, _encode_json
from .._lease import lost_error
from ._schema import SQLSTATE_LEASE_LOST

if TYPE_CHECKING:
    import psycopg

    from ._db import Database

_COMMIT = "SELECT goondan_commit(%s, %s, %s, %s, %s::text[], %s)"


def _text(data: bytes) -> str:
    return data[:-1].decode() if data.endswith(b"\n") else data.decode()


class PostgresInstanceStore:
    """One agent instance (see the module docstring). Not thread-safe, like the other stores."""

    path: Path | None = None

    def __init__(self, db: Database, workspace_id: str, agent_name: str, instance_key: str) -> None:
        self._db = db
        self.workspace_id = workspace_id
        self.agent_name: str | None = agent_name
        self.instance_key: str | None = instance_key
        self._id: int | None = None
        self._token: int | None = None
        self._loaded = False
        self._closed = False
        self._base_count = 0
        self._pending: list[str | None] = []
        # set after a commit failed with an unknown outcome (see commit)
        self._force_rewrite = False
        self._created = False

    # ------------------------------------------------------------------ lifecycle

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def lease_token(self) -> int | None:
        return self._token if self._id is not None and self._db.holds(self, self._id, self._token) else None

    def __enter__(self) -> PostgresInstanceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._id is not None and self._token is not None:
            self._db.release(self, self._id)
        self._token = None
        self._loaded = False
        self._closed = True

    def _name(self) -> str:
        return f"{self.agent_name}:{self.instance_key} (PostgreSQL)"

    # ------------------------------------------------------------------ rows and leases

    def _instance_id(self, *, create: bool = True) -> int | None:
        if self._id is not None:
            return self._id
        key = (self.workspace_id, self.agent_name, self.instance_key)
        with self._db.connection("open the instance") as conn:
            row = conn.execute(
                "SELECT id FROM goondan_instances WHERE workspace_id = %s AND agent_name = %s AND instance_key = %s",
                key,
            ).fetchone()
            if row is None and create:
                row = conn.execute(
                    "INSERT INTO goondan_instances (workspace_id, agent_name, instance_key) VALUES (%s, %s, %s)"
                    " ON CONFLICT (workspace_id, agent_name, instance_key)"
                    " DO UPDATE SET agent_name = EXCLUDED.agent_name"
                    " RETURNING id",
                    key,
                ).fetchone()
        if row is not None:
            self._id = int(row[0])
        return self._id

    def _require_id(self) -> int:
        instance_id = self._instance_id()
        assert instance_id is not None
        return instance_id

    def _holds(self) -> bool:
        return self._id is not None and self._db.holds(self, self._id, self._token)

    def _take_lease(self) -> None:
        if self._holds():
            return
        instance_id = self._require_id()
        self._token = self._db.acquire(self, instance_id, self._name())

    def _check_lease(self) -> tuple[int, int]:
        """``(id, token)`` of the lease this store holds, taking it if it never had one."""
        if not self._holds():
            if self._token is not None:
                raise self._lost()
            self._take_lease()
        else:
            self._db.check_session()
            if not self._holds():  # the lock was taken by another node while the session was down
                raise self._lost()
        assert self._id is not None and self._token is not None
        return self._id, self._token

    def _lost(self) -> StorageError:
        token = self._token or 0
        holder = None
        if self._id is not None:
            with contextlib.suppress(StorageError):
                holder = self._db.holder_info(self._id)
            if self._token is not None:
                self._db.release(self, self._id)
        return lost_error(self._name(), token, holder)

    def _is_lease_lost(self, exc: BaseException) -> bool:
        return getattr(exc, "sqlstate", None) == SQLSTATE_LEASE_LOST

    # ------------------------------------------------------------------ conversation

    def load(self) -> LoadedConversation:
        self._take_lease()
        self._closed = False
        instance_id = self._require_id()
        with self._db.connection("load the conversation") as conn:
            rows = conn.execute(
                "SELECT record::text FROM goondan_messages WHERE instance_id = %s ORDER BY seq", (instance_id,)
            ).fetchall()
            ev_rows = conn.execute(
                "SELECT record::text FROM goondan_events WHERE instance_id = %s ORDER BY seq", (instance_id,)
            ).fetchall()
        from_record, loads = Message.from_record, orjson.loads
        base = [from_record(loads(r[0])) for r in rows]
        events = [event_from_record(loads(r[0])) for r in ev_rows]
        self._base_count = len(base)
        self._pending = [e["message"].id if e["type"] == "append" else None for e in events]
        self._force_rewrite = False
        self._loaded = True
        return LoadedConversation(base, events, [])

    def _require_loaded(self) -> None:
        if self._loaded:
            return
        loaded = self.load()
        if loaded.base or loaded.events:
            self.close()
            self._closed = False
            raise StorageError(
                CODE_NOT_LOADED,
                f"instance {self._name()} holds a conversation that was not loaded",
                suggestion="Call InstanceStore.load() before appending or committing.",
            )

    def append_event(self, event: Mapping[str, Any]) -> None:
        """Insert one message event, committed (durable) before returning."""
        if not self._loaded:
            self._require_loaded()
        data = _text(_encode_json(event_to_record(event), "message event"))
        if self._token is not None and not self._holds():
            # A writer whose lease was taken over writes nothing (its event must never land in the
            # new holder's turn); as on disk, the loss is reported by its commit.
            return
        instance_id, token = self._check_lease()
        crash_point("pg_before_event")
        try:
            with self._db.connection("append a message event") as conn:
                conn.execute("SELECT goondan_append_event(%s, %s, %s::json)", (instance_id, token, data))
        except Exception as exc:
            if self._is_lease_lost(exc):
                self._db.vacate_if_held(self, instance_id)
                return
            raise
        if event.get("type") == "append":
            message = event.get("message")
            self._pending.append(message.id if isinstance(message, Message) else None)
        else:
            self._pending.append(None)

    def commit(self, next_messages: Sequence[Message], appended: Sequence[Message] | None) -> None:
        """Fold the turn in one transaction (see the module docstring)."""
        self._require_loaded()
        instance_id, token = self._check_lease()
        n = self._base_count
        delta = (
            appended is not None
            and not self._force_rewrite
            and len(next_messages) == n + len(appended)
            and self._pending == [m.id for m in appended]
            and all(a is b or a.id == b.id for a, b in zip(next_messages[n:], appended, strict=True))
        )
        rows = appended if delta else next_messages
        assert rows is not None
        texts = [_text(dumps_line(m.to_record())) for m in rows]
        clear_events = bool(self._pending) or self._force_rewrite
        params = (instance_id, token, delta, n if delta else 0, texts, clear_events)
        try:
            with self._db.connection("commit the turn") as conn:
                if _atomic.CRASH_AT is not None and _atomic.CRASH_AT.startswith("pg_"):
                    # crash tests: the same fold inside an explicit transaction, killed after the
                    # server applied it and before COMMIT
                    with conn.transaction():
                        conn.execute(_COMMIT, params)
                        crash_point("pg_before_commit" if delta else "pg_before_rewrite_commit")
                else:
                    conn.execute(_COMMIT, params)
            crash_point("pg_after_commit")
        except Exception as exc:
            if self._is_lease_lost(exc):
                raise self._lost() from None
            # The connection may have died after the server committed: the next commit rewrites
            # base and clears every event, which is right whether this one landed or not.
            self._force_rewrite = True
            raise
        self._base_count = len(next_messages)
        self._pending = []
        self._force_rewrite = False

    # ------------------------------------------------------------------ runtime events

    def append_runtime_event(self, record: Mapping[str, Any], *, owned: bool = False) -> None:
        """Keep one runtime event (not fsynced: observability, see the module docstring)."""
        data = _text(_encode_json(record, "runtime event"))
        instance_id = self._require_id()
        with self._db.connection("record a runtime event") as conn:
            conn.execute("SELECT goondan_runtime_event(%s, %s::json)", (instance_id, data))

    def append_runtime_events(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Keep several runtime events in one round trip: the same ``goondan_runtime_event`` call
        per record, in the records' order (the function is volatile, so PostgreSQL calls it after
        the ``ORDER BY`` and each gets the next ``seq``), in one statement (all or none)."""
        if not records:
            return
        texts = [_text(_encode_json(record, "runtime event")) for record in records]
        instance_id = self._require_id()
        with self._db.connection("record runtime events") as conn:
            conn.execute(
                "SELECT goondan_runtime_event(%s, r::json) FROM unnest(%s::text[]) WITH ORDINALITY AS t(r, o)"
                " ORDER BY o",
                (instance_id, texts),
            )

    def read_runtime_events(self) -> list[dict[str, Any]]:
        instance_id = self._instance_id(create=False)
        if instance_id is None:
            return []
        with self._db.connection("read runtime events") as conn:
            rows = conn.execute(
                "SELECT record::text FROM goondan_runtime_events WHERE instance_id = %s ORDER BY seq", (instance_id,)
            ).fetchall()
        out: list[dict[str, Any]] = []
        for (text,) in rows:
            value = orjson.loads(text)
            if isinstance(value, dict):
                out.append(value)
        return out

    # ------------------------------------------------------------------ extension state

    def load_extension_state(self, extension_name: str) -> Any | None:
        instance_id = self._instance_id(create=False)
        if instance_id is None:
            return None
        with self._db.connection("read extension state") as conn:
            row = conn.execute(
                "SELECT value::text FROM goondan_extension_state WHERE instance_id = %s AND name = %s",
                (instance_id, extension_name),
            ).fetchone()
        return None if row is None else orjson.loads(row[0])

    def save_extension_state(self, extension_name: str, value: Any) -> None:
        data = _text(_encode_json(value, f"state of extension {extension_name!r}"))
        instance_id = self._require_id()
        with self._db.connection("save extension state") as conn:
            conn.execute(
                "INSERT INTO goondan_extension_state (instance_id, name, value) VALUES (%s, %s, %s::json)"
                " ON CONFLICT (instance_id, name) DO UPDATE SET value = EXCLUDED.value",
                (instance_id, extension_name, data),
            )

    def clear_extension_state(self, extension_name: str) -> None:
        instance_id = self._instance_id(create=False)
        if instance_id is None:
            return
        with self._db.connection("clear extension state") as conn:
            conn.execute(
                "DELETE FROM goondan_extension_state WHERE instance_id = %s AND name = %s",
                (instance_id, extension_name),
            )

    # ------------------------------------------------------------------ attachments

    def put_attachment(self, data: bytes) -> str:
        digest = attachment_id(data)
        instance_id = self._require_id()
        with self._db.connection("store an attachment") as conn:
            conn.execute(
                "INSERT INTO goondan_attachments (instance_id, id, data) VALUES (%s, %s, %s)"
                " ON CONFLICT (instance_id, id) DO NOTHING",
                (instance_id, digest, bytes(data)),
            )
        return digest

    def read_attachment(self, attachment_id: str) -> bytes:
        digest = check_id(attachment_id)
        instance_id = self._instance_id(create=False)
        row = None
        if instance_id is not None:
            with self._db.connection("read an attachment") as conn:
                row = conn.execute(
                    "SELECT data FROM goondan_attachments WHERE instance_id = %s AND id = %s", (instance_id, digest)
                ).fetchone()
        if row is None:
            raise not_found(attachment_id)
        return bytes(row[0])

    # ------------------------------------------------------------------ paused turn (approvals)

    def read_paused_turn(self) -> dict[str, Any] | None:
        instance_id = self._instance_id(create=False)
        if instance_id is None:
            return None
        with self._db.connection("read the paused turn") as conn:
            row = conn.execute(
                "SELECT paused_turn::text FROM goondan_instances WHERE id = %s", (instance_id,)
            ).fetchone()
        if row is None or row[0] is None:
            return None
        value = orjson.loads(row[0])
        return value if isinstance(value, dict) else None

    def write_paused_turn(self, record: Mapping[str, Any] | None) -> None:
        instance_id, token = self._check_lease()
        data = None if record is None else _text(_encode_json(dict(record), "paused turn"))
        try:
            with self._db.connection("write the paused turn") as conn, conn.pipeline(), conn.transaction():
                conn.execute("SELECT goondan_fence(%s, %s)", (instance_id, token))
                conn.execute("UPDATE goondan_instances SET paused_turn = %s::json WHERE id = %s", (data, instance_id))
        except Exception as exc:
            if self._is_lease_lost(exc):
                raise self._lost() from None
            raise

    # ------------------------------------------------------------------ metadata

    def read_metadata(self) -> dict[str, Any] | None:
        instance_id = self._instance_id(create=False)
        if instance_id is None:
            return None
        with self._db.connection("read metadata") as conn:
            row = conn.execute(
                "SELECT agent_name, instance_key, status, created_at, updated_at FROM goondan_instances WHERE id = %s",
                (instance_id,),
            ).fetchone()
        if row is None or row[2] is None:
            return None
        agent, key, status, created, updated = row
        return {"agentName": agent, "instanceKey": key, "status": status, "createdAt": created, "updatedAt": updated}

    def write_metadata(self, *, agent_name: str, instance_key: str, status: str) -> None:
        """Set the status; ``createdAt`` is kept. The first write is durable, later status flips are
        not flushed (as the filesystem store's in-place overwrite)."""
        now = now_iso()
        instance_id = self._require_id()
        with self._db.connection("write metadata") as conn:
            conn.execute("SELECT goondan_set_status(%s, %s, %s, %s)", (instance_id, status, now, not self._created))
        self._created = True

    # ------------------------------------------------------------------ fresh start

    def clear_history(self) -> None:
        """A fresh start: conversation, runtime events, extension state, attachments and the paused
        turn go, in one fenced transaction; metadata stays."""
        instance_id, token = self._check_lease()
        try:
            with self._db.connection("clear the history") as conn, conn.pipeline(), conn.transaction():
                conn.execute("SELECT goondan_fence(%s, %s)", (instance_id, token))
                _delete_data(conn, instance_id)
                conn.execute("UPDATE goondan_instances SET paused_turn = NULL WHERE id = %s", (instance_id,))
        except Exception as exc:
            if self._is_lease_lost(exc):
                raise self._lost() from None
            raise
        self._base_count = 0
        self._pending = []
        self._loaded = True
        self._closed = False


_DATA_TABLES = (
    "goondan_messages",
    "goondan_events",
    "goondan_runtime_events",
    "goondan_extension_state",
    "goondan_attachments",
)


def _delete_data(conn: psycopg.Connection[Any], instance_id: int) -> None:
    for table in _DATA_TABLES:
        conn.execute(f"DELETE FROM {table} WHERE instance_id = %s", (instance_id,))


__all__ = ["PostgresInstanceStore"]
