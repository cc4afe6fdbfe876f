"""A connection failure names the endpoint the adapter tried, without credentials (issue 11)."""

from __future__ import annotations

import socket

import pytest

from goondan.models import ProviderError, create_model_adapter

from .conftest import request, run


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("provider", ["openai", "anthropic", "google"])
def test_connection_error_names_the_endpoint_without_credentials(provider: str) -> None:
    pytest.importorskip({"openai": "openai", "anthropic": "anthropic", "google": "google.genai"}[provider])
    port = _closed_port()
    endpoint = f"http://user:s3cret-pass@127.0.0.1:{port}/v1?token=hidden"
    model = create_model_adapter(
        provider, model="m", options={"maxRetries": 0, "timeoutSeconds": 5}, api_key="sk-test-key", endpoint=endpoint
    )

    async def go() -> None:
        try:
            await model.generate(request([{"role": "user", "content": "hi"}]))
        finally:
            await model.aclose()

    with pytest.raises(ProviderError) as info:
        run(go())
    assert info.value.code == "E_MODEL_CONNECTION"
    assert f"127.0.0.1:{port}" in info.value.message
    assert "s3cret-pass" not in info.value.message and "hidden" not in info.value.message
