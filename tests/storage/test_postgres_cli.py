"""``gdn run``, ``gdn instance list|delete`` and ``gdn logs`` against the PostgreSQL store, run as
subprocesses like a user types them (``--store URL`` and ``GOONDAN_STORE``): nothing is written
under the state root, and what one command wrote the next one reads from the database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from storage_testkit import gdn as _gdn

from kit import simple_bundle
from kit.postgres import own_server

ECHO_MODEL = "def generate(request):\n    return {'text': f'echo {len(request.messages)}'}\n"


def test_gdn_run_instance_list_logs_and_delete_work_against_postgres(tmp_path: Path, postgres_url: str) -> None:
    bundle = simple_bundle(tmp_path, files={"model.py": ECHO_MODEL})
    first = _gdn(tmp_path, "run", str(bundle), "--store", postgres_url, "--input", "hi")
    assert first.returncode == 0, first.stderr
    second = _gdn(tmp_path, "run", str(bundle), "--input", "again", GOONDAN_STORE=postgres_url)
    assert (first.stdout.strip(), second.stdout.strip()) == ("echo 1", "echo 3")  # one conversation
    assert not (tmp_path / "state" / "workspaces").exists()

    listed = _gdn(tmp_path, "instance", "list", "-A", "--json", "--store", postgres_url)
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["agentName"], r["status"], r["path"]) for r in rows] == [("a", "idle", None)]
    assert rows[0]["package"] == "test-bundle"  # the workspace record comes from the database too
    key = rows[0]["instanceKey"]

    logs = _gdn(tmp_path, "logs", "--json", "-l", "0", GOONDAN_STORE=postgres_url)
    assert logs.returncode == 0, logs.stderr
    types = [json.loads(line)["type"] for line in logs.stdout.splitlines()]
    assert types.count("turn.started") == 2 and types.count("turn.completed") == 2
    text = _gdn(tmp_path, "logs", "--store", postgres_url, "--instance", key)
    assert "turn.completed" in text.stdout and "Logs postgresql://" in text.stderr

    deleted = _gdn(tmp_path, "instance", "delete", key, "-A", "-y", "--store", postgres_url)
    assert deleted.returncode == 0, deleted.stderr
    assert f"deleted a@{key}" in deleted.stdout
    after = _gdn(tmp_path, "instance", "list", "-A", "--store", postgres_url)
    assert after.returncode == 0 and "No instances" in after.stdout
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("SELECT count(*) FROM goondan_messages").fetchone()
    assert row is not None and row[0] == 0
    third = _gdn(tmp_path, "run", str(bundle), "--store", postgres_url, "--input", "fresh")
    assert third.stdout.strip() == "echo 1"  # the deleted conversation is gone


def test_gdn_instance_list_against_an_unreachable_postgres_says_so_without_a_traceback(tmp_path: Path) -> None:
    proc = _gdn(tmp_path, "instance", "list", "-A", "--store", "postgresql://u:pw@127.0.0.1:1/x")
    assert proc.returncode != 0
    assert "E_STORE_UNAVAILABLE" in proc.stderr and "Traceback" not in proc.stderr and ":pw@" not in proc.stderr


def test_gdn_logs_follow_waits_out_a_server_restart_and_shows_the_turns_after_it(tmp_path: Path) -> None:
    bundle = simple_bundle(tmp_path, files={"model.py": ECHO_MODEL})
    with own_server() as server:
        url = server.create_database()
        assert _gdn(tmp_path, "run", str(bundle), "--store", url, "--input", "before").returncode == 0
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GOONDAN_", "PG"))}
        follow = subprocess.Popen(
            [sys.executable, "-m", "goondan", "logs", "--store", url, "--follow", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "NO_COLOR": "1"},
        )
        try:
            time.sleep(2)  # following
            server.stop()
            time.sleep(2)  # was: it exited 1 with E_STORE_UNAVAILABLE on its next poll
            server.start()
            assert _gdn(tmp_path, "run", str(bundle), "--store", url, "--input", "after").returncode == 0
            time.sleep(3)
            assert follow.poll() is None, follow.communicate()[1]
        finally:
            follow.terminate()
            out, err = follow.communicate(timeout=30)
        completed = [json.loads(line) for line in out.splitlines() if '"turn.completed"' in line]
        assert len(completed) == 2, out  # the turn before and the turn after the restart
        assert err.count("[E_STORE_UNAVAILABLE]") == 1 and "warning: " in err and "Traceback" not in err, err
