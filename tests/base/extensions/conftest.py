from __future__ import annotations

from collections.abc import Iterator

import policy_kit
import pytest


@pytest.fixture(autouse=True)
def _reset_policy_kit() -> Iterator[None]:
    policy_kit.reset()
    yield
    policy_kit.reset()
