"""One service per workspace on a PostgreSQL store, across machines.

``gdn run`` serving a swarm's connectors refuses to start when another ``gdn run`` already serves the
same workspace on the same state root (``E_RUN_ACTIVE``). With the PostgreSQL store two machines (or a
laptop pointed at the production database) have different state roots, so both started, both accepted
webhooks with 202, and every event the second one received for an instance the first held failed
with ``E_INSTANCE_LOCKED`` in its log: lost for the sender. The service claims the workspace here: a
session-level advisory lock (two-key form, class :data:`SERVICE_LOCK_CLASS`, so it never meets the
instances' one-key locks) on a connection of its own whose ``application_name`` names the holder. It
goes away with that connection, i.e. with the process (or ~25 s after its machine vanished, like an
instance lease: the same keepalive settings).
"""

from __future__ import annotations

import contextlib
import zlib
from typing import Any

from ...errors import GoondanError
from ._db import (
    KEEPALIVE_COUNT,
    KEEPALIVE_IDLE_S,
    KEEPALIVE_INTERVAL_S,
    LEASE_EXPIRY_S,
    Database,
    query_error,
    redact,
    unavailable,
)

SERVICE_LOCK_CLASS = 0x676F6E64  # "gond": the first key of every service lock
_NAME_PREFIX = "goondan service "


def _key(workspace_id: str) -> int:
    """A signed 32-bit key for ``workspace_id`` (advisory locks take int4 pairs)."""
    value = zlib.crc32(workspace_id.encode("utf-8"))
    return value - (1 << 32) if value >= (1 << 31) else value


class ServiceClaim:
    """The held claim; :meth:`release` gives it back (closing its connection)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # closing a connection the server already dropped
                pass


def claim_service(db: Database, workspace_id: str, what: str) -> ServiceClaim:
    """Claim ``workspace_id`` for this process's service, or raise ``E_RUN_ACTIVE`` naming the
    holder. ``what`` describes this process for the next one that tries (pid, host, bundle)."""
    import psycopg

    with db.connection("check the store"):  # reachable, schema made: the errors every run gives
        pass
    name = (_NAME_PREFIX + what)[:63]  # PostgreSQL keeps 63 bytes of application_name
    try:
        conn = psycopg.connect(
            db.conninfo, autocommit=True, application_name=name, connect_timeout=max(2, int(db.pool_timeout))
        )
    except psycopg.OperationalError as exc:
        raise unavailable(db.url, exc, "connect") from None
    try:
        with contextlib.suppress(psycopg.Error):  # the server drops a vanished holder as it drops a lease
            conn.execute(
                f"SET tcp_keepalives_idle = {KEEPALIVE_IDLE_S}; SET tcp_keepalives_interval = {KEEPALIVE_INTERVAL_S}; "
                f"SET tcp_keepalives_count = {KEEPALIVE_COUNT}; SET tcp_user_timeout = {LEASE_EXPIRY_S * 1000}"
            )
        key = _key(workspace_id)
        row = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (SERVICE_LOCK_CLASS, key)).fetchone()
        if row is not None and row[0]:
            return ServiceClaim(conn)
        holder = conn.execute(
            "SELECT a.application_name, a.client_addr, a.backend_start FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
            "AND l.classid = %s::oid AND l.objid = %s::oid AND l.objsubid = 2",
            (SERVICE_LOCK_CLASS, key & 0xFFFFFFFF),
        ).fetchone()
    except psycopg.Error as exc:
        conn.close()
        raise query_error(db.url, exc, "claim the workspace for this service") from None
    conn.close()
    who = "another gdn run"
    if holder is not None and str(holder[0] or "").startswith(_NAME_PREFIX):
        who = str(holder[0])[len(_NAME_PREFIX) :]
        if holder[2] is not None:
            who += f", since {holder[2].isoformat(timespec='seconds')}"
    raise GoondanError(
        "E_RUN_ACTIVE",
        f"workspace {workspace_id!r} is already served from the PostgreSQL store {redact(db.url)} by {who}",
        suggestion="One gdn run serves a workspace's connectors: stop the other one first, or send it "
        "requests. A machine that vanished frees it within about 25 s.",
    )


__all__ = ["SERVICE_LOCK_CLASS", "ServiceClaim", "claim_service"]
