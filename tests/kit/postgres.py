"""A real PostgreSQL server for the tests, started from the Debian ``postgresql`` package's binaries
(``initdb`` + ``pg_ctl`` in a temporary directory; ``.ci/run`` installs the package).

Why a server of our own instead of a shared one: the store's guarantees (a commit is durable, a
lease dies with its holder's connection, a restart loses nothing committed) can only be shown
against a real server the test is allowed to stop and start. The server listens on a unix socket
in its own directory and on a free TCP port of 127.0.0.1, with ``fsync`` and
``synchronous_commit`` on (the defaults, stated explicitly so nobody "speeds up" the fixture into
proving nothing).

``initdb`` refuses to run as root (CI runs as root): then the data directory is given to the
``postgres`` user (or ``nobody``) and the binaries run as that user (``os.setuid`` in the child).

Fixtures (registered in ``tests/conftest.py``):

- ``postgres_server`` (session): the :class:`PostgresServer`; ``stop()`` / ``start()`` for the
  restart tests, ``create_database()`` for a database of one's own.
- ``postgres_url`` (function): the URL of a fresh, empty database for this test.

:func:`own_server` is a server of one's own, for a test that stops it for a while or changes its
authentication: the session's server stays up for every other test of the session.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["PostgresServer", "find_pg_bin", "own_server", "postgres_server", "postgres_url"]

_COUNTER = itertools.count(1)


def find_pg_bin() -> Path | None:
    """The directory holding ``initdb`` / ``pg_ctl``: ``$GOONDAN_PG_BIN``, else the newest
    ``/usr/lib/postgresql/*/bin``, else whatever ``initdb`` is on ``PATH``."""
    env = os.environ.get("GOONDAN_PG_BIN")
    if env:
        return Path(env)
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name))
    if found:
        return Path(found[-1])
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as() -> pwd.struct_passwd | None:
    """The unprivileged user the server runs as when we are root (``initdb`` refuses root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists")


class PostgresServer:
    """One PostgreSQL cluster in a temporary directory. Not thread-safe; one per test session."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.user = _run_as()
        # short path under /tmp: unix socket paths are limited to ~107 bytes, and pytest's
        # tmp_path is 0700 root-only, which the unprivileged server user could not enter
        self.root = Path(tempfile.mkdtemp(prefix="gdn-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sock"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self.superuser = "postgres"
        self.sockets.mkdir()
        if self.user is not None:
            for p in (self.root, self.sockets):
                os.chown(p, self.user.pw_uid, self.user.pw_gid)
            self.root.chmod(0o755)

    # -- process plumbing -------------------------------------------------------------------

    def _preexec(self) -> None:
        if self.user is not None:
            os.setgid(self.user.pw_gid)
            os.setgroups([])
            os.setuid(self.user.pw_uid)

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, LC_ALL="C.UTF-8", LANG="C.UTF-8")
        if self.user is not None:
            env["HOME"] = str(self.root)
            env["USER"] = self.user.pw_name
        proc = subprocess.run(
            [str(self.bin_dir / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=self.root,
            preexec_fn=self._preexec if self.user is not None else None,
            check=False,
        )
        if proc.returncode != 0:
            log = self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""
            raise RuntimeError(f"{args[0]} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}\n{log[-3000:]}")
        return proc

    def init(self) -> None:
        """``initdb`` with trust auth (only reachable on 127.0.0.1 and our own socket dir)."""
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            self.superuser,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",  # only initdb's own files; the server itself runs with fsync on
            "--locale=C.UTF-8",
        )
        conf = self.data / "postgresql.conf"
        with conf.open("a", encoding="utf-8") as f:
            f.write(
                "\n# goondan test fixture\n"
                "listen_addresses = '127.0.0.1'\n"
                f"port = {self.port}\n"
                f"unix_socket_directories = '{self.sockets}'\n"
                "fsync = on\n"
                "synchronous_commit = on\n"
                "max_connections = 200\n"
                "shared_buffers = 32MB\n"
            )

    def start(self) -> None:
        """Start (or restart after :meth:`stop`) on the same port and data directory."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` (disconnect clients, clean shutdown) or ``immediate`` (like a
        crash: no shutdown checkpoint, recovery replays the WAL on the next start)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        try:
            self._run("pg_ctl", "-D", str(self.data), "status", timeout=10)
        except RuntimeError:
            return False
        return True

    def destroy(self) -> None:
        if self.data.exists() and self.running():
            try:
                self.stop("immediate")
            except RuntimeError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)

    # -- databases --------------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        """A TCP URL (what a user on another machine would use)."""
        return f"postgresql://{self.superuser}@127.0.0.1:{self.port}/{database}"

    def socket_url(self, database: str = "postgres") -> str:
        """A unix-socket URL (libpq's ``host=`` pointing at our socket directory)."""
        return f"postgresql://{self.superuser}@/{database}?host={self.sockets}&port={self.port}"

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database and return its URL."""
        import psycopg

        name = name or f"t{os.getpid()}_{next(_COUNTER)}_{int(time.time() * 1000) % 100000}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        """Drop a database made by :meth:`create_database`, closing whatever still uses it."""
        import psycopg

        name = url.rsplit("/", 1)[1].split("?", 1)[0]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def require_password(self, role: str, password: str) -> str:
        """Create a login role that must give ``password`` over TCP (scram-sha-256; everything else
        stays trusted) and return its URL without the password, for a test to add a right or wrong one."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE \"{role}\" LOGIN SUPERUSER PASSWORD '{password}'")
        hba = self.data / "pg_hba.conf"
        hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + hba.read_text(encoding="utf-8"))
        self._run("pg_ctl", "-D", str(self.data), "reload")
        time.sleep(0.3)  # the postmaster re-reads pg_hba.conf on SIGHUP
        return f"postgresql://{role}@127.0.0.1:{self.port}/postgres"


@contextlib.contextmanager
def own_server() -> Iterator[PostgresServer]:
    """A started server of the caller's own (~1-2 s), destroyed on exit."""
    bin_dir = find_pg_bin()
    if bin_dir is None or not (bin_dir / "initdb").exists():
        pytest.fail("PostgreSQL binaries not found: install Debian's postgresql package (.ci/run does)")
    server = PostgresServer(bin_dir)
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.destroy()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole session (started on first use, ~1-2 s). A missing
    installation is a failure, not a skip: a suite that silently skipped the store's tests would look green."""
    with own_server() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, empty database on the session's server, dropped after the test."""
    if not postgres_server.running():  # a restart test that failed half-way must not break the next
        postgres_server.start()
    url = postgres_server.create_database()
    yield url
    if not postgres_server.running():
        postgres_server.start()
    postgres_server.drop_database(url)
