"""The PostgreSQL store's fold when the writer does not hear how its commit ended (the connection
died right after the server committed): the next commit rewrites instead of appending at offsets
that are already taken - nothing twice, nothing lost. (A commit that never landed leaves the events,
which the rewrite folds the same way.)"""

from __future__ import annotations

import pytest

import goondan.storage._postgres._instance as pg_instance
from goondan.errors import StorageError
from goondan.messages import append_event
from goondan.storage import open_store
from goondan.testing.store_conformance import expected, msg, records


def test_a_commit_that_landed_without_a_reply_is_followed_by_a_commit_that_applies_nothing_twice(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = open_store(postgres_url, state_root="/nonexistent")
    store = backend.workspace("ws").instance("agent", "k")
    store.load()
    a1, a2, b1 = msg("a1"), msg("a2"), msg("b1")
    for m in (a1, a2):
        store.append_event(append_event(m))

    def lost_reply(name: str) -> None:
        if name == "pg_after_commit":
            raise StorageError("E_STORE_UNAVAILABLE", "the connection died before the reply")

    monkeypatch.setattr(pg_instance, "crash_point", lost_reply)  # the server committed, no reply came
    with pytest.raises(StorageError):
        store.commit([a1, a2], [a1, a2])
    monkeypatch.setattr(pg_instance, "crash_point", lambda name: None)
    store.append_event(append_event(b1))
    store.commit([a1, a2, b1], [a1, a2, b1])  # the runtime folds everything it has not seen committed
    store.close()
    again = backend.workspace("ws").instance("agent", "k")
    loaded = again.load()
    assert records(loaded.base) == expected([["append", "a1"], ["append", "a2"], ["append", "b1"]])
    assert loaded.events == []
    again.close()
    backend.close()  # type: ignore[attr-defined]
