"""What only the in-memory store has to say: a holder that is garbage-collected gives its lease back
(as a dead process does on disk), and runtime events are bounded."""

from __future__ import annotations

import gc

import pytest

from goondan.errors import GoondanError
from goondan.storage import MemoryInstanceStore, MemorySpace, MemoryWorkspaceStore


def test_a_memory_holder_dropped_without_close_frees_its_lease() -> None:
    space = MemorySpace()
    holder = MemoryWorkspaceStore(space, "w")
    holder.instance("a", "k").load()
    with pytest.raises(GoondanError) as info:
        MemoryWorkspaceStore(space, "w").instance("a", "k").load()
    assert info.value.code == "E_INSTANCE_LOCKED"
    del holder
    gc.collect()
    store = MemoryWorkspaceStore(space, "w").instance("a", "k")
    store.load()
    assert store.lease_token == 2


def test_memory_runtime_events_keep_the_most_recent_ones() -> None:
    store = MemoryInstanceStore(agent_name="a", instance_key="k")
    for i in range(MemoryInstanceStore.MAX_RUNTIME_EVENTS + 5):
        store.append_runtime_event({"n": i}, owned=True)
    events = store.read_runtime_events()
    assert len(events) == MemoryInstanceStore.MAX_RUNTIME_EVENTS and events[0] == {"n": 5}


def test_an_idle_memory_instance_costs_no_runtime_event_buffer_until_its_first_event() -> None:
    """Most instances of a large swarm sit idle: an empty bounded deque per instance was ~880 bytes,
    a fifth of an idle inline agent. Measured as what 200 loaded, idle instances allocate."""
    import tracemalloc

    space = MemorySpace()
    workspace = MemoryWorkspaceStore(space, "w")
    warm = workspace.instance("a", "warm")
    warm.load()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        stores = [workspace.instance("a", f"k{i}") for i in range(200)]
        for store in stores:
            store.load()
        per_instance = (tracemalloc.get_traced_memory()[0] - before) / len(stores)
    finally:
        tracemalloc.stop()
    assert per_instance < 1500, per_instance  # 1,139 bytes; 1,946 with the eager deque
    store = stores[0]
    assert store.read_runtime_events() == []
    store.append_runtime_event({"type": "turn.started"})
    store.clear_history()
    assert store.read_runtime_events() == []
    store.append_runtime_event({"type": "turn.completed"}, owned=True)
    assert store.read_runtime_events() == [{"type": "turn.completed"}]
