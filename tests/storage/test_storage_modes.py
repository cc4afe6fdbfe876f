"""State is private to its user: directories 0700 and files 0600 whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from storage_testkit import msg, run_turn

from goondan.messages import append_event
from goondan.storage import FileWorkspaceStore


@pytest.fixture
def open_umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def modes(root: Path) -> dict[str, int]:
    out = {".": stat.S_IMODE(root.stat().st_mode)}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            out[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return out


def assert_private(root: Path) -> None:
    found = modes(root)
    wrong = {name: oct(mode) for name, mode in found.items() if mode != (0o700 if (root / name).is_dir() else 0o600)}
    assert not wrong, wrong
    assert len(found) > 5


def test_state_directories_are_0700_and_files_0600(tmp_path: Path, open_umask: None) -> None:
    root = tmp_path / "state"
    workspace = FileWorkspaceStore(root, "ws")
    store = workspace.instance("agent", "key")
    loaded = store.load()
    base = run_turn(store, loaded.base, [append_event(msg("m1"))])
    run_turn(store, base, [append_event(msg("m2")), append_event(msg("m3"))])
    store.commit([msg("m9")], None)  # a rewrite commit (tmp file + marker + rename)
    store.write_metadata(agent_name="agent", instance_key="key", status="idle")
    store.write_metadata(agent_name="agent", instance_key="key", status="processing")
    store.save_extension_state("memo", {"n": 1})
    store.append_runtime_event({"type": "turn.started"})
    store.close()
    assert_private(root)


def test_existing_files_written_by_an_older_version_are_tightened(tmp_path: Path, open_umask: None) -> None:
    root = tmp_path / "state"
    workspace = FileWorkspaceStore(root, "ws")
    store = workspace.instance("agent", "key")
    store.load()
    store.close()
    for path in (store.base_path, store.events_path, store.runtime_events_path):
        path.chmod(0o644)
    store = workspace.instance("agent", "key")
    run_turn(store, store.load().base, [append_event(msg("m1"))])
    store.append_runtime_event({"type": "x"})
    store.close()
    for path in (store.base_path, store.events_path, store.runtime_events_path):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
