"""THE wire protocol between goondan and every child process it supervises: agent processes, the
fork server and connector hosts. One framing, one message envelope, one set of typed records.

Framing (agent and connector channels, one ``SOCK_STREAM`` Unix socketpair per child): each message
is a 4-byte big-endian unsigned length ``n`` followed by ``n`` bytes of UTF-8 JSON (no trailing
newline). A stream socket delivers bytes in order, so messages are ordered per connection; there is
no other multiplexing. End of stream means the peer is gone.

A frame body is at most :data:`MAX_FRAME` bytes (64 MiB; ``GOONDAN_IPC_MAX_FRAME_BYTES`` lowers or
raises it). Senders refuse a larger message with :class:`FrameTooLarge` (the caller turns that into an
``E_IPC_FRAME_TOO_LARGE`` failure of the one request it belongs to). A reader that still meets one
skips its body and raises :class:`FrameTooLarge`, and so does a body that is not an IPC message
(:class:`IpcError`): the stream stays in step, so the channel keeps serving.

The fork-server control channel (host ↔ fork server) carries the same envelope and records, encoded
the same way and under the same size limit, but as ``SOCK_SEQPACKET`` datagrams without the length
prefix. It stays a datagram channel because a ``spawn`` carries the child's ends of its agent
socketpair and output pipe as ``SCM_RIGHTS`` ancillary data: on a datagram socket the descriptors
arrive with exactly the message they belong to, whereas on a byte stream they attach to whichever
``recvmsg`` happens to read the first byte after them, which a reader that batches frames would have
to untangle. The fork server is also a plain ``select`` loop (it must stay free of asyncio and
threads to ``fork()`` safely), for which one ``recv`` per message is the simplest correct reader.

Envelope: every message is a JSON object ``{"type", "from", "to", "payload"}``; ``type`` is one of
``event``, ``shutdown`` or ``shutdown_ack``. An ``event``'s payload carries ``kind``; the pair
(type, kind) names one record class below. Field names are the records' attribute names in
camelCase; a field with a default may be left out. A receiver decodes with :func:`decode_record`
and hands the record to a :class:`Dispatcher` (message kind → handler): a kind it does not know, or
a record whose fields have the wrong types, is logged and skipped, never ends the channel.

Messages (→ child: sent by the host; ← child: sent by the child)

Agent channel (orchestrator ↔ agent process):
  → ``turn`` {ticket, event, stream?}: run one turn for an AgentEvent; ``stream`` {address, id}:
    send its text deltas straight to that connector host's delta socket for event ``id`` (see
    ``_direct_stream``), and its ``turn_done`` result says ``directStream: "broken"`` if that failed.
  → ``response`` {event}: the answer to an inter-agent request, ``event.metadata.inReplyTo`` = its
    correlation id.
  → ``error_response`` {source, metadata{inReplyTo, errorCode, errorMessage}}: the request failed.
  → ``rpc_result`` {rpcId, ok, value?, error?}: the answer to an ``rpc``.
  → ``sync`` {id}: answer ``sync_ack`` once no turn or background work is left.
  → ``forward`` {events, deltas}: whether to send ``runtime_event`` / ``text_delta`` records from
    now on (the host has listeners for them, or none any more); the spawn spec's ``events`` and
    ``deltas`` give the starting values. Without a listener nothing in the host reads them, so the
    process does not encode and write them (it stores its runtime events itself either way).
  → ``cancel_turn`` {reason, ticket?}: cancel the running turn (``Runtime.cancel``); it commits with
    ``finish_reason`` "cancelled" and is answered by its ``turn_done`` as usual. ``ticket`` names
    the turn the orchestrator dispatched: one the process holds but has not started yet starts
    cancelled (its user message is recorded, no step runs). Turns still queued are not touched.
  → ``shutdown`` (type ``shutdown``) {reason, gracePeriodMs, instanceKey?, interrupt?}: finish the
    current turn (cancel it when ``interrupt``), save state, answer ``shutdown_ack``, exit 0.
  ← ``agent_ready`` {pid, steering?}: the instance started; ``steering``: its agent takes messages
    into a running turn (``Agent.spec.steering: inject``), so a turn for it is sent while one runs.
  ← ``start_error`` {error}: it could not start (a GoondanError dict plus ``class``).
  ← ``turn_accepted`` {ticket}: the turn's user message is durable; a crash now belongs to the turn.
    For a message steered into a running turn: it is in that turn's history (before a step); until
    then a crash leaves it to the orchestrator, which gives it to the next process. A process with
    an accept slot (``acceptSlot`` in its spawn spec, see ``_accept``) marks its turns accepted
    there instead, without a frame; steering agents and processes that cannot map it send these.
  ← ``turn_done`` {ticket, result}: the TurnResult dict.
  ← ``request`` {event, target, instanceKey} / ``send`` {event, target, instanceKey}: inter-agent.
  ← ``rpc`` {rpcId, op, args}: op "spawn" with args {owner, target, instanceKey, cwd}, or op
    "list" with args {owner, includeAll}.
  ← ``runtime_event`` {record}, ``text_delta`` {delta}, ``log`` {record} (a log record's fields,
    message formatted, traceback as text).
  ← ``restart_request`` {reason}; ``sync_ack`` {id}.
  ← ``shutdown_ack`` (type ``shutdown_ack``) {instanceKey?}.

Fork-server channel (host ↔ fork server, datagrams):
  → ``init`` {bundle, stateRoot, persist, env?, swarm?, store?, sysPath?}: first message; load the
    bundle and warm up.
  → ``spawn`` {id, spec}, with SCM_RIGHTS [agent socket, output pipe]: fork one agent process;
    ``spec`` is {agent, instanceKey, events, deltas, logLevel, acceptSlot?} as the agent process
    reads it.
  ← ``ready`` {pid, deltas?} / ``start_error`` {error}: the answer to ``init`` (``deltas`` is
    a connector host's, see below).
  ← ``spawned`` {id, pid}; ``exited`` {pid, code} (``code`` < 0: killed by that signal).

Connector channel (``gdn run`` ↔ connector host, ``python -m goondan.connectors.host --fd N``):
  → ``connector_start`` {entry, connection, connector, config, secrets}: first message.
  → ``connector_reply`` {id, text?, finishReason?, error?, direct?}: the turn result of event
    ``id``; ``direct``: its deltas came on the delta socket, ended by an end marker that the
    connector reads before it hands over the reply (or until the sending connection closes).
  → ``connector_delta`` {id, delta, step?}: streamed text of event ``id``'s turn (model step
    ``step``), sent only for events emitted with ``stream``, always before their ``connector_reply``.
  → ``shutdown`` {reason, gracePeriodMs}: cancel ``run(ctx)``, answer ``connector_stopped`` and
    ``shutdown_ack``, exit.
  ← ``ready`` {pid, deltas?} / ``start_error`` {error}: the connector is up, or failed to
    load/start; ``deltas``: the address of its delta socket, where agent processes send the text
    deltas of its streamed events directly (``_direct_stream``).
  ← ``connector_event`` {id, event{name, message, properties, instanceKey}, stream?}: ``stream``
    asks for the turn's text deltas (``connector_delta``) ahead of its reply.
  ← ``connector_stopped`` {reason: returned|shutdown|failed, error?{code, message, traceback}}.
  ← ``shutdown_ack`` {}.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import inspect
import logging
import os
import socket
import struct
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

import orjson

from ...errors import GoondanError

log = logging.getLogger("goondan.executors.process")

MESSAGE_TYPES = ("event", "shutdown", "shutdown_ack")
ORCHESTRATOR = "orchestrator"
HEADER = struct.Struct(">I")
DEFAULT_MAX_FRAME = 64 * 1024 * 1024
MAX_FRAME_ENV = "GOONDAN_IPC_MAX_FRAME_BYTES"
_SKIP_CHUNK = 1 << 20


def _max_frame_from_env() -> int:
    raw = os.environ.get(MAX_FRAME_ENV, "").strip()
    if raw.isdigit() and 0 < int(raw) < 2**32:
        return int(raw)
    return DEFAULT_MAX_FRAME


# Read once per process; child processes inherit the host's environment, so both ends agree.
MAX_FRAME = _max_frame_from_env()


class IpcError(Exception):
    """A frame that is not a valid IPC message."""


class FrameTooLarge(IpcError):
    """A message whose frame would exceed (or, read, did exceed) :data:`MAX_FRAME`."""

    def __init__(self, size: int, limit: int, kind: str | None = None) -> None:
        what = f"a {kind} message" if kind else "a message"
        super().__init__(f"{what} of {size} bytes exceeds the {limit} byte IPC frame limit")
        self.size = size
        self.limit = limit
        self.kind = kind


def frame_error(exc: FrameTooLarge) -> GoondanError:
    """The error a request gets when its event or its result cannot cross the process boundary."""
    return GoondanError(
        "E_IPC_FRAME_TOO_LARGE",
        f"{exc} and cannot cross the process boundary",
        suggestion=f"Return or send less data (limit {exc.limit} bytes; {MAX_FRAME_ENV} changes it), "
        "or write large results to a file and pass its path.",
    )


# --- typed records --------------------------------------------------------------------------------

_Check = Callable[[Any], bool]
_NO_DEFAULT: Any = dataclasses.MISSING


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _checker(hint: Any) -> _Check:
    """A cheap JSON-level type check for one annotated field (str, int, float, bool, dict, list,
    Any and ``X | None``): enough to refuse a record a handler would trip over."""
    if hint is Any:
        return lambda v: True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        checks = [_checker(arg) for arg in typing.get_args(hint)]
        return lambda v: any(check(v) for check in checks)
    if hint is type(None):
        return lambda v: v is None
    base = origin or hint
    if base is bool:
        return lambda v: isinstance(v, bool)
    if base is int:
        return lambda v: isinstance(v, int) and not isinstance(v, bool)
    if base is float:
        return lambda v: isinstance(v, int | float) and not isinstance(v, bool)
    if base in (dict, Mapping):
        return lambda v: isinstance(v, dict)
    if base is list:
        return lambda v: isinstance(v, list)
    if base is str:
        return lambda v: isinstance(v, str)
    raise TypeError(f"IPC record fields must be JSON types, not {hint!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    wire: str
    check: _Check
    default: Any


class Record:
    """One IPC message. Subclasses are slotted dataclasses (not frozen: a frozen ``__init__`` costs
    twice as much, on every message) registered with :func:`_record`; ``TYPE``
    is the envelope type and ``KIND`` the payload kind (for ``shutdown``/``shutdown_ack`` the type)."""

    __slots__ = ()
    TYPE: ClassVar[str] = "event"
    KIND: ClassVar[str] = ""
    FIELDS: ClassVar[tuple[_Field, ...]] = ()

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"kind": self.KIND} if self.TYPE == "event" else {}
        for f in self.FIELDS:
            value = getattr(self, f.name)
            if f.default is _NO_DEFAULT or value != f.default or type(value) is not type(f.default):
                payload[f.wire] = value
        return payload

    @classmethod
    def from_payload(cls: type[R], payload: Any) -> R:
        """The record a payload describes; :class:`IpcError` names the first field that is missing
        or of the wrong type. Unknown fields are ignored (a newer peer may add optional ones)."""
        if not isinstance(payload, dict):
            raise IpcError(f"a {cls.KIND} payload must be an object")
        values: dict[str, Any] = {}
        for f in cls.FIELDS:
            if f.wire in payload:
                value = payload[f.wire]
                if not f.check(value):
                    raise IpcError(f"{cls.KIND}: field {f.wire!r} has the wrong type ({type(value).__name__})")
                values[f.name] = value
            elif f.default is _NO_DEFAULT:
                raise IpcError(f"{cls.KIND}: field {f.wire!r} is missing")
        return cls(**values)

    def message(self, from_: str, to: str) -> dict[str, Any]:
        """The envelope this record travels in."""
        return {"type": self.TYPE, "from": from_, "to": to, "payload": self.to_payload()}


R = TypeVar("R", bound=Record)
RECORDS: dict[str, type[Record]] = {}


def _ticket_and_object(cls: type[R], payload: Any, name: str) -> R:
    """The fast decoder of a record ``{ticket: str, <name>: object}`` (Turn, TurnDone); anything
    else goes through the generic :meth:`Record.from_payload`, which names what is wrong."""
    if type(payload) is dict:
        ticket, value = payload.get("ticket"), payload.get(name)
        if isinstance(ticket, str) and isinstance(value, dict):
            return cls(ticket, value)  # type: ignore[call-arg]
    return Record.from_payload.__func__(cls, payload)  # type: ignore[attr-defined,no-any-return]


def _record(cls: type[R]) -> type[R]:
    """Register a record class: precompute its wire fields (checked once here, not per message)."""
    hints = typing.get_type_hints(cls)
    fields = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: IPC record defaults must be plain values")
        fields.append(_Field(f.name, _camel(f.name), _checker(hints[f.name]), f.default))
    cls.FIELDS = tuple(fields)
    if cls.KIND in RECORDS:
        raise TypeError(f"IPC message kind {cls.KIND!r} is defined twice")
    RECORDS[cls.KIND] = cls
    return cls


JsonObject = dict[str, Any]


# Agent channel, orchestrator → agent process
@_record
@dataclasses.dataclass(slots=True)
class Turn(Record):
    KIND: ClassVar[str] = "turn"
    ticket: str
    event: JsonObject
    stream: JsonObject | None = None  # {address, id}: stream its deltas to a connector (_direct_stream)

    # Turn and TurnDone cross the agent channel once per turn, each to a process that wakes from
    # idle with cold caches: their codecs are written out (the generic loop calls a checker and a
    # getattr per field). A payload they do not accept goes to the generic one, for its error.
    @classmethod
    def from_payload(cls, payload: Any) -> Turn:
        if type(payload) is dict:
            ticket, event, stream = payload.get("ticket"), payload.get("event"), payload.get("stream")
            if isinstance(ticket, str) and isinstance(event, dict) and (stream is None or type(stream) is dict):
                return cls(ticket, event, stream)
        return Record.from_payload.__func__(cls, payload)  # type: ignore[attr-defined,no-any-return]

    def to_payload(self) -> dict[str, Any]:
        if self.stream is None:
            return {"kind": "turn", "ticket": self.ticket, "event": self.event}
        return {"kind": "turn", "ticket": self.ticket, "event": self.event, "stream": self.stream}


@_record
@dataclasses.dataclass(slots=True)
class Response(Record):
    KIND: ClassVar[str] = "response"
    event: JsonObject


@_record
@dataclasses.dataclass(slots=True)
class ErrorResponse(Record):
    KIND: ClassVar[str] = "error_response"
    source: JsonObject
    metadata: JsonObject


@_record
@dataclasses.dataclass(slots=True)
class RpcResult(Record):
    KIND: ClassVar[str] = "rpc_result"
    rpc_id: str
    ok: bool
    value: Any = None
    error: JsonObject | None = None


@_record
@dataclasses.dataclass(slots=True)
class Sync(Record):
    KIND: ClassVar[str] = "sync"
    id: str


@_record
@dataclasses.dataclass(slots=True)
class Forward(Record):
    KIND: ClassVar[str] = "forward"
    events: bool
    deltas: bool


@_record
@dataclasses.dataclass(slots=True)
class CancelTurn(Record):
    KIND: ClassVar[str] = "cancel_turn"
    reason: str = "api"
    ticket: str = ""


@_record
@dataclasses.dataclass(slots=True)
class Shutdown(Record):
    """Agent and connector channels: stop gracefully (or, ``interrupt``, cancel the running work)."""

    TYPE: ClassVar[str] = "shutdown"
    KIND: ClassVar[str] = "shutdown"
    reason: str
    grace_period_ms: int
    instance_key: str | None = None
    interrupt: bool = False


# Agent channel, agent process → orchestrator
@_record
@dataclasses.dataclass(slots=True)
class AgentReady(Record):
    KIND: ClassVar[str] = "agent_ready"
    pid: int
    steering: bool = False


@_record
@dataclasses.dataclass(slots=True)
class StartError(Record):
    """Agent, fork-server and connector channels: the child could not start."""

    KIND: ClassVar[str] = "start_error"
    error: JsonObject


@_record
@dataclasses.dataclass(slots=True)
class TurnAccepted(Record):
    KIND: ClassVar[str] = "turn_accepted"
    ticket: str


@_record
@dataclasses.dataclass(slots=True)
class TurnDone(Record):
    KIND: ClassVar[str] = "turn_done"
    ticket: str
    result: JsonObject

    @classmethod
    def from_payload(cls, payload: Any) -> TurnDone:  # written out: see Turn
        return _ticket_and_object(cls, payload, "result")

    def to_payload(self) -> dict[str, Any]:
        return {"kind": "turn_done", "ticket": self.ticket, "result": self.result}


@_record
@dataclasses.dataclass(slots=True)
class Request(Record):
    KIND: ClassVar[str] = "request"
    event: JsonObject
    target: str
    instance_key: str


@_record
@dataclasses.dataclass(slots=True)
class Send(Record):
    KIND: ClassVar[str] = "send"
    event: JsonObject
    target: str
    instance_key: str


@_record
@dataclasses.dataclass(slots=True)
class Rpc(Record):
    KIND: ClassVar[str] = "rpc"
    rpc_id: str
    op: str
    args: JsonObject


@_record
@dataclasses.dataclass(slots=True)
class RuntimeEvent(Record):
    KIND: ClassVar[str] = "runtime_event"
    record: JsonObject


@_record
@dataclasses.dataclass(slots=True)
class TextDelta(Record):
    KIND: ClassVar[str] = "text_delta"
    delta: Any


@_record
@dataclasses.dataclass(slots=True)
class RestartRequest(Record):
    KIND: ClassVar[str] = "restart_request"
    reason: str


@_record
@dataclasses.dataclass(slots=True)
class SyncAck(Record):
    KIND: ClassVar[str] = "sync_ack"
    id: str


@_record
@dataclasses.dataclass(slots=True)
class Log(Record):
    KIND: ClassVar[str] = "log"
    record: JsonObject


@_record
@dataclasses.dataclass(slots=True)
class ShutdownAck(Record):
    """Agent and connector channels: the child stopped its work and saved its state."""

    TYPE: ClassVar[str] = "shutdown_ack"
    KIND: ClassVar[str] = "shutdown_ack"
    instance_key: str | None = None


# Fork-server channel
@_record
@dataclasses.dataclass(slots=True)
class Init(Record):
    KIND: ClassVar[str] = "init"
    bundle: str
    state_root: str
    persist: bool
    env: JsonObject | None = None
    swarm: str | None = None
    store: str | None = None
    sys_path: list[Any] | None = None


@_record
@dataclasses.dataclass(slots=True)
class Spawn(Record):
    KIND: ClassVar[str] = "spawn"
    id: int
    spec: JsonObject


@_record
@dataclasses.dataclass(slots=True)
class Ready(Record):
    """Fork-server and connector channels: the child is up (a connector host: ``deltas``, the
    address of its delta socket, empty when it has none)."""

    KIND: ClassVar[str] = "ready"
    pid: int
    deltas: str = ""


@_record
@dataclasses.dataclass(slots=True)
class Spawned(Record):
    KIND: ClassVar[str] = "spawned"
    id: int
    pid: int


@_record
@dataclasses.dataclass(slots=True)
class Exited(Record):
    KIND: ClassVar[str] = "exited"
    pid: int
    code: int


# Connector channel
@_record
@dataclasses.dataclass(slots=True)
class ConnectorStart(Record):
    KIND: ClassVar[str] = "connector_start"
    entry: str
    connection: str
    connector: str
    config: JsonObject
    secrets: JsonObject


@_record
@dataclasses.dataclass(slots=True)
class ConnectorReply(Record):
    KIND: ClassVar[str] = "connector_reply"
    id: str
    text: str | None = None
    finish_reason: str | None = None
    error: JsonObject | None = None
    direct: bool = False


@_record
@dataclasses.dataclass(slots=True)
class ConnectorEvent(Record):
    KIND: ClassVar[str] = "connector_event"
    id: str
    event: JsonObject
    stream: bool = False


@_record
@dataclasses.dataclass(slots=True)
class ConnectorDelta(Record):
    KIND: ClassVar[str] = "connector_delta"
    id: str
    delta: str
    step: int = 0


@_record
@dataclasses.dataclass(slots=True)
class ConnectorStopped(Record):
    KIND: ClassVar[str] = "connector_stopped"
    reason: str
    error: JsonObject | None = None


EVENT_KINDS = tuple(kind for kind, cls in RECORDS.items() if cls.TYPE == "event")


def message_kind(msg: Mapping[str, Any]) -> str:
    """The dispatch key of an envelope: the payload kind of an ``event``, else the type."""
    mtype = msg.get("type")
    if mtype != "event":
        return str(mtype)
    payload = msg.get("payload")
    kind = payload.get("kind") if isinstance(payload, dict) else None
    return str(kind) if kind else "event"


def decode_record(msg: Mapping[str, Any]) -> Record:
    """The record an envelope carries; :class:`IpcError` for an unknown kind or bad fields."""
    kind = message_kind(msg)
    cls = RECORDS.get(kind)
    if cls is None or msg.get("type") != cls.TYPE:
        raise IpcError(f"unknown IPC message kind {kind!r}")
    return cls.from_payload(msg.get("payload") if msg.get("payload") is not None else {})


Handler = Callable[[Any], Any]


class Dispatcher:
    """Message kind → handler, one table per channel end (instead of an ``if``/``elif`` chain on
    ``type`` and ``kind``). A message whose kind has no handler here, or whose record does not
    decode, is logged and skipped: one bad message never ends the channel, and a peer one version
    ahead (a new kind) degrades to a warning. A handler that raises is logged with its traceback and
    the channel goes on. Returns what the handler returned (a coroutine is the caller's to await)."""

    __slots__ = ("_logger", "_table", "name")

    def __init__(self, name: str, logger: logging.Logger | None = None) -> None:
        self.name = name
        self._table: dict[str, tuple[type[Record], Handler]] = {}
        self._logger = logger or log

    def on(self, cls: type[R], handler: Callable[[R], Any]) -> Dispatcher:
        self._table[cls.KIND] = (cls, handler)
        return self

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(self._table)

    def dispatch(self, msg: Mapping[str, Any]) -> Any:
        mtype = msg.get("type")
        payload = msg.get("payload")
        if mtype == "event":  # message_kind(), spelt out: every message passes here
            kind = payload.get("kind") if isinstance(payload, dict) else None
            kind = str(kind) if kind else "event"
        else:
            kind = str(mtype)
        entry = self._table.get(kind)
        if entry is None or mtype != entry[0].TYPE:
            self._logger.warning("%s: skipped a message of unknown kind %r from %s", self.name, kind, msg.get("from"))
            return None
        cls, handler = entry
        try:
            record = cls.from_payload(payload if payload is not None else {})
        except IpcError as exc:
            self._logger.error("%s: skipped a malformed message from %s: %s", self.name, msg.get("from"), exc)
            return None
        try:
            return handler(record)
        except Exception:
            self._logger.exception("%s: handling a %s message failed", self.name, kind)
            return None

    async def dispatch_async(self, msg: Mapping[str, Any]) -> Any:
        """:meth:`dispatch`, awaiting a handler that is a coroutine function."""
        result = self.dispatch(msg)
        if inspect.isawaitable(result):
            return await result
        return result


# --- envelopes and framing ------------------------------------------------------------------------


def message(type_: str, from_: str, to: str, payload: Any) -> dict[str, Any]:
    """A raw envelope (records build theirs with :meth:`Record.message`)."""
    if type_ not in MESSAGE_TYPES:
        raise IpcError(f"unknown IPC message type {type_!r}")
    return {"type": type_, "from": from_, "to": to, "payload": payload}


def _kind(msg: dict[str, Any]) -> str:
    payload = msg.get("payload")
    kind = payload.get("kind") if isinstance(payload, dict) else None
    return str(kind) if kind else str(msg.get("type"))


def _body(msg: dict[str, Any]) -> bytes:
    body = orjson.dumps(msg)
    if len(body) > MAX_FRAME:
        raise FrameTooLarge(len(body), MAX_FRAME, _kind(msg))
    return body


def encode(msg: dict[str, Any]) -> bytes:
    body = _body(msg)
    return HEADER.pack(len(body)) + body


def encode_packet(msg: dict[str, Any]) -> bytes:
    """A fork-server control datagram: the same JSON body, no length prefix (SOCK_SEQPACKET keeps
    message boundaries), the same size limit."""
    return _body(msg)


_NOT_A_MESSAGE = "frame is not an IPC message {type: event|shutdown|shutdown_ack, from, to, payload}"


def decode(body: bytes | bytearray) -> dict[str, Any]:
    try:
        msg = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise IpcError(f"frame is not JSON: {exc}") from exc
    if not isinstance(msg, dict) or msg.get("type") not in MESSAGE_TYPES:
        raise IpcError(_NOT_A_MESSAGE)
    return msg


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message, or ``None`` at end of stream. An oversized frame is read past (never held
    in memory) and raises :class:`FrameTooLarge`; a body that is not a message raises
    :class:`IpcError`; either way the next call reads the next frame."""
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError:
        return None
    (size,) = HEADER.unpack(header)
    if size > MAX_FRAME:
        left = size
        try:
            while left:
                chunk = await reader.read(min(left, _SKIP_CHUNK))
                if not chunk:
                    return None
                left -= len(chunk)
        except asyncio.IncompleteReadError:
            return None
        raise FrameTooLarge(size, MAX_FRAME)
    try:
        body = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        return None
    return decode(body)


class MessageChannel:
    """One ordered message stream to a peer: the sending side shared by :class:`Connection` (over
    an asyncio stream pair) and :class:`FrameChannel` (frames parsed where the bytes arrive). ``send``
    never blocks: frames are queued on the transport (a peer that stops reading is a dead peer and
    gets killed).

    :meth:`defer` is ``send`` for messages nobody waits on (an agent process's runtime events): they
    are written together, in one ``write``, at the end of the current event-loop iteration or right
    before the next :meth:`send`, whichever comes first, so the stream keeps its order and a turn's
    burst of records wakes the peer once instead of once per record.

    ``received`` and ``writes`` count the messages read and the ``write`` calls made (each one a
    syscall that wakes the peer): what tests and benchmarks look at to see what a turn costs."""

    __slots__ = ("_deferred", "closed", "received", "writes")

    def __init__(self) -> None:
        self.closed = False
        self._deferred: list[bytes] = []
        self.received = 0
        self.writes = 0

    # what a subclass provides: its transport's state and its write call
    def _closing(self) -> bool:
        raise NotImplementedError

    def _transport_write(self, data: bytes) -> None:
        raise NotImplementedError

    def send(self, msg: dict[str, Any]) -> bool:
        """Queue one message; ``False`` when the peer is gone. Raises ``TypeError`` for values
        that are not JSON and :class:`FrameTooLarge` for a message above the frame limit: nothing
        is written then, so the stream stays usable."""
        if self.closed or self._closing():
            return False
        body = orjson.dumps(msg)  # encode(), spelt out: once per turn each way
        if len(body) > MAX_FRAME:
            raise FrameTooLarge(len(body), MAX_FRAME, _kind(msg))
        data = HEADER.pack(len(body)) + body
        if self._deferred:
            self._deferred.append(data)
            return self.flush()
        return self._write(data)

    def defer(self, msg: dict[str, Any]) -> bool:
        """:meth:`send`, written with whatever else is sent in this loop iteration (see the class)."""
        if self.closed or self._closing():
            return False
        data = encode(msg)
        if not self._deferred:
            asyncio.get_running_loop().call_soon(self.flush)
        self._deferred.append(data)
        return True

    def flush(self) -> bool:
        """Write the deferred messages now (nothing to do when there are none)."""
        if not self._deferred:
            return not self.closed
        data = b"".join(self._deferred)
        self._deferred.clear()
        if self.closed or self._closing():
            return False
        return self._write(data)

    def _write(self, data: bytes) -> bool:
        self.writes += 1
        try:
            self._transport_write(data)
        except (ConnectionError, RuntimeError):
            self.closed = True
            return False
        return True

    def send_record(self, record: Record, from_: str, to: str) -> bool:
        """:meth:`send` for a typed record (its :meth:`Record.message`)."""
        return self.send({"type": record.TYPE, "from": from_, "to": to, "payload": record.to_payload()})

    async def recv(self) -> dict[str, Any] | None:
        """The next message or ``None`` when the peer is gone; :class:`IpcError` (incl.
        :class:`FrameTooLarge`) for one bad frame, after which the stream goes on."""
        raise NotImplementedError

    async def serve(self, on_message: Callable[[dict[str, Any]], Any], on_error: Callable[[IpcError], Any]) -> None:
        """Hand every message to ``on_message`` and every bad frame to ``on_error`` (both called
        synchronously, in stream order) until the peer is gone."""
        while True:
            try:
                msg = await self.recv()
            except IpcError as exc:
                on_error(exc)
                continue
            if msg is None:
                return
            on_message(msg)

    async def drain(self) -> None:
        """Wait while the transport's write buffer is above its high-water mark (before an exit)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class Connection(MessageChannel):
    """A :class:`MessageChannel` over an asyncio stream pair (``asyncio.open_unix_connection`` /
    ``open_connection``): channels whose rate does not matter (connector hosts, Ray actors, tests)."""

    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self.reader = reader
        self.writer = writer

    def _closing(self) -> bool:
        return self.writer.is_closing()

    def _transport_write(self, data: bytes) -> None:
        self.writer.write(data)

    async def recv(self) -> dict[str, Any] | None:
        try:
            msg = await read_message(self.reader)
        except (ConnectionError, OSError):
            return None
        if msg is not None:
            self.received += 1
        return msg

    async def drain(self) -> None:
        await self.writer.drain()

    def close(self) -> None:
        if not self.closed:
            self.flush()
            self.closed = True
            try:
                self.writer.close()
            except Exception:
                pass


_EOF: Any = object()


class _FrameProtocol(asyncio.Protocol):
    """The reading end of a :class:`FrameChannel`: splits the bytes the transport hands over into
    frames and passes each one on as it completes. An oversized frame's header is answered with
    :class:`FrameTooLarge` and its body is dropped as it arrives (never held in memory)."""

    def __init__(self, channel: FrameChannel) -> None:
        self._channel = channel
        self._buf = bytearray()
        self._skip = 0  # body bytes of an oversized frame still to drop

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._channel._transport = typing.cast(asyncio.WriteTransport, transport)

    def data_received(self, data: bytes) -> None:
        if self._skip:
            if len(data) <= self._skip:
                self._skip -= len(data)
                return
            data = data[self._skip :]
            self._skip = 0
        buf = self._buf
        if buf:
            buf += data
            view: bytes | bytearray = buf
        else:
            view = data  # the usual case: whole frames in one read, nothing buffered before
        channel = self._channel
        end = len(view)
        pos = 0
        while end - pos >= 4:
            (size,) = HEADER.unpack_from(view, pos)
            if size > MAX_FRAME:
                left = end - pos - 4
                pos = end
                if size > left:
                    self._skip = size - left
                else:
                    pos = end - (left - size)
                channel._deliver_error(FrameTooLarge(size, MAX_FRAME))
                continue
            stop = pos + 4 + size
            if stop > end:
                break
            body = view[pos + 4 : stop]
            pos = stop
            channel._deliver(body)
        if view is buf:
            del buf[:pos]
        elif pos < end:
            buf += view[pos:]

    def eof_received(self) -> bool:
        self._channel._deliver_eof()
        return True  # keep our writing half open, as asyncio's stream protocol does

    def connection_lost(self, exc: Exception | None) -> None:
        self._channel._deliver_eof()

    def pause_writing(self) -> None:
        self._channel._paused = True

    def resume_writing(self) -> None:
        self._channel._wake_drain()


class FrameChannel(MessageChannel):
    """A :class:`MessageChannel` that reads in the transport's callback: each complete frame is
    decoded and handed to the handler :meth:`serve` was given (or queued for :meth:`recv`) right
    where the bytes arrive, and writes go straight to the transport.

    Why: the agent channel carries a turn each way, and both ends wake from idle for it. Through
    asyncio's stream reader a frame costs a future, a task resume and two ``readexactly`` calls,
    and the handler runs one loop iteration after the bytes came; here it runs in the read
    callback. Measured per round trip of a turn-sized frame between two processes: about 15 µs of
    CPU less per side with the default loop, 5 µs with uvloop."""

    __slots__ = ("_drainers", "_eof", "_inbox", "_on_error", "_on_message", "_paused", "_transport", "_waiter")

    def __init__(self) -> None:
        super().__init__()
        self._transport: asyncio.WriteTransport | None = None
        self._on_message: Callable[[dict[str, Any]], Any] | None = None
        self._on_error: Callable[[IpcError], Any] | None = None
        self._inbox: collections.deque[Any] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._eof = False
        self._paused = False
        self._drainers: list[asyncio.Future[None]] = []

    @classmethod
    async def open(cls, sock: socket.socket) -> FrameChannel:
        """A channel over a connected stream socket (Unix, or TCP for actors on other machines)."""
        channel = cls()
        loop = asyncio.get_running_loop()
        if sock.family == socket.AF_UNIX:
            await loop.create_unix_connection(lambda: _FrameProtocol(channel), sock=sock)
        else:
            await loop.create_connection(lambda: _FrameProtocol(channel), sock=sock)
        return channel

    def _closing(self) -> bool:
        return self._transport is None or self._transport.is_closing()

    def _transport_write(self, data: bytes) -> None:
        assert self._transport is not None
        self._transport.write(data)

    # --- from the protocol ---

    def _deliver(self, body: bytes | bytearray) -> None:
        # decode(), spelt out (once per turn each way): the same checks and errors
        try:
            msg = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            self._deliver_error(IpcError(f"frame is not JSON: {exc}"))
            return
        if not isinstance(msg, dict) or msg.get("type") not in MESSAGE_TYPES:
            self._deliver_error(IpcError(_NOT_A_MESSAGE))
            return
        self.received += 1
        handler = self._on_message
        if handler is None:
            self._queue(msg)
            return
        try:
            handler(msg)
        except Exception:  # raised into the transport it would close the channel
            log.exception("handling an IPC message failed")

    def _deliver_error(self, exc: IpcError) -> None:
        handler = self._on_error
        if handler is None:
            self._queue(exc)
            return
        try:
            handler(exc)
        except Exception:
            log.exception("handling a bad IPC frame failed")

    def _deliver_eof(self) -> None:
        if self._eof:
            return
        self._eof = True
        self._queue(_EOF)
        self._wake_drain()

    def _queue(self, item: Any) -> None:
        self._inbox.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_drain(self) -> None:
        self._paused = False
        for fut in self._drainers:
            if not fut.done():
                fut.set_result(None)
        self._drainers.clear()

    # --- reading ---

    async def _until_queued(self) -> None:
        while not self._inbox:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def recv(self) -> dict[str, Any] | None:
        await self._until_queued()
        item = self._inbox[0]
        if item is _EOF:
            return None  # stays queued: every later call answers None too
        self._inbox.popleft()
        if isinstance(item, IpcError):
            raise item
        msg: dict[str, Any] = item
        return msg

    async def serve(self, on_message: Callable[[dict[str, Any]], Any], on_error: Callable[[IpcError], Any]) -> None:
        """Messages that arrived before this call first, then each one in the read callback."""
        while self._inbox and self._inbox[0] is not _EOF:
            item = self._inbox.popleft()
            if isinstance(item, IpcError):
                on_error(item)
            else:
                on_message(item)
        self._on_message, self._on_error = on_message, on_error
        try:
            await self._until_queued()  # only the end of the stream is queued now
        finally:
            self._on_message = self._on_error = None

    async def drain(self) -> None:
        if self._paused and not self._eof:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drainers.append(fut)
            await fut

    def close(self) -> None:
        if not self.closed:
            self.flush()
            self.closed = True
            if self._transport is not None:
                try:
                    self._transport.close()
                except Exception:
                    pass


__all__ = [
    "DEFAULT_MAX_FRAME",
    "EVENT_KINDS",
    "MAX_FRAME_ENV",
    "MESSAGE_TYPES",
    "ORCHESTRATOR",
    "RECORDS",
    "Connection",
    "Dispatcher",
    "FrameChannel",
    "FrameTooLarge",
    "IpcError",
    "MessageChannel",
    "Record",
    "decode",
    "decode_record",
    "encode",
    "encode_packet",
    "frame_error",
    "message",
    "message_kind",
    "read_message",
]
