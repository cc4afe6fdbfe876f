"""`gdn instance delete` on a state root it cannot write (a read-only file system, a lease file it
cannot open) is a coded E_STORAGE_WRITE naming the instance, with what to do; it was
INTERNAL_ERROR "OSError: [Errno 30] Read-only file system" ("report it"). Nothing is deleted.
Real `gdn` subprocesses; the read-only case on a real read-only tmpfs when this user may mount one."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_testkit import ECHO_BUNDLE, gdn

from kit import write_bundle


def _instance(tmp_path: Path, root: Path) -> tuple[Path, Path]:
    bundle = write_bundle(tmp_path / "b", ECHO_BUNDLE)
    done = gdn(tmp_path, "run", str(bundle), "--input", "hi", "--state-root", str(root))
    assert done.returncode == 0, done.stderr
    (instance,) = root.glob("workspaces/*/instances/talker__default")
    return bundle, instance


def test_delete_whose_lease_file_cannot_be_opened_is_a_coded_storage_error(tmp_path: Path) -> None:
    root = tmp_path / "state"
    bundle, instance = _instance(tmp_path, root)
    (instance / "lease.lock").unlink()
    (instance / "lease.lock").mkdir()  # open(O_RDWR) fails: EISDIR
    proc = gdn(tmp_path, "instance", "delete", "default", str(bundle), "-y", "--state-root", str(root))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith(f"[E_STORAGE_WRITE] could not delete {instance}: "), proc.stderr
    assert "INTERNAL_ERROR" not in proc.stderr and "suggestion: Check permissions of the state root" in proc.stderr
    assert (instance / "messages" / "base.jsonl").read_bytes()


@pytest.fixture
def read_only_mount(tmp_path: Path) -> Iterator[Path]:
    mount = shutil.which("mount")
    point = tmp_path / "ro"
    point.mkdir()
    if mount is None or subprocess.run([mount, "-t", "tmpfs", "tmpfs", str(point)], capture_output=True).returncode:
        pytest.skip("this user may not mount a tmpfs (needs root): the read-only file system case is not run")
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=False)


def test_delete_on_a_read_only_file_system_says_so(tmp_path: Path, read_only_mount: Path) -> None:
    root = read_only_mount / "state"
    bundle, instance = _instance(tmp_path, root)
    subprocess.run(["mount", "-o", "remount,ro", str(read_only_mount)], check=True)
    proc = gdn(tmp_path, "instance", "delete", "default", str(bundle), "-y", "--state-root", str(root))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith(f"[E_STORAGE_WRITE] could not delete {instance}: "), proc.stderr
    assert "suggestion: The state root is on a read-only file system" in proc.stderr
    again = gdn(tmp_path, "run", str(bundle), "--input", "hi", "--state-root", str(root))
    assert again.returncode == 1 and "read-only file system: give a writable directory" in again.stderr
