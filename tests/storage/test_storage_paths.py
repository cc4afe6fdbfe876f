"""State root, workspace ids and instance directory names (CONTRACT §8, digest §3)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goondan.storage import instance_dir_name, parse_instance_dir_name, resolve_state_root, workspace_id
from goondan.storage._paths import component_file_name, decode_component, encode_component

SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def test_state_root_precedence_explicit_then_env_then_home(tmp_path: Path) -> None:
    env = {"GOONDAN_STATE_ROOT": str(tmp_path / "from-env"), "HOME": str(tmp_path / "home")}
    assert resolve_state_root(tmp_path / "explicit", env) == tmp_path / "explicit"
    assert resolve_state_root(None, env) == tmp_path / "from-env"
    assert resolve_state_root(None, {"HOME": str(tmp_path / "home")}) == tmp_path / "home" / ".goondan"
    assert resolve_state_root("", {"GOONDAN_STATE_ROOT": "", "HOME": "/h"}) == Path("/h/.goondan")


def test_state_root_is_absolute_and_not_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    root = resolve_state_root("rel/state", {})
    assert root.is_absolute() and root == tmp_path / "rel" / "state"
    assert not root.exists()
    assert resolve_state_root("~/x", {"HOME": "/home/u"}) == Path("/home/u/x")


def test_workspace_id_slug_rules() -> None:
    assert workspace_id("Main Swarm:Prod") == "main-swarm-prod"
    assert workspace_id("///@@@:::") == "default"
    assert workspace_id("") == "default"
    assert workspace_id("   ") == "default"
    assert workspace_id("  My--Swarm__v1.2  ") == "my-swarm__v1.2"
    assert workspace_id("-a--b-") == "a-b"
    assert workspace_id("Main Swarm:Prod") == workspace_id("Main Swarm:Prod")  # deterministic
    assert workspace_id("swarm-a") != workspace_id("swarm-b")


def test_workspace_id_long_keys_are_truncated_deterministically_and_stay_distinct() -> None:
    a = workspace_id("swarm-" + "x" * 300)
    b = workspace_id("swarm-" + "x" * 299 + "y")
    assert len(a) <= 128 and len(b) <= 128
    assert a.startswith("swarm-") and b.startswith("swarm-")
    assert a != b
    assert a == workspace_id("swarm-" + "x" * 300)
    assert re.fullmatch(r"[a-z0-9._-]+", a)


@given(st.text(max_size=300))
def test_workspace_id_is_always_a_safe_bounded_slug(key: str) -> None:
    wid = workspace_id(key)
    assert 1 <= len(wid) <= 128
    assert re.fullmatch(r"[a-z0-9._-]+", wid)
    assert wid not in (".", "..")
    assert not wid.startswith("-") and not wid.endswith("-")


@settings(max_examples=500)
@given(st.text(max_size=40), st.text(max_size=40))
def test_instance_dir_name_roundtrips(agent: str, key: str) -> None:
    name = instance_dir_name(agent, key)
    assert SAFE_NAME.match(name)
    assert not name.startswith(".")
    assert len(name) <= 200
    assert name.lower() == name  # safe on case-insensitive filesystems
    if not name.startswith("_h"):  # not the hashed form used for over-long pairs
        assert parse_instance_dir_name(name) == (agent, key)
    else:
        assert len(encode_component(agent)) + len(encode_component(key)) + 2 > 200


@pytest.mark.parametrize(
    ("agent", "key"),
    [
        ("coder", "default"),
        ("coder", ""),
        ("", ""),
        ("", "key"),
        ("a/b", "../.."),
        ("..", ".."),
        (".hidden", ".x"),
        ("Coder", "user:123"),
        ("a_b", "c__d"),
        ("a", "_x"),
        ("a_", "x"),
        ("%2f", "%"),
        ("에이전트", "키 🔑"),
        ("a\ud800b", "lone surrogate"),
        ("nul\0byte", "tab\tnewline\n"),
    ],
)
def test_instance_dir_name_roundtrips_awkward_names(agent: str, key: str) -> None:
    name = instance_dir_name(agent, key)
    assert SAFE_NAME.match(name) and not name.startswith(".") and name not in (".", "..")
    assert parse_instance_dir_name(name) == (agent, key)


def test_instance_dir_name_is_readable_for_ordinary_names() -> None:
    assert instance_dir_name("coder", "default") == "coder__default"
    assert instance_dir_name("coder", "user:123") == "coder__user_3a123"


@given(
    st.tuples(st.text(max_size=12), st.text(max_size=12)),
    st.tuples(st.text(max_size=12), st.text(max_size=12)),
)
def test_instance_dir_name_is_unique_per_pair(p: tuple[str, str], q: tuple[str, str]) -> None:
    if p != q:
        assert instance_dir_name(*p) != instance_dir_name(*q)


def test_case_variants_do_not_collide_on_case_insensitive_filesystems() -> None:
    names = {instance_dir_name(a, k).lower() for a in ("coder", "Coder", "CODER") for k in ("k", "K")}
    assert len(names) == 6


def test_over_long_pairs_get_bounded_unique_hashed_names() -> None:
    a = instance_dir_name("agent", "k" * 500)
    b = instance_dir_name("agent", "k" * 499 + "j")
    c = instance_dir_name("agent", "한" * 100)
    for name in (a, b, c):
        assert len(name) <= 200 and SAFE_NAME.match(name) and not name.startswith(".")
        with pytest.raises(ValueError):
            parse_instance_dir_name(name)
    assert a != b
    assert a == instance_dir_name("agent", "k" * 500)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "coder",
        "coder_default",
        "Coder__x",
        "a__b_zz",
        "a__b_4",
        "a__b/c",
        "x_2e__y",
        "a__b_2d",
        ".x__y",
        "a__\u00e9",
    ],
)
def test_parse_instance_dir_name_rejects_foreign_names(name: str) -> None:
    with pytest.raises(ValueError):
        parse_instance_dir_name(name)


@given(st.text(max_size=30))
def test_component_encoding_roundtrips(text: str) -> None:
    assert decode_component(encode_component(text)) == text


def test_extension_file_names_are_safe_and_distinct() -> None:
    assert component_file_name("compaction", ".json") == "compaction.json"
    names = {component_file_name(n, ".json") for n in ("a/b", "a_2fb", "A", "a", "", "_", "..", ".")}
    assert len(names) == 8
    for n in names:
        assert SAFE_NAME.match(n) and not n.startswith(".")
    assert len(component_file_name("x" * 1000, ".json")) <= 200
