"""file-system confinement against a concurrent attacker, fd hygiene, and random paths.

The attacker is a real second process that keeps exchanging a subdirectory of the workdir with a
symlink to a directory outside it (an atomic ``renameat2(RENAME_EXCHANGE)``, so the name always
exists) while the tool works under that subdirectory. A path-checking implementation loses this
race: it checks ``sub`` while it is a directory and opens ``sub/f.txt`` after it became the link.
On Linux the kernel itself (inotify) reports any open, read or write inside the outside directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tools_testkit import FakeCtx

from goondan.base.tools import file_system as fs
from goondan.base.tools._common import ToolExecutionError

OUTSIDE = "E_FS_OUTSIDE_WORKDIR"
SECRET = "OUTSIDE-SECRET"

SWAPPER = r"""
import ctypes, os, sys

a, b, stop = (os.fsencode(p) for p in sys.argv[1:4])
libc = ctypes.CDLL(None, use_errno=True)
if hasattr(libc, "renameat2"):  # Linux: exchange two names atomically
    def swap():
        return libc.renameat2(-100, a, -100, b, 2)  # AT_FDCWD, RENAME_EXCHANGE
elif hasattr(libc, "renamex_np"):  # macOS
    def swap():
        return libc.renamex_np(a, b, 2)  # RENAME_SWAP
else:
    sys.exit("no atomic rename-exchange on this platform")
swaps = 0
print("ready", flush=True)
while not os.path.exists(stop):
    for _ in range(100):
        if swap() != 0:
            sys.exit("swap failed: " + os.strerror(ctypes.get_errno()))
        swaps += 1
print(swaps, flush=True)
"""


class _KernelWatch:
    """inotify on one directory: the kernel records every open, read, write, create, delete, rename
    and attribute change of the directory and of the entries in it, whoever does it."""

    def __init__(self, path: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        assert libc.inotify_add_watch(self.fd, os.fsencode(path), 0xFFF) >= 0  # IN_ALL_EVENTS

    def events(self) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            offset = 0
            while offset < len(data):
                _wd, mask, _cookie, size = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16 : offset + 16 + size].rstrip(b"\0").decode()
                out.append((mask, name))
                offset += 16 + size

    def close(self) -> None:
        os.close(self.fd)


def _watch(path: Path) -> _KernelWatch | None:
    return _KernelWatch(path) if sys.platform.startswith("linux") else None


def _snapshot(directory: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every entry under ``directory`` with its content (files) and mtime, without following links."""
    shot: dict[str, tuple[bytes | None, int]] = {".": (None, directory.lstat().st_mtime_ns)}
    for path in sorted(directory.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        shot[str(path.relative_to(directory))] = (data, info.st_mtime_ns)
    return shot


def _outside_dir(tmp: Path) -> Path:
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text(SECRET)
    (outside / "canary.txt").write_text("canary")
    (outside / "made").mkdir()
    old = time.time() - 3600  # an hour ago: any write would visibly move an mtime
    for path in [outside / "f.txt", outside / "canary.txt", outside / "made", outside]:
        os.utime(path, (old, old))
    return outside


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"))


# --- the race ------------------------------------------------------------------------------------


class _Race:
    """Counts how the tool's calls came out while the attacker ran; any other outcome fails the test."""

    def __init__(self, ctx: FakeCtx) -> None:
        self.ctx = ctx
        self.ok = 0
        self.refused = 0

    def call(self, handler: Callable[[Any, Any], dict[str, Any]], args: dict[str, Any]) -> dict[str, Any] | None:
        try:
            out = handler(self.ctx, args)
        except ToolExecutionError as exc:
            assert exc.code == OUTSIDE, (exc.code, exc.message)
            self.refused += 1
            return None
        self.ok += 1
        return out


def _under_attack(tmp_path: Path, swapped: Path, planted: Path, seconds: float, body: Callable[[int], None]) -> None:
    """Run ``body(round)`` repeatedly while another process keeps exchanging ``swapped`` and the
    symlink ``planted``; then prove the outside directory was never opened, read or written."""
    outside = tmp_path / "outside"
    stop = tmp_path / "stop"
    before = _snapshot(outside)
    watch = _watch(outside)
    fds = _open_fds()
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(swapped), str(planted), str(stop)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
        deadline = time.monotonic() + seconds
        rounds = 0
        while time.monotonic() < deadline:
            rounds += 1
            body(rounds)
    finally:
        stop.touch()
        swaps_text, _ = swapper.communicate(timeout=30)
    assert _open_fds() == fds, "a descriptor leaked on a raced path"
    events = watch.events() if watch else []
    if watch:
        watch.close()
    assert swapper.returncode == 0
    assert int(swaps_text) > 1000, "the attacker barely ran"
    assert events == [], f"the kernel saw the tool touch the outside directory: {events[:5]}"
    assert _snapshot(outside) == before


@pytest.mark.slow
def test_swapping_a_directory_for_an_outside_symlink_never_reaches_outside(
    ctx: FakeCtx, workdir: Path, tmp_path: Path
) -> None:
    outside = _outside_dir(tmp_path)
    (workdir / "sub").mkdir()
    (workdir / "sub" / "f.txt").write_text("inside")
    os.symlink(outside, workdir / ".other")  # absolute target, like a planted link
    race = _Race(ctx)

    def body(n: int) -> None:
        read = race.call(fs.read, {"path": "sub/f.txt"})
        if read is not None:
            assert read == {"path": "sub/f.txt", "size": 6, "truncated": False, "content": "inside"}
        wrote = race.call(fs.write, {"path": "sub/w.txt", "content": "written"})
        if wrote is not None:
            assert wrote["path"] == "sub/w.txt"
        listing = race.call(fs.list_dir, {"path": "sub"})
        if listing is not None:
            names = {e["name"] for e in listing["entries"]}
            assert {n for n in names if not n.startswith("gone")} <= {"f.txt", "w.txt", "made"}, names
        stat = race.call(fs.stat, {"path": "sub/f.txt"})
        if stat is not None:
            assert stat["size"] == 6  # the outside f.txt has 14 bytes
        exists = race.call(fs.exists, {"path": "sub/canary.txt"})
        assert exists is None or exists["exists"] is False
        race.call(fs.mkdir, {"path": "sub/made/deeper"})
        if race.call(fs.mkdir, {"path": f"sub/gone{n}", "recursive": False}) is not None:
            race.call(fs.delete, {"path": f"sub/gone{n}"})

    _under_attack(tmp_path, workdir / "sub", workdir / ".other", 3.0, body)
    assert race.ok > 100 and race.refused > 100, (race.ok, race.refused)  # both sides of the race were hit
    # the writes that succeeded landed in the real directory, under whichever name it has now
    [real] = [p for p in (workdir / "sub", workdir / ".other") if not p.is_symlink()]
    assert sorted(p.name for p in real.iterdir() if not p.name.startswith("gone")) == ["f.txt", "made", "w.txt"]
    assert (real / "w.txt").read_text() == "written" and (real / "made" / "deeper").is_dir()


@pytest.mark.slow
def test_swapping_a_file_for_an_outside_symlink_never_reaches_outside(
    ctx: FakeCtx, workdir: Path, tmp_path: Path
) -> None:
    outside = _outside_dir(tmp_path)
    (workdir / "sub").mkdir()
    (workdir / "sub" / "f.txt").write_text("inside")
    os.symlink(outside / "f.txt", workdir / "sub" / ".other")
    race = _Race(ctx)

    def body(n: int) -> None:
        read = race.call(fs.read, {"path": "sub/f.txt"})
        if read is not None:
            assert read["content"] == "inside"
        race.call(fs.write, {"path": "sub/f.txt", "content": "inside"})
        race.call(fs.write, {"path": "sub/f.txt", "content": "", "append": True})
        stat = race.call(fs.stat, {"path": "sub/f.txt"})
        if stat is not None:
            assert stat["size"] == 6
        race.call(fs.exists, {"path": "sub/f.txt"})

    _under_attack(tmp_path, workdir / "sub" / "f.txt", workdir / "sub" / ".other", 2.0, body)
    assert race.ok > 100 and race.refused > 100, (race.ok, race.refused)


# --- no leaked descriptors ---------------------------------------------------------------------------


def test_no_operation_leaks_a_file_descriptor(ctx: FakeCtx, workdir: Path, tmp_path: Path) -> None:
    outside = _outside_dir(tmp_path)
    (workdir / "a" / "b").mkdir(parents=True)
    (workdir / "a" / "b" / "f.txt").write_text("x" * 100)
    os.symlink(workdir / "a", workdir / "in-link")
    os.symlink(outside, workdir / "out-link")
    os.symlink("loop", workdir / "loop")
    (workdir / "file.txt").write_text("plain")
    calls: list[tuple[Callable[[Any, Any], dict[str, Any]], dict[str, Any]]] = [
        (fs.read, {"path": "in-link/b/f.txt", "maxBytes": 10}),
        (fs.read, {"path": "a"}),
        (fs.read, {"path": "missing/x"}),
        (fs.read, {"path": "loop"}),
        (fs.read, {"path": "out-link/f.txt"}),
        (fs.read, {"path": "../x"}),
        (fs.write, {"path": "new/deep/f.txt", "content": "y"}),
        (fs.write, {"path": "new/deep/f.txt", "content": "z", "append": True}),
        (fs.write, {"path": "file.txt/x", "content": "y"}),
        (fs.write, {"path": "a", "content": "y"}),
        (fs.list_dir, {"recursive": True}),
        (fs.list_dir, {"path": "file.txt"}),
        (fs.list_dir, {"path": "loop"}),
        (fs.mkdir, {"path": "m/n"}),
        (fs.mkdir, {"path": "m/n", "recursive": False}),
        (fs.mkdir, {"path": "file.txt"}),
        (fs.exists, {"path": "in-link/b"}),
        (fs.exists, {"path": "loop/x"}),
        (fs.stat, {"path": "in-link/b/f.txt"}),
        (fs.stat, {"path": "nothing"}),
        (fs.delete, {"path": "m", "recursive": True}),
        (fs.delete, {"path": "new"}),
        (fs.delete, {"path": "new", "recursive": True}),
        (fs.delete, {"path": "out-link/f.txt"}),
    ]

    def round_of_calls() -> None:
        for handler, args in calls:
            with contextlib.suppress(ToolExecutionError):
                handler(ctx, dict(args))

    round_of_calls()  # warm up lazily opened things (imports, locale files)
    before = _open_fds()
    for _ in range(50):
        round_of_calls()
    assert _open_fds() == before


def test_a_wide_tree_lists_fully_with_few_descriptors_to_spare(ctx: FakeCtx, workdir: Path) -> None:
    # pending subdirectories are remembered by name, not by an open descriptor each
    for i in range(300):
        (workdir / f"d{i:03}" / "inner").mkdir(parents=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (_open_fds() + 16, hard))
    try:
        out = fs.list_dir(ctx, {"recursive": True, "maxEntries": 1000})
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert out["count"] == 600 and "truncated" not in out
    assert out["entries"][:2] == [
        {"name": "d000", "path": "d000", "type": "dir"},
        {"name": "inner", "path": "d000/inner", "type": "dir"},
    ]


# --- random paths never escape ----------------------------------------------------------------------

_SEGMENTS = st.sampled_from(
    ["..", ".", "", "a", "b", "f.txt", "in-link", "out-link", "abs-out", "up-link", "loop", "dangling", "self"]
)
_OPS = st.sampled_from(["read", "write", "append", "list", "mkdir", "mkdir-flat", "exists", "stat", "delete", "rmtree"])
_ALLOWED = {
    OUTSIDE,
    "E_FS_NOT_FOUND",
    "E_FS_NOT_A_FILE",
    "E_FS_NOT_A_DIRECTORY",
    "E_FS_IS_A_DIRECTORY",
    "E_FS_ALREADY_EXISTS",
    "E_FS_DIRECTORY_NOT_EMPTY",
    "E_FS_INVALID_PATH",
    "E_FS_IO",
}


@contextlib.contextmanager
def _planted_workdir() -> Iterator[tuple[Path, Path]]:
    """A fresh workdir full of traps next to an outside directory, removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="goondan-fs-hyp-"))
    try:
        outside = _outside_dir(base)
        workdir = base / "workdir"
        (workdir / "a" / "b").mkdir(parents=True)
        (workdir / "a" / "f.txt").write_text("inside")
        os.symlink("a", workdir / "in-link")  # relative, stays inside
        os.symlink("../outside", workdir / "out-link")  # relative, leaves
        os.symlink(outside, workdir / "abs-out")  # absolute, leaves
        os.symlink("../..", workdir / "a" / "up-link")  # from a/: climbs above the workdir
        os.symlink("loop", workdir / "loop")
        os.symlink("../outside/new.txt", workdir / "dangling")  # writing through it would create outside
        os.symlink(".", workdir / "self")
        yield workdir, outside
    finally:
        shutil.rmtree(base)


def _call(op: str, ctx: FakeCtx, raw: str) -> dict[str, Any]:
    if op in ("read", "list", "exists", "stat"):
        handler = {"read": fs.read, "list": fs.list_dir, "exists": fs.exists, "stat": fs.stat}[op]
        return handler(ctx, {"path": raw})
    if op in ("write", "append"):
        return fs.write(ctx, {"path": raw, "content": "hyp", "append": op == "append"})
    if op in ("mkdir", "mkdir-flat"):
        return fs.mkdir(ctx, {"path": raw, "recursive": op == "mkdir"})
    return fs.delete(ctx, {"path": raw, "recursive": op == "rmtree"})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_SEGMENTS, min_size=1, max_size=7), op=_OPS)
def test_random_relative_paths_never_touch_anything_outside(parts: list[str], op: str) -> None:
    raw = "/".join(parts) or "."
    with _planted_workdir() as (workdir, outside):
        before = _snapshot(outside)
        watch = _watch(outside)
        try:
            out = _call(op, FakeCtx(workdir=workdir), raw)
        except ToolExecutionError as exc:
            assert exc.code in _ALLOWED, (exc.code, exc.message)
            assert exc.suggestion
        else:
            shown = out["path"]
            assert not shown.startswith("/") and ".." not in shown.split("/"), shown
            real_workdir = Path(os.path.realpath(workdir))
            named = workdir / shown
            # what the result names is inside: the entry itself (a deleted link: its directory)
            assert Path(os.path.realpath(named if op not in ("delete", "rmtree") else named.parent)).is_relative_to(
                real_workdir
            ), shown
            if op == "read":
                assert SECRET not in out["content"]
            if op == "list":
                assert all(not e["path"].startswith("..") for e in out["entries"])
        events = watch.events() if watch else []
        if watch:
            watch.close()
        assert events == [], (raw, op, events[:5])
        assert _snapshot(outside) == before
