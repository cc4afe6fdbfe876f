from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import tools_testkit
from tools_testkit import FakeCtx


@pytest.fixture(autouse=True)
def _reset_kit() -> Iterator[None]:
    tools_testkit.reset()
    yield
    tools_testkit.reset()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "workdir"
    path.mkdir()
    return path


@pytest.fixture
def ctx(workdir: Path) -> FakeCtx:
    return FakeCtx(workdir=workdir)
