from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tools_testkit import FakeCtx

from connectors.cn_testkit import FakeApi


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "workdir"
    path.mkdir()
    return path


@pytest.fixture
def ctx(workdir: Path) -> FakeCtx:
    return FakeCtx(workdir=workdir)


@pytest.fixture
def api() -> Iterator[FakeApi]:
    """A loopback fake platform API (Slack, Telegram) recording every request."""
    fake = FakeApi()
    yield fake
    fake.close()
