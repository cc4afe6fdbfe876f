"""Event-sourced conversation state: ``next_messages = base_messages + SUM(events)``.

The state is maintained incrementally: emitting an event applies it to the current ``next`` list in
place (O(1) for appends), so a turn never re-folds the whole history. :func:`fold_events` is the
reference (from-scratch) fold; the property tests check that both always agree.

Messages enter the state as frozen deep copies (``FrozenDict``/``FrozenList``), so reading is free
and nobody can change stored history behind the event log's back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, overload

from ._json import MAX_RECORD_DEPTH, encoded_size, freeze_json, repair_json
from .errors import GoondanError
from .messages import Message, MessageEvent, check_message_event

Warning_ = dict[str, Any]


def freeze_message(message: Message) -> Message:
    """A private, immutable-content copy of ``message`` for storage in the state."""
    return Message(
        message.id,
        freeze_json(message.data),
        freeze_json(message.metadata),
        message.created_at,
        freeze_json(message.source),
    )


def storable_message(message: Message) -> Message:
    """``message`` (frozen) as it can be stored: unchanged when it encodes, else repaired — integers
    beyond 64 bits become decimal strings, lone surrogates U+FFFD (:func:`~goondan._json.repair_json`).
    Extensions build messages from arbitrary values; refusing one would abort the turn midway."""
    if encoded_size((message.data, message.metadata, message.source)) is not None:
        return message
    return Message(
        message.id,
        freeze_json(repair_json(message.data, MAX_RECORD_DEPTH)),
        freeze_json(repair_json(message.metadata, MAX_RECORD_DEPTH)),
        message.created_at,
        freeze_json(repair_json(message.source, MAX_RECORD_DEPTH)),
    )


def _duplicate_id(message_id: str) -> GoondanError:
    return GoondanError(
        "E_MESSAGE_DUPLICATE_ID",
        f"a message with id {message_id!r} is already in the conversation",
        suggestion="Build new messages with goondan.messages helpers, which assign fresh ids.",
    )


def handle(message: Message) -> Message:
    """What readers get: a fresh Message object over the frozen contents (so rebinding its
    attributes cannot touch the state) — far cheaper than a deep copy."""
    return Message(message.id, message.data, message.metadata, message.created_at, message.source)


class _SnapshotView:
    """Shared base of the read-only views: a snapshot of the first ``n`` items of a list.

    Creating a view costs O(1): it remembers the list and its length. The conversation state marks
    its list as shared while views may exist and copies it before any in-place change other than an
    append (copy-on-write), so a view never changes after it was taken — a model that keeps its
    ``request.messages`` keeps exactly what it was given.
    """

    __slots__ = ("_items", "_n")

    def __init__(self, items: list[Any], n: int | None = None) -> None:
        self._items = items
        self._n = len(items) if n is None else n

    def __len__(self) -> int:
        return self._n

    def _index(self, index: int) -> int:
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("view index out of range")
        return index


class MessagesView(_SnapshotView, Sequence[Message]):
    """Read-only snapshot of stored messages; items are cheap handles over frozen contents."""

    __slots__ = ()

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return self._slice(index)
        n = self._n  # _index spelled out: the model reads messages[-1] every step
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("view index out of range")
        return handle(self._items[index])

    def _slice(self, index: slice) -> list[Message]:
        # apart from __getitem__: its comprehension would make ``self`` a cell on every index read
        return [handle(self._items[i]) for i in range(self._n)[index]]

    def __iter__(self) -> Iterator[Message]:
        items = self._items
        for i in range(self._n):
            yield handle(items[i])

    def __repr__(self) -> str:
        return f"MessagesView({self._n} messages)"

    @property
    def ids(self) -> list[str]:
        items = self._items
        return [items[i].id for i in range(self._n)]


class LlmMessagesView(_SnapshotView, Sequence[dict[str, Any]]):
    """Read-only snapshot of the core-message dicts (``message.data``). It is a ``Sequence``
    (index, slice, iterate, ``len``); ``list(view)`` gives a plain list, e.g. for ``json.dumps``."""

    __slots__ = ()

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return self._slice(index)
        n = self._n  # _index spelled out: the model reads messages[-1] every step
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("view index out of range")
        data: dict[str, Any] = self._items[index].data
        return data

    def _slice(self, index: slice) -> list[dict[str, Any]]:
        # apart from __getitem__: its comprehension would make ``self`` a cell on every index read
        return [self._items[i].data for i in range(self._n)[index]]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        items = self._items
        for i in range(self._n):
            yield items[i].data

    def __repr__(self) -> str:
        return f"LlmMessagesView({self._n} messages)"


class EventsView(_SnapshotView, Sequence[dict[str, Any]]):
    """Read-only, ordered snapshot of this turn's message events."""

    __slots__ = ()

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [_event_handle(self._items[i]) for i in range(self._n)[index]]
        return _event_handle(self._items[self._index(index)])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        items = self._items
        for i in range(self._n):
            yield _event_handle(items[i])


def _event_handle(event: dict[str, Any]) -> dict[str, Any]:
    out = dict(event)
    msg = out.get("message")
    if isinstance(msg, Message):
        out["message"] = handle(msg)
    return out


def target_missing_warning(event_index: int, target_id: str, event_type: str) -> Warning_:
    return {
        "code": "E_MESSAGE_TARGET_NOT_FOUND",
        "message": f"{event_type} event #{event_index} targets message {target_id!r}, which does not exist; skipped",
        "eventIndex": event_index,
        "targetId": target_id,
    }


def _find(items: list[Message], target_id: str) -> int:
    for i in range(len(items) - 1, -1, -1):  # recent messages are the usual targets
        if items[i].id == target_id:
            return i
    return -1


def apply_event(items: list[Message], event: dict[str, Any], event_index: int) -> Warning_ | None:
    """Apply one checked event to ``items`` in place; return a warning if its target is missing."""
    etype = event["type"]
    if etype == "append":
        items.append(event["message"])
        return None
    if etype == "truncate":
        items.clear()
        return None
    target = event["targetId"]
    pos = _find(items, target)
    if pos < 0:
        return target_missing_warning(event_index, target, etype)
    if etype == "replace":
        items[pos] = event["message"]
    else:
        del items[pos]
    return None


def fold_events(base: Iterable[Message], events: Iterable[dict[str, Any]]) -> tuple[list[Message], list[Warning_]]:
    """Reference fold: apply ``events`` in order to a copy of ``base``."""
    items = list(base)
    warnings: list[Warning_] = []
    for index, event in enumerate(events):
        w = apply_event(items, event, index)
        if w is not None:
            warnings.append(w)
    return items, warnings


EventSink = Callable[[dict[str, Any]], None]


class ConversationState:
    """The conversation of one agent instance during a turn (docs/architecture.md#message-events).

    ``base_messages``, ``events`` and ``next_messages`` are read-only views; changes go through
    :meth:`emit` (exposed to middleware as ``ctx.emit_message_event``).
    """

    __slots__ = ("_append_only", "_appended", "_base", "_events", "_ids", "_next", "_shared", "_sink", "warnings")

    def __init__(
        self,
        base: Iterable[Message] = (),
        events: Iterable[dict[str, Any]] = (),
        *,
        sink: EventSink | None = None,
    ) -> None:
        self._base: list[Message] = [freeze_message(m) for m in base]
        self._next: list[Message] = list(self._base)
        self._events: list[dict[str, Any]] = []
        self._ids: dict[str, int] = {}
        for m in self._next:
            self._ids[m.id] = self._ids.get(m.id, 0) + 1
        self._appended: list[Message] = []
        self._append_only = True
        self._shared = False
        self.warnings: list[Warning_] = []
        self._sink: EventSink | None = None
        # residual events recovered from disk are replayed without being written again
        for event in events:
            checked = check_message_event(event, copy=False)
            if checked.get("message") is not None:
                checked["message"] = freeze_message(checked["message"])
            self._apply(checked)
        self._sink = sink

    # --- read side -------------------------------------------------------------------------

    @property
    def base_messages(self) -> MessagesView:
        return MessagesView(self._base)

    @property
    def events(self) -> EventsView:
        return EventsView(self._events)

    @property
    def next_messages(self) -> MessagesView:
        self._shared = True
        return MessagesView(self._next)

    def to_llm_messages(self) -> LlmMessagesView:
        self._shared = True
        return LlmMessagesView(self._next)

    def __len__(self) -> int:
        return len(self._next)

    def has_message(self, message_id: str) -> bool:
        return message_id in self._ids

    def last_message(self) -> Message | None:
        return handle(self._next[-1]) if self._next else None

    def last_stored(self) -> Message | None:
        """The last message as stored (frozen contents, no fresh handle): for the engine's own
        reads on every turn; never handed to user code, which gets :meth:`last_message`."""
        return self._next[-1] if self._next else None

    # --- write side ------------------------------------------------------------------------

    def emit(self, event: MessageEvent, *, trusted: bool = False) -> None:
        """Validate, persist (through the sink) and apply one message event. The stored message is
        a frozen copy, so the caller keeps no alias into the state."""
        checked = check_message_event(event, copy=False, trusted=trusted)
        msg = checked.get("message")
        if msg is not None:
            checked["message"] = msg = storable_message(freeze_message(msg))
            replaced = checked.get("targetId")
            if msg.id in self._ids and msg.id != replaced:
                raise _duplicate_id(msg.id)
        if self._sink is not None:
            self._sink(checked)
        self._apply(checked)

    def unanswered_tool_calls(self) -> list[tuple[int, list[dict[str, Any]]]]:
        """Every assistant message whose tool calls lack results in the tool messages right after
        it, as ``(index, missing tool-call parts)``. A provider rejects such a history; it exists only
        when a process died or an older version aborted a turn between a call and its result."""
        items = self._next
        found: list[tuple[int, list[dict[str, Any]]]] = []
        n = len(items)
        for i in range(n):
            data = items[i].data
            if data.get("role") != "assistant":
                continue
            content = data.get("content")
            if not isinstance(content, list):
                continue
            calls = [p for p in content if p.get("type") == "tool-call"]
            if not calls:
                continue
            answered: set[Any] = set()
            j = i + 1
            while j < n and items[j].data.get("role") == "tool":
                tool_content = items[j].data.get("content")
                if isinstance(tool_content, list):
                    answered.update(p.get("toolCallId") for p in tool_content if p.get("type") == "tool-result")
                j += 1
            missing = [p for p in calls if p.get("toolCallId") not in answered]
            if missing:
                found.append((i, missing))
        return found

    def append_trusted(self, message: Message) -> None:
        """Append a message the runtime built itself (well-formed, fresh id): the same as emitting
        an ``append`` event, minus the shape checks, and free of copies when its contents are
        already frozen. The state keeps a Message object of its own: the caller may keep ``message``."""
        self.append_owned(freeze_message(message))

    def append_owned(self, msg: Message) -> None:
        """:meth:`append_trusted` for a message the caller hands over: its contents are frozen
        already (built by :mod:`goondan.engine._messages`) and the caller neither keeps nor shows
        the object (what it shows is a copy, e.g. :func:`handle`), so no Message is made here. The
        turn loop appends about four messages per turn this way."""
        mid = msg.id
        ids = self._ids
        if mid in ids:
            raise _duplicate_id(mid)
        event = {"type": "append", "message": msg}
        sink = self._sink
        if sink is not None:
            sink(event)
        self._next.append(msg)
        ids[mid] = 1  # not there before (checked above)
        self._appended.append(msg)
        self._events.append(event)

    def _apply(self, event: dict[str, Any]) -> None:
        index = len(self._events)
        etype = event["type"]
        items = self._next
        warning: Warning_ | None = None
        if etype == "append":
            msg = event["message"]
            items.append(msg)
            self._ids[msg.id] = self._ids.get(msg.id, 0) + 1
            self._appended.append(msg)
        elif etype == "truncate":
            self._next = []  # a fresh list: views taken earlier keep what they saw
            self._shared = False
            self._ids.clear()
            self._append_only = False
        else:
            self._append_only = False
            if self._shared:  # copy-on-write: never change a list a view still shows
                items = self._next = list(items)
                self._shared = False
            target = event["targetId"]
            pos = _find(items, target)
            if pos < 0:
                warning = target_missing_warning(index, target, etype)
                self.warnings.append(warning)
            else:
                self._forget(target)
                if etype == "replace":
                    msg = event["message"]
                    items[pos] = msg
                    self._ids[msg.id] = self._ids.get(msg.id, 0) + 1
                else:
                    del items[pos]
        self._events.append(event)

    def _forget(self, message_id: str) -> None:
        count = self._ids.get(message_id, 0)
        if count <= 1:
            self._ids.pop(message_id, None)
        else:
            self._ids[message_id] = count - 1

    # --- commit ----------------------------------------------------------------------------

    @property
    def dirty(self) -> bool:
        return bool(self._events)

    def pending_commit(self) -> tuple[list[Message], list[Message] | None]:
        """What the turn end must persist: the folded messages, and the appended messages alone
        when the turn only appended (so storage can append lines instead of rewriting)."""
        if self._append_only and len(self._next) == len(self._base) + len(self._appended):
            return self._next, list(self._appended)
        return self._next, None

    def fold(self) -> None:
        """Make ``next`` the new base and clear the events (after the commit is durable)."""
        if not self._events:
            return
        if self._append_only and len(self._next) == len(self._base) + len(self._appended):
            self._base.extend(self._appended)
        else:
            self._base = list(self._next)
        self._events = []
        self._appended = []
        self._append_only = True


__all__ = [
    "ConversationState",
    "EventsView",
    "LlmMessagesView",
    "MessagesView",
    "apply_event",
    "fold_events",
    "storable_message",
]
