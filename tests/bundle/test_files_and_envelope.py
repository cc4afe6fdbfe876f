from __future__ import annotations

from pathlib import Path

import pytest
from bundle_testkit import MODEL_DOC, check, codes, only

from goondan.bundle import load_bundle, validate_bundle
from goondan.errors import ConfigError
from kit import agent_yaml

PACKAGE_DOC = "apiVersion: goondan.ai/v1\nkind: Package\nmetadata: {name: pkg}\nspec: {version: 0.1.0}\n"


def test_directory_without_goondan_yaml_is_not_a_bundle_and_a_missing_path_is_not_found(tmp_path: Path) -> None:
    report = validate_bundle(tmp_path, env={})
    assert codes(report.errors) == ["E_CONFIG_NOT_A_BUNDLE"]
    with pytest.raises(ConfigError) as info:
        load_bundle(tmp_path / "nowhere", env={})
    assert info.value.code == "E_CONFIG_FILE_NOT_FOUND"


def test_only_resource_file_names_are_loaded_and_build_dirs_skipped(tmp_path: Path) -> None:
    agent = agent_yaml("NAME")
    files = {
        "goondan.yaml": MODEL_DOC,
        "sub/Agents.YML": agent.replace("NAME", "found"),
        "notes.yaml": agent.replace("NAME", "ignored-name"),
        "dist/agents.yaml": "not: [valid",
        "node_modules/x/agents.yaml": "not: [valid",
        ".hidden/agents.yaml": "not: [valid",
        "resources.yaml": agent.replace("NAME", "also"),
    }
    report = check(tmp_path, files)
    assert report.valid, report.errors
    assert report.bundle is not None
    assert {r.name for r in report.bundle.of_kind("Agent")} == {"found", "also"}
    assert report.bundle.get("Agent", "found") is not None
    assert report.bundle.get("Agent", "found").file == "sub/Agents.YML"  # type: ignore[union-attr]


def test_file_over_one_mebibyte_is_too_large(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC, "tools.yaml": "# " + "x" * (1024 * 1024)})
    issue = only(report.errors, "E_CONFIG_FILE_TOO_LARGE")
    assert issue.file == "tools.yaml"


def test_more_than_one_hundred_documents_is_rejected(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + "---\n{}\n" * 101})
    issue = only(report.errors, "E_CONFIG_TOO_MANY_DOCUMENTS")
    assert issue.file == "goondan.yaml"


def test_parse_error_carries_parser_line_and_column_and_a_suggestion(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + "---\nkind: [Model\nmetadata: {}\n"})
    issue = only(report.errors, "E_CONFIG_PARSE_ERROR")
    assert (issue.file, issue.line) == ("goondan.yaml", 13)
    assert issue.column is not None
    assert issue.suggestion and "unclosed bracket" in issue.suggestion


def test_alias_bomb_is_a_parse_error(tmp_path: Path) -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 8):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        levels.append(f"a{i}: &a{i} [{refs}]")
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + "---\n" + "\n".join(levels) + "\n"})
    issue = only(report.errors, "E_CONFIG_PARSE_ERROR")
    assert "alias" in issue.message


def test_modest_alias_reuse_is_accepted(tmp_path: Path) -> None:
    text = MODEL_DOC.replace("  options:", "  capabilities: &caps {streaming: true}\n  options:")
    report = check(tmp_path, {"goondan.yaml": text})
    assert report.valid, report.errors


def test_duplicate_mapping_keys_are_an_error(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + "  model: y\n"})
    issue = only(report.errors, "E_CONFIG_PARSE_ERROR")
    assert "duplicate" in issue.message
    assert (issue.line, issue.column) == (11, 3)


def test_empty_documents_are_ignored(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": "---\n---\n" + MODEL_DOC + "---\n"})
    assert report.valid, report.errors


def test_non_mapping_document_is_schema_invalid(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + "---\n- just\n- a list\n"})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#1"
    assert (issue.line, issue.column) == (12, 1)


def test_document_without_kind_is_an_error_not_dropped(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + "---\napiVersion: goondan.ai/v1\nmetadata: {name: x}\n"})
    issue = only(report.errors, "E_CONFIG_KIND_MISSING")
    assert issue.path == "goondan.yaml#1"
    assert issue.line == 12


def test_unknown_kind_is_an_error_with_did_you_mean(tmp_path: Path) -> None:
    doc = "---\napiVersion: goondan.ai/v1\nkind: Agnet\nmetadata: {name: x}\nspec: {}\n"
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + doc})
    issue = only(report.errors, "E_CONFIG_UNKNOWN_KIND")
    assert issue.path == "goondan.yaml#1.kind"
    assert (issue.line, issue.column) == (13, 1)
    assert issue.suggestion is not None and "did you mean 'Agent'?" in issue.suggestion


def test_unsupported_api_version_suggests_goondan_ai_v1(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC.replace("goondan.ai/v1", "goondan.ai/v2")})
    issue = only(report.errors, "E_CONFIG_UNSUPPORTED_API_VERSION")
    assert issue.path == "goondan.yaml#0.apiVersion"
    assert (issue.line, issue.column) == (1, 1)
    assert "goondan.ai/v1" in (issue.suggestion or "")


def test_legacy_api_version_gets_a_migration_hint(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC.replace("goondan.ai/v1", "agents.example.io/v1alpha1")})
    issue = only(report.errors, "E_CONFIG_UNSUPPORTED_API_VERSION")
    assert "old" in (issue.suggestion or "") and "goondan.ai/v1" in (issue.suggestion or "")


@pytest.mark.parametrize("name", ["Upper", "1abc", "with_underscore", "a" * 64, "", "@scope/pkg"])
def test_invalid_resource_names_are_rejected(tmp_path: Path, name: str) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC.replace("name: m", f"name: '{name}'")})
    issue = only(report.errors, "E_CONFIG_INVALID_NAME")
    assert issue.path == "goondan.yaml#0.metadata.name"
    assert (issue.line, issue.column) == (4, 3)


def test_nameless_document_is_an_error_not_dropped(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC.replace("metadata:\n  name: m\n", "")})
    issue = only(report.errors, "E_CONFIG_INVALID_NAME")
    assert issue.path == "goondan.yaml#0"


def test_package_may_use_a_scoped_name(tmp_path: Path) -> None:
    pkg = 'apiVersion: goondan.ai/v1\nkind: Package\nmetadata: {name: "@acme/tools"}\nspec: {version: 1.2.3}\n'
    report = check(tmp_path, {"goondan.yaml": pkg + "---\n" + MODEL_DOC})
    assert report.valid, report.errors
    assert report.bundle is not None and report.bundle.package_name == "@acme/tools"


def test_labels_must_map_strings_to_strings(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC.replace("  name: m\n", "  name: m\n  labels: {tier: 1}\n")})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#0.metadata.labels"


def test_unknown_top_level_field_is_rejected(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + "status: {}\n"})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#0.status"
    assert (issue.line, issue.column) == (11, 1)


def test_package_doc_must_be_first_in_goondan_yaml(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + "---\n" + PACKAGE_DOC})
    issue = only(report.errors, "E_CONFIG_PACKAGE_DOC_POSITION")
    assert issue.path == "goondan.yaml#1.kind"


def test_package_doc_in_another_file_is_misplaced(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC, "resources.yaml": PACKAGE_DOC})
    issue = only(report.errors, "E_CONFIG_PACKAGE_DOC_POSITION")
    assert issue.file == "resources.yaml"


def test_second_package_doc_is_duplicated(tmp_path: Path) -> None:
    second = PACKAGE_DOC.replace("name: pkg", "name: other")
    report = check(tmp_path, {"goondan.yaml": PACKAGE_DOC + "---\n" + second + "---\n" + MODEL_DOC})
    issue = only(report.errors, "E_CONFIG_PACKAGE_DOC_DUPLICATED")
    assert issue.path == "goondan.yaml#1.kind"


def test_duplicate_kind_and_name_reports_both_locations(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC, "models.yaml": MODEL_DOC})
    issue = only(report.errors, "E_CONFIG_DUPLICATE_NAME")
    assert issue.path == "models.yaml#0.metadata.name"
    assert (issue.line, issue.column) == (4, 3)
    assert "goondan.yaml:4:3" in issue.message and "models.yaml:4:3" in issue.message


def test_same_name_with_different_kinds_is_fine(tmp_path: Path) -> None:
    agent = agent_yaml("m")
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + "---\n" + agent})
    assert report.valid, report.errors


def test_validate_reports_every_problem_at_once(tmp_path: Path) -> None:
    bad_kind = "apiVersion: goondan.ai/v1\nkind: Nope\nmetadata: {name: x}\n"
    bad_name = MODEL_DOC.replace("name: m", "name: Bad")
    report = check(tmp_path, {"goondan.yaml": bad_kind + "---\n" + bad_name, "tools.yaml": "a: [1"})
    assert sorted(codes(report.errors)) == [
        "E_CONFIG_INVALID_NAME",
        "E_CONFIG_PARSE_ERROR",
        "E_CONFIG_UNKNOWN_KIND",
    ]
