"""Runtime-event and text-delta subscriptions, the same for every executor.

The lists are handed to whatever emits the records (an inline instance, the orchestrator) by
reference, so a listener added after start is seen by the next record. ``changed`` (set by an
executor whose instances run elsewhere) is called after every subscribe and unsubscribe: agent
processes only send the records while someone in the host listens, and are told when that changes."""

from __future__ import annotations

from collections.abc import Callable

from ._protocol import RuntimeEventListener


class Listeners:
    def __init__(self) -> None:
        self.events: list[RuntimeEventListener] = []
        self.deltas: list[RuntimeEventListener] = []
        self.changed: Callable[[], None] | None = None

    def on_runtime_event(self, listener: RuntimeEventListener) -> Callable[[], None]:
        return self._subscribe(self.events, listener)

    def on_text_delta(self, listener: RuntimeEventListener) -> Callable[[], None]:
        return self._subscribe(self.deltas, listener)

    def _subscribe(self, listeners: list[RuntimeEventListener], listener: RuntimeEventListener) -> Callable[[], None]:
        listeners.append(listener)
        self._notify()

        def off() -> None:
            if listener in listeners:
                listeners.remove(listener)
                self._notify()

        return off

    def _notify(self) -> None:
        if self.changed is not None:
            self.changed()


__all__ = ["Listeners"]
