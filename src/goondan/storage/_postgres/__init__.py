"""The PostgreSQL store (``store="postgresql://USER:PASSWORD@HOST:PORT/DB"``, extra ``postgres``).

Durable state every node of a cluster can reach: workspaces, instances (metadata, lease holder,
fencing token), base messages, message events, runtime events, extension state, paused turns and
attachments, in tables created by versioned migrations on first use (:mod:`._schema`). The rules
are the filesystem store's (:mod:`goondan.testing.store_conformance` checks both):

* each emitted message event is committed (``synchronous_commit`` on) before ``append_event``
  returns; a turn's fold is one transaction;
* the single-writer lease is a session-level advisory lock held by the holder process's lease
  session (it dies with the process, or after the server's TCP keepalive gives up on a vanished
  machine, ~25 s), plus a fencing token in the instance row that every write checks inside its
  own transaction - two nodes can never both write one instance;
* a server that cannot be reached gives ``E_STORE_UNAVAILABLE`` (with a suggestion) and the store
  works again, on fresh connections, once the server is back.

Nothing is imported from psycopg until a store is actually used, so ``gdn --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._ids import parse_iso
from .._identity import WorkspaceIdentity
from .._lease import POSTGRES_ELSEWHERE, locked_error
from .._workspace import InstanceInfo
from ._db import LEASE_EXPIRY_S, Database, forget_shared, missing_extra, redact, shared_database
from ._instance import PostgresInstanceStore, _delete_data
from ._reader import PostgresInstanceReader

#: the instances of a workspace, and whether a session holds each one's lease: the one-key advisory
#: lock on its row id (pg_locks shows it as classid = high 32 bits, objid = low 32 bits, objsubid 1)
_LIST_INSTANCES = (
    "SELECT i.agent_name, i.instance_key, i.status, i.created_at, i.updated_at, EXISTS (SELECT 1 FROM pg_locks l"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND l.classid = (i.id >> 32)::oid AND l.objid = (i.id & 4294967295)::oid)"
    " FROM goondan_instances i WHERE i.workspace_id = %s AND i.status IS NOT NULL"
    " ORDER BY i.agent_name, i.instance_key"
)


class PostgresWorkspaceStore:
    """The instances of one workspace in the database."""

    path: Path | None = None

    def __init__(self, db: Database, workspace_id: str, *, identity: WorkspaceIdentity | None = None) -> None:
        self._db = db
        self.workspace_id = workspace_id
        self.identity = identity
        self._recorded = identity is None
        self._stores: dict[tuple[str, str], PostgresInstanceStore] = {}

    def record(self) -> dict[str, Any] | None:
        with self._db.connection("read the workspace record") as conn:
            row = conn.execute(
                "SELECT record::text FROM goondan_workspaces WHERE workspace_id = %s", (self.workspace_id,)
            ).fetchone()
        if row is None or row[0] is None:
            return None
        import orjson

        value = orjson.loads(row[0])
        return value if isinstance(value, dict) else None

    def _record_identity(self) -> None:
        if self._recorded or self.identity is None:
            return
        import orjson

        data = orjson.dumps(self.identity.record()).decode()
        with self._db.connection("record the workspace") as conn:
            conn.execute(
                "INSERT INTO goondan_workspaces (workspace_id, record) VALUES (%s, %s::json)"
                " ON CONFLICT (workspace_id) DO UPDATE SET record = EXCLUDED.record"
                " WHERE goondan_workspaces.record::text IS DISTINCT FROM EXCLUDED.record::text",
                (self.workspace_id, data),
            )
        self._recorded = True

    def instance(self, agent_name: str, instance_key: str) -> PostgresInstanceStore:
        key = (agent_name, instance_key)
        store = self._stores.get(key)
        if store is None or store.closed:
            self._record_identity()
            store = PostgresInstanceStore(self._db, self.workspace_id, agent_name, instance_key)
            self._stores[key] = store
        return store

    def instance_path(self, agent_name: str, instance_key: str) -> Path | None:
        return None

    def reader(self, agent_name: str, instance_key: str) -> PostgresInstanceReader:
        """A read-only view (no lease, nothing created): see :mod:`._reader`."""
        return PostgresInstanceReader(self._db, self.workspace_id, agent_name, instance_key)

    def list_instances(self) -> list[InstanceInfo]:
        """Every instance of this workspace that wrote its metadata, sorted by (agent, key)."""
        with self._db.connection("list instances") as conn:
            rows = conn.execute(_LIST_INSTANCES, (self.workspace_id,)).fetchall()
        out: list[InstanceInfo] = []
        for agent, key, status, created, updated, held in rows:
            try:
                info = InstanceInfo(agent, key, status, parse_iso(created), parse_iso(updated), Path(), held=bool(held))
                out.append(info)
            except (TypeError, ValueError):
                continue
        out.sort(key=lambda i: (i.agent_name, i.instance_key))  # Python's order, not the collation's
        return out

    def delete_instance(self, agent_name: str, instance_key: str, *, force: bool = False) -> bool:
        """Delete the instance's data; the row stays as a tombstone so its fencing token keeps
        growing (a writer of the deleted instance can never match again). A held instance raises
        ``E_INSTANCE_LOCKED`` unless ``force``."""
        store = self._stores.pop((agent_name, instance_key), None)
        if store is not None:
            store.close()
        db = self._db
        with db.connection("find the instance") as conn:
            row = conn.execute(
                "SELECT id FROM goondan_instances WHERE workspace_id = %s AND agent_name = %s AND instance_key = %s",
                (self.workspace_id, agent_name, instance_key),
            ).fetchone()
        if row is None:
            return False
        instance_id = int(row[0])
        name = f"{agent_name}:{instance_key} (PostgreSQL)"
        held_here = db.live_holder(instance_id) is not None
        locked = held_here or not db.try_lock(instance_id)
        if locked and not force:
            raise locked_error(name, db.holder_info(instance_id), elsewhere=POSTGRES_ELSEWHERE)
        if held_here:
            db.vacate(instance_id)  # its next write fails with E_INSTANCE_LEASE_LOST
        try:
            with db.connection("delete the instance") as conn, conn.transaction():
                found = conn.execute(
                    "SELECT status IS NOT NULL OR paused_turn IS NOT NULL"
                    " OR EXISTS (SELECT 1 FROM goondan_messages WHERE instance_id = %(id)s)"
                    " OR EXISTS (SELECT 1 FROM goondan_events WHERE instance_id = %(id)s)"
                    " OR EXISTS (SELECT 1 FROM goondan_runtime_events WHERE instance_id = %(id)s)"
                    " OR EXISTS (SELECT 1 FROM goondan_extension_state WHERE instance_id = %(id)s)"
                    " OR EXISTS (SELECT 1 FROM goondan_attachments WHERE instance_id = %(id)s)"
                    " FROM goondan_instances WHERE id = %(id)s FOR UPDATE",
                    {"id": instance_id},
                ).fetchone()
                _delete_data(conn, instance_id)
                conn.execute(
                    "UPDATE goondan_instances SET status = NULL, created_at = NULL, updated_at = NULL,"
                    " paused_turn = NULL, holder = NULL, token = token + 1 WHERE id = %s",
                    (instance_id,),
                )
        finally:
            db.unlock_if_vacant(instance_id)
        return bool(found and found[0])

    def close(self) -> None:
        for store in self._stores.values():
            store.close()
        self._stores.clear()


class PostgresStoreBackend:
    """What a ``postgresql://`` URL opens: one pool and one lease session for this process."""

    durable = True

    def __init__(self, url: str) -> None:
        self.url = url
        self._db = shared_database(url)  # validates the URL; connects on first use

    def workspace(self, workspace_id: str, *, identity: WorkspaceIdentity | None = None) -> PostgresWorkspaceStore:
        return PostgresWorkspaceStore(self._db, workspace_id, identity=identity)

    def list_workspaces(self) -> list[str]:
        """Workspaces with a record or at least one instance, sorted."""
        with self._db.connection("list workspaces") as conn:
            rows = conn.execute(
                "SELECT workspace_id FROM goondan_workspaces UNION SELECT workspace_id FROM goondan_instances"
            ).fetchall()
        return sorted(str(r[0]) for r in rows)  # Python's order, not the database collation's

    def claim_service(self, workspace_id: str, what: str) -> Any:
        """Claim the workspace for this process's connector service (``gdn run``), or raise
        ``E_RUN_ACTIVE`` naming the process that has it (:mod:`._service`). Returns the claim; its
        ``watch(on_lost)`` keeps it across server restarts (``on_lost`` gets ``E_RUN_CLAIM_LOST`` if
        another service took it meanwhile), its ``release()`` gives it back, and it goes away with
        this process anyway."""
        from ._service import claim_service

        return claim_service(self._db, workspace_id, what)

    def close(self) -> None:
        """Close the pool and the lease session of this URL in this process: every lease this
        process holds through it is given back. (Runtimes never call it; tests and tools do.)"""
        forget_shared(self._db)
        self._db.close()

    def __repr__(self) -> str:
        return f"PostgresStoreBackend({redact(self.url)!r})"


def open_postgres(url: str, *, state_root: Path) -> PostgresStoreBackend:
    """The :class:`~goondan.storage.StoreFactory` of ``postgresql://`` and ``postgres://``.
    Nothing connects yet; an installation without the ``postgres`` extra is told so now."""
    import importlib.util

    if importlib.util.find_spec("psycopg") is None or importlib.util.find_spec("psycopg_pool") is None:
        raise missing_extra()
    return PostgresStoreBackend(url)


if TYPE_CHECKING:
    # the backend implements the store protocols; mypy checks these assignments
    from .._protocol import InstanceReader, InstanceStore, StoreBackend, WorkspaceStore

    _instance: type[InstanceStore] = PostgresInstanceStore
    _reader: type[InstanceReader] = PostgresInstanceReader
    _workspace: type[WorkspaceStore] = PostgresWorkspaceStore
    _backend: type[StoreBackend] = PostgresStoreBackend

__all__ = [
    "LEASE_EXPIRY_S",
    "PostgresInstanceReader",
    "PostgresInstanceStore",
    "PostgresStoreBackend",
    "PostgresWorkspaceStore",
    "open_postgres",
]
