"""The store conformance suite (goondan.testing.store_conformance) run against the built-in backends:
the filesystem store (with its SIGKILL crash points) and the in-memory store."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest
from storage_testkit import child_env

from goondan.storage import FileStoreBackend, MemoryStoreBackend, StoreBackend, WorkspaceStore, open_store
from goondan.testing.store_conformance import StoreConformance, StoreFactory, TurnSpec

KILLED_CHILD = """
import json, sys
from goondan.storage import FileWorkspaceStore
from goondan.testing.store_conformance import run_turns
store = FileWorkspaceStore(sys.argv[1], sys.argv[2]).instance(sys.argv[3], sys.argv[4])
run_turns(store, json.loads(sys.argv[5]))
print("completed")
"""


class TestFileStore(StoreConformance):
    crash_points: ClassVar[dict[str, str]] = {
        "event_append_partial": "event_append",
        "after_base_append_partial": "append_commit",
        "after_base_append": "append_commit",
        "after_events_cleared": "append_commit",
        "after_tmp_written": "rewrite_commit",
        "after_marker_written": "rewrite_commit",
        "after_rename": "rewrite_commit",
    }

    @pytest.fixture
    def store_backend(self, tmp_path: Path) -> StoreBackend:
        backend = open_store(tmp_path.as_uri(), state_root=tmp_path / "unused")
        assert isinstance(backend, FileStoreBackend) and backend.root == tmp_path
        return backend

    @pytest.fixture
    def store_factory(self, tmp_path: Path, store_backend: StoreBackend) -> StoreFactory:
        backend = store_backend

        def factory(workspace_id: str = "conformance") -> WorkspaceStore:
            return backend.workspace(workspace_id)

        self.root = tmp_path
        return factory

    def run_turns_killed_at(
        self, factory: StoreFactory, agent: str, key: str, turns: list[TurnSpec], point: str
    ) -> None:
        proc = subprocess.run(
            [sys.executable, "-c", KILLED_CHILD, str(self.root), "conformance", agent, key, json.dumps(turns)],
            env=child_env(point),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == -signal.SIGKILL, (point, proc.stdout, proc.stderr)


class TestMemoryStore(StoreConformance):
    @pytest.fixture
    def store_backend(self, tmp_path: Path) -> StoreBackend:
        backend = open_store("memory:", state_root=tmp_path)
        assert isinstance(backend, MemoryStoreBackend) and not backend.durable
        return backend

    @pytest.fixture
    def store_factory(self, store_backend: StoreBackend) -> StoreFactory:
        backend = store_backend

        def factory(workspace_id: str = "conformance") -> WorkspaceStore:
            return backend.workspace(workspace_id)

        return factory
