from __future__ import annotations

from pathlib import Path

import pytest
from tools_testkit import FakeCtx


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "workdir"
    path.mkdir()
    return path


@pytest.fixture
def ctx(workdir: Path) -> FakeCtx:
    return FakeCtx(workdir=workdir)
