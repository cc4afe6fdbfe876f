"""Workspaces: instance listing and deletion (digest §9.1 instance-manager)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from storage_testkit import msg, reload, run_turn

from goondan.messages import append_event
from goondan.storage import FileInstanceStore, FileWorkspaceStore, instance_dir_name, workspace_id


def _make(ws: FileWorkspaceStore, agent: str, key: str, status: str = "idle") -> FileInstanceStore:
    store = ws.instance(agent, key)
    store.load()
    store.write_metadata(agent_name=agent, instance_key=key, status=status)
    return store


def test_workspace_layout(tmp_path: Path) -> None:
    ws = FileWorkspaceStore(tmp_path, workspace_id("Main Swarm:Prod"))
    assert ws.path == tmp_path / "workspaces" / "main-swarm-prod"
    store = ws.instance("coder", "user:1")
    assert store.path == ws.path / "instances" / instance_dir_name("coder", "user:1")
    assert ws.instance("coder", "user:1") is store  # one writer per instance per process
    store.close()
    assert ws.instance("coder", "user:1") is not store
    assert not tmp_path.joinpath("workspaces").exists()  # nothing created until something is written


def test_invalid_workspace_ids_are_rejected(tmp_path: Path) -> None:
    for bad in ("", ".", "..", "a/b"):
        with pytest.raises(ValueError):
            FileWorkspaceStore(tmp_path, bad)


def test_list_instances_without_root_is_empty(tmp_path: Path) -> None:
    assert FileWorkspaceStore(tmp_path / "missing", "default").list_instances() == []


def test_list_instances_reads_metadata_and_skips_invalid(tmp_path: Path) -> None:
    ws = FileWorkspaceStore(tmp_path, "default")
    _make(ws, "writer", "b", "processing")
    _make(ws, "coder", "z")
    _make(ws, "coder", "a")
    (ws.instances_path / "no-metadata").mkdir()
    (ws.instances_path / "bad-json").mkdir()
    (ws.instances_path / "bad-json" / "metadata.json").write_bytes(b"{")
    (ws.instances_path / "bad-shape").mkdir()
    (ws.instances_path / "bad-shape" / "metadata.json").write_bytes(b'{"agentName": 1}')
    (ws.instances_path / "stray-file").write_bytes(b"x")
    # an instance written by another tool under a foreign directory name is still listed
    foreign = ws.instances_path / "legacy-dir"
    foreign.mkdir()
    (foreign / "metadata.json").write_bytes(
        orjson.dumps(
            {
                "agentName": "legacy",
                "instanceKey": "k",
                "status": "idle",
                "createdAt": "2025-01-01T00:00:00.000Z",
                "updatedAt": "2025-01-01T00:00:00.000Z",
            }
        )
    )
    infos = ws.list_instances()
    assert [(i.agent_name, i.instance_key, i.status) for i in infos] == [
        ("coder", "a", "idle"),
        ("coder", "z", "idle"),
        ("legacy", "k", "idle"),
        ("writer", "b", "processing"),
    ]
    assert infos[0].path == ws.instance_path("coder", "a")
    assert infos[0].created_at.tzinfo is not None and infos[0].updated_at >= infos[0].created_at


def test_delete_instance_removes_history_and_extension_state(tmp_path: Path) -> None:
    ws = FileWorkspaceStore(tmp_path, "default")
    store = _make(ws, "coder", "user:1")
    run_turn(store, [], [append_event(msg("m1"))])
    store.save_extension_state("memo", {"x": 1})
    other = _make(ws, "coder", "user:2")
    run_turn(other, [], [append_event(msg("o1"))])
    assert ws.delete_instance("coder", "user:1") is True
    assert not store.path.exists()
    assert store.closed
    assert [i.instance_key for i in ws.list_instances()] == ["user:2"]
    assert os.listdir(ws.instances_path) == [instance_dir_name("coder", "user:2")]
    other.close()  # its lease: one writer at a time
    assert [m.id for m in reload(other.path)[0]] == ["o1"]
    # recreated from scratch afterwards
    again = ws.instance("coder", "user:1")
    assert again.load().base == [] and again.load_extension_state("memo") is None


def test_delete_nonexistent_instance_is_idempotent(tmp_path: Path) -> None:
    ws = FileWorkspaceStore(tmp_path, "default")
    assert ws.delete_instance("nobody", "nothing") is False
    _make(ws, "coder", "k")
    assert ws.delete_instance("coder", "k") is True
    assert ws.delete_instance("coder", "k") is False


def test_delete_finishes_interrupted_deletions(tmp_path: Path) -> None:
    ws = FileWorkspaceStore(tmp_path, "default")
    _make(ws, "coder", "k")
    leftover = ws.instances_path / ".deleting-old-1234"
    leftover.mkdir()
    (leftover / "metadata.json").write_bytes(b"{}")
    assert [i.instance_key for i in ws.list_instances()] == ["k"]  # hidden dirs are not instances
    ws.delete_instance("coder", "k")
    assert os.listdir(ws.instances_path) == []


def test_unreadable_metadata_is_named_from_the_directory_not_dropped(tmp_path: Path) -> None:
    ws = FileWorkspaceStore(tmp_path, "default")
    store = _make(ws, "coder", "user:1")
    run_turn(store, [], [append_event(msg("m1", "hello"))])
    store.close()
    _make(ws, "writer", "ok").close()
    (ws.instance_path("coder", "user:1") / "metadata.json").write_bytes(b"garbage{{")
    (ws.instances_path / "being-created").mkdir()  # no metadata, no conversation: not an instance yet
    assert [i.agent_name for i in ws.list_instances()] == ["writer"]
    (bad,) = ws.unreadable_instances()
    assert (bad.agent_name, bad.instance_key, bad.status) == ("coder", "user:1", "unreadable")
    assert bad.problem == "metadata.json is not valid JSON"
    assert bad.path == ws.instance_path("coder", "user:1")
    assert bad.created_at <= bad.updated_at
