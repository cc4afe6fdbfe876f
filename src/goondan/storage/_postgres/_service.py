"""One service per workspace on a PostgreSQL store, across machines.

``gdn run`` serving a swarm's connectors refuses to start when another ``gdn run`` already serves the
same workspace on the same state root (``E_RUN_ACTIVE``). With the PostgreSQL store two machines (or a
laptop pointed at the production database) have different state roots, so both started, both accepted
webhooks with 202, and every event the second one received for an instance the first held failed
with ``E_INSTANCE_LOCKED`` in its log: lost for the sender. The service claims the workspace here: a
session-level advisory lock on a connection of its own whose ``application_name`` names the holder.
It goes away with that connection, i.e. with the process (or ~25 s after its machine vanished, like
an instance lease: the same keepalive settings).

**The key** is 63 bits of a hash of the workspace id, in the one-key (bigint) form with the top bit
set: instance leases use the one-key form with their row id (positive), so the two never meet, and
two workspaces of one database practically never share a key (a 32-bit key would refuse a second
service for nothing once in 2^32 pairs).

**A server restart** ends the claim's session, and with it the lock: a second service could start
while the first still runs. A watcher thread (:meth:`ServiceClaim.watch`) notices at once (the
server closes the socket), connects again every second and takes the claim again. If another service
took it meanwhile, the claim is lost: the watcher reports ``E_RUN_CLAIM_LOST`` naming that service, and
``gdn run`` stops serving rather than have both accept work.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import select
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import GoondanError
from ._db import (
    KEEPALIVE_COUNT,
    KEEPALIVE_IDLE_S,
    KEEPALIVE_INTERVAL_S,
    LEASE_EXPIRY_S,
    PROBE_CONNECT_S,
    Database,
    query_error,
    redact,
    unavailable,
)

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("goondan.storage.postgres")

_NAME_PREFIX = "goondan service "
#: how often the watcher asks a quiet claim session whether it is still there (a vanished network
#: shows no closed socket; the query then fails within the keepalive bound)
HEARTBEAT_S = 5.0
#: how often the watcher tries to connect again after the session was lost
RETRY_S = 1.0
# the client side gives up on a vanished server as the server gives up on us (libpq parameters)
_CLIENT_KEEPALIVE: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": KEEPALIVE_IDLE_S,
    "keepalives_interval": KEEPALIVE_INTERVAL_S,
    "keepalives_count": KEEPALIVE_COUNT,
    "tcp_user_timeout": LEASE_EXPIRY_S * 1000,
}


def service_key(workspace_id: str) -> int:
    """The claim's advisory lock key: a negative bigint (top bit set) from 63 bits of BLAKE2b."""
    value = int.from_bytes(hashlib.blake2b(workspace_id.encode("utf-8"), digest_size=8).digest(), "big")
    return (value | (1 << 63)) - (1 << 64)


# a one-key (bigint) advisory lock shows in pg_locks as classid = high 32 bits, objid = low 32 bits,
# objsubid = 1
_HOLDER = (
    "SELECT a.application_name, a.backend_start FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s::oid AND l.objid = %s::oid"
    " AND l.objsubid = 1"
)


def _holder(conn: psycopg.Connection[Any], key: int) -> str:
    """Who holds the claim ``key`` (its ``application_name``), as the refusal names it."""
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    row = conn.execute(_HOLDER, (unsigned >> 32, unsigned & 0xFFFFFFFF)).fetchone()
    if row is None or not str(row[0] or "").startswith(_NAME_PREFIX):
        return "another gdn run"  # gone meanwhile, or a session that did not name itself
    who = str(row[0])[len(_NAME_PREFIX) :]
    if row[1] is not None:
        who += f", since {row[1].isoformat(timespec='seconds')}"
    return who


def _take(conn: psycopg.Connection[Any], workspace_id: str) -> str | None:
    """Take the claim of ``workspace_id`` on ``conn``: None when taken, else who holds it."""
    key = service_key(workspace_id)
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
    return None if row and row[0] else _holder(conn, key)


def _connect(db: Database, name: str, timeout: int) -> psycopg.Connection[Any]:
    import psycopg

    conn = psycopg.connect(
        db.conninfo, autocommit=True, application_name=name, connect_timeout=timeout, **_CLIENT_KEEPALIVE
    )
    with contextlib.suppress(psycopg.Error):  # the server drops a vanished holder as it drops a lease
        conn.execute(
            f"SET tcp_keepalives_idle = {KEEPALIVE_IDLE_S}; SET tcp_keepalives_interval = {KEEPALIVE_INTERVAL_S}; "
            f"SET tcp_keepalives_count = {KEEPALIVE_COUNT}; SET tcp_user_timeout = {LEASE_EXPIRY_S * 1000}"
        )
    return conn


class ServiceClaim:
    """The held claim. :meth:`watch` keeps it across server restarts; :meth:`release` gives it back
    (closing its connection)."""

    def __init__(self, db: Database, workspace_id: str, name: str, conn: psycopg.Connection[Any]) -> None:
        self._db = db
        self.workspace_id = workspace_id
        self._name = name
        self._conn: psycopg.Connection[Any] | None = conn
        self._released = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        self._thread: threading.Thread | None = None
        #: set when another service took the workspace while this one could not hold it
        self.lost: GoondanError | None = None
        #: how many times the claim was taken again after its session was lost
        self.retaken = 0

    def watch(self, on_lost: Callable[[GoondanError], None]) -> None:
        """Keep the claim from now on (a daemon thread); ``on_lost`` is called from that thread,
        once, if another service took the workspace meanwhile. The caller must then stop serving."""
        if self._thread is None and not self._released.is_set():
            self._thread = threading.Thread(
                target=self._watch, args=(on_lost,), name="goondan-service-claim", daemon=True
            )
            self._thread.start()

    def release(self) -> None:
        if self._released.is_set():
            return
        self._released.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        thread = self._thread
        if thread is not None:
            thread.join(timeout=PROBE_CONNECT_S + 1)  # at most one connect attempt in flight
        conn, self._conn = self._conn, None
        if conn is not None and (thread is None or not thread.is_alive()):
            with contextlib.suppress(Exception):  # closing a connection the server already dropped
                conn.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    # ------------------------------------------------------------------ the watcher

    def _watch(self, on_lost: Callable[[GoondanError], None]) -> None:
        try:
            self._keep(on_lost)
        except Exception:  # never silently: a claim nobody keeps is two services after a restart
            log.exception("the service claim of workspace %r is no longer kept", self.workspace_id)

    def _keep(self, on_lost: Callable[[GoondanError], None]) -> None:
        import psycopg

        while not self._released.is_set():
            conn = self._conn
            if conn is not None and self._alive(conn):
                continue
            if self._released.is_set():
                return
            if conn is not None:
                log.warning("the PostgreSQL server ended the service claim's session; taking the claim again")
                self._conn = None
                with contextlib.suppress(Exception):
                    conn.close()
            try:
                conn = _connect(self._db, self._name, PROBE_CONNECT_S)
            except psycopg.Error:
                self._released.wait(RETRY_S)  # down, restarting, or refusing us for now: try again
                continue
            try:
                holder = _take(conn, self.workspace_id)
            except psycopg.Error:
                with contextlib.suppress(Exception):
                    conn.close()
                self._released.wait(RETRY_S)
                continue
            if holder is None:
                self._conn = conn
                self.retaken += 1
                log.warning("the service claim of workspace %r is held again", self.workspace_id)
                continue
            with contextlib.suppress(Exception):
                conn.close()
            self.lost = GoondanError(
                "E_RUN_CLAIM_LOST",
                f"workspace {self.workspace_id!r} is now served from the PostgreSQL store {redact(self._db.url)} "
                f"by {holder}: this service lost its claim when the server ended its session and stops",
                suggestion="Two services of one workspace must not both accept work: this one stopped. Keep the "
                "other, or stop it and start this one again.",
            )
            on_lost(self.lost)
            return

    def _alive(self, conn: psycopg.Connection[Any]) -> bool:
        """Wait up to :data:`HEARTBEAT_S` on the session's socket; False when it is gone. Something
        to read on an idle session is the server ending it (a restart sends FATAL, then closes)."""
        try:
            ready, _, _ = select.select([conn.fileno(), self._wake_r], [], [], HEARTBEAT_S)
        except Exception:  # a closed connection (psycopg's error), a descriptor gone (OSError)
            return False
        if self._wake_r in ready or self._released.is_set():
            return True
        try:
            conn.execute("SELECT 1")
        except Exception:
            return False
        return True


_NAME_BYTES = 63  # PostgreSQL keeps 63 bytes of application_name (NAMEDATALEN - 1)


def _application_name(what: str) -> str:
    """``goondan service <what>`` within 63 bytes. ``what`` ends with the bundle's path in
    parentheses, which is what runs over: its start is dropped (``(...nd/my-bot)``) rather than its
    end, which named the bundle and closed the parenthesis (a refusal read ``by pid 7 on host
    (/srv/deploy/te, since ...``)."""
    name = _NAME_PREFIX + what
    if len(name.encode("utf-8")) <= _NAME_BYTES:
        return name
    cut = name.rfind("(")
    if name.endswith(")") and cut > 0:
        head = name[: cut + 1] + "..."
        room = _NAME_BYTES - len(head.encode("utf-8")) - 1
        if room >= 8:
            tail = name[cut + 1 : -1].encode("utf-8")[-room:].decode("utf-8", errors="ignore")
            return f"{head}{tail})"
    return name.encode("utf-8")[:_NAME_BYTES].decode("utf-8", errors="ignore")


def claim_service(db: Database, workspace_id: str, what: str) -> ServiceClaim:
    """Claim ``workspace_id`` for this process's service, or raise ``E_RUN_ACTIVE`` naming the
    holder. ``what`` describes this process for the next one that tries (pid, host, bundle)."""
    import psycopg

    with db.connection("check the store"):  # reachable, schema made: the errors every run gives
        pass
    name = _application_name(what)
    try:
        conn = _connect(db, name, max(PROBE_CONNECT_S, int(db.pool_timeout)))
    except psycopg.OperationalError as exc:
        raise unavailable(db.url, exc, "connect") from None
    try:
        holder = _take(conn, workspace_id)
    except psycopg.Error as exc:
        conn.close()
        raise query_error(db.url, exc, "claim the workspace for this service") from None
    if holder is None:
        return ServiceClaim(db, workspace_id, name, conn)
    conn.close()
    raise GoondanError(
        "E_RUN_ACTIVE",
        f"workspace {workspace_id!r} is already served from the PostgreSQL store {redact(db.url)} by {holder}",
        suggestion="One gdn run serves a workspace's connectors: stop the other one first, or send it "
        "requests. A machine that vanished frees it within about 25 s.",
    )


__all__ = ["ServiceClaim", "claim_service", "service_key"]
