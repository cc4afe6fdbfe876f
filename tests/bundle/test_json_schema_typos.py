"""Misspelt JSON Schema in a Tool's parameters or an Agent's output schema: a misspelt ``type`` is an
error naming the type meant, a near-miss of a keyword (``requird``) a warning at its line (JSON Schema
ignores unknown keywords, so the field it meant to require was silently optional)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bundle_testkit import MODEL_DOC, codes

from goondan.bundle import API_VERSION, ValidationReport, validate_bundle
from goondan.errors import ConfigIssue
from kit import write_bundle

CALC = "def add(ctx, args):\n    return 1\n\nhandlers = {'add': add}\n"


def check_tool(root: Path, parameters: dict[str, Any]) -> ValidationReport:
    export = {"name": "add", "description": "adds", "parameters": parameters}
    tool = {"apiVersion": API_VERSION, "kind": "Tool", "metadata": {"name": "calc"}}
    write_bundle(
        root, MODEL_DOC, {**tool, "spec": {"entry": "./calc.py", "exports": [export]}}, files={"calc.py": CALC}
    )
    return validate_bundle(root, env={})


def schema_warnings(report: ValidationReport) -> list[ConfigIssue]:
    return [w for w in report.warnings if w.code == "E_CONFIG_SCHEMA_INVALID"]  # not "no Swarm"


def test_a_misspelt_json_type_is_an_error_naming_the_type_meant(tmp_path: Path) -> None:
    report = check_tool(tmp_path, {"type": "object", "properties": {"a": {"type": "integr"}}})
    assert codes(report.errors) == ["E_CONFIG_SCHEMA_INVALID"]
    assert "'integr' is not a JSON type" in report.errors[0].message
    assert "did you mean 'integer'?" in report.errors[0].message


def test_a_near_miss_of_a_schema_keyword_is_a_warning_at_its_line(tmp_path: Path) -> None:
    parameters = {"type": "object", "properties": {"a": {"type": "integer", "descripton": "first"}}, "requird": ["a"]}
    report = check_tool(tmp_path, parameters)
    assert report.errors == []
    by_key = {w.path.rsplit(".", 1)[-1]: w for w in schema_warnings(report) if w.path}
    assert set(by_key) == {"descripton", "requird"}, [w.message for w in report.warnings]
    assert by_key["requird"].suggestion == "did you mean 'required'?"
    text = (tmp_path / "goondan.yaml").read_text().splitlines()
    assert text[(by_key["requird"].line or 0) - 1].strip().startswith("requird:")


def test_annotations_that_are_no_keyword_typo_pass_silently(tmp_path: Path) -> None:
    parameters = {"type": "object", "x-unit": "cm", "properties": {"a": {"type": "integer", "example": 3}}}
    report = check_tool(tmp_path, parameters)
    assert (report.errors, schema_warnings(report)) == ([], [])


def test_an_agents_output_schema_is_checked_the_same_way(tmp_path: Path) -> None:
    spec = {"modelConfig": {"modelRef": "Model/m"}, "output": {"schema": {"type": "object", "propertes": {}}}}
    agent = {"apiVersion": API_VERSION, "kind": "Agent", "metadata": {"name": "a"}, "spec": spec}
    write_bundle(tmp_path, MODEL_DOC, agent)
    (warning,) = schema_warnings(validate_bundle(tmp_path, env={}))
    assert warning.path is not None and warning.path.endswith("spec.output.schema.propertes")
    assert warning.suggestion == "did you mean 'properties'?"


def test_a_required_name_missing_from_properties_is_a_warning_naming_the_near_property(tmp_path: Path) -> None:
    """A property renamed with ``required`` left behind: the model is asked for a field nobody
    described (with ``additionalProperties: false`` no call could ever pass)."""
    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "mode": {"type": "string"}},
        "required": ["path", "paht", "size"],
    }
    report = check_tool(tmp_path, parameters)
    assert report.errors == []
    by_path = {w.path.rsplit(".", 1)[-1]: w for w in schema_warnings(report) if w.path}
    assert set(by_path) == {"required[1]", "required[2]"}, [w.message for w in report.warnings]
    assert "'paht' is required but not in properties (properties: 'path', 'mode')" in by_path["required[1]"].message
    assert (by_path["required[1]"].suggestion or "").startswith("did you mean 'path'?")
    assert by_path["required[2]"].suggestion == "add it to properties or remove it from required"


def test_required_names_of_nested_objects_are_checked_and_complete_ones_pass(tmp_path: Path) -> None:
    nested = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["b"]}
    parameters = {"type": "object", "properties": {"inner": nested, "x": {"type": "string"}}, "required": ["x"]}
    (warning,) = schema_warnings(check_tool(tmp_path, parameters))
    assert warning.path is not None and warning.path.endswith("parameters.properties.inner.required[0]")


def test_an_invalid_schema_is_reported_at_the_offending_keywords_line_with_a_suggestion(tmp_path: Path) -> None:
    """The error pointed at the schema's first line (a 40-line schema left the user searching)."""
    parameters = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "minLength": "3"}}}
    report = check_tool(tmp_path, parameters)
    (issue,) = report.errors
    assert issue.path is not None and issue.path.endswith("parameters.properties.b.minLength"), issue.path
    text = (tmp_path / "goondan.yaml").read_text().splitlines()
    assert "minLength" in text[(issue.line or 0) - 1], (issue.line, text)
    assert issue.suggestion and "JSON Schema Draft 2020-12" in issue.suggestion
    typo = check_tool(tmp_path, {"type": "object", "properties": {"a": {"type": "integr"}}}).errors[0]
    assert typo.suggestion == "did you mean 'integer'?"
