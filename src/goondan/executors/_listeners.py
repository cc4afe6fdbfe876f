"""Runtime-event and text-delta subscriptions, the same for every executor.

The lists are handed to whatever emits the records (an inline instance, the orchestrator) by
reference, so a listener added after start is seen by the next record."""

from __future__ import annotations

from collections.abc import Callable

from ._protocol import RuntimeEventListener


class Listeners:
    def __init__(self) -> None:
        self.events: list[RuntimeEventListener] = []
        self.deltas: list[RuntimeEventListener] = []

    def on_runtime_event(self, listener: RuntimeEventListener) -> Callable[[], None]:
        return _subscribe(self.events, listener)

    def on_text_delta(self, listener: RuntimeEventListener) -> Callable[[], None]:
        return _subscribe(self.deltas, listener)


def _subscribe(listeners: list[RuntimeEventListener], listener: RuntimeEventListener) -> Callable[[], None]:
    listeners.append(listener)

    def off() -> None:
        if listener in listeners:
            listeners.remove(listener)

    return off


__all__ = ["Listeners"]
