"""What a bundle is: the goondan.yaml PATH names and the resource files beside it, not nested bundles."""

from __future__ import annotations

from pathlib import Path

from bundle_testkit import MODEL_DOC, check, codes

from goondan.bundle import validate_bundle
from kit import agent_yaml, write_files

SWARM = (
    "apiVersion: goondan.ai/v1\nkind: Swarm\nmetadata: {name: default}\n"
    "spec: {entryAgent: Agent/main, agents: [Agent/main]}\n"
)


def _bundle(root: Path) -> Path:
    return write_files(root, {"goondan.yaml": MODEL_DOC + "---\n" + agent_yaml("main") + "---\n" + SWARM})


def test_nested_bundle_below_the_root_is_not_merged_in(tmp_path: Path) -> None:
    _bundle(tmp_path)
    broken = "apiVersion: goondan.ai/v1\nkind: Agent\nmetadata: {name: main}\nspec: {}\n"
    write_files(tmp_path, {"examples/other/goondan.yaml": broken, "examples/other/tools/tools.yaml": broken})
    report = validate_bundle(tmp_path, env={})
    assert report.valid, report.errors
    assert report.bundle is not None
    assert [r.file for r in report.bundle.of_kind("Agent")] == ["goondan.yaml"]


def test_resource_files_in_plain_subdirectories_are_still_loaded(tmp_path: Path) -> None:
    _bundle(tmp_path)
    write_files(tmp_path, {"sub/agents.yaml": agent_yaml("extra")})
    report = check(tmp_path, {})
    assert report.valid, report.errors
    assert report.bundle is not None and report.bundle.get("Agent", "extra") is not None


def test_a_file_that_is_not_goondan_yaml_is_not_a_bundle(tmp_path: Path) -> None:
    _bundle(tmp_path)
    (tmp_path / "README.md").write_text("# hello\n\n- a: [\n")
    report = validate_bundle(tmp_path / "README.md", env={})
    assert codes(report.errors) == ["E_CONFIG_NOT_A_BUNDLE"]
    assert str(tmp_path) in (report.errors[0].suggestion or "")


def test_goondan_yaml_given_as_path_is_the_bundle(tmp_path: Path) -> None:
    _bundle(tmp_path)
    assert validate_bundle(tmp_path / "goondan.yaml", env={}).valid


def test_directory_without_manifest_names_the_bundles_below_it(tmp_path: Path) -> None:
    _bundle(tmp_path / "inner")
    report = validate_bundle(tmp_path, env={})
    assert codes(report.errors) == ["E_CONFIG_NOT_A_BUNDLE"]
    assert "inner" in (report.errors[0].suggestion or "")


def test_missing_path_is_file_not_found(tmp_path: Path) -> None:
    assert codes(validate_bundle(tmp_path / "nowhere", env={}).errors) == ["E_CONFIG_FILE_NOT_FOUND"]


def test_empty_goondan_yaml_is_an_error_with_a_suggestion(tmp_path: Path) -> None:
    for text in ("", "# only a comment\n", "---\n---\n"):
        (tmp_path / "goondan.yaml").write_text(text)
        report = validate_bundle(tmp_path, env={})
        assert codes(report.errors) == ["E_CONFIG_EMPTY_BUNDLE"], text
        assert "gdn init" in (report.errors[0].suggestion or "")
