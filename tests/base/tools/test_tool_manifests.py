"""The Tool resources of @goondan/base: they load, name real handlers and have closed schemas."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from tools_testkit import FakeCtx, run, tools_bundle

import goondan
from goondan._modules import import_path
from goondan.base.tools._common import ToolInputError

EXPECTED = {
    "bash": ({"exec", "script"}, 1200),
    "file-system": ({"read", "write", "list", "mkdir", "exists", "stat", "delete"}, 2000),
    "http-fetch": ({"get", "post"}, 1000),
    "json-query": ({"query", "pick", "count", "flatten"}, 1000),
    "text-transform": ({"replace", "slice", "split", "join", "trim", "case"}, 1000),
    "wait": ({"seconds"}, 600),
    "agents": ({"request", "send", "spawn", "list", "catalog"}, 1500),
    "self-restart": ({"request"}, 1000),
    "slack": ({"send", "read", "edit", "delete", "react", "upload", "downloadFile"}, 1000),
    # the Bot API cannot read a chat's history: no `read`
    "telegram": ({"send", "edit", "delete", "react", "setChatAction", "upload", "downloadFile"}, 1000),
}


Export = tuple[str, str, dict[str, Any], Any]


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    bundle = goondan.load_bundle(tools_bundle(tmp_path_factory.mktemp("manifests") / "b", {"a": []}))
    return {r.name: r for r in bundle.of_kind("Tool", package="@goondan/base")}


@pytest.fixture(scope="module")
def exports(tools: dict[str, Any]) -> list[Export]:
    out = []
    for name in EXPECTED:
        res = tools[name]
        handlers = import_path(res.entry_path()).handlers
        for export in res.raw["spec"]["exports"]:
            out.append((name, export["name"], export["parameters"], handlers.get(export["name"])))
    return out


def test_every_standard_tool_loads_with_its_exports_and_error_limit(tools: dict[str, Any]) -> None:
    assert set(EXPECTED) <= set(tools)
    for name, (exports, limit) in EXPECTED.items():
        spec = tools[name].raw["spec"]
        assert {e["name"] for e in spec["exports"]} == exports, name
        assert spec.get("errorMessageLimit", 1000) == limit, name


def test_every_export_has_a_handler_and_a_closed_schema(exports: list[Export]) -> None:
    for tool, export, params, handler in exports:
        label = f"{tool}__{export}"
        assert callable(handler), label
        assert params["type"] == "object", label
        assert params["additionalProperties"] is False, label
        assert set(params.get("required", [])) <= set(params.get("properties", {})), label
        assert export.strip(), label


def test_handlers_refuse_properties_their_schema_does_not_declare(exports: list[Export], workdir: Path) -> None:
    ctx = FakeCtx(workdir=workdir)
    for tool, export, _params, handler in exports:
        with pytest.raises(ToolInputError, match="unexpected argument\\(s\\) 'bogusArg'"):
            run(handler, ctx, {"bogusArg": 1})
        assert inspect.signature(handler).parameters, f"{tool}__{export}"


def test_handlers_accept_every_property_their_schema_declares(exports: list[Export], workdir: Path) -> None:
    """A property in the schema that the handler refuses would make a valid call fail."""
    for tool, export, params, handler in exports:
        for prop in params.get("properties", {}):
            try:
                run(handler, FakeCtx(workdir=workdir), {prop: object()})
            except ToolInputError as exc:
                assert "unexpected argument" not in exc.message, f"{tool}__{export}.{prop}"
            except Exception:
                pass


def test_agents_request_schema_has_async_and_required_target_input(tools: dict[str, Any]) -> None:
    res = tools["agents"]
    request = next(e for e in res.raw["spec"]["exports"] if e["name"] == "request")
    assert request["parameters"]["properties"]["async"]["type"] == "boolean"
    assert request["parameters"]["required"] == ["target", "input"]
