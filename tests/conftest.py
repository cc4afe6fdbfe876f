"""Shared by every test directory. Being at the top of ``tests/``, this file puts ``tests/`` on
``sys.path`` (pytest's default import mode), which is what makes ``import kit`` work everywhere."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import kit
from kit.postgres import postgres_server, postgres_url  # noqa: F401  (fixtures: a real PostgreSQL)
from kit.ray_cluster import ray_session  # noqa: F401  (fixture: one local Ray for the session)


@pytest.fixture(autouse=True)
def _reset_kit() -> Iterator[None]:
    """The model hook is module state: no test sees the previous test's model or records."""
    kit.reset()
    yield
    kit.reset()


@pytest.fixture
def state_root(tmp_path: Path) -> Path:
    """An empty state root (``GOONDAN_STATE_ROOT``) inside the test's tmp_path."""
    root = tmp_path / "state"
    root.mkdir()
    return root


# Every executor the shared executor suite runs against (``executor`` fixture); a new executor is
# added here and every test taking the fixture runs against it too.
EXECUTORS = ("inline", "process", "ray")


@pytest.fixture(params=EXECUTORS)
def executor(request: pytest.FixtureRequest) -> str:
    """An executor name: a test taking it runs once per executor and must behave the same in each.
    ``ray`` runs on the session's one local Ray (``ray_session``)."""
    name = str(request.param)
    if name == "ray":
        request.getfixturevalue("ray_session")
    return name
