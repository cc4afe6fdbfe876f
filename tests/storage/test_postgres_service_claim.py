"""One ``gdn run`` service per workspace on a PostgreSQL store, also across machines (state roots).
Two services on one database both started before: both answered webhooks with 202, and each event the
second received for an instance the first held failed with E_INSTANCE_LOCKED in its log, lost for
the sender. Now the second refuses to start (E_RUN_ACTIVE naming the first) and starts once the first
is gone. Real ``gdn run`` processes serving a webhook Connection, a real PostgreSQL server."""

from __future__ import annotations

import os
import platform
import signal
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import kit
from goondan.errors import GoondanError
from goondan.storage import open_store
from kit.postgres import PostgresServer, own_server

MODEL = 'def generate(request):\n    return {"text": "ok"}\n'


def _connection(port: int) -> dict[str, object]:
    return {
        "apiVersion": "goondan.ai/v1",
        "kind": "Connection",
        "metadata": {"name": "http"},
        "spec": {
            "connectorRef": {"kind": "Connector", "name": "webhook", "package": "@goondan/base"},
            "config": {"port": {"value": str(port)}},
            "secrets": {"signingSecret": {"value": "s3cret"}},
        },
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(tmp_path: Path, name: str, url: str) -> tuple[subprocess.Popen[str], int]:
    """``gdn run`` of the same bundle (its own copy, port and state root: another machine)."""
    port = _free_port()
    root = kit.write_bundle(
        tmp_path / name,
        kit.package_doc("served-once"),
        kit.python_model_doc(),
        kit.agent_doc("a"),
        kit.swarm_doc(["a"]),
        _connection(port),
        files={"model.py": MODEL},
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOONDAN_")}
    argv = [sys.executable, "-m", "goondan", "run", str(root), "--store", url]
    argv += ["--state-root", str(tmp_path / f"state-{name}")]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, port


def _wait_listening(proc: subprocess.Popen[str], port: int) -> None:
    deadline = time.monotonic() + 60
    while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
        time.sleep(0.1)


def _stop(*procs: subprocess.Popen[str]) -> None:
    """SIGTERM what still runs (a kill after 30 s)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_a_second_service_of_a_workspace_on_one_database_refuses_to_start_and_starts_after_the_first(
    tmp_path: Path, postgres_url: str
) -> None:
    first, first_port = _serve(tmp_path, "machine-a", postgres_url)
    procs = [first]
    try:
        _wait_listening(first, first_port)
        second, _ = _serve(tmp_path, "machine-b", postgres_url)
        procs.append(second)
        _, err = second.communicate(timeout=60)
        # was: started, served its webhook port, and lost the events of instances the first held
        assert second.returncode == 1, err
        assert err.startswith("[E_RUN_ACTIVE] workspace "), err
        assert f"by pid {first.pid} on " in err and "Traceback" not in err
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == 0
        third, third_port = _serve(tmp_path, "machine-b", postgres_url)
        procs.append(third)
        _wait_listening(third, third_port)  # the claim went away with the first process
    finally:
        _stop(*procs)


def _claim_holders(url: str) -> list[str]:
    """``application_name`` of every session holding a service claim now."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT DISTINCT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted AND a.application_name LIKE 'goondan service %'"
        ).fetchall()
    return [str(r[0]) for r in rows]


@pytest.fixture(scope="module")
def restartable() -> Iterator[PostgresServer]:
    """A server of this module's own: these tests stop it and change who may connect."""
    with own_server() as server:
        yield server


def test_a_service_takes_its_claim_again_after_a_server_restart_so_a_second_one_is_still_refused(
    tmp_path: Path, restartable: PostgresServer
) -> None:
    url = restartable.create_database()
    first, first_port = _serve(tmp_path, "machine-a", url)
    procs = [first]
    try:
        _wait_listening(first, first_port)
        restartable.stop()  # the session holding the claim ends, and the lock with it
        restartable.start()
        deadline = time.monotonic() + 10
        while not _claim_holders(url) and time.monotonic() < deadline:
            time.sleep(0.1)
        holders = _claim_holders(url)
        assert [h.startswith(f"goondan service pid {first.pid} on {platform.node()}") for h in holders] == [True]
        second, _ = _serve(tmp_path, "machine-b", url)
        procs.append(second)
        try:
            _, err = second.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the second service serves the workspace beside the first")
        assert second.returncode == 1 and err.startswith("[E_RUN_ACTIVE] workspace "), err
        assert f"by pid {first.pid} on " in err
        assert first.poll() is None  # the first goes on serving
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == 0
    finally:
        _stop(*procs)


def test_a_service_whose_workspace_another_took_while_the_server_was_away_stops_with_e_run_claim_lost(
    tmp_path: Path, restartable: PostgresServer
) -> None:
    url = restartable.create_database()
    name = url.rsplit("/", 1)[1]
    hba = restartable.data / "pg_hba.conf"
    before = hba.read_text(encoding="utf-8")
    first, first_port = _serve(tmp_path, "machine-a", url)  # over TCP
    procs = [first]
    try:
        _wait_listening(first, first_port)
        restartable.stop()
        hba.write_text("host all all 127.0.0.1/32 reject\n" + before, encoding="utf-8")  # the first cannot come back
        restartable.start()
        second, second_port = _serve(tmp_path, "machine-b", restartable.socket_url(name))  # the unix socket can
        procs.append(second)
        _wait_listening(second, second_port)
        hba.write_text(before, encoding="utf-8")
        restartable._run("pg_ctl", "-D", str(restartable.data), "reload")
        try:
            _, err = first.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the first service goes on serving beside the second")
        assert first.returncode == 1, err
        assert "[E_RUN_CLAIM_LOST] workspace " in err and f"by pid {second.pid} on " in err, err
        assert "suggestion: Two services of one workspace must not both accept work" in err
        assert second.poll() is None  # the one that holds the claim goes on
    finally:
        hba.write_text(before, encoding="utf-8")
        _stop(*procs)


def crc32_key(workspace_id: str) -> int:
    """A 32-bit key from the id's CRC32, the kind of key the claim must not be."""
    return zlib.crc32(workspace_id.encode())


# two workspace ids with one CRC32 (found by a birthday search over random ids)
CRC32_TWINS = ("ws-a02552f76dbdf5fd", "ws-670009b22c087272")


def test_two_workspaces_whose_crc32_collide_are_served_at_once(postgres_url: str) -> None:
    backend = open_store(postgres_url, state_root="/nonexistent")
    claims = []
    try:
        a, b = CRC32_TWINS
        assert crc32_key(a) == crc32_key(b)
        claims.append(backend.claim_service(a, "service a"))
        claims.append(backend.claim_service(b, "service b"))  # was E_RUN_ACTIVE: one 32-bit key for both
        with pytest.raises(GoondanError, match="already served") as again:
            backend.claim_service(a, "service a again")
        assert again.value.code == "E_RUN_ACTIVE" and "by service a, since " in again.value.message
    finally:
        for claim in claims:
            claim.release()
        backend.close()
