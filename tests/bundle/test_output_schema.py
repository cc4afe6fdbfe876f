"""``Agent.spec.output``: the schema is checked when the bundle loads, with the file and line of the
problem, so a broken schema never reaches a turn."""

from __future__ import annotations

from pathlib import Path

import pytest
from bundle_testkit import MODEL_DOC, check, only
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goondan.bundle import load_bundle

AGENT = """---
apiVersion: goondan.ai/v1
kind: Agent
metadata:
  name: a
spec:
  modelConfig: {{modelRef: Model/m}}
  output:
{output}"""


def manifest(output: str) -> str:
    return MODEL_DOC + AGENT.format(output=output)


def agent_line(text: str, needle: str) -> int:
    return text.splitlines().index(needle) + 1


def test_output_schema_is_loaded_with_default_retries(tmp_path: Path) -> None:
    text = manifest("    schema: {type: object, required: [n], properties: {n: {type: integer}}}\n")
    report = check(tmp_path, {"goondan.yaml": text})
    assert not report.errors
    agent = load_bundle(tmp_path, env={}).get("Agent", "a")
    assert agent is not None
    output = agent.spec.output  # type: ignore[union-attr]
    assert output.json_schema["required"] == ["n"]
    assert output.retries == 2


def test_invalid_output_schema_is_a_config_error_at_its_line(tmp_path: Path) -> None:
    text = manifest("    schema: {type: objekt}\n")
    report = check(tmp_path, {"goondan.yaml": text})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path is not None and issue.path.endswith("spec.output.schema.type")  # the keyword itself
    assert "output.schema is not a valid JSON Schema" in issue.message
    assert "at type" in issue.message
    assert issue.line == agent_line(text, "    schema: {type: objekt}")


def test_output_schema_must_be_an_object(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": manifest("    schema: [1, 2]\n")})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path is not None and issue.path.endswith("spec.output.schema")


def test_output_without_schema_and_unknown_keys_are_rejected(tmp_path: Path) -> None:
    report = check(tmp_path / "a", {"goondan.yaml": manifest("    retries: 1\n")})
    paths = {issue.path for issue in report.errors}
    assert any(p and p.endswith("spec.output.schema") for p in paths)
    report = check(tmp_path / "b", {"goondan.yaml": manifest("    retries: 1\n    shema: {}\n")})
    paths = {issue.path for issue in report.errors}
    assert any(p and p.endswith("spec.output.shema") for p in paths)


def test_a_misspelt_required_field_is_one_error_not_also_a_missing_one(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": manifest("    retries: 1\n    shema: {}\n")})
    (issue,) = report.errors
    assert issue.path is not None and issue.path.endswith("spec.output.shema")
    assert issue.suggestion is not None and issue.suggestion.startswith("did you mean 'schema'?")


@pytest.mark.parametrize("retries", ["-1", "11", "'2'", "true"])
def test_output_retries_must_be_a_small_whole_number(tmp_path: Path, retries: str) -> None:
    report = check(tmp_path, {"goondan.yaml": manifest(f"    schema: {{type: object}}\n    retries: {retries}\n")})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path is not None and issue.path.endswith("spec.output.retries")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "null"]), st.integers(0, 10))
def test_every_valid_json_schema_type_loads(tmp_path: Path, kind: str, retries: int) -> None:
    report = check(tmp_path, {"goondan.yaml": manifest(f"    schema: {{type: '{kind}'}}\n    retries: {retries}\n")})
    assert not report.errors
