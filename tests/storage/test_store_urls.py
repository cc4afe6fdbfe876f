"""store= URLs: which backend a URL opens, the registry of schemes (register_store and the
goondan.stores entry point group), and clear errors for everything else."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goondan.errors import GoondanError
from goondan.storage import (
    FileStoreBackend,
    FileWorkspaceStore,
    MemoryStoreBackend,
    MemoryWorkspaceStore,
    open_store,
    register_store,
    runtime_store,
)
from goondan.storage._backends import _REGISTRY


def test_no_store_and_no_env_is_the_filesystem_store_under_the_state_root(tmp_path: Path) -> None:
    backend = open_store(None, state_root=tmp_path, env={})
    assert isinstance(backend, FileStoreBackend) and backend.root == tmp_path and backend.durable
    ws = backend.workspace("w")
    assert isinstance(ws, FileWorkspaceStore) and ws.path == tmp_path / "workspaces" / "w"


def test_goondan_store_env_selects_the_store_and_an_explicit_store_wins(tmp_path: Path) -> None:
    env = {"GOONDAN_STORE": "memory:"}
    assert isinstance(open_store(None, state_root=tmp_path, env=env), MemoryStoreBackend)
    explicit = open_store(str(tmp_path / "x"), state_root=tmp_path, env=env)
    assert isinstance(explicit, FileStoreBackend) and explicit.root == tmp_path / "x"
    blank = open_store(None, state_root=tmp_path, env={"GOONDAN_STORE": "  "})
    assert isinstance(blank, FileStoreBackend) and blank.root == tmp_path


def test_a_directory_path_is_the_filesystem_store_rooted_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for given_path in ("rel/dir", "./a:b", str(tmp_path / "abs"), tmp_path / "pathlike"):
        backend = open_store(given_path, state_root=tmp_path / "state", env={})
        assert isinstance(backend, FileStoreBackend)
        assert backend.root == (tmp_path / given_path if isinstance(given_path, str) else given_path).absolute()
    assert not (tmp_path / "rel").exists()  # opening a backend creates nothing


def test_file_url_names_the_store_directory_and_round_trips(tmp_path: Path) -> None:
    target = tmp_path / "with space" / "é"
    backend = open_store(target.as_uri(), state_root=tmp_path, env={})
    assert isinstance(backend, FileStoreBackend) and backend.root == target
    again = open_store(backend.url, state_root=tmp_path, env={})
    assert isinstance(again, FileStoreBackend) and again.root == target
    assert open_store("file://localhost/tmp/x", state_root=tmp_path, env={}).url == "file:///tmp/x"


@pytest.mark.parametrize("url", ["file://relative/dir", "file:rel", "file:///x?y=1", "file://host/x", "file://[x"])
def test_a_file_url_that_is_not_an_absolute_local_directory_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(GoondanError) as info:
        open_store(url, state_root=tmp_path, env={})
    assert info.value.code == "E_STORE_URL_INVALID" and info.value.suggestion


def test_memory_is_private_per_open_and_a_named_memory_space_is_shared_in_the_process(tmp_path: Path) -> None:
    a = open_store("memory:", state_root=tmp_path, env={})
    b = open_store("memory:", state_root=tmp_path, env={})
    assert isinstance(a, MemoryStoreBackend) and isinstance(b, MemoryStoreBackend)
    assert a.space is not b.space and not a.durable and a.url == "memory:"
    n1 = open_store("memory://shared-test", state_root=tmp_path, env={})
    n2 = open_store("MEMORY://shared-test", state_root=tmp_path, env={})
    assert isinstance(n1, MemoryStoreBackend) and isinstance(n2, MemoryStoreBackend)
    assert n1.space is n2.space and n1.url == "memory://shared-test"
    ws1, ws2 = n1.workspace("w"), n2.workspace("w")
    assert isinstance(ws1, MemoryWorkspaceStore)
    holder = ws1.instance("a", "k")
    holder.load()
    with pytest.raises(GoondanError) as info:
        ws2.instance("a", "k").load()  # two runtimes of one process cannot both write
    assert info.value.code == "E_INSTANCE_LOCKED"
    holder.close()


@pytest.mark.parametrize("url", ["memory:x", "memory:///", "memory://", "memory://a/b", "memory://" + "n" * 129])
def test_a_malformed_memory_url_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(GoondanError) as info:
        open_store(url, state_root=tmp_path, env={})
    assert info.value.code == "E_STORE_URL_INVALID"


@pytest.mark.parametrize("url", ["", "   ", "a\0b"])
def test_an_empty_store_url_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(GoondanError) as info:
        open_store(url, state_root=tmp_path, env={})
    assert info.value.code == "E_STORE_URL_INVALID"


def test_a_postgresql_url_opens_the_postgres_store_lazily_and_never_shows_the_password(tmp_path: Path) -> None:
    from goondan.storage._postgres import PostgresStoreBackend

    for url in ("postgresql://user:secret@db.invalid/goondan", "postgres://db.invalid/x?pool_size=2"):
        backend = open_store(url, state_root=tmp_path, env={})  # nothing connects until a store is used
        assert isinstance(backend, PostgresStoreBackend) and backend.durable and backend.url == url
        assert "secret" not in repr(backend)


def test_an_unknown_scheme_lists_the_known_ones_without_the_password(tmp_path: Path) -> None:
    with pytest.raises(GoondanError) as info:
        open_store("redis://user:hunter2@host:6379/0", state_root=tmp_path, env={})
    assert info.value.code == "E_STORE_UNSUPPORTED"
    assert "redis" in str(info.value) and "hunter2" not in str(info.value)
    assert "file, memory" in (info.value.suggestion or "")


def test_a_registered_scheme_opens_its_factory(tmp_path: Path) -> None:
    seen: list[tuple[str, Path]] = []

    def factory(url: str, *, state_root: Path) -> MemoryStoreBackend:
        seen.append((url, state_root))
        return MemoryStoreBackend()

    register_store("conformance-test", factory)
    try:
        backend = open_store("Conformance-Test://anything", state_root=tmp_path, env={})
    finally:
        _REGISTRY.pop("conformance-test", None)
    assert isinstance(backend, MemoryStoreBackend) and seen == [("Conformance-Test://anything", tmp_path)]
    for bad in ("file", "memory", "x", "1abc", "a b"):
        with pytest.raises(GoondanError) as info:
            register_store(bad, factory)
        assert info.value.code == "E_STORE_URL_INVALID"


def test_an_installed_distribution_publishes_a_store_through_the_entry_point_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    dist = site / "goondan_teststore-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: goondan-teststore\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[goondan.stores]\nteststore = goondan_teststore_mod:factory\n")
    (site / "goondan_teststore_mod.py").write_text(
        "from goondan.storage import MemoryStoreBackend\n"
        "OPENED = []\n"
        "def factory(url, *, state_root):\n"
        "    OPENED.append(url)\n"
        "    return MemoryStoreBackend()\n"
    )
    monkeypatch.syspath_prepend(str(site))
    backend = open_store("teststore://db", state_root=tmp_path, env={})
    assert isinstance(backend, MemoryStoreBackend)
    assert sys.modules["goondan_teststore_mod"].OPENED == ["teststore://db"]


def test_persist_false_is_the_memory_store_and_contradicts_a_durable_store(tmp_path: Path) -> None:
    assert isinstance(runtime_store(None, persist=False, state_root=tmp_path, env={}), MemoryStoreBackend)
    env = {"GOONDAN_STORE": str(tmp_path / "elsewhere")}
    assert isinstance(runtime_store(None, persist=False, state_root=tmp_path, env=env), MemoryStoreBackend)
    assert isinstance(runtime_store("memory:", persist=False, state_root=tmp_path, env={}), MemoryStoreBackend)
    with pytest.raises(GoondanError) as info:
        runtime_store(str(tmp_path), persist=False, state_root=tmp_path, env={})
    assert info.value.code == "E_RUNTIME_OPTION"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_any_store_text_opens_a_backend_or_fails_with_a_goondan_error(text: str) -> None:
    try:
        backend = open_store(text, state_root="/nonexistent-state-root", env={})
    except GoondanError as exc:
        assert exc.code in ("E_STORE_URL_INVALID", "E_STORE_UNSUPPORTED"), exc
        return
    assert backend.url


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters=":\0", blacklist_categories=("Cs",)), min_size=1))
def test_text_without_a_colon_is_a_filesystem_path(text: str) -> None:
    if not text.strip():
        return
    backend = open_store(text, state_root="/nonexistent-state-root", env={})
    assert isinstance(backend, FileStoreBackend)
    assert backend.root == Path(os.path.expanduser(text.strip())).absolute()
