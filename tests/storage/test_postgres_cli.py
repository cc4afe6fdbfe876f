"""``gdn run``, ``gdn instance list|delete`` and ``gdn logs`` against the PostgreSQL store, run as
subprocesses like a user types them (``--store URL`` and ``GOONDAN_STORE``): nothing is written
under the state root, and what one command wrote the next one reads from the database."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
from storage_testkit import gdn as _gdn

from kit import simple_bundle

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
