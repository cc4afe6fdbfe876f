from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def state_root(tmp_path: Path) -> Path:
    root = tmp_path / "state"
    root.mkdir()
    return root


@pytest.fixture(params=["inline", "process"])
def isolation(request: pytest.FixtureRequest) -> str:
    """Behaviour both modes must share runs once per mode."""
    return str(request.param)
