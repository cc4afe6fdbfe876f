from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import rt_testkit


@pytest.fixture(autouse=True)
def _reset_testkit() -> Iterator[None]:
    rt_testkit.reset()
    yield
    rt_testkit.reset()


@pytest.fixture
def state_root(tmp_path: Path) -> Path:
    root = tmp_path / "state"
    root.mkdir()
    return root
