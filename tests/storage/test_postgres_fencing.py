"""Single writer across processes on the PostgreSQL store: a second runtime is refused an instance
another process holds (naming it), the lease dies with its holder, and a holder whose lease
session the server dropped (a network partition, as the server sees it) can no longer write a
single row once another node took the instance over (fencing token checked inside the commit)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from storage_testkit import child_env

from goondan.errors import GoondanError, StorageError
from goondan.storage import open_store
from goondan.testing.store_conformance import build_events, expected, fold, records, run_turn
from kit import simple_bundle

ECHO_MODEL = "def generate(request):\n    return {'text': 'echo: ' + request.messages[-1]['content']}\n"

RUNTIME_CHILD = """
import asyncio, json, sys
import goondan

async def main():
    bundle, state, executor, store, text, hold = sys.argv[1:7]
    async with goondan.Runtime(bundle, state_root=state, executor=executor, store=store) as rt:
        try:
            result = await rt.request(text)
            out = {"text": result.text, "error": result.error}
        except goondan.GoondanError as exc:
            out = {"text": None, "error": exc.to_dict()}
        print(json.dumps(out), flush=True)
        if hold == "hold":
            sys.stdin.readline()

asyncio.run(main())
"""


def _start(tmp_path: Path, executor: str, store: str, text: str, hold: bool) -> subprocess.Popen[str]:
    bundle = tmp_path / "bundle"
    if not bundle.exists():
        simple_bundle(tmp_path, files={"model.py": ECHO_MODEL})
    args = [str(bundle), str(tmp_path / "state"), executor, store, text, "hold" if hold else "once"]
    return subprocess.Popen(
        [sys.executable, "-c", RUNTIME_CHILD, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
        start_new_session=True,
    )


def _answer(proc: subprocess.Popen[str]) -> dict[str, object]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else "no output"
    out: dict[str, object] = json.loads(line)
    return out


@pytest.mark.parametrize("executor", ["inline", "process"])
def test_a_second_runtime_process_is_refused_the_instance_and_gets_it_when_the_holder_dies(
    tmp_path: Path, executor: str, postgres_url: str
) -> None:
    holder = _start(tmp_path, executor, postgres_url, "first", hold=True)
    try:
        assert _answer(holder)["text"] == "echo: first"
        other = _start(tmp_path, executor, postgres_url, "second", hold=False)
        refused = _answer(other)
        other.wait(60)
        error = refused["error"]
        assert isinstance(error, dict) and error["code"] == "E_INSTANCE_LOCKED", refused
        assert "pid " in str(error["message"]) and "since" in str(error["message"])
        os.killpg(holder.pid, signal.SIGKILL)  # the lease session dies with the process
        holder.wait(30)
        after = _start(tmp_path, executor, postgres_url, "third", hold=False)
        assert _answer(after)["text"] == "echo: third"
        after.wait(60)
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait(30)
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT record::text FROM goondan_messages ORDER BY seq").fetchall()
    texts = [json.loads(r[0])["data"]["content"] for r in rows]
    assert texts == ["first", "echo: first", "third", "echo: third"]  # nothing of the refused request


STALE_WRITER = """
import json, sys
from goondan.storage import open_store
from goondan.testing.store_conformance import build_events, fold, run_turn
store = open_store(sys.argv[1], state_root="/nonexistent").workspace("ws").instance("agent", "k")
conv = run_turn(store, store.load().base, build_events([["append", "a1"]]))
print(json.dumps({"token": store.lease_token}), flush=True)
sys.stdin.readline()  # meanwhile its lease session is dropped and another node takes over
events = build_events([["append", "a2"]])
try:
    run_turn(store, conv, events)
    print(json.dumps({"ok": True}), flush=True)
except Exception as exc:
    print(json.dumps({"code": getattr(exc, "code", repr(exc))}), flush=True)
"""


def test_a_holder_whose_lease_session_was_dropped_cannot_write_after_another_node_took_over(
    postgres_url: str,
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", STALE_WRITER, postgres_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        first = json.loads(proc.stdout.readline() or "{}")
        assert isinstance(first.get("token"), int), proc.stderr.read() if proc.stderr else ""
        backend = open_store(postgres_url, state_root="/nonexistent")
        other = backend.workspace("ws").instance("agent", "k")
        with pytest.raises(GoondanError) as info:
            other.load()
        assert info.value.code == "E_INSTANCE_LOCKED" and f"pid {proc.pid}" in str(info.value)
        # a state root keeps nothing apart in a PostgreSQL store: the way out is another database
        suggestion = info.value.suggestion or ""
        assert "--state-root" not in suggestion and "another database" in suggestion, suggestion
        # the server drops the holder's lease session (as after a partition): the lock is free,
        # but the holder process lives on with its pooled connections
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            killed = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            ).fetchall()
        assert killed == [(True,)]
        # pg_terminate_backend only signals the backend: its session (and the lock) ends a moment later
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            deadline = time.monotonic() + 10
            while conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted").fetchone() != (
                0,
            ):
                assert time.monotonic() < deadline, "the terminated session still holds the lease lock"
                time.sleep(0.01)
        loaded = other.load()
        assert other.lease_token is not None and other.lease_token > first["token"]
        run_turn(other, fold(loaded.base, loaded.events), build_events([["append", "b1"]]))
        proc.stdin.write("go\n")
        proc.stdin.flush()
        second = json.loads(proc.stdout.readline() or "{}")
        assert second == {"code": "E_INSTANCE_LEASE_LOST"}
        other.close()
        reload = backend.workspace("ws").instance("agent", "k")
        conv = reload.load()
        assert records(fold(conv.base, conv.events)) == expected([["append", "a1"]], [["append", "b1"]])
        reload.close()
        backend.close()  # type: ignore[attr-defined]
    finally:
        proc.kill()
        proc.wait(30)


def test_a_stale_writer_refused_inside_the_commit_transaction_writes_no_row(postgres_url: str) -> None:
    backend = open_store(postgres_url, state_root="/nonexistent")
    stale = backend.workspace("ws").instance("agent", "k")
    base = run_turn(stale, stale.load().base, build_events([["append", "a1"]]))
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # another node fenced it out
        conn.execute("UPDATE goondan_instances SET token = token + 1")
        before = conn.execute("SELECT count(*) FROM goondan_messages").fetchone()
    stale.append_event(build_events([["append", "a2"]])[0])  # writes nothing: its token is stale
    with pytest.raises(StorageError) as info:
        stale.commit([*base, *[e["message"] for e in build_events([["append", "a2"]])]], None)
    assert info.value.code == "E_INSTANCE_LEASE_LOST" and info.value.suggestion
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM goondan_messages").fetchone() == before
        assert conn.execute("SELECT count(*) FROM goondan_events").fetchone() == (0,)
    backend.close()  # type: ignore[attr-defined]


def test_the_lease_session_asks_the_server_to_drop_it_about_25_s_after_its_machine_vanishes(
    postgres_url: str,
) -> None:
    """The documented lease expiry for a node that vanishes (no FIN, no RST) is the server's TCP
    keepalive on the lease session: 10 s idle, then 3 probes 5 s apart (and a 25 s TCP user timeout
    while data is in flight)."""
    from goondan.storage._postgres import LEASE_EXPIRY_S

    backend = open_store(postgres_url, state_root="/nonexistent")
    store = backend.workspace("ws").instance("agent", "k")
    store.load()
    session = backend._db._lease_conn  # type: ignore[attr-defined]
    names = ("tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count", "tcp_user_timeout")
    shown = [session.execute(f"SHOW {name}").fetchone()[0] for name in names]
    assert shown == ["10", "5", "3", "25000"] and LEASE_EXPIRY_S == 25
    store.close()
    backend.close()  # type: ignore[attr-defined]
