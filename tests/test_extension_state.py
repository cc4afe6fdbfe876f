"""``api.state``: what an ExtensionState keeps per agent instance to tell a changed value."""

from __future__ import annotations

import asyncio
import tracemalloc
from typing import Any

from goondan.extensions import ExtensionState


class _Backend:
    def __init__(self, value: Any) -> None:
        self.value = value
        self.saved: list[Any] = []

    def load_extension_state(self, extension_name: str) -> Any | None:
        return self.value

    def save_extension_state(self, extension_name: str, value: Any) -> None:
        self.saved.append(value)


def _bytes_per_state(value: Any, n: int = 200) -> float:
    backend = _Backend(value)
    ExtensionState(backend, "warm")
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        keep = [ExtensionState(backend, "x") for _ in range(n)]
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(keep) == n
    return (after - before) / n


def test_a_state_snapshot_costs_its_own_size_not_the_encoders_buffer() -> None:
    # orjson returns its 4 KiB write buffer: kept per instance, that was most of an idle agent's memory
    assert _bytes_per_state(None) < 200
    assert _bytes_per_state({"count": 1, "names": ["a", "b"]}) < 300


def test_a_state_is_saved_once_per_change_also_after_the_snapshot_is_compacted() -> None:
    backend = _Backend(None)
    state = ExtensionState(backend, "x")
    assert not state.dirty and not state.save_if_changed()
    asyncio.run(state.set({"n": 1}))
    assert state.dirty and state.save_if_changed()
    assert not state.dirty and not state.save_if_changed()
    asyncio.run(state.set(None))
    assert state.save_if_changed() and not state.dirty
    assert backend.saved == [{"n": 1}, None]
