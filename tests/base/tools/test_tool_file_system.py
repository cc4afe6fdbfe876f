"""file-system: real files, confined to the instance workdir (digest §4.4, §10 "Path security")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tools_testkit import FakeCtx, run

from goondan.base.tools import file_system as fs
from goondan.base.tools._common import ToolExecutionError, ToolInputError
from goondan.base.tools._confine import resolve, workdir_root


def test_mkdir_write_read_list_round_trip(ctx: FakeCtx, workdir: Path) -> None:
    assert run(fs.mkdir, ctx, {"path": "notes"}) == {"path": "notes", "created": True, "recursive": True}
    written = run(fs.write, ctx, {"path": "notes/a.txt", "content": "alpha"})
    assert written == {"path": "notes/a.txt", "size": 5, "bytesWritten": 5, "written": True, "append": False}
    assert (workdir / "notes" / "a.txt").read_text() == "alpha"
    assert run(fs.read, ctx, {"path": "notes/a.txt"}) == {
        "path": "notes/a.txt",
        "size": 5,
        "truncated": False,
        "content": "alpha",
    }
    listing = run(fs.list_dir, ctx, {"path": "notes"})
    assert listing == {
        "path": "notes",
        "recursive": False,
        "count": 1,
        "entries": [{"name": "a.txt", "path": "notes/a.txt", "type": "file", "size": 5}],
    }


def test_write_creates_parents_and_append_adds(ctx: FakeCtx, workdir: Path) -> None:
    run(fs.write, ctx, {"path": "deep/er/log.txt", "content": "one\n"})
    out = run(fs.write, ctx, {"path": "deep/er/log.txt", "content": "two\n", "append": True})
    assert out["append"] is True
    assert out["size"] == 8
    assert (workdir / "deep/er/log.txt").read_text() == "one\ntwo\n"


def test_read_truncates_at_max_bytes_on_a_character_boundary(ctx: FakeCtx, workdir: Path) -> None:
    (workdir / "u.txt").write_text("aé" * 10, encoding="utf-8")  # 'é' is two bytes
    out = run(fs.read, ctx, {"path": "u.txt", "maxBytes": 5})  # a, é, a and half of the next é
    assert out["truncated"] is True
    assert out["size"] == 30
    assert out["content"] == "aéa"
    assert "\ufffd" not in out["content"]


def test_read_errors_are_precise(ctx: FakeCtx, workdir: Path) -> None:
    with pytest.raises(ToolExecutionError) as info:
        run(fs.read, ctx, {"path": "missing.txt"})
    assert info.value.code == "E_FS_NOT_FOUND"
    assert info.value.suggestion
    (workdir / "d").mkdir()
    with pytest.raises(ToolExecutionError) as info:
        run(fs.read, ctx, {"path": "d"})
    assert info.value.code == "E_FS_NOT_A_FILE"
    with pytest.raises(ToolInputError, match="'path' must be a non-empty string"):
        run(fs.read, ctx, {"path": ""})
    with pytest.raises(ToolInputError, match="'content' must be a string"):
        run(fs.write, ctx, {"path": "x"})
    with pytest.raises(ToolInputError, match="unexpected argument\\(s\\) 'encoding'"):
        run(fs.read, ctx, {"path": "x", "encoding": "latin-1"})


def test_list_recursive_is_sorted_and_filters_by_kind(ctx: FakeCtx, workdir: Path) -> None:
    (workdir / "b").mkdir()
    (workdir / "b" / "z.txt").write_text("z")
    (workdir / "a.txt").write_text("aa")
    out = run(fs.list_dir, ctx, {"recursive": True})
    assert [(e["path"], e["type"]) for e in out["entries"]] == [("a.txt", "file"), ("b", "dir"), ("b/z.txt", "file")]
    assert out["path"] == "."
    assert out["count"] == 3
    files = run(fs.list_dir, ctx, {"recursive": True, "includeDirs": False})
    assert [e["path"] for e in files["entries"]] == ["a.txt", "b/z.txt"]
    dirs = run(fs.list_dir, ctx, {"recursive": True, "includeFiles": False})
    assert [e["path"] for e in dirs["entries"]] == ["b"]


def test_list_is_bounded_by_max_entries(ctx: FakeCtx, workdir: Path) -> None:
    for i in range(5):
        (workdir / f"f{i}").write_text("")
    out = run(fs.list_dir, ctx, {"maxEntries": 2})
    assert out["count"] == 2
    assert out["truncated"] is True


def test_mkdir_without_recursive_refuses_missing_parents_and_existing_dirs(ctx: FakeCtx, workdir: Path) -> None:
    with pytest.raises(ToolExecutionError) as info:
        run(fs.mkdir, ctx, {"path": "x/y", "recursive": False})
    assert info.value.code == "E_FS_NOT_FOUND"
    assert run(fs.mkdir, ctx, {"path": "x/y"})["created"] is True
    assert run(fs.mkdir, ctx, {"path": "x/y"})["created"] is False
    with pytest.raises(ToolExecutionError) as info:
        run(fs.mkdir, ctx, {"path": "x/y", "recursive": False})
    assert info.value.code == "E_FS_ALREADY_EXISTS"


def test_exists_stat_and_delete(ctx: FakeCtx, workdir: Path) -> None:
    assert run(fs.exists, ctx, {"path": "f.txt"}) == {"path": "f.txt", "exists": False, "type": None}
    (workdir / "f.txt").write_text("hey")
    assert run(fs.exists, ctx, {"path": "f.txt"})["type"] == "file"
    st = run(fs.stat, ctx, {"path": "f.txt"})
    assert st["type"] == "file" and st["size"] == 3 and st["modifiedAt"].endswith("Z")
    assert run(fs.delete, ctx, {"path": "f.txt"}) == {"path": "f.txt", "deleted": True, "type": "file"}
    assert not (workdir / "f.txt").exists()
    (workdir / "d" / "e").mkdir(parents=True)
    with pytest.raises(ToolExecutionError) as info:
        run(fs.delete, ctx, {"path": "d"})
    assert info.value.code == "E_FS_DIRECTORY_NOT_EMPTY"
    assert run(fs.delete, ctx, {"path": "d", "recursive": True})["type"] == "dir"
    assert not (workdir / "d").exists()
    with pytest.raises(ToolExecutionError) as info:
        run(fs.delete, ctx, {"path": "."})
    assert info.value.code == "E_FS_INVALID_PATH"
    assert workdir.is_dir()


# --- confinement ------------------------------------------------------------------------------

ESCAPES = ["../outside.txt", "sub/../../outside.txt", "../../etc/passwd"]


@pytest.mark.parametrize("path", ESCAPES)
def test_dotdot_escapes_are_refused_for_every_operation(ctx: FakeCtx, workdir: Path, path: str) -> None:
    (workdir / "sub").mkdir()
    (workdir.parent / "outside.txt").write_text("secret")
    for handler, args in [
        (fs.read, {"path": path}),
        (fs.write, {"path": path, "content": "pwned"}),
        (fs.list_dir, {"path": path}),
        (fs.mkdir, {"path": path}),
        (fs.exists, {"path": path}),
        (fs.stat, {"path": path}),
        (fs.delete, {"path": path}),
    ]:
        with pytest.raises(ToolExecutionError) as info:
            run(handler, ctx, args)
        assert info.value.code == "E_FS_OUTSIDE_WORKDIR", handler
        assert "climbs out of the workdir" in info.value.message
        assert info.value.suggestion
    assert (workdir.parent / "outside.txt").read_text() == "secret"


def test_absolute_paths_outside_the_workdir_are_refused(ctx: FakeCtx, workdir: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("secret")
    with pytest.raises(ToolExecutionError) as info:
        run(fs.read, ctx, {"path": str(target)})
    assert info.value.code == "E_FS_OUTSIDE_WORKDIR"
    assert "absolute path outside the workdir" in info.value.message
    with pytest.raises(ToolExecutionError):
        run(fs.write, ctx, {"path": "/tmp/goondan-fs-escape-test.txt", "content": "x"})
    assert not Path("/tmp/goondan-fs-escape-test.txt").exists()


def test_absolute_paths_inside_the_workdir_are_accepted(ctx: FakeCtx, workdir: Path) -> None:
    run(fs.write, ctx, {"path": str(workdir / "in.txt"), "content": "ok"})
    assert run(fs.read, ctx, {"path": str(workdir / "in.txt")})["content"] == "ok"


def test_symlinks_pointing_outside_are_refused(ctx: FakeCtx, workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside / "secret.txt", workdir / "file-link")
    os.symlink(outside, workdir / "dir-link")
    os.symlink(outside / "not-yet.txt", workdir / "dangling")
    for handler, args in [
        (fs.read, {"path": "file-link"}),
        (fs.read, {"path": "dir-link/secret.txt"}),
        (fs.write, {"path": "dir-link/new.txt", "content": "x"}),
        (fs.write, {"path": "dangling", "content": "x"}),
        (fs.list_dir, {"path": "dir-link"}),
        (fs.mkdir, {"path": "dir-link/sub"}),
        (fs.delete, {"path": "dir-link/secret.txt"}),
    ]:
        with pytest.raises(ToolExecutionError) as info:
            run(handler, ctx, args)
        assert info.value.code == "E_FS_OUTSIDE_WORKDIR", (handler, args)
        assert "symlink" in info.value.message
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret"


def test_a_symlink_loop_cannot_smuggle_an_outside_link_in(ctx: FakeCtx, workdir: Path, tmp_path: Path) -> None:
    # realpath gives up at the loop and only normalizes the rest: 'loop/../out-link' -> '<wd>/out-link'
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside, workdir / "out-link")
    os.symlink(workdir / "loop", workdir / "loop")
    for handler, args in [
        (fs.read, {"path": "loop/../out-link/secret.txt"}),
        (fs.write, {"path": "loop/../out-link/new.txt", "content": "x"}),
    ]:
        with pytest.raises(ToolExecutionError) as info:
            run(handler, ctx, args)
        assert info.value.code == "E_FS_OUTSIDE_WORKDIR"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_listing_shows_symlinks_without_following_them(ctx: FakeCtx, workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside, workdir / "dir-link")
    out = run(fs.list_dir, ctx, {"recursive": True})
    assert out["entries"] == [{"name": "dir-link", "path": "dir-link", "type": "symlink"}]


def test_deleting_a_symlink_removes_the_link_not_its_target(ctx: FakeCtx, workdir: Path, tmp_path: Path) -> None:
    target = tmp_path / "keep.txt"
    target.write_text("keep")
    os.symlink(target, workdir / "link")
    assert run(fs.delete, ctx, {"path": "link"})["type"] == "symlink"
    assert not os.path.lexists(workdir / "link")
    assert target.read_text() == "keep"


def test_symlinks_that_stay_inside_the_workdir_work(ctx: FakeCtx, workdir: Path) -> None:
    (workdir / "real").mkdir()
    (workdir / "real" / "f.txt").write_text("inside")
    os.symlink(workdir / "real", workdir / "alias")
    assert run(fs.read, ctx, {"path": "alias/f.txt"})["content"] == "inside"
    assert run(fs.read, ctx, {"path": "alias/f.txt"})["path"] == "real/f.txt"


def test_dotdot_that_stays_inside_is_fine(ctx: FakeCtx, workdir: Path) -> None:
    (workdir / "a").mkdir()
    run(fs.write, ctx, {"path": "a/../b.txt", "content": "b"})
    assert (workdir / "b.txt").read_text() == "b"


def test_deleting_a_symlink_to_the_workdir_removes_only_the_link(ctx: FakeCtx, workdir: Path) -> None:
    os.symlink(workdir, workdir / "self")
    assert run(fs.delete, ctx, {"path": "self"})["type"] == "symlink"
    assert workdir.is_dir() and not os.path.lexists(workdir / "self")


def test_a_symlink_that_leaves_and_comes_back_is_refused(ctx: FakeCtx, workdir: Path) -> None:
    # followed one component at a time, '../workdir/a' leaves the workdir at its first step
    (workdir / "a").mkdir()
    (workdir / "a" / "f.txt").write_text("inside")
    os.symlink(f"../{workdir.name}/a", workdir / "out-and-back")
    with pytest.raises(ToolExecutionError) as info:
        run(fs.read, ctx, {"path": "out-and-back/f.txt"})
    assert info.value.code == "E_FS_OUTSIDE_WORKDIR"
    assert "symlink" in info.value.message
    with pytest.raises(ToolExecutionError) as info:
        run(fs.read, ctx, {"path": f"../{workdir.name}/a/f.txt"})
    assert info.value.code == "E_FS_OUTSIDE_WORKDIR"
    assert "climbs out of the workdir" in info.value.message


def test_relative_symlinks_between_subdirectories_are_followed(ctx: FakeCtx, workdir: Path) -> None:
    (workdir / "a").mkdir()
    (workdir / "b").mkdir()
    (workdir / "b" / "f.txt").write_text("in b")
    os.symlink("../b", workdir / "a" / "sibling")
    os.symlink("sibling/f.txt", workdir / "a" / "chain")
    read = run(fs.read, ctx, {"path": "a/chain"})
    assert read == {"path": "b/f.txt", "size": 4, "truncated": False, "content": "in b"}
    out = run(fs.write, ctx, {"path": "a/sibling/new.txt", "content": "n"})
    assert out["path"] == "b/new.txt" and (workdir / "b" / "new.txt").read_text() == "n"
    assert run(fs.stat, ctx, {"path": "a/sibling/.."})["path"] == "."
    assert run(fs.exists, ctx, {"path": "a/sibling/../b/f.txt"}) == {"path": "b/f.txt", "exists": True, "type": "file"}


def test_a_workdir_reached_through_a_symlinked_path_accepts_both_absolute_spellings(tmp_path: Path) -> None:
    # like /tmp -> /private/tmp on macOS: the runtime may hand out the workdir by a linked path
    real = tmp_path / "real-workdir"
    real.mkdir()
    alias = tmp_path / "alias"
    os.symlink(real, alias)
    ctx = FakeCtx(workdir=alias / ".")
    run(fs.write, ctx, {"path": str(alias / "x.txt"), "content": "via alias"})
    assert run(fs.read, ctx, {"path": str(real / "x.txt")})["content"] == "via alias"
    assert run(fs.read, ctx, {"path": str(alias / "x.txt")})["path"] == "x.txt"
    with pytest.raises(ToolExecutionError) as info:
        run(fs.read, ctx, {"path": str(tmp_path / "elsewhere.txt")})
    assert info.value.code == "E_FS_OUTSIDE_WORKDIR"


def test_paths_through_files_and_loops_fail_with_a_code_not_a_traceback(ctx: FakeCtx, workdir: Path) -> None:
    (workdir / "file.txt").write_text("plain")
    os.symlink("loop", workdir / "loop")
    for handler, args, code in [
        (fs.delete, {"path": "file.txt/x"}, "E_FS_IO"),
        (fs.delete, {"path": "loop/x", "recursive": True}, "E_FS_IO"),
        (fs.read, {"path": "loop"}, "E_FS_IO"),
        (fs.write, {"path": "file.txt/x", "content": "y"}, "E_FS_NOT_A_DIRECTORY"),
        (fs.write, {"path": "loop/x", "content": "y"}, "E_FS_NOT_A_DIRECTORY"),
        (fs.write, {"path": "file.txt/x/y", "content": "y"}, "E_FS_NOT_A_DIRECTORY"),
        (fs.mkdir, {"path": "file.txt/x"}, "E_FS_NOT_A_DIRECTORY"),
        (fs.list_dir, {"path": "loop"}, "E_FS_NOT_FOUND"),
        (fs.stat, {"path": "missing/../missing2"}, "E_FS_NOT_FOUND"),
    ]:
        with pytest.raises(ToolExecutionError) as info:
            run(handler, ctx, args)
        assert info.value.code == code, (handler, args, info.value.message)
        assert info.value.suggestion
    assert run(fs.exists, ctx, {"path": "loop/x"})["exists"] is False
    assert (workdir / "file.txt").read_text() == "plain"


def test_deleting_a_path_that_collapses_to_a_directory_walks_it_physically(ctx: FakeCtx, workdir: Path) -> None:
    # 'link/..' is the directory holding the link's target, as the OS sees it; 'a/..' is the workdir
    (workdir / "a" / "b").mkdir(parents=True)
    os.symlink(workdir / "a" / "b", workdir / "deep-link")
    with pytest.raises(ToolExecutionError) as info:
        run(fs.delete, ctx, {"path": "a/.."})
    assert info.value.code == "E_FS_INVALID_PATH"
    assert run(fs.delete, ctx, {"path": "deep-link/..", "recursive": True}) == {
        "path": "a",
        "deleted": True,
        "type": "dir",
    }
    assert not (workdir / "a").exists() and os.path.islink(workdir / "deep-link")


_SEGMENTS = st.sampled_from(["..", ".", "a", "b", "in-link", "out-link", "loop", "", "x..y"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_SEGMENTS, min_size=1, max_size=6), absolute=st.booleans(), follow=st.booleans())
def test_any_path_either_resolves_inside_the_workdir_or_is_refused(
    workdir: Path, tmp_path: Path, parts: list[str], absolute: bool, follow: bool
) -> None:
    root = workdir_root(workdir)
    if not (workdir / "a").exists():
        (workdir / "a" / "b").mkdir(parents=True)
        (tmp_path / "outside").mkdir(exist_ok=True)
        os.symlink(workdir / "a", workdir / "in-link")
        os.symlink(tmp_path / "outside", workdir / "out-link")
        os.symlink(workdir / "loop", workdir / "loop")
    raw = "/".join(parts)
    if absolute:
        raw = str(workdir / raw)
    try:
        resolved = resolve(root, raw, follow_last=follow)
    except ToolExecutionError as exc:
        assert exc.code == "E_FS_OUTSIDE_WORKDIR"
        return
    assert resolved == root or resolved.is_relative_to(root)
    # what the OS would open (or, for the link itself, the directory holding it) is inside too
    opened = resolved if follow or resolved == root else resolved.parent
    assert Path(os.path.realpath(opened)).is_relative_to(root)
