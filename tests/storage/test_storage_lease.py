"""Single writer: an instance is written by one process at a time (a kernel lock that dies with its
holder, holder info, and a fencing token checked on every commit)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from storage_testkit import child_env, msg, records, reload, run_turn

from goondan.errors import GoondanError, StorageError
from goondan.messages import append_event
from goondan.storage import FileInstanceStore

HOLDER = """
import os, sys, time
from pathlib import Path
from goondan.storage import FileInstanceStore
store = FileInstanceStore(Path(sys.argv[1]))
store.load()
if len(sys.argv) > 2 and sys.argv[2] == "fork-then-close":
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        # fork() has returned here, so the after-fork hooks have run: report that, then linger
        os.write(w, b"x")
        time.sleep(60)
        os._exit(0)
    os.read(r, 1)  # without this the parent could finish before the child was even scheduled
    store.close()
    print(child, flush=True)
print("ready", flush=True)
sys.stdin.readline()
store.close()
"""


def start_holder(path: Path, *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), *args],
        env=child_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    return proc


def wait_ready(proc: subprocess.Popen[str]) -> list[str]:
    assert proc.stdout is not None
    lines = []
    while True:
        line = proc.stdout.readline().strip()
        assert line, "holder exited early"
        if line == "ready":
            return lines
        lines.append(line)


def test_second_writer_gets_instance_locked_naming_the_holder(tmp_path: Path) -> None:
    holder = start_holder(tmp_path)
    try:
        wait_ready(holder)
        with pytest.raises(GoondanError) as info:
            FileInstanceStore(tmp_path).load()
        err = info.value
        assert err.code == "E_INSTANCE_LOCKED"
        assert f"pid {holder.pid}" in err.message and socket.gethostname() in err.message
        assert "since 20" in err.message
        assert err.suggestion and "--state-root" in err.suggestion
    finally:
        holder.kill()
        holder.wait()


def test_lease_of_a_killed_holder_is_free_at_once(tmp_path: Path) -> None:
    holder = start_holder(tmp_path)
    wait_ready(holder)
    token = json.loads((tmp_path / "lease.json").read_text())["token"]
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    store = FileInstanceStore(tmp_path)
    store.load()
    assert store.lease is not None and store.lease.token == token + 1
    lease = json.loads((tmp_path / "lease.json").read_text())
    assert lease["pid"] == os.getpid() and lease["token"] == token + 1
    store.close()


def test_lease_is_released_on_close(tmp_path: Path) -> None:
    store = FileInstanceStore(tmp_path)
    store.load()
    store.close()
    holder = start_holder(tmp_path)
    try:
        wait_ready(holder)  # the other process got it
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=10)
    assert holder.returncode == 0


def test_two_stores_in_one_process_are_two_writers(tmp_path: Path) -> None:
    first = FileInstanceStore(tmp_path)
    first.load()
    with pytest.raises(GoondanError) as info:
        FileInstanceStore(tmp_path).load()
    assert info.value.code == "E_INSTANCE_LOCKED"
    first.load()  # re-opening by the holder itself is fine
    first.close()


def test_a_forked_child_never_keeps_its_parents_lease(tmp_path: Path) -> None:
    holder = start_holder(tmp_path, "fork-then-close")
    child = int(wait_ready(holder)[0])
    try:
        store = FileInstanceStore(tmp_path)
        store.load()  # the parent closed its store; the still running child must not hold the lock
        store.close()
    finally:
        os.kill(child, signal.SIGKILL)
        holder.kill()
        holder.wait()


def test_commit_of_a_stale_holder_fails_instead_of_overwriting(tmp_path: Path) -> None:
    path = tmp_path / "inst"
    stale = FileInstanceStore(path)
    base = run_turn(stale, stale.load().base, [append_event(msg("a1"))])
    # the directory is deleted under the running holder and a new writer starts over
    os.rename(path, tmp_path / "gone")
    fresh = FileInstanceStore(path)
    run_turn(fresh, fresh.load().base, [append_event(msg("b1"))])
    fresh.close()
    stale.append_event(append_event(msg("a2")))
    with pytest.raises(StorageError) as info:
        stale.commit([*base, msg("a2")], None)
    assert info.value.code == "E_INSTANCE_LEASE_LOST"
    stale.close()
    conv, _ = reload(path)
    assert records(conv) == records([msg("b1")])


def test_an_instance_deleted_under_its_holder_says_it_was_deleted_not_held_by_someone_unknown(
    tmp_path: Path,
) -> None:
    # gdn instance delete --force under a running chat: nobody holds it; the message said 'it is now
    # held by another process (holder unknown)' and to 'stop one of them'
    path = tmp_path / "inst"
    store = FileInstanceStore(path)
    base = run_turn(store, store.load().base, [append_event(msg("a1"))])
    shutil.rmtree(path)
    with pytest.raises(StorageError) as info:
        store.commit([*base, msg("a2")], None)
    assert info.value.code == "E_INSTANCE_LEASE_LOST"
    assert "was deleted while this runtime held it" in info.value.message
    assert "holder unknown" not in info.value.message
    assert "gdn restart --fresh" in (info.value.suggestion or "")
    store.close()


def test_lease_json_replaced_by_a_new_holder_fails_the_fencing_check(tmp_path: Path) -> None:
    """check() compares lease.json's inode with the one this lease wrote and keeps open (so its
    number cannot be reused); a file another holder renamed into place fails it."""
    store = FileInstanceStore(tmp_path)
    store.load()
    store.lease.check()  # type: ignore[union-attr]
    holder = json.loads((tmp_path / "lease.json").read_text())
    tmp = tmp_path / "lease.json.new"
    tmp.write_text(json.dumps({**holder, "token": holder["token"] + 1, "owner": "someone-else"}))
    os.replace(tmp, tmp_path / "lease.json")
    with pytest.raises(StorageError) as info:
        store.commit([], None)
    assert info.value.code == "E_INSTANCE_LEASE_LOST"
    store.close()


def test_lease_json_rewritten_in_place_fails_the_fencing_check(tmp_path: Path) -> None:
    store = FileInstanceStore(tmp_path)
    store.load()
    holder = json.loads((tmp_path / "lease.json").read_text())
    time.sleep(0.02)  # a later modification time than the one the lease recorded
    (tmp_path / "lease.json").write_text(json.dumps({**holder, "owner": "x" * len(holder["owner"])}))
    with pytest.raises(StorageError) as info:
        store.lease.check()  # type: ignore[union-attr]
    assert info.value.code == "E_INSTANCE_LEASE_LOST"
    store.close()
