"""Swarm.spec.telemetry (OpenTelemetry export): mistakes are reported by `gdn validate` at the field,
with its line, like every other field; a valid setting loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bundle_testkit import MODEL_DOC, check, only

from kit import agent_yaml

SWARM_HEAD = (
    "apiVersion: goondan.ai/v1\nkind: Swarm\nmetadata:\n  name: s\nspec:\n  entryAgent: Agent/a\n  agents: [Agent/a]\n"
)


def _bundle(telemetry: str) -> dict[str, str]:
    # the Swarm document starts on line 17 (Model 10 lines, ---, Agent 4 lines, ---); telemetry: is on line 24
    return {"goondan.yaml": MODEL_DOC + "---\n" + agent_yaml("a") + "---\n" + SWARM_HEAD + "  telemetry:\n" + telemetry}


def test_a_valid_setting_loads(tmp_path: Path) -> None:
    setting = (
        "    otlp:\n"
        "      endpoint: https://cloud.langfuse.com/api/public/otel\n"
        "      serviceName: support-swarm\n"
        "      headers:\n"
        "        Authorization: {valueFrom: {env: LANGFUSE_AUTH}}\n"
        "        x-team: {value: core}\n"
    )
    report = check(tmp_path, _bundle(setting), env={"LANGFUSE_AUTH": "Basic x"})  # unset: E_CONFIG_ENV_MISSING
    assert report.valid, report.errors


def test_an_endpoint_that_is_not_an_http_url_is_reported_at_its_line(tmp_path: Path) -> None:
    report = check(tmp_path, _bundle("    otlp:\n      endpoint: localhost:4317\n"))
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#2.spec.telemetry.otlp.endpoint"
    assert issue.line == 26
    assert "http(s) URL" in issue.message


def test_unknown_fields_and_bad_headers_are_each_reported(tmp_path: Path) -> None:
    setting = (
        "    otlp:\n"
        "      endpoint: http://localhost:4318\n"
        "      servicename: x\n"
        "      headers:\n"
        "        Bad Header: {value: x}\n"
    )
    report = check(tmp_path, _bundle(setting))
    by_path = {i.path: i for i in report.errors}
    unknown = by_path["goondan.yaml#2.spec.telemetry.otlp.servicename"]
    assert "serviceName" in (unknown.suggestion or "")
    header = by_path["goondan.yaml#2.spec.telemetry.otlp.headers.Bad Header"]
    assert header.line == 29 and "header name" in header.message


def test_a_header_value_must_be_a_value_source(tmp_path: Path) -> None:
    setting = "    otlp:\n      endpoint: http://localhost:4318\n      headers:\n        Authorization: Bearer x\n"
    issue = only(check(tmp_path, _bundle(setting)).errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#2.spec.telemetry.otlp.headers.Authorization"


def test_otlp_is_required_inside_telemetry(tmp_path: Path) -> None:
    issue = only(check(tmp_path, _bundle("    {}\n")).errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#2.spec.telemetry.otlp"


def test_gdn_validate_prints_the_problem_with_file_line_and_column(tmp_path: Path) -> None:
    from kit import write_files

    write_files(tmp_path, _bundle("    otlp:\n      endpoint: localhost:4317\n"))
    proc = subprocess.run(
        [sys.executable, "-m", "goondan", "validate", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 4
    assert "[E_CONFIG_SCHEMA_INVALID]" in proc.stdout + proc.stderr
    assert "goondan.yaml:26:7" in proc.stdout + proc.stderr
