"""The retry policy shared by the network providers (models/_retry.py)."""

from __future__ import annotations

import email.utils
import random
import socket
import time
from typing import Any

import pytest

from goondan.models import ProviderError, create_model_adapter
from goondan.models._options import NetworkOptions
from goondan.models._retry import backoff_delay, parse_retry_after

from .conftest import request, run
from .fake_http import Reply


def test_retry_after_is_read_as_milliseconds_seconds_or_an_http_date() -> None:
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 27 <= (parse_retry_after({"retry-after": date}) or 0) <= 30
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    options = NetworkOptions(retry_base_delay=1.0, retry_max_delay=5.0)
    rng = random.Random(7)
    for index, ceiling in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 5.0), (10, 5.0)]:
        delays = [backoff_delay(index, options, rng) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert max(delays) - min(delays) > ceiling / 4  # actually jittered


def test_a_retry_after_longer_than_the_limit_fails_at_once(serve: Any) -> None:
    server = serve(lambda r: Reply(429, {"error": {"message": "quota"}}, {"retry-after": "120"}))
    model = create_model_adapter(
        "openai", model="m", options={"maxRetryAfterSeconds": 5}, api_key="k", endpoint=server.url + "/v1"
    )
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        run(model.generate(request([{"role": "user", "content": "a"}])))
    assert time.monotonic() - started < 2 and len(server.requests) == 1
    assert info.value.code == "E_MODEL_RATE_LIMITED" and "retry after 120s" in info.value.message


def test_an_endpoint_nobody_listens_on_is_a_connection_error_after_retries() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = create_model_adapter(
        "anthropic",
        model="m",
        options={"maxRetries": 2, "retryBaseDelaySeconds": 0.01},
        api_key="k",
        endpoint=f"http://127.0.0.1:{port}",
    )
    with pytest.raises(ProviderError) as info:
        run(model.generate(request([{"role": "user", "content": "a"}])))
    err = info.value
    assert (err.code, err.attempts, err.status) == ("E_MODEL_CONNECTION", 3, None)
    assert "endpoint" in (err.suggestion or "")
