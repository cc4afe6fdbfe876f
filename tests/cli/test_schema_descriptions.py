"""`gdn schema` documents every resource kind and every field, so editors can show help while typing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli_testkit import gdn

from goondan.bundle._schemas import SPEC_MODELS
from goondan.cli._schema import build_schema


def _undescribed(node: Any, path: str) -> list[str]:
    """Properties without a description, walking schemas (a ``properties`` map holds schemas by name)."""
    missing: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for name, schema in value.items():
                    if isinstance(schema, dict) and "description" not in schema:
                        missing.append(f"{path}.{name}")
                    missing += _undescribed(schema, f"{path}.{name}")
            else:
                missing += _undescribed(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            missing += _undescribed(value, f"{path}[{i}]")
    return missing


def test_every_property_in_the_schema_has_a_description() -> None:
    assert _undescribed(build_schema(), "") == []


def test_every_kind_has_a_description() -> None:
    defs = build_schema()["$defs"]
    for kind, model in SPEC_MODELS.items():
        assert defs[model.__name__].get("description", "").startswith(f"{kind}:"), kind


def test_gdn_schema_output_carries_the_descriptions(tmp_path: Path) -> None:
    proc = gdn(tmp_path, "schema", "--kind", "Tool")
    assert proc.returncode == 0
    schema = json.loads(proc.stdout)
    tool = schema["$defs"]["ToolSpec"]
    assert "handlers" in tool["properties"]["entry"]["description"]
