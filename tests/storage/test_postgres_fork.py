"""A forked child (the process executor's fork server and agent processes are forks) never holds
its parent's lease and never ends its parent's sessions: the inherited connections are forgotten in
the child, and freeing them there (libpq says goodbye on free) writes nothing to the shared sockets."""

from __future__ import annotations

import gc
import os

import psycopg

from goondan.storage import open_store
from goondan.storage._postgres import _db


def _pids(url: str) -> set[int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return {int(r[0]) for r in rows}


def test_a_forked_child_neither_holds_the_parents_lease_nor_ends_its_sessions(postgres_url: str) -> None:
    backend = open_store(postgres_url, state_root="/nonexistent")
    store = backend.workspace("ws").instance("agent", "k")
    store.load()  # the lease session holds the lock; the pool has an idle connection
    store.write_metadata(agent_name="agent", instance_key="k", status="idle")
    before = _pids(postgres_url)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: try the instance, then free everything it inherited
        code = 1
        try:
            os.close(read)
            other = backend.workspace("ws").instance("agent", "k")
            try:
                other.load()
                verdict = b"took"
            except Exception as exc:  # report whatever it was to the parent
                verdict = str(getattr(exc, "code", repr(exc))).encode()
            other.close()
            backend.close()  # type: ignore[attr-defined]
            _db._ABANDONED.clear()
            gc.collect()
            os.write(write, verdict)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    verdict = os.read(read, 100).decode()
    os.close(read)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert verdict == "E_INSTANCE_LOCKED"  # the parent still holds the instance
    assert before <= _pids(postgres_url)  # every session of the parent survived the child
    assert store.lease_token is not None
    store.write_metadata(agent_name="agent", instance_key="k", status="processing")  # the pool still works
    store.close()
    backend.close()  # type: ignore[attr-defined]
