"""``Agent.spec.steering``: ``queue`` (the default) or ``inject``; anything else is a schema error
at the field, naming the allowed values."""

from __future__ import annotations

from pathlib import Path

from bundle_testkit import MODEL_DOC, check, only

AGENT = "apiVersion: goondan.ai/v1\nkind: Agent\nmetadata:\n  name: a\nspec:\n  modelConfig:\n    modelRef: Model/m\n"


def test_steering_accepts_queue_and_inject(tmp_path: Path) -> None:
    for value in ("queue", "inject"):
        report = check(tmp_path / value, {"goondan.yaml": MODEL_DOC + "---\n" + AGENT + f"  steering: {value}\n"})
        assert report.valid, report.errors


def test_an_unknown_steering_mode_is_rejected_at_the_field(tmp_path: Path) -> None:
    report = check(tmp_path, {"goondan.yaml": MODEL_DOC + "---\n" + AGENT + "  steering: sometimes\n"})
    issue = only(report.errors, "E_CONFIG_SCHEMA_INVALID")
    assert issue.path == "goondan.yaml#1.spec.steering"
    assert "'queue'" in issue.message and "'inject'" in issue.message
