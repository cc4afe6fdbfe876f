"""One typo, one error: a misspelt kind does not also make every reference to the resource an
E_CONFIG_REF_NOT_FOUND (the resource is remembered as the kind it is meant to be)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bundle_testkit import MODEL_DOC, check, codes, real_base_root

from goondan.bundle import _loader

AGENT_AND_SWARM = """---
apiVersion: goondan.ai/v1
kind: {kind}
metadata: {{name: helper}}
spec: {{modelConfig: {{modelRef: Model/m}}}}
---
apiVersion: goondan.ai/v1
kind: Swarm
metadata: {{name: default}}
spec: {{entryAgent: Agent/helper, agents: [Agent/helper]}}
"""


def test_a_misspelt_kind_is_one_error_not_also_missing_references(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + AGENT_AND_SWARM.format(kind="Agnet")})
    assert codes(report.errors) == ["E_CONFIG_UNKNOWN_KIND"], [e.message for e in report.errors]
    assert "did you mean 'Agent'?" in (report.errors[0].suggestion or "")


def test_a_kind_unlike_any_still_leaves_its_references_unresolved(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + AGENT_AND_SWARM.format(kind="Gadget")})
    assert codes(report.errors) == ["E_CONFIG_UNKNOWN_KIND", "E_CONFIG_REF_NOT_FOUND", "E_CONFIG_REF_NOT_FOUND"]


def test_a_misspelt_builtin_reference_suggests_the_builtin_with_its_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_loader, "base_package_root", real_base_root)  # the built-in connectors too
    connection = """---
apiVersion: goondan.ai/v1
kind: Connection
metadata: {name: http}
spec: {connectorRef: Connector/webhok}
"""
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + AGENT_AND_SWARM.format(kind="Agent") + connection})
    assert codes(report.errors) == ["E_CONFIG_REF_NOT_FOUND"], [e.message for e in report.errors]
    assert report.errors[0].suggestion == (
        "did you mean 'webhook'? (the built-in: reference it as "
        '{kind: Connector, name: webhook, package: "@goondan/base"})'
    )


def test_a_swarm_with_a_misspelt_field_is_not_also_reported_missing(tmp_path: Path) -> None:
    """`entryAgnet` made the Swarm invalid, and validation then also warned that the bundle 'defines
    no Swarm, so there is nothing to run' about a bundle whose Swarm is right there."""
    swarm = AGENT_AND_SWARM.format(kind="Agent").replace("{entryAgent:", "{entryAgnet:")
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + swarm})
    assert codes(report.errors) == ["E_CONFIG_SCHEMA_INVALID"], [e.message for e in report.errors]
    assert "did you mean 'entryAgent'?" in (report.errors[0].suggestion or "")
    assert report.warnings == [], [w.message for w in report.warnings]
