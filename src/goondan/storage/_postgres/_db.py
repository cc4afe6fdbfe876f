"""Connections of the PostgreSQL store: a pool for data, one session for leases, clear errors.

Why two kinds of connection:

* **The pool** (psycopg_pool, ``pool_size`` connections at most, autocommit) carries every read
  and write. A connection the server closed (a restart, an idle timeout) is found before use by
  a non-blocking poll of its socket - an idle healthy connection has nothing to read - so after a
  server restart the next operation gets a fresh connection instead of failing on a stale one. A
  pool that gives no connection within half a second may be failing to connect rather than busy:
  the server is then asked directly once, so a server that is down fails the operation at once
  instead of after the whole ``pool_timeout`` (:data:`POOL_FIRST_WAIT_S`).
* **The lease session**: one dedicated connection per backend object holding a session-level
  advisory lock for every instance this process holds. The lock dies with the connection, i.e.
  with the holder process (the kernel closes its socket) or, for a machine that vanishes, when
  the server's TCP keepalive gives up on it (``tcp_keepalives_*`` below, about 25 s). That is the
  lease's expiry. Two stores of one process share the session, so this process keeps its own
  table of which store holds what (advisory locks are re-entrant within a session).

Fork: a forked child must not hold its parent's leases (a lock lives as long as any process has
the socket open), so every backend forgets its connections in the child (``os.register_at_fork``);
the lease socket's descriptor is pointed at ``/dev/null`` so the child keeps no reference to it.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ...errors import GoondanError, StorageError
from .._lease import POSTGRES_ELSEWHERE, locked_error

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

CODE_UNAVAILABLE = "E_STORE_UNAVAILABLE"
CODE_QUERY = "E_STORE_QUERY"
CODE_URL = "E_STORE_URL_INVALID"
CODE_AUTH = "E_STORE_AUTH"
CODE_DATABASE = "E_STORE_DATABASE_NOT_FOUND"

DEFAULT_POOL_SIZE = 4
DEFAULT_POOL_TIMEOUT = 10.0

#: A pooled connection not given within this long: the pool may be failing to connect (the server is
#: down) rather than busy, so the server is asked directly once (:meth:`Database._probe`) before the
#: request waits out the rest of ``pool_timeout``. Without it every operation during an outage waited
#: the whole ``pool_timeout`` (10 s) for its E_STORE_UNAVAILABLE, and Studio froze page by page.
POOL_FIRST_WAIT_S = 0.5
#: ``connect_timeout`` of that direct connection (libpq's minimum that means anything: 2 s)
PROBE_CONNECT_S = 2
#: How long a failed connect that was slow to fail (a host that drops packets: the whole connect
#: timeout) is remembered: operations within it fail at once with the same error instead of each
#: waiting for the network again; the first one after it tries again, so the store recovers on its
#: own. A connect refused at once (the server's host is up, the server is not) is not remembered:
#: trying again costs a millisecond, and the first operation after the restart succeeds.
DOWN_MEMORY_S = 3.0
SLOW_FAILURE_S = 0.25

#: Server-side TCP keepalive of the lease session: a holder whose machine vanishes loses its
#: leases after about idle + interval * count seconds.
KEEPALIVE_IDLE_S = 10
KEEPALIVE_INTERVAL_S = 5
KEEPALIVE_COUNT = 3
LEASE_EXPIRY_S = KEEPALIVE_IDLE_S + KEEPALIVE_INTERVAL_S * KEEPALIVE_COUNT

# goondan's own query parameters, removed before the URL reaches libpq
_OWN_PARAMS = ("pool_size", "pool_timeout")

# objects a forked child inherited and must never finalize (that would talk on the parent's sockets)
_ABANDONED: list[Any] = []
_DATABASES: weakref.WeakSet[Database] = weakref.WeakSet()


def redact(url: str) -> str:
    """``url`` without its password, safe for messages and logs."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.netloc.rsplit("@", 1)[1]
        return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
    except ValueError:
        return url.split("@", 1)[-1]


def parse_url(url: str) -> tuple[str, int, float]:
    """``(libpq conninfo, pool size, pool timeout)`` of a ``postgresql://`` / ``postgres://`` URL."""
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError as exc:
        raise GoondanError(CODE_URL, f"invalid store URL {redact(url)!r}: {exc}", suggestion=_URL_HINT) from exc
    own = {k: v for k, v in query if k in _OWN_PARAMS}
    rest = [(k, v) for k, v in query if k not in _OWN_PARAMS]
    try:
        size = int(own.get("pool_size", DEFAULT_POOL_SIZE))
        timeout = float(own.get("pool_timeout", DEFAULT_POOL_TIMEOUT))
    except ValueError as exc:
        raise GoondanError(CODE_URL, f"invalid store URL {redact(url)!r}: {exc}", suggestion=_URL_HINT) from exc
    if size < 1 or not timeout > 0:
        raise GoondanError(
            CODE_URL,
            f"invalid store URL {redact(url)!r}: pool_size must be >= 1 and pool_timeout > 0",
            suggestion=_URL_HINT,
        )
    conninfo = urlunsplit(parts._replace(scheme="postgresql", query=urlencode(rest)))
    return conninfo, size, timeout


_URL_HINT = (
    "Write postgresql://USER:PASSWORD@HOST:PORT/DATABASE (libpq parameters such as sslmode=require "
    "go in the query string; goondan's own: pool_size=N, pool_timeout=SECONDS)."
)


def unavailable(url: str, exc: BaseException | None, what: str) -> StorageError:
    detail = f": {str(exc).strip().splitlines()[0]}" if exc is not None and str(exc).strip() else ""
    if detail.startswith(": connection is bad: invalid "):
        # libpq rejected a value of the URL before trying the network (port=abc, port=99999,
        # sslmode=bogus): a typo in the URL, not a server to wait for
        return StorageError(
            CODE_URL, f"invalid store URL {redact(url)!r}{detail[len(': connection is bad') :]}", suggestion=_URL_HINT
        )
    refused = login_refused(url, detail)
    if refused is not None:
        return refused
    if "FATAL:" in detail:  # the server answered and refused this session (too many clients, starting up)
        return StorageError(
            CODE_UNAVAILABLE,
            f"the PostgreSQL store {redact(url)} is unavailable ({what}){detail}",
            suggestion="The server is up but refused the connection: check the server log (max_connections, "
            "a server starting up or shutting down) and retry; nothing committed is lost.",
        )
    return StorageError(
        CODE_UNAVAILABLE,
        f"the PostgreSQL store {redact(url)} is unavailable ({what}){detail}",
        suggestion=(
            "Check that the PostgreSQL server is running and reachable from this machine "
            "(pg_isready -d URL). Nothing committed is lost: a turn that failed now keeps its "
            "durable events and is replayed when the instance is next loaded; retry once the server is back."
        ),
    )


def _login(url: str) -> tuple[str, str, str]:
    """``(user, host, port)`` the URL logs in as, libpq's defaults filled in the way libpq does
    (``PGUSER`` / the OS user, ``PGHOST`` / the local socket, ``PGPORT`` / 5432); never the password."""
    import getpass

    try:
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(parse_url(url)[0])
    except Exception:  # a URL libpq cannot parse never gets this far; be safe in an error path
        params = {}
    user = str(params.get("user") or os.environ.get("PGUSER") or getpass.getuser())
    host = str(params.get("host") or os.environ.get("PGHOST") or "the local socket")
    port = str(params.get("port") or os.environ.get("PGPORT") or 5432)
    return user, host, port


def login_refused(url: str, detail: str) -> StorageError | None:
    """The server answered and refused this login for a reason only the configuration can fix: a
    wrong or missing password, an unknown role, a pg_hba.conf that rejects this client
    (``E_STORE_AUTH``), or a database that does not exist (``E_STORE_DATABASE_NOT_FOUND``). Such a
    store is not "unavailable": waiting does not help, so the CLI exits with the config code (3).
    None for anything else. (libpq gives no SQLSTATE for a failed login, so its text is matched;
    the server's messages are English unless its lc_messages says otherwise.)"""
    user, host, port = _login(url)
    lower = detail.lower()
    missing = re.search(r'FATAL:\s+database "(.*)" does not exist', detail)
    if missing is not None:
        name = missing.group(1)
        return StorageError(
            CODE_DATABASE,
            f"the PostgreSQL server at {host}:{port} has no database {name!r} (store {redact(url)})",
            suggestion=f"Create it (createdb -h {host} -p {port} -U {user} {name}) or name an existing database "
            "in the URL's path; goondan creates its own tables on first use, not the database.",
        )
    reason = _auth_reason(lower)
    if reason is not None:
        return StorageError(
            CODE_AUTH,
            f"the PostgreSQL server at {host}:{port} refused the login of user {user!r} "
            f"(store {redact(url)}): {reason}",
            suggestion="Check the user and password in the store URL (--store / GOONDAN_STORE; a password with "
            "@ : / or % must be percent-encoded) or in PGPASSWORD / ~/.pgpass, that the role exists and may "
            "log in, and that the server's pg_hba.conf admits this client.",
        )
    return None


def _auth_reason(lower: str) -> str | None:
    """Why libpq's ``lower``-cased message says the login was refused, or None when it does not."""
    if "no password supplied" in lower:
        return "the server wants a password and none was given"
    if "fatal:" not in lower:
        return None
    if "password authentication failed" in lower:
        return "wrong password"
    if "authentication failed" in lower:  # peer, ident, cert, ...
        return lower[lower.index("fatal:") + 6 :].strip().split(" for user", 1)[0]
    if "pg_hba.conf" in lower:
        return "no pg_hba.conf entry admits this client"
    if 'role "' in lower and "does not exist" in lower:
        return "no such role"
    if "not permitted to log in" in lower:
        return "the role may not log in"
    if "permission denied for database" in lower:
        return "the role may not connect to this database"
    return None


def query_error(url: str, exc: BaseException, what: str) -> StorageError:
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
    if what == "prepare the schema" and "permission denied" in detail:
        # the first use creates goondan's tables: say the two ways to get there
        return StorageError(
            CODE_QUERY,
            f"the PostgreSQL store {redact(url)} refused to {what}: {detail}",
            suggestion="The first use creates goondan's tables, which this user may not do: grant it CREATE on "
            "the schema (GRANT CREATE ON SCHEMA public TO <user>), or have a user who may run "
            "`gdn instance list -A --store URL` against the database once.",
        )
    return StorageError(
        CODE_QUERY,
        f"the PostgreSQL store {redact(url)} refused to {what}: {detail}",
        suggestion="Check the database user's privileges (it needs to create tables on first use) and the server log.",
    )


def _readable(fd: int) -> bool:
    """True when an idle connection has something to read: the server closed it or sent an
    error (a restart sends FATAL 57P01 to every session)."""
    try:
        ready, _, _ = select.select([fd], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)


def _check_connection(conn: psycopg.Connection[Any]) -> None:
    import psycopg

    if conn.closed or conn.broken or _readable(conn.fileno()):
        raise psycopg.OperationalError("the server closed the connection")


@dataclass(slots=True)
class _Lease:
    """One instance held by this process: who holds it (``None`` = nobody, lock still held by
    the session, free for the next opener of this process) and with which fencing token."""

    holder: weakref.ReferenceType[Any] | None
    token: int


class Database:
    """Everything one backend object shares: the pool, the lease session, the lease table."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conninfo, self.pool_size, self.pool_timeout = parse_url(url)
        self._pool: psycopg_pool.ConnectionPool[Any] | None = None
        self._pool_lock = threading.Lock()
        self._lease_conn: psycopg.Connection[Any] | None = None
        self._lease_lock = threading.RLock()
        self.leases: dict[int, _Lease] = {}
        self._migrated = False
        self._down: tuple[float, Exception] | None = None  # (until, the failed connect's error): DOWN_MEMORY_S
        self._probe_lock = threading.Lock()
        self._up_at = -float(PROBE_CONNECT_S)  # when a direct connect last succeeded (time.monotonic())
        _DATABASES.add(self)

    # ------------------------------------------------------------------ pool

    def _open_pool(self, what: str = "connect") -> psycopg_pool.ConnectionPool[Any]:
        with self._pool_lock:
            if self._pool is not None:
                return self._pool
            self._raise_if_down(what)  # checked again under the lock: waiters do not each try the network
            try:
                import psycopg_pool
            except ImportError as exc:  # pragma: no cover - the extra brings it
                raise missing_extra() from exc
            # on a connection of its own, so a server that is down (or refuses this login) fails now
            # and fast instead of after the pool's timeout; the first one migrates the schema
            self._probe(what, migrate=not self._migrated)
            self._migrated = True
            pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
                self.conninfo,
                kwargs={"autocommit": True},
                min_size=1,
                max_size=self.pool_size,
                open=False,
                check=_check_connection,
                timeout=self.pool_timeout,
                num_workers=1,
                name="goondan-store",
                reconnect_timeout=max(self.pool_timeout, 60.0),
            )
            pool.open(wait=False)
            self._pool = pool
        return pool

    def _probe(self, what: str, *, migrate: bool = False) -> None:
        """Connect directly once (and migrate the schema when ``migrate``): ``E_STORE_UNAVAILABLE``,
        ``E_STORE_AUTH``, ... now, in the time the server takes to refuse (a slow failure is
        remembered for :data:`DOWN_MEMORY_S`). A server that answers "too many clients" is up:
        the caller goes on waiting for a pooled connection."""
        import psycopg

        # the first connect of a process may be to a slow, far server; after a failure it is a check
        timeout = max(PROBE_CONNECT_S, int(self.pool_timeout)) if migrate else PROBE_CONNECT_S
        started = time.monotonic()
        try:
            with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=timeout) as conn:
                if migrate:
                    from ._schema import migrate as run_migrations

                    run_migrations(conn)
        except psycopg.OperationalError as exc:
            if not migrate and "too many clients" in str(exc):
                return
            now = time.monotonic()
            self._down = (now + DOWN_MEMORY_S, exc) if now - started >= SLOW_FAILURE_S else None
            raise unavailable(self.url, exc, what) from None
        except psycopg.ProgrammingError as exc:
            if exc.sqlstate:  # the server refused a statement (InsufficientPrivilege is one too)
                raise query_error(self.url, exc, "prepare the schema") from None
            # no SQLSTATE: libpq refused the URL itself (an unknown option)
            url = redact(self.url)
            raise GoondanError(CODE_URL, f"invalid store URL {url!r}: {exc}", suggestion=_URL_HINT) from None
        except psycopg.Error as exc:
            raise query_error(self.url, exc, "prepare the schema") from None
        self._down = None

    def _raise_if_down(self, what: str) -> None:
        """Fail at once while a failed connect is remembered (see :data:`DOWN_MEMORY_S`)."""
        down = self._down
        if down is not None and time.monotonic() < down[0]:
            raise unavailable(self.url, down[1], what)

    def _getconn(self, pool: psycopg_pool.ConnectionPool[Any], what: str) -> psycopg.Connection[Any]:
        """A connection of ``pool`` within ``pool_timeout``, or the server's own error as soon as it
        is known: while the pool gives none, the server is asked directly every
        :data:`POOL_FIRST_WAIT_S` - by one waiter at a time, and not within ``PROBE_CONNECT_S`` of an
        answer (a pool that is only busy, more concurrent operations than ``pool_size``, must not
        become a connection storm)."""
        import psycopg_pool

        deadline = time.monotonic() + self.pool_timeout
        conn: psycopg.Connection[Any]
        while True:
            left = deadline - time.monotonic()
            try:
                conn = pool.getconn(timeout=max(0.001, min(POOL_FIRST_WAIT_S, left)))
                return conn
            except psycopg_pool.PoolTimeout:
                if left <= POOL_FIRST_WAIT_S:
                    raise
            with self._probe_lock:
                if time.monotonic() - self._up_at >= PROBE_CONNECT_S:
                    self._raise_if_down(what)
                    self._probe(what)  # raises when the server cannot be reached
                    self._up_at = time.monotonic()  # it is there: the pool is busy, wait on

    @contextlib.contextmanager
    def connection(self, what: str) -> Iterator[psycopg.Connection[Any]]:
        """A pooled autocommit connection; connection failures become ``E_STORE_UNAVAILABLE``
        (``E_STORE_AUTH`` / ``E_STORE_DATABASE_NOT_FOUND`` for a refused login) and other server
        errors ``E_STORE_QUERY`` (our own StorageErrors pass through). While the server is known to
        be unreachable (a connect that timed out less than :data:`DOWN_MEMORY_S` ago) it fails at once."""
        try:
            import psycopg
            import psycopg_pool
        except ImportError as exc:
            raise missing_extra() from exc

        doing = f"could not {what}"
        self._raise_if_down(doing)
        pool = self._pool if self._pool is not None else self._open_pool(doing)
        try:
            try:
                conn = self._getconn(pool, doing)
            except StorageError:
                self._discard_pool(pool)
                raise
            try:
                with conn:
                    yield conn
            finally:
                pool.putconn(conn)
        except psycopg_pool.PoolTimeout as exc:
            self._discard_pool(pool)
            raise unavailable(self.url, exc, f"no connection within {self.pool_timeout:g} s to {what}") from None
        except psycopg.OperationalError as exc:
            self._discard_pool(pool)
            raise unavailable(self.url, exc, doing) from None
        except psycopg.Error as exc:
            if getattr(exc, "sqlstate", None) == "GDN01":
                raise
            raise query_error(self.url, exc, what) from None

    def _discard_pool(self, pool: psycopg_pool.ConnectionPool[Any]) -> None:
        """After a connection failure: the next operation gets a new pool, which connects at once
        (the old one would retry with a growing backoff and keep failing for a while after the
        server is back). The old pool closes in the background."""
        with self._pool_lock:
            if self._pool is pool:
                self._pool = None
        threading.Thread(target=_close_quietly, args=(pool,), daemon=True, name="goondan-pool-close").start()

    # ------------------------------------------------------------------ lease session

    def _lease_session(self) -> psycopg.Connection[Any]:
        """The lease session, reconnected (and every held lock taken again) when the server
        dropped it. Must be called with ``_lease_lock`` held."""
        conn = self._lease_conn
        if conn is not None and not (conn.closed or conn.broken or _readable(conn.fileno())):
            return conn
        import psycopg

        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
        self._lease_conn = None
        if self._pool is None:
            self._open_pool("open the lease session")
        self._raise_if_down("open the lease session")
        try:
            conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=max(1, int(self.pool_timeout)))
            with contextlib.suppress(psycopg.Error):  # keepalives only matter (and only apply) on TCP
                conn.execute(
                    f"SET tcp_keepalives_idle = {KEEPALIVE_IDLE_S}; "
                    f"SET tcp_keepalives_interval = {KEEPALIVE_INTERVAL_S}; "
                    f"SET tcp_keepalives_count = {KEEPALIVE_COUNT}; "
                    # the same bound while the server has unacknowledged data in flight to it
                    f"SET tcp_user_timeout = {LEASE_EXPIRY_S * 1000}"
                )
            # re-take what this process held before the connection was lost; a lock someone else
            # took meanwhile stays theirs (their token is higher: our next commit is refused)
            for instance_id in list(self.leases):
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (instance_id,)).fetchone()
                if not (row and row[0]):
                    del self.leases[instance_id]
        except psycopg.OperationalError as exc:
            raise unavailable(self.url, exc, "open the lease session") from None
        self._lease_conn = conn
        return conn

    def check_session(self) -> None:
        """Before a write: if the server dropped the lease session (a restart), reconnect and take
        this process's locks again, so a restarted server keeps refusing other openers. One
        non-blocking poll when nothing happened."""
        conn = self._lease_conn
        if conn is not None and not (conn.closed or conn.broken or _readable(conn.fileno())):
            return
        if not self.leases:
            return
        with self._lease_lock:
            self._lease_session()

    def acquire(self, store: Any, instance_id: int, name: str) -> int:
        """Make ``store`` the holder of ``instance_id`` and return its new fencing token, or raise
        ``E_INSTANCE_LOCKED`` naming the holder."""
        import psycopg

        with self._lease_lock:
            self._sweep(keep=instance_id)
            lease = self.leases.get(instance_id)
            for attempt in (1, 2):
                conn = self._lease_session()
                try:
                    if lease is not None:
                        holder = lease.holder() if lease.holder is not None else None
                        if holder is not None and holder is not store and not holder.closed:
                            holder = None
                            raise locked_error(name, self._holder(conn, instance_id), elsewhere=POSTGRES_ELSEWHERE)
                    else:
                        self._lock_or_raise(conn, instance_id, name)
                        lease = self.leases[instance_id] = _Lease(None, 0)
                    from ..._ids import now_iso
                    from .._lease import _host

                    holder_info = {"pid": os.getpid(), "host": _host(), "since": now_iso()}
                    row = conn.execute(
                        "UPDATE goondan_instances SET token = token + 1,"
                        " holder = json_build_object('pid', %s::int, 'host', %s::text, 'since', %s::text,"
                        " 'token', token + 1) WHERE id = %s RETURNING token",
                        (holder_info["pid"], holder_info["host"], holder_info["since"], instance_id),
                    ).fetchone()
                    assert row is not None, "the instance row exists before its lease is taken"
                    lease.holder = weakref.ref(store)
                    lease.token = int(row[0])
                    return lease.token
                except psycopg.OperationalError as exc:
                    self.leases.pop(instance_id, None)
                    lease = None
                    if attempt == 2:
                        raise unavailable(self.url, exc, "take the instance lease") from None
            raise AssertionError("unreachable")  # pragma: no cover

    def _lock_or_raise(self, conn: psycopg.Connection[Any], instance_id: int, name: str) -> None:
        """Take the advisory lock, or raise ``E_INSTANCE_LOCKED``. A holder that is a dead process
        of this host is waited for a moment: the server is closing its session right now (a
        crashed agent process being restarted)."""
        deadline: float | None = None
        while True:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (instance_id,)).fetchone()
            if row and row[0]:
                return
            holder = self._holder(conn, instance_id)
            pid = holder.get("pid") if holder else None
            from .._lease import DEAD_HOLDER_WAIT_S, _host, _pid_alive

            dead = isinstance(pid, int) and holder is not None and holder.get("host") == _host() and not _pid_alive(pid)
            now = time.monotonic()
            if deadline is None:
                deadline = now + DEAD_HOLDER_WAIT_S
            if not dead or now >= deadline:
                raise locked_error(name, holder, elsewhere=POSTGRES_ELSEWHERE)
            time.sleep(0.02)

    def _holder(self, conn: psycopg.Connection[Any], instance_id: int) -> dict[str, Any] | None:
        row = conn.execute("SELECT holder FROM goondan_instances WHERE id = %s", (instance_id,)).fetchone()
        value = row[0] if row else None
        return value if isinstance(value, dict) else None

    def holder_info(self, instance_id: int) -> dict[str, Any] | None:
        with self.connection("read the lease holder") as conn:
            return self._holder(conn, instance_id)

    def holds(self, store: Any, instance_id: int, token: int | None) -> bool:
        lease = self.leases.get(instance_id)
        return (
            token is not None
            and lease is not None
            and lease.token == token
            and lease.holder is not None
            and lease.holder() is store
        )

    def live_holder(self, instance_id: int) -> Any | None:
        """The open store of this process holding ``instance_id``, if any."""
        lease = self.leases.get(instance_id)
        holder = lease.holder() if lease is not None and lease.holder is not None else None
        return holder if holder is not None and not holder.closed else None

    def release(self, store: Any, instance_id: int) -> None:
        """``store`` gives its lease back (the session's advisory lock is released)."""
        with self._lease_lock:
            lease = self.leases.get(instance_id)
            if lease is None or lease.holder is None or lease.holder() is not store:
                return
            del self.leases[instance_id]
            self._unlock(instance_id)

    def vacate(self, instance_id: int) -> None:
        """Forget this process's holder of ``instance_id`` (a forced delete): its writes are
        refused from now on; the session keeps the lock for the next opener of this process."""
        with self._lease_lock:
            lease = self.leases.get(instance_id)
            if lease is not None:
                lease.holder = None

    def vacate_if_held(self, store: Any, instance_id: int) -> None:
        """``store`` learnt from the server that its token is stale: it no longer holds."""
        with self._lease_lock:
            lease = self.leases.get(instance_id)
            if lease is not None and lease.holder is not None and lease.holder() is store:
                del self.leases[instance_id]
                self._unlock(instance_id)

    def try_lock(self, instance_id: int) -> bool:
        """Take the advisory lock of an instance nobody in this process holds (for a delete)."""
        with self._lease_lock:
            if instance_id in self.leases:
                return True
            import psycopg

            try:
                row = self._lease_session().execute("SELECT pg_try_advisory_lock(%s)", (instance_id,)).fetchone()
            except psycopg.OperationalError as exc:
                raise unavailable(self.url, exc, "lock the instance") from None
            if row and row[0]:
                self.leases[instance_id] = _Lease(None, 0)
                return True
            return False

    def unlock_if_vacant(self, instance_id: int) -> None:
        with self._lease_lock:
            lease = self.leases.get(instance_id)
            if lease is not None and (lease.holder is None or lease.holder() is None):
                del self.leases[instance_id]
                self._unlock(instance_id)

    def _unlock(self, instance_id: int) -> None:
        conn = self._lease_conn
        if conn is None or conn.closed:
            return
        with contextlib.suppress(Exception):
            conn.execute("SELECT pg_advisory_unlock(%s)", (instance_id,))

    def _sweep(self, keep: int) -> None:
        """Give back the locks of stores that were dropped without close()."""
        for instance_id, lease in list(self.leases.items()):
            if instance_id != keep and (lease.holder is None or lease.holder() is None):
                del self.leases[instance_id]
                self._unlock(instance_id)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        with self._lease_lock:
            conn, self._lease_conn = self._lease_conn, None
            self.leases.clear()
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.close(timeout=1.0)

    def _forget_after_fork(self) -> None:
        conn, self._lease_conn = self._lease_conn, None
        pool, self._pool = self._pool, None
        self._pool_lock = threading.Lock()
        self._probe_lock = threading.Lock()
        self._lease_lock = threading.RLock()
        self.leases = {}
        if conn is not None:
            _blind(conn)
            _ABANDONED.append(conn)
        if pool is not None:
            # nothing the child does with the inherited connections (a close, a finalizer) may
            # reach the sockets it shares with the parent: a Terminate there ends its session
            for idle in list(getattr(pool, "_pool", ())):
                _blind(idle)
            _ABANDONED.append(pool)


def _blind(conn: Any) -> None:
    """Point an inherited connection's descriptor at ``/dev/null``: the child keeps no reference
    to the parent's socket and anything libpq writes on it later goes nowhere."""
    with contextlib.suppress(Exception):
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, conn.fileno())
        os.close(devnull)


_SHARED: dict[str, Database] = {}
_SHARED_LOCK = threading.Lock()


def shared_database(url: str) -> Database:
    """The one :class:`Database` of ``url`` in this process. Runtimes never close their store, so a
    program that opens many runtimes on one URL must not get a pool and a lease session each; and
    one lease session per process is what lets two runtimes of one process refuse each other an
    instance (the in-process lease table) like two processes do (the advisory lock)."""
    with _SHARED_LOCK:
        db = _SHARED.get(url)
        if db is None:
            db = _SHARED[url] = Database(url)
        return db


def forget_shared(db: Database) -> None:
    with _SHARED_LOCK:
        if _SHARED.get(db.url) is db:
            del _SHARED[db.url]


def _close_quietly(pool: Any) -> None:
    with contextlib.suppress(Exception):
        pool.close(timeout=1.0)


def _forget_all_after_fork() -> None:
    for db in list(_DATABASES):
        db._forget_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_all_after_fork)


def missing_extra() -> GoondanError:
    return GoondanError(
        "E_STORE_UNSUPPORTED",
        "the PostgreSQL store needs psycopg 3 and psycopg_pool, which are not installed",
        suggestion="pip install 'goondan-runtime[postgres]'",
    )


__all__ = [
    "CODE_QUERY",
    "CODE_UNAVAILABLE",
    "LEASE_EXPIRY_S",
    "Database",
    "forget_shared",
    "missing_extra",
    "parse_url",
    "redact",
    "shared_database",
    "unavailable",
]
