"""``ctx`` handed to a connector's ``async def run(ctx)`` and the event shape it emits."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._content import max_part_bytes, normalize_part
from ..errors import GoondanError
from ..executors.process._ipc import ConnectorEvent, FrameTooLarge, frame_error

_MESSAGE_TYPES = ("text", "image", "file")


@dataclass(frozen=True, slots=True)
class Reply:
    """The outcome of one emitted event's turn: the agent's final text, or an error."""

    text: str | None
    finish_reason: str | None = None
    error: Mapping[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.finish_reason != "error"


@dataclass(frozen=True, slots=True)
class ReplyDelta:
    """Text the model has written so far of a streamed event's reply, in model step ``step`` (a turn
    that calls tools has several steps; the reply is the last step's text)."""

    text: str
    step: int = 0


class ReplyStream:
    """A streamed event's turn as it happens: ``async for delta in stream`` yields :class:`ReplyDelta`
    in order while the model writes, and ends when the turn does; ``await stream.reply`` is its
    :class:`Reply` (the whole text, or the error).

    Deltas arrive (on the delta socket or the connector channel) whether or not anyone reads them,
    so this buffers; a consumer that falls behind (a slow HTTP client) gets what piled up joined into
    one delta per step instead of one object per token. The buffer therefore holds at most the text
    the turn has written, which the final reply carries anyway. :meth:`close` drops the buffer and
    later deltas (the client is gone); the turn itself runs on and its reply still resolves.
    :meth:`heartbeat` makes a silent stream yield an empty delta now and then (to keep a connection
    alive through a long tool call). :meth:`write_through` hands deltas to a synchronous writer as
    they arrive, skipping the buffer and the consumer's wake-up while the writer keeps up."""

    __slots__ = (
        "_beat",
        "_beat_due",
        "_buffer",
        "_burst",
        "_closed",
        "_last",
        "_parked",
        "_sink",
        "_step",
        "_timer",
        "_wake",
        "reply",
    )

    def __init__(self, reply: asyncio.Future[Reply]) -> None:
        self.reply = reply
        self._buffer: list[tuple[int, list[str]]] = []
        self._closed = False
        self._wake = asyncio.Event()
        self._beat = 0.0
        self._beat_due = False
        self._last = 0.0
        self._step = 0
        self._timer: asyncio.TimerHandle | None = None
        self._sink: Callable[[ReplyDelta], bool] | None = None
        self._parked = False  # the consumer waits in __anext__ with everything before it handled
        self._burst = False  # a delta went to the sink in this loop iteration
        reply.add_done_callback(self._ended)

    def write_through(self, sink: Callable[[ReplyDelta], bool]) -> None:
        """From now on, a delta that arrives while the consumer waits with nothing buffered goes to
        ``sink`` at once, in the callback that delivered it (the connector channel's record), instead
        of waking the consumer one event-loop iteration later to do the same. ``sink`` returns
        ``False`` when it cannot take the delta now (a slow or gone client): the delta is buffered
        as without a sink, so order, joining and the buffer's bound are unchanged. While anything
        is buffered or the consumer is busy with an earlier delta, deltas queue behind it. Only the
        first delta of a loop iteration goes to the sink: the rest of a burst (frames read together)
        is joined by the consumer into one piece, one write, as before."""
        self._sink = sink

    def _push(self, text: str, step: int) -> None:
        if self._closed or not text:
            return
        if (
            self._sink is not None
            and self._parked
            and not self._buffer
            and not self._burst
            and self._written(ReplyDelta(text, step))
        ):
            return
        if self._buffer and self._buffer[-1][0] == step:
            self._buffer[-1][1].append(text)
        else:
            self._buffer.append((step, [text]))
        self._wake.set()

    def _written(self, delta: ReplyDelta) -> bool:
        assert self._sink is not None
        try:
            written = self._sink(delta)
        except Exception:
            logging.getLogger("goondan.connectors").exception("a stream's writer failed; deltas are buffered")
            self._sink = None
            return False
        if written:
            self._step = delta.step
            self._burst = True
            loop = asyncio.get_running_loop()
            loop.call_soon(self._end_burst)
            if self._beat:
                self._last = loop.time()
        return written

    def _end_burst(self) -> None:
        self._burst = False

    def heartbeat(self, seconds: float) -> None:
        """From now on, after ``seconds`` without a delta the iteration yields ``ReplyDelta("", step)``.

        One timer per stream, re-armed from the last delta's time when it fires, so the deltas
        themselves cost no timer (a per-wait timeout was a quarter of the connector's work per delta).
        """
        loop = asyncio.get_running_loop()
        self._beat = seconds
        self._last = loop.time()
        if self._timer is None and not self.reply.done():
            self._timer = loop.call_later(seconds, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._closed or self.reply.done():
            return
        loop = asyncio.get_running_loop()
        due = self._last + self._beat
        if loop.time() >= due:
            self._beat_due = True
            self._wake.set()
            due = loop.time() + self._beat
        self._timer = loop.call_at(due, self._on_timer)

    def _ended(self, _reply: asyncio.Future[Reply]) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._wake.set()

    def close(self) -> None:
        """Stop buffering: nobody reads this stream any more."""
        self._closed = True
        self._buffer.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._wake.set()

    def __aiter__(self) -> ReplyStream:
        return self

    async def __anext__(self) -> ReplyDelta:
        # cancellation-safe: the only await is the wake-up, nothing is taken before it returns
        while True:
            if self._buffer:
                step, parts = self._buffer.pop(0)
                self._step = step
                if self._beat:
                    self._last = asyncio.get_running_loop().time()
                return ReplyDelta("".join(parts), step)
            if self._closed or self.reply.done():
                raise StopAsyncIteration
            if self._beat_due:
                self._beat_due = False
                return ReplyDelta("", self._step)
            self._wake.clear()
            self._parked = True
            try:
                await self._wake.wait()
            finally:
                self._parked = False


def check_event(event: Any) -> dict[str, Any]:
    """Validate a ConnectorEvent and return a normalized copy; ``ValueError`` says what is wrong."""
    if not isinstance(event, Mapping):
        raise ValueError("a connector event must be a mapping {name, message, properties, instanceKey}")
    name = event.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("event 'name' must be a non-empty string")
    key = event.get("instanceKey")
    if not isinstance(key, str) or not key.strip():
        raise ValueError("event 'instanceKey' must be a non-empty string")
    message = event.get("message")
    if isinstance(message, str):
        message = {"type": "text", "text": message}
    if not isinstance(message, Mapping) or message.get("type") not in _MESSAGE_TYPES:
        raise ValueError("event 'message' must be {type: text, text} | {type: image, url} | {type: file, url, name}")
    mtype = message["type"]
    required = {"text": ("text",), "image": ("url",), "file": ("url", "name")}[mtype]
    for field_name in required:
        if not isinstance(message.get(field_name), str):
            raise ValueError(f"event message of type {mtype} needs a string '{field_name}'")
    properties = event.get("properties") or {}
    if not isinstance(properties, Mapping):
        raise ValueError("event 'properties' must be a mapping of primitive values")
    out: dict[str, Any] = {
        "name": name,
        "message": {k: message[k] for k in ("type", *required)},
        "properties": {str(k): v for k, v in properties.items()},
        "instanceKey": key.strip(),
    }
    attachments = event.get("attachments")
    if attachments is not None:
        out["attachments"] = _check_attachments(attachments)
    return out


def _check_attachments(attachments: Any) -> list[dict[str, Any]]:
    """``attachments``: image and file parts downloaded by the connector (``data``) or left at a public
    ``url``. A ``path`` is refused: it would let outside traffic name files on this machine."""
    if not isinstance(attachments, list):
        raise ValueError("event 'attachments' must be a list of image or file parts")
    limit = max_part_bytes()
    out: list[dict[str, Any]] = []
    for index, part in enumerate(attachments):
        if not isinstance(part, Mapping) or part.get("type") not in ("image", "file") or part.get("path") is not None:
            raise ValueError(f"event attachment {index} must be {{type: image|file, mediaType, name?, data|url}}")
        try:
            out.append(normalize_part(part, index, limit=limit, read_paths=False))
        except GoondanError as exc:
            raise ValueError(f"event attachment {index}: [{exc.code}] {exc.message}") from None
    return out


def request_input(event: Mapping[str, Any]) -> str | list[dict[str, Any]]:
    """What a checked event sends to its agent: the message text, followed by the event's
    attachments as content parts when it has any."""
    text = message_text(event["message"])
    attachments = event.get("attachments")
    if not attachments:
        return text
    return [{"type": "text", "text": text}, *attachments] if text else list(attachments)


def message_text(message: Mapping[str, Any]) -> str:
    """The agent's input text for a connector message (docs/architecture.md#connectors)."""
    mtype = message.get("type")
    if mtype == "image":
        return f"[image] {message.get('url', '')}"
    if mtype == "file":
        return f"[file:{message.get('name', '')}] {message.get('url', '')}"
    return str(message.get("text", ""))


class ConnectorContext:
    """What a connector sees. ``emit`` sends an event at once and returns a future of its :class:`Reply`.

    ``await ctx.emit(event)`` therefore waits for the agent's answer (webhook replies, chat messages),
    while a bare ``ctx.emit(event)`` is fire-and-forget. Each event is an independent turn.
    """

    def __init__(
        self,
        *,
        connection: str,
        connector: str,
        config: Mapping[str, str],
        secrets: Mapping[str, str],
        send: Callable[[ConnectorEvent], None],
        on_ready: Callable[[], None],
    ) -> None:
        self.connection = connection
        self.connector = connector
        self.config: dict[str, str] = dict(config)
        self.secrets: dict[str, str] = dict(secrets)
        self.logger = logging.getLogger(f"goondan.connector.{connection}")
        self._send = send
        self._on_ready = on_ready
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[Reply]] = {}
        self._streams: dict[str, ReplyStream] = {}

    def emit(self, event: Mapping[str, Any]) -> asyncio.Future[Reply]:
        return self._emit(event, None)

    def stream(self, event: Mapping[str, Any]) -> ReplyStream:
        """:meth:`emit`, and the turn's text as the model writes it: see :class:`ReplyStream`.

        Deltas come to this process only for events sent this way: straight from the agent's
        process where agents run in processes on this machine (see ``_direct``), else from
        ``gdn run``. A turn's model calls stream only when something waits for its deltas."""
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        stream = ReplyStream(future)
        self._emit(event, stream)
        return stream

    def _emit(self, event: Mapping[str, Any], stream: ReplyStream | None) -> asyncio.Future[Reply]:
        normalized = check_event(event)
        event_id = f"{next(self._ids)}"
        future = stream.reply if stream is not None else asyncio.get_running_loop().create_future()
        self._pending[event_id] = future
        if stream is not None:
            self._streams[event_id] = stream
        self._on_ready()  # a connector that emits is evidently up
        try:
            self._send(ConnectorEvent(event_id, normalized, stream is not None))
        except FrameTooLarge as exc:
            # nothing was sent: this one event fails, the connector and its channel go on
            self._pending.pop(event_id, None)
            self._streams.pop(event_id, None)
            future.set_result(Reply(None, "error", frame_error(exc).to_dict()))
        return future

    def ready(self) -> None:
        """Tell the supervisor the connector is listening (bound its port, authenticated, ...)."""
        self._on_ready()

    def secret(self, *names: str) -> str | None:
        """The first non-empty secret among ``names`` (connectors accept a few customary names)."""
        for name in names:
            value = self.secrets.get(name)
            if value:
                return value
        return None

    def setting(self, name: str, default: str) -> str:
        value = self.config.get(name)
        return value if value not in (None, "") else default

    def _delta(self, event_id: str, text: str, step: int) -> None:
        stream = self._streams.get(event_id)
        if stream is not None:
            stream._push(text, step)

    def _resolve(self, event_id: str, reply: Reply) -> None:
        self._streams.pop(event_id, None)
        future = self._pending.pop(event_id, None)
        if future is not None and not future.done():
            future.set_result(reply)

    def _fail_streams(self, reason: str) -> None:
        """End the streamed events still waiting with ``E_CONNECTOR_STOPPED`` (the host is stopping)."""
        error = {"code": "E_CONNECTOR_STOPPED", "message": reason}
        for event_id in list(self._streams):
            self._resolve(event_id, Reply(None, "error", error))

    def _fail_pending(self, reason: str) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_result(Reply(None, "error", {"code": "E_CONNECTOR_STOPPED", "message": reason}))
        self._pending.clear()
        self._streams.clear()


__all__ = ["ConnectorContext", "Reply", "ReplyDelta", "ReplyStream", "check_event", "message_text", "request_input"]
