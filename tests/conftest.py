"""Shared by every test directory. Being at the top of ``tests/``, this file puts ``tests/`` on
``sys.path`` (pytest's default import mode), which is what makes ``import kit`` work everywhere."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import kit


@pytest.fixture(autouse=True)
def _reset_kit() -> Iterator[None]:
    """The model hook is module state: no test sees the previous test's model or records."""
    kit.reset()
    yield
    kit.reset()
