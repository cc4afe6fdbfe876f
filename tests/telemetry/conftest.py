from __future__ import annotations

from collections.abc import Iterator

import otel_kit
import pytest


@pytest.fixture
def otlp() -> Iterator[otel_kit.Receiver]:
    """A real OTLP/HTTP receiver on 127.0.0.1 for this test."""
    yield from otel_kit.receiver()
