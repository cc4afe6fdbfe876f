"""The store conformance suite (goondan.testing.store_conformance), unchanged, against the PostgreSQL
store on a real server (tests/kit/postgres.py), including writers SIGKILLed inside the commit
transaction and before an event insert."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import ClassVar

import pytest
from storage_testkit import child_env

from goondan.storage import StoreBackend, WorkspaceStore, open_store
from goondan.storage._postgres import PostgresStoreBackend
from goondan.testing.store_conformance import StoreConformance, StoreFactory, TurnSpec

KILLED_CHILD = """
import json, sys
from goondan.storage import open_store
from goondan.testing.store_conformance import run_turns
backend = open_store(sys.argv[1], state_root="/nonexistent")
store = backend.workspace(sys.argv[2]).instance(sys.argv[3], sys.argv[4])
run_turns(store, json.loads(sys.argv[5]))
print("completed")
"""


class TestPostgresStore(StoreConformance):
    crash_points: ClassVar[dict[str, str]] = {
        "pg_before_event": "event_append",
        "pg_before_commit": "append_commit",
        "pg_before_rewrite_commit": "rewrite_commit",
        "pg_after_commit": "append_commit",
    }

    @pytest.fixture
    def store_backend(self, postgres_url: str) -> Iterator[StoreBackend]:
        backend = open_store(postgres_url, state_root="/nonexistent")
        assert isinstance(backend, PostgresStoreBackend) and backend.durable
        self.url = postgres_url
        yield backend
        backend.close()

    @pytest.fixture
    def store_factory(self, store_backend: StoreBackend) -> StoreFactory:
        def factory(workspace_id: str = "conformance") -> WorkspaceStore:
            return store_backend.workspace(workspace_id)

        return factory

    def run_turns_killed_at(
        self, factory: StoreFactory, agent: str, key: str, turns: list[TurnSpec], point: str
    ) -> None:
        proc = subprocess.run(
            [sys.executable, "-c", KILLED_CHILD, self.url, "conformance", agent, key, json.dumps(turns)],
            env=child_env(point),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == -signal.SIGKILL, (point, proc.stdout, proc.stderr)
