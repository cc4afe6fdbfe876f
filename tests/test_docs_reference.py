"""The site's reference pages are generated from the code (docs/_hooks/reference.py), so they cover
everything the code has: every kind and field ``gdn schema`` emits, every built-in resource and
config option, every CLI command, every runtime event, and a page for every error code at the URL
the ``help:`` line of a GoondanError prints."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from goondan.errors import help_url_for

ROOT = Path(__file__).resolve().parents[1]


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", ROOT / "docs" / "_hooks" / "reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOK = _hook()


def _property_names(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                found.update(value)
                for schema in value.values():
                    found |= _property_names(schema)
            else:
                found |= _property_names(value)
    elif isinstance(node, list):
        for item in node:
            found |= _property_names(item)
    return found


def test_the_resources_page_lists_every_kind_and_field_of_the_schema() -> None:
    from goondan.cli._schema import build_schema

    page = HOOK.resources_page()
    schema = build_schema()
    for kind in schema["properties"]["kind"]["enum"]:
        assert f"`{kind}`" in page
    missing = sorted(name for name in _property_names(schema) if not re.search(rf"`([\w.]+\.)?{name}`", page))
    assert missing == []


def test_the_builtins_page_lists_every_base_resource_and_config_option() -> None:
    page = HOOK.builtins_page()
    for doc in HOOK._base_documents():
        if doc["kind"] in ("Tool", "Extension", "Connector"):
            assert f"### {doc['metadata']['name']}" in page
        for export in doc["spec"].get("exports", []):
            assert f"`{doc['metadata']['name']}__{export['name']}`" in page
    from goondan.base.extensions.message_window import CONFIG_SCHEMA

    assert "`maxMessages`" in page and set(CONFIG_SCHEMA["properties"]) == {"maxMessages"}


def test_the_cli_page_has_every_command_of_the_parser() -> None:
    import argparse

    from goondan.cli._parser import build_parser

    page = HOOK.cli_page()
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name in sub.choices:
        assert f"`gdn {name}`" in page, name


def test_the_events_page_describes_every_runtime_event() -> None:
    from goondan.extensions import RUNTIME_EVENT_TYPES

    page = HOOK.events_page()
    for event in (*RUNTIME_EVENT_TYPES, "approval.requested", "approval.decided"):
        assert f"## `{event}`" in page


def test_every_documented_error_code_has_a_page_where_its_help_link_points() -> None:
    first_cells = re.findall(r"^\|([^|]*)\|", (ROOT / "docs" / "errors.md").read_text(), re.M)
    documented = {code for cell in first_cells for code in re.findall(r"`([A-Z][A-Z0-9_]+)`", cell)}
    pages = HOOK.error_pages()
    assert set(pages) == documented
    site_url = yaml.safe_load(
        "\n".join(line for line in (ROOT / "mkdocs.yml").read_text().splitlines() if line.startswith("site_url:"))
    )["site_url"]
    for code in sorted(documented)[:5]:
        # mkdocs publishes docs/errors/<CODE>.md at <site_url>errors/<CODE>/
        assert help_url_for(code).rstrip("/") == f"{site_url}errors/{code}"
        assert code in pages[code]
