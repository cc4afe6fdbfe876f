"""Versioned migrations of the PostgreSQL store: an empty database gets every table on first use, a
second run applies nothing, two nodes starting at once against an empty database do not race, and
a database newer than this goondan is refused instead of written."""

from __future__ import annotations

import subprocess
import sys

import psycopg
import pytest
from storage_testkit import child_env

from goondan.errors import GoondanError
from goondan.storage import open_store
from goondan.storage._postgres._schema import LATEST, migrate

TABLES = {
    "goondan_schema_version",
    "goondan_workspaces",
    "goondan_instances",
    "goondan_messages",
    "goondan_events",
    "goondan_runtime_events",
    "goondan_extension_state",
    "goondan_attachments",
}


def _tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return {r[0] for r in rows}


def test_an_empty_database_is_migrated_once_and_a_rerun_applies_nothing(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert migrate(conn) == list(range(1, LATEST + 1))
        assert migrate(conn) == []
        versions = conn.execute("SELECT version FROM goondan_schema_version ORDER BY version").fetchall()
    assert [v[0] for v in versions] == list(range(1, LATEST + 1))
    assert _tables(postgres_url) == TABLES


def test_the_first_store_use_migrates_and_a_second_process_finds_it_done(postgres_url: str) -> None:
    backend = open_store(postgres_url, state_root="/nonexistent")
    assert _tables(postgres_url) == set()  # opening the URL touches nothing
    assert backend.workspace("ws").list_instances() == []
    assert _tables(postgres_url) == TABLES
    backend.close()  # type: ignore[attr-defined]
    again = open_store(postgres_url, state_root="/nonexistent")
    assert again.workspace("ws").list_instances() == []
    again.close()  # type: ignore[attr-defined]


STARTER = """
import sys
from goondan.storage import open_store
open_store(sys.argv[1], state_root="/x").workspace("ws").instance("a", sys.argv[2]).write_metadata(
    agent_name="a", instance_key=sys.argv[2], status="idle")
print("ok")
"""


def test_nodes_starting_at_once_on_an_empty_database_migrate_without_racing(postgres_url: str) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", STARTER, postgres_url, f"k{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for i in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [err for _, err in outs]
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM goondan_schema_version").fetchone() == (LATEST,)
        assert conn.execute("SELECT count(*) FROM goondan_instances").fetchone() == (4,)


def test_a_database_migrated_by_a_newer_goondan_is_refused(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        migrate(conn)
        conn.execute("INSERT INTO goondan_schema_version (version) VALUES (%s)", (LATEST + 1,))
    backend = open_store(postgres_url, state_root="/nonexistent")
    with pytest.raises(GoondanError) as info:
        backend.workspace("ws").list_instances()
    assert info.value.code == "E_STORE_SCHEMA" and info.value.suggestion
    assert f"version {LATEST + 1}" in str(info.value)


def test_a_user_who_may_not_create_the_tables_gets_a_clear_query_error(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS goondan_reader")
        conn.execute("CREATE ROLE goondan_reader LOGIN")  # PostgreSQL 15: no CREATE on public for others
    limited = postgres_url.replace("postgresql://postgres@", "postgresql://goondan_reader@")
    backend = open_store(limited, state_root="/nonexistent")
    with pytest.raises(GoondanError) as info:
        backend.workspace("ws").list_instances()
    assert info.value.code == "E_STORE_QUERY" and "permission denied" in str(info.value)
    # was only "check the database user's privileges": the grant and the one-off run are named now
    assert "GRANT CREATE ON SCHEMA public" in (info.value.suggestion or "")
    assert "gdn instance list -A --store URL" in (info.value.suggestion or "")
    backend.close()  # type: ignore[attr-defined]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP ROLE goondan_reader")
