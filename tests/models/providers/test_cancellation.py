"""Cancelling a streamed call (an interrupted turn, a shutdown) closes its HTTP connection for every
provider, and the pooled client is gone once the adapters that used it are closed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from goondan.models import create_model_adapter
from goondan.models._pool import live_clients

from . import test_anthropic, test_google, test_openai
from .conftest import request, run
from .fake_http import Reply

# provider -> (a streamed tool-call answer, endpoint suffix, events up to and including the first text delta)
STREAMS = {
    "openai": (test_openai.TOOL_STREAM, "/v1", 1),
    "anthropic": (test_anthropic.TOOL_STREAM, "", 4),
    "google": (test_google.TOOL_STREAM, "", 1),
}


@pytest.mark.parametrize("provider", sorted(STREAMS))
def test_cancelling_a_stream_closes_the_connection_and_releases_the_client(serve: Any, provider: str) -> None:
    events, suffix, first_text = STREAMS[provider]
    server = serve(lambda r: Reply(sse=events, stall_after_chunks=first_text))

    async def scenario() -> int:
        model = create_model_adapter(provider, model="m", options={}, api_key="k", endpoint=server.url + suffix)
        got = asyncio.Event()
        task = asyncio.create_task(
            model.generate(request([{"role": "user", "content": "a"}], on_text_delta=lambda d: got.set()))
        )
        await asyncio.wait_for(got.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await model.aclose()
        return live_clients()

    assert run(scenario()) == 0
    assert server.wait_for(lambda: server.closed_by_client == 1)
