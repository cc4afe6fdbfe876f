"""The backup docs/cluster.md#postgresql-store gives works: ``pg_dump -Fc`` of the store's database
taken while a writer holds an instance, ``pg_restore`` into an empty database, and the restored
store serves the conversation and keeps working (tables, functions and schema version came along)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from goondan.storage import open_store
from goondan.testing.store_conformance import build_events, expected, fold, records, run_turn
from kit.postgres import PostgresServer


def test_a_dump_taken_under_a_live_writer_restores_into_a_working_store(
    tmp_path: Path, postgres_url: str, postgres_server: PostgresServer
) -> None:
    backend = open_store(postgres_url, state_root="/nonexistent")
    writer = backend.workspace("ws").instance("agent", "k")
    conv = run_turn(writer, writer.load().base, build_events([["append", "a1"], ["append", "a2"]]))
    writer.append_event(build_events([["append", "pending"]])[0])  # a turn in progress
    dump = tmp_path / "goondan.dump"
    subprocess.run(
        [str(postgres_server.bin_dir / "pg_dump"), "-Fc", "-d", postgres_url, "-f", str(dump)], check=True, timeout=120
    )
    writer.close()
    backend.close()  # type: ignore[attr-defined]
    restored_url = postgres_server.create_database()
    subprocess.run(
        [str(postgres_server.bin_dir / "pg_restore"), "-d", restored_url, str(dump)], check=True, timeout=120
    )
    restored = open_store(restored_url, state_root="/nonexistent")
    store = restored.workspace("ws").instance("agent", "k")
    loaded = store.load()
    assert records(loaded.base) == records(conv)
    assert [e["message"].id for e in loaded.events] == ["pending"]  # the turn in progress is replayed
    run_turn(store, fold(loaded.base, loaded.events), build_events([["append", "b1"]]))
    store.close()
    again = restored.workspace("ws").instance("agent", "k")
    final = again.load()
    assert records(final.base) == expected(
        [["append", "a1"], ["append", "a2"], ["append", "pending"]], [["append", "b1"]]
    )
    again.close()
    restored.close()  # type: ignore[attr-defined]
    postgres_server.drop_database(restored_url)
