"""One agent instance on disk: conversation (base + events), runtime events, extension state, metadata.

See the package docstring (:mod:`goondan.storage`) for the crash-safety protocol implemented here.
"""

from __future__ import annotations

import contextlib
import gc
import os
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .._ids import now_iso
from .._json import dumps, dumps_line, dumps_pretty
from ..errors import GoondanError, StorageError
from ..messages import Message, event_from_record, event_to_record
from . import _atomic
from ._atomic import (
    APPEND_FLAGS,
    crash_point,
    die,
    ensure_dir,
    fsync_dir,
    open_private,
    replace_atomically,
    unlink_if_exists,
    write_all,
    write_file_durably,
)
from ._attachments import attachment_id, check_id, not_found
from ._events import CRC_KEY, TAG_KEY, append_seed, scan_events, tag_append_line, tag_line
from ._jsonl import (
    JsonlReader,
    corrupt_error,
    read_bytes,
    repair_tail,
    terminate_line,
    torn_warning,
    truncate_file,
)
from ._lease import InstanceLease, os_error_suggestion
from ._paths import component_file_name

CODE_WRITE = "E_STORAGE_WRITE"
CODE_NOT_JSON = "E_STORAGE_NOT_JSON"
CODE_NOT_LOADED = "E_STORAGE_NOT_LOADED"
CODE_RECOVERED = "E_STORAGE_COMMIT_RECOVERED"

BASE_FILE = "base.jsonl"
EVENTS_FILE = "events.jsonl"
RUNTIME_EVENTS_FILE = "runtime-events.jsonl"
TMP_FILE = "base.jsonl.tmp"
MARKER_FILE = ".commit.json"
METADATA_FILE = "metadata.json"
# a turn paused for approvals: its pending tool calls and what resuming needs
PAUSED_TURN_FILE = "paused-turn.json"


@dataclass(slots=True)
class LoadedConversation:
    """What :meth:`InstanceStore.load` found: the committed ``base`` messages, the residual ``events``
    of an unfinished turn (to replay on top of ``base``) and structured recovery ``warnings``
    (``{"code", "message", "file", "line"}``)."""

    base: list[Message] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)


def _write_error(path: Path, action: str, exc: BaseException) -> StorageError:
    return StorageError(
        CODE_WRITE,
        f"could not {action} {path}: {exc}",
        file=str(path),
        suggestion=(
            "Check free disk space and permissions of the state root (--state-root / GOONDAN_STATE_ROOT). "
            "The turn's events are kept in events.jsonl and will be replayed on the next start."
        ),
    )


def _warning(code: str, message: str, path: Path, line: int | None = None) -> dict[str, Any]:
    return {"code": code, "message": message, "file": str(path), "line": line}


def _encode_json(value: Any, what: str, *, pretty: bool = False, line: bool = True) -> bytes:
    try:
        return dumps_pretty(value) if pretty else dumps_line(value) if line else dumps(value)
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        raise StorageError(
            CODE_NOT_JSON,
            f"{what} is not JSON-serializable: {exc}",
            suggestion="Store only dicts, lists, strings, numbers, booleans and None.",
        ) from exc


_REWRITE_BATCH = 4096


def _encoded_batches(messages: Sequence[Message]) -> Iterator[bytes]:
    """The lines of ``messages`` a few thousand at a time: a rewrite of a long history never holds
    the whole encoded file in memory beside the messages."""
    for start in range(0, len(messages), _REWRITE_BATCH):
        yield b"".join([dumps_line(m.to_record()) for m in messages[start : start + _REWRITE_BATCH]])


_STATUS_WIDTH = 24
# A status flip's bytes up to the updatedAt value, per (agent, key, createdAt, status): a flip then
# formats one timestamp instead of encoding the whole record (~1.5 µs). Shared and bounded rather
# than kept per store, so that idle inline instances do not carry them (an agent process has one
# instance: two entries).
_FLIP_HEADS: dict[tuple[str, str, str, str], bytes] = {}
_FLIP_HEADS_MAX = 256

# events.jsonl is written at the store's own offset (pwrite), not appended to: an append commit
# "clears" it by overwriting what the turn wrote with newlines (blank lines, which every reader
# skips) instead of truncating it, and the next turn writes over them from offset 0. A truncate
# frees the file's block and every later append allocates it again and grows the inode's size,
# each a journaled inode change after the commit's fsync (measured, 4 lines of a turn plus the
# clear, interleaved with a base fsync: append + ftruncate 32.2 µs, pwrite + blanking 18.1-18.3 µs,
# medians of 3,000 turns, 2 runs). After a kill the file holds the pending turn's lines followed by
# blank lines only, as before; what a power loss can leave (a lost blanking brings back committed
# lines, like a lost truncation did) is told apart by the tags (see _events).
_EVENTS_FLAGS = APPEND_FLAGS & ~os.O_APPEND
# A turn that wrote more than this is cleared by a truncation (no large write of newlines, and the
# file does not keep a large size).
_BLANK_MAX = 65536
_BLANK = b"\n" * _BLANK_MAX


def _metadata_record(raw: bytes | None) -> dict[str, Any] | None:
    """The JSON object in ``raw`` (``None`` for no file, invalid JSON or another JSON value)."""
    if raw is None:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _metadata_bytes(record: dict[str, Any]) -> bytes:
    """Pretty JSON with whitespace after the status so every status gives the same file length."""
    text = dumps_pretty(record)
    status = dumps_line(record["status"])[:-1]
    line = b'"status": ' + status + b","
    return text.replace(line, line + b" " * max(0, _STATUS_WIDTH - len(status)), 1)


class FileInstanceStore:
    """Durable storage of one agent instance (``<root>/workspaces/<ws>/instances/<instanceDir>/``).

    Not thread-safe and meant for one writer process per instance (the agent process). The file
    descriptor of ``events.jsonl`` stays open so that :meth:`append_event` is one ``os.write``.
    """

    path: Path
    agent_name: str | None
    instance_key: str | None

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        agent_name: str | None = None,
        instance_key: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.agent_name = agent_name
        self.instance_key = instance_key
        self._created_at: str | None = None
        self._metadata_len = -1
        self.messages_dir = self.path / "messages"
        self.extensions_dir = self.path / "extensions"
        self.base_path = self.messages_dir / BASE_FILE
        self.events_path = self.messages_dir / EVENTS_FILE
        self.runtime_events_path = self.messages_dir / RUNTIME_EVENTS_FILE
        self.tmp_path = self.messages_dir / TMP_FILE
        self.marker_path = self.messages_dir / MARKER_FILE
        self.metadata_path = self.path / METADATA_FILE
        self._events_fd: int | None = None
        self._events_size = 0
        self._runtime_fd: int | None = None
        # Kept open between turns: an append commit and a status flip are then a write (plus fsync)
        # without an open and a close (~4 µs each, three per turn). Dropped whenever the file is
        # replaced (rewrite commit, atomic metadata write) or repaired (load).
        self._base_fd: int | None = None
        self._metadata_fd: int | None = None
        self._loaded = False
        self._closed = False
        # What this store knows is on disk: number of messages in base.jsonl, and for each line of
        # events.jsonl the id of the appended message (None for replace/remove/truncate). Used to decide
        # whether a commit may append to base instead of rewriting it.
        self._base_count = 0
        self._pending: list[str | None] = []
        # For each line of events.jsonl this store wrote in this turn: the appended message object and
        # its encoded record (``{...}``, no newline), so that the append commit writes the same bytes to
        # base.jsonl without encoding the message again (None for other events and loaded lines).
        self._pending_lines: list[tuple[Message, bytes] | None] = []
        # Size of base.jsonl while its descriptor is kept (this store is its one writer): the append
        # commit needs it to undo a failed write, and an fstat per commit costs ~1.5 µs.
        self._base_size = 0
        # (base, append_seed(base)) of the last append line
        self._seed = (-1, 0)
        # Set after a failed commit left base/events in a state only a full rewrite is sure to fix.
        self._force_rewrite = False
        # Set when load() found untagged (pre-tag) event lines: the next clear is fsynced.
        self._durable_clear = False
        # The single-writer lease, taken by load() (or clear_history) and released by close().
        self._lease: InstanceLease | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> FileInstanceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the open file descriptors and release the lease. Nothing is lost: every event is
        already in the file."""
        for fd in (self._events_fd, self._runtime_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._events_fd = None
        self._runtime_fd = None
        self._drop_base_fd()
        self._drop_metadata_fd()
        self._loaded = False
        self._closed = True
        self._release_lease()

    @property
    def lease(self) -> InstanceLease | None:
        """The single-writer lease while this store holds it (see :mod:`goondan.storage._lease`)."""
        return self._lease

    @property
    def lease_token(self) -> int | None:
        lease = self._lease
        return lease.token if lease is not None and lease.held else None

    def _take_lease(self) -> None:
        """Become the instance's one writer, or raise ``E_INSTANCE_LOCKED`` naming the holder."""
        lease = self._lease
        if lease is not None and lease.held:
            return
        try:
            self._lease = InstanceLease.acquire(self.path)
        except OSError as exc:
            raise StorageError(
                "E_STORAGE_READ",
                f"could not open {self.path}: {exc}",
                file=str(self.path),
                suggestion=os_error_suggestion(exc),
            ) from exc

    def _release_lease(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()

    def _check_lease(self) -> None:
        lease = self._lease
        if lease is None:
            self._take_lease()
        else:
            lease.check()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # ------------------------------------------------------------------ load / recovery

    def load(self) -> LoadedConversation:
        """Read the conversation, repairing what an interrupted process left behind.

        Returns the committed ``base`` and the residual ``events`` to replay. Raises
        :class:`StorageError` ``E_STORAGE_CORRUPT`` (with file and line) for damage a crash cannot
        explain.
        """
        self._take_lease()  # before anything is read or repaired: another writer may be mid-commit
        self._closed = False
        if self._events_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._events_fd)
            self._events_fd = None
        warnings: list[dict[str, Any]] = []
        self._durable_clear = False
        self._drop_base_fd()
        # Decoding creates hundreds of thousands of acyclic objects; pausing the cyclic GC meanwhile
        # roughly halves the load time of long conversations (nothing here creates cycles).
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            ensure_dir(self.messages_dir)
            self._recover_marker(warnings)
            base, base_offsets = self._read_base(warnings)
            events = self._read_events(base, base_offsets, warnings)
            self._ensure_files()
            fd = open_private(self.events_path, _EVENTS_FLAGS)
        except OSError as exc:
            raise StorageError(
                "E_STORAGE_READ",
                f"could not open the conversation in {self.messages_dir}: {exc}",
                file=str(self.messages_dir),
                suggestion="Check permissions of the state root (--state-root / GOONDAN_STATE_ROOT).",
            ) from exc
        finally:
            if gc_was_enabled:
                gc.enable()
        self._events_fd = fd
        self._events_size = os.fstat(fd).st_size
        self._base_count = len(base)
        self._pending = [
            e["message"].id if e["type"] == "append" else None  # message is a Message after parsing
            for e in events
        ]
        self._pending_lines = [None] * len(events)
        self._force_rewrite = False
        self._loaded = True
        return LoadedConversation(base, events, warnings)

    def _recover_marker(self, warnings: list[dict[str, Any]]) -> None:
        """Finish or roll back a rewrite commit that was interrupted (see the protocol)."""
        marker = read_bytes(self.marker_path) if self.marker_path.exists() else None
        if marker is None:
            if unlink_if_exists(self.tmp_path):
                fsync_dir(self.messages_dir)
            return
        inode: int | None = None
        with contextlib.suppress(orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
            value = orjson.loads(marker)
            if value.get("mode") == "rewrite" and isinstance(value.get("inode"), int):
                inode = value["inode"]
        try:
            base_inode: int | None = os.stat(self.base_path).st_ino
        except FileNotFoundError:
            base_inode = None
        if inode is not None and base_inode == inode:
            # The new base.jsonl was renamed into place (and is durable: it was fsynced before the
            # rename), so the events are already folded into it: finish the commit by clearing them.
            if self.events_path.exists():
                truncate_file(self.events_path, 0)
            warnings.append(
                _warning(
                    CODE_RECOVERED,
                    "completed a base.jsonl rewrite that was interrupted after the rename; events.jsonl was cleared",
                    self.events_path,
                )
            )
        else:
            # The rename never happened: base.jsonl is the old one and events.jsonl still holds the turn.
            warnings.append(
                _warning(
                    CODE_RECOVERED,
                    "discarded an unfinished base.jsonl rewrite; the turn's events will be replayed",
                    self.base_path,
                )
            )
        unlink_if_exists(self.tmp_path)
        self.marker_path.unlink()
        fsync_dir(self.messages_dir)

    def _read_base(self, warnings: list[dict[str, Any]]) -> tuple[list[Message], array[int]]:
        """Stream-decode ``base.jsonl`` straight into messages; also returns each line's byte offset
        (8 bytes a line, for :meth:`_recover_unfinished_append`)."""
        path = self.base_path
        reader = JsonlReader(path)
        from_record = Message.from_record
        base: list[Message] = []
        offsets: array[int] = array("q")
        append, add_offset = base.append, offsets.append
        for lineno, offset, record in reader:
            try:
                append(from_record(record))
            except GoondanError as exc:
                raise corrupt_error(path, lineno, exc.message) from None
            add_offset(offset)
        self._finish_tail(reader, warnings)
        return base, offsets

    def _read_events(
        self, base: list[Message], base_offsets: array[int], warnings: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """The pending turn's events (see :mod:`goondan.storage._events` for how lines of committed
        turns that an un-fsynced clear left behind are told apart); repairs the file and, for an
        append commit that was cut short, base.jsonl."""
        path = self.events_path
        data = read_bytes(path)
        if not data:
            return []
        scan = scan_events(path, data, [m.id for m in base])
        if scan.legacy:
            events = self._read_legacy_events(warnings)
            if events and base:
                self._recover_unfinished_append(base, base_offsets, events, warnings)
            # these lines carry no tag: fsync the next clear so that they can never come back as
            # remnants nobody can tell from the pending turn
            self._durable_clear = True
            return events
        if scan.cut_base_to is not None:
            self._cut_base(base, base_offsets, scan.cut_base_to, warnings)
        if scan.keep_size < scan.size:
            truncate_file(path, scan.keep_size)
            if scan.remnants:
                warnings.append(
                    _warning(
                        CODE_RECOVERED,
                        f"dropped {scan.remnants} line(s) of already committed turns that an interrupted "
                        "clear left in events.jsonl",
                        path,
                    )
                )
            if scan.torn_line is not None:
                warnings.append(torn_warning(path, scan.torn_line, scan.size - scan.keep_size))
        elif scan.unterminated:
            terminate_line(path)
        return scan.events

    def _read_legacy_events(self, warnings: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``events.jsonl`` as written before lines were tagged (tagged lines a newer writer added
        after loading such a file are pending events too)."""
        path = self.events_path
        reader = JsonlReader(path)
        events: list[dict[str, Any]] = []
        for lineno, _offset, record in reader:
            if isinstance(record, dict):
                record.pop(TAG_KEY, None)
                record.pop(CRC_KEY, None)
            try:
                events.append(event_from_record(record))
            except GoondanError as exc:
                raise corrupt_error(path, lineno, exc.message) from None
        self._finish_tail(reader, warnings)
        return events

    @staticmethod
    def _finish_tail(reader: JsonlReader, warnings: list[dict[str, Any]]) -> None:
        """Leave the file ending on a line boundary: cut a torn tail, terminate a complete one."""
        if reader.torn_line is not None:
            warnings.append(torn_warning(reader.path, reader.torn_line, reader.size - reader.good_size))
            truncate_file(reader.path, reader.good_size)
        elif reader.unterminated:
            terminate_line(reader.path)

    def _recover_unfinished_append(
        self,
        base: list[Message],
        offsets: array[int],
        events: list[dict[str, Any]],
        warnings: list[dict[str, Any]],
    ) -> None:
        """Undo the base.jsonl lines of an append commit that died before clearing events.jsonl.

        Such a commit appended (a prefix of) the events' messages to the end of base.jsonl. If the tail
        of base is exactly that - same ids, in order, starting with the first appended message - those
        lines are cut off and the events are replayed instead, so nothing is applied twice.
        """
        if any(e["type"] != "append" for e in events):
            return
        first = events[0]["message"].id
        nb = len(base)
        for k in range(nb - 1, max(0, nb - len(events)) - 1, -1):
            if base[k].id == first:
                break
        else:
            return
        tail = [m.id for m in base[k:]]
        if tail != [e["message"].id for e in events[: nb - k]]:
            return
        self._cut_base(base, offsets, k, warnings)

    def _cut_base(self, base: list[Message], offsets: array[int], k: int, warnings: list[dict[str, Any]]) -> None:
        """Remove base lines ``k:`` - an append commit that died before it finished; its events are
        replayed instead."""
        count = len(base) - k
        truncate_file(self.base_path, offsets[k])
        del base[k:]
        warnings.append(
            _warning(
                CODE_RECOVERED,
                f"removed {count} line(s) of an unfinished append commit from base.jsonl; "
                "the turn's events will be replayed",
                self.base_path,
                k + 1,
            )
        )

    def _ensure_files(self) -> None:
        created = False
        for path in (self.base_path, self.events_path, self.runtime_events_path):
            if not path.exists():
                os.close(open_private(path, APPEND_FLAGS))
                created = True
        if created:
            fsync_dir(self.messages_dir)

    def _require_loaded(self) -> None:
        if self._loaded:
            return
        loaded = self.load()
        if loaded.base or loaded.events:
            # Refuse to write blind: a commit computed without this history would overwrite it.
            self.close()
            self._closed = False
            raise StorageError(
                CODE_NOT_LOADED,
                f"{self.path} holds a conversation that was not loaded",
                file=str(self.path),
                suggestion="Call InstanceStore.load() before appending or committing.",
            )

    # ------------------------------------------------------------------ turn: events and commit

    def append_event(self, event: Mapping[str, Any]) -> None:
        """Append one message event to ``events.jsonl`` now (one ``os.write``, no fsync).

        A process kill after this returns cannot lose the event (it is in the kernel); only a power
        loss before the next commit can, and the turn was not committed then anyway.
        """
        fd = self._events_fd
        if fd is None:
            self._require_loaded()
            fd = self._events_fd
            assert fd is not None
        message = event.get("message")
        line: tuple[Message, bytes] | None = None
        if type(message) is Message and len(event) == 2 and event.get("type") == "append":
            # the common event, encoded once: the message's record is also its base.jsonl line
            base = self._base_count
            seed = self._seed
            if seed[0] != base:
                seed = self._seed = (base, append_seed(base))
            encoded = _encode_json(message.to_record(), "message event", line=False)
            data = tag_append_line(encoded, base, seed[1])
            line = (message, encoded)
        else:
            data = tag_line(_encode_json(event_to_record(event), "message event"), self._base_count)
        before = self._events_size
        try:
            if _atomic.CRASH_AT is not None and _atomic.CRASH_AT == "event_append_partial":
                os.pwrite(fd, data[: len(data) // 2], before)
                die()
            if os.pwrite(fd, data, before) != len(data):
                raise OSError("short write")
        except OSError as exc:
            # Never leave half a line behind: the next event would be glued to it and turn a torn
            # tail into a corrupt middle line.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, before)
            raise _write_error(self.events_path, "append to", exc) from exc
        self._events_size = before + len(data)
        self._pending_lines.append(line)
        if line is not None:
            self._pending.append(line[0].id)
        elif event.get("type") == "append":
            self._pending.append(message.id if isinstance(message, Message) else None)
        else:
            self._pending.append(None)

    def commit(self, next_messages: Sequence[Message], appended: Sequence[Message] | None) -> None:
        """End of turn: make ``next_messages`` the new base and clear ``events.jsonl``.

        ``appended`` (the turn only appended these messages) allows the cheap delta commit; it is used
        only if it matches exactly what this store appended to ``events.jsonl`` and what it knows is in
        base.jsonl - otherwise the base is rewritten, which is always correct.
        """
        self._require_loaded()
        self._check_lease()
        if (
            appended is not None
            and not self._force_rewrite
            and len(next_messages) == self._base_count + len(appended)
            and self._pending == [m.id for m in appended]
            and all(a is b or a.id == b.id for a, b in zip(next_messages[self._base_count :], appended, strict=True))
        ):
            if appended:
                self._commit_append(appended)
        else:
            self._commit_rewrite(next_messages)
        self._base_count = len(next_messages)

    def _drop_base_fd(self) -> None:
        fd, self._base_fd = self._base_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _drop_metadata_fd(self) -> None:
        fd, self._metadata_fd = self._metadata_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _commit_append(self, appended: Sequence[Message]) -> None:
        # The lines this store encoded for the events, where the committed message is the very
        # object it wrote then (messages in the conversation state are private frozen copies);
        # anything else is encoded now. commit() checked that the ids match line for line.
        lines = self._pending_lines
        data = (
            b"\n".join(
                [
                    line[1] if line is not None and line[0] is m else dumps(m.to_record())
                    for m, line in zip(appended, lines, strict=False)
                ]
                + [dumps(m.to_record()) for m in appended[len(lines) :]]
            )
            + b"\n"
        )
        path = self.base_path
        fd = self._base_fd
        if fd is None:
            try:
                fd = self._base_fd = open_private(path, APPEND_FLAGS)
            except OSError as exc:
                raise _write_error(path, "open", exc) from exc
            self._base_size = -1
        try:
            if self._base_size < 0:
                self._base_size = os.fstat(fd).st_size
            before = self._base_size
            try:
                if _atomic.CRASH_AT == "after_base_append_partial":
                    os.write(fd, data[: len(data) // 2])
                    die()
                write_all(fd, data)
                os.fsync(fd)
                self._base_size = before + len(data)
            except OSError as exc:
                try:
                    os.ftruncate(fd, before)
                    os.fsync(fd)
                except OSError:
                    self._force_rewrite = True
                raise _write_error(path, "append to", exc) from exc
        except BaseException:
            self._drop_base_fd()
            raise
        crash_point("after_base_append")
        # base.jsonl now holds the turn durably; from here a crash is repaired by load(), so a failure
        # below must not be retried as another append. Later events apply on top of the new base.
        self._base_count += len(appended)
        # Not fsynced: if a power loss undoes the truncation, the lines left behind are tagged with
        # an older base and provably in base.jsonl, and load() drops them (see _events).
        self._clear_events(durable=self._durable_clear)
        crash_point("after_events_cleared")

    def _commit_rewrite(self, next_messages: Sequence[Message]) -> None:
        tmp, marker, directory = self.tmp_path, self.marker_path, self.messages_dir
        self._drop_base_fd()  # base.jsonl is about to be another file
        try:
            inode = write_file_durably(tmp, _encoded_batches(next_messages))
            crash_point("after_tmp_written")
            write_file_durably(marker, dumps_line({"mode": "rewrite", "inode": inode}))
            fsync_dir(directory)
            crash_point("after_marker_written")
            os.replace(tmp, self.base_path)
        except OSError as exc:
            unlink_if_exists(marker)
            unlink_if_exists(tmp)
            raise _write_error(self.base_path, "rewrite", exc) from exc
        try:
            fsync_dir(directory)
        except OSError as exc:
            self._force_rewrite = True
            raise _write_error(self.base_path, "rewrite", exc) from exc
        crash_point("after_rename")
        self._base_count = len(next_messages)
        # Fsynced: a rewrite may give base.jsonl a length it had before, so lines of this turn
        # could not be told from a later turn's by their tag; and the marker must outlive them.
        self._clear_events(durable=True)
        crash_point("after_events_cleared")
        try:
            marker.unlink()
            fsync_dir(directory)
        except OSError as exc:
            raise _write_error(marker, "remove", exc) from exc

    def _clear_events(self, *, durable: bool) -> None:
        """Empty events.jsonl: truncated (and fsynced) when ``durable``, else its written bytes are
        overwritten with newlines (see ``_EVENTS_FLAGS``) unless the turn wrote a lot."""
        fd = self._events_fd
        size = self._events_size
        try:
            if fd is None:
                fd = self._events_fd = open_private(self.events_path, _EVENTS_FLAGS)
                size = -1  # not written through this descriptor: whatever is there goes
            if durable or size < 0 or size > _BLANK_MAX:
                os.ftruncate(fd, 0)
                if durable:
                    os.fsync(fd)
            elif size and os.pwrite(fd, _BLANK[:size], 0) != size:
                raise OSError("short write")
        except OSError as exc:
            self._force_rewrite = True
            raise _write_error(self.events_path, "clear", exc) from exc
        if durable:
            self._durable_clear = False
        self._events_size = 0
        self._pending = []
        self._pending_lines = []

    # ------------------------------------------------------------------ runtime events

    def append_runtime_event(self, record: Mapping[str, Any], *, owned: bool = False) -> None:
        """Append one runtime event (observability, not conversation state): one line, no fsync.
        (``owned`` only matters to the in-memory store.)"""
        self._write_runtime(_encode_json(record, "runtime event"))

    def append_runtime_events(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Append several runtime events, in order, with one ``write``: what calling
        :meth:`append_runtime_event` for each does, for a fraction of the cost (a turn's eight
        records were eight writes to a growing file, each allocating and updating the inode).
        Every record is encoded before anything is written, so a record that is not JSON writes
        none of them; a failed write leaves none of them either (the retry writes each once)."""
        if records:
            self._write_runtime(b"".join([_encode_json(record, "runtime event") for record in records]))

    def _write_runtime(self, data: bytes) -> None:
        """Append ``data`` (whole lines) to runtime-events.jsonl. A write that fails part way is
        cut back to where it started, so the file keeps ending on a line boundary."""
        fd = self._runtime_fd
        if fd is None:
            try:
                ensure_dir(self.messages_dir)
                fd = open_private(self.runtime_events_path, (APPEND_FLAGS & ~os.O_WRONLY) | os.O_RDWR)
                repair_tail(fd)
            except OSError as exc:
                raise _write_error(self.runtime_events_path, "open", exc) from exc
            self._runtime_fd = fd
        written = 0
        try:
            written = os.write(fd, data)
            while written < len(data):  # regular files rarely write short
                written += os.write(fd, memoryview(data)[written:])
        except OSError as exc:
            with contextlib.suppress(OSError):
                if written:
                    os.ftruncate(fd, os.fstat(fd).st_size - written)
                repair_tail(fd)
            raise _write_error(self.runtime_events_path, "append to", exc) from exc

    def read_runtime_events(self) -> list[dict[str, Any]]:
        """All runtime events; undecodable lines (e.g. a torn last line) are skipped."""
        out: list[dict[str, Any]] = []
        loads = orjson.loads
        for line in read_bytes(self.runtime_events_path).split(b"\n"):
            if not line:
                continue
            try:
                value = loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(value, dict):
                out.append(value)
        return out

    # ------------------------------------------------------------------ extension state

    def extension_state_path(self, extension_name: str) -> Path:
        return self.extensions_dir / component_file_name(extension_name, ".json")

    def load_extension_state(self, extension_name: str) -> Any | None:
        """The saved state of ``extension_name`` (``None`` if it never saved any)."""
        path = self.extension_state_path(extension_name)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError("E_STORAGE_READ", f"could not read {path}: {exc}", file=str(path)) from exc
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise StorageError(
                "E_STORAGE_CORRUPT",
                f"{path}: invalid JSON ({exc})",
                file=str(path),
                suggestion=f"Fix or delete {path.name}; the extension then starts with empty state.",
            ) from exc

    def clear_extension_state(self, extension_name: str) -> None:
        """Forget the saved state of ``extension_name`` (the next load returns ``None``)."""
        path = self.extension_state_path(extension_name)
        try:
            if unlink_if_exists(path):
                fsync_dir(self.extensions_dir)
        except OSError as exc:
            raise _write_error(path, "remove", exc) from exc

    def save_extension_state(self, extension_name: str, value: Any) -> None:
        """Atomically replace the state of ``extension_name`` (readers see old or new, never a mix)."""
        data = _encode_json(value, f"state of extension {extension_name!r}", pretty=True)
        path = self.extension_state_path(extension_name)
        try:
            ensure_dir(self.extensions_dir)
            replace_atomically(path, data)
        except OSError as exc:
            raise _write_error(path, "write", exc) from exc

    # ------------------------------------------------------------------ attachments

    @property
    def attachments_dir(self) -> Path:
        return self.path / "attachments"

    def put_attachment(self, data: bytes) -> str:
        """Write ``attachments/<sha256>`` (mode 0600, atomically and durably: the message that refers
        to it is appended right after, and must never outlive its bytes)."""
        digest = attachment_id(data)
        path = self.attachments_dir / digest
        try:
            if path.stat().st_size == len(data):
                return digest  # same hash and size: the same bytes are already there
        except OSError:
            pass
        try:
            ensure_dir(self.attachments_dir)
            replace_atomically(path, data)
        except OSError as exc:
            raise _write_error(path, "write", exc) from exc
        return digest

    def read_attachment(self, attachment_id: str) -> bytes:
        path = self.attachments_dir / check_id(attachment_id)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise not_found(attachment_id) from None
        except OSError as exc:
            raise StorageError("E_STORAGE_READ", f"could not read {path}: {exc}", file=str(path)) from exc

    # ------------------------------------------------------------------ paused turn (approvals)

    @property
    def paused_turn_path(self) -> Path:
        return self.path / PAUSED_TURN_FILE

    def read_paused_turn(self) -> dict[str, Any] | None:
        """``paused-turn.json`` (read without the lease: approvals are listed while no runtime runs)."""
        path = self.paused_turn_path
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError("E_STORAGE_READ", f"could not read {path}: {exc}", file=str(path)) from exc
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise StorageError(
                "E_STORAGE_CORRUPT",
                f"{path}: invalid JSON ({exc})",
                file=str(path),
                suggestion=f"Delete {path.name} to drop the paused turn (its pending approvals are lost).",
            ) from exc
        return value if isinstance(value, dict) else None

    def write_paused_turn(self, record: Mapping[str, Any] | None) -> None:
        """Atomically replace (or, with ``None``, remove) the paused-turn record; the writer must
        hold the lease, like a commit."""
        self._check_lease()
        path = self.paused_turn_path
        try:
            if record is None:
                if unlink_if_exists(path):
                    fsync_dir(self.path)
                return
            data = _encode_json(dict(record), "paused turn", pretty=True)
            ensure_dir(self.path)
            replace_atomically(path, data)
        except OSError as exc:
            raise _write_error(path, "write", exc) from exc

    # ------------------------------------------------------------------ metadata

    def read_metadata(self) -> dict[str, Any] | None:
        """``metadata.json`` as a dict, or ``None`` if it is missing or not a JSON object."""
        try:
            return _metadata_record(self.metadata_path.read_bytes())
        except OSError:
            return None

    def _overwrite_metadata(self, data: bytes, *, durable: bool = False) -> bool:
        """Status flips rewrite the file in place: ``data`` has exactly the length of what is on disk
        (the status is padded to a fixed width), so one small ``pwrite`` replaces it without the
        flush that ext4 forces on every rename-over-existing (~100-200 µs, twice per turn).

        The descriptor is kept between flips and never ``fstat``-ed: since Linux 6.13 a stat marks
        the inode's timestamps as queried, so the next write takes a fine-grained mtime and dirties
        the inode in the journal (after a commit's fsync, measured on ext4: fstat + pwrite 16.6 µs,
        pwrite alone 9.3 µs, medians of 6,000). It cannot name a file that is no longer there: every
        writer overwrites an existing file of the same length in place (see :meth:`write_metadata`);
        the file is replaced only when it is missing, unreadable or of another length, which no
        writer of the same instance produces while this store is open."""
        fd = self._metadata_fd
        try:
            if fd is None:
                fd = self._metadata_fd = os.open(self.metadata_path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
            if os.pwrite(fd, data, 0) == len(data):
                if durable:
                    os.fsync(fd)
                return True
        except OSError:
            pass
        self._drop_metadata_fd()
        return False

    @staticmethod
    def _flip_bytes(agent_name: str, instance_key: str, status: str, created: str, now: str) -> bytes:
        """:func:`_metadata_bytes` of the record, from a cached head plus the timestamp."""
        key = (agent_name, instance_key, created, status)
        head = _FLIP_HEADS.get(key)
        if head is None:
            record = {
                "agentName": agent_name,
                "instanceKey": instance_key,
                "status": status,
                "createdAt": created,
                "updatedAt": "",
            }
            full = _metadata_bytes(record)
            head = full[: full.rindex(b'""')]
            if len(_FLIP_HEADS) >= _FLIP_HEADS_MAX:
                _FLIP_HEADS.clear()
            _FLIP_HEADS[key] = head
        return head + dumps(now) + b"\n}\n"

    def write_metadata(self, *, agent_name: str, instance_key: str, status: str) -> None:
        """Write ``metadata.json``; ``createdAt`` is kept from the existing file.

        Status changes overwrite the file in place (same length). The first write of this store
        is durable: an existing file of the same length is overwritten in place and fsynced (so
        that no other store's kept descriptor is left naming a replaced file), anything else -
        a new instance, an unreadable file, a file of an older layout - is replaced atomically."""
        now = now_iso()
        created = self._created_at
        if created is not None:
            data = self._flip_bytes(agent_name, instance_key, status, created, now)
            if self._metadata_len == len(data) and self._overwrite_metadata(data):
                return
        else:
            try:
                raw: bytes | None = self.metadata_path.read_bytes()
            except OSError:
                raw = None
            existing = _metadata_record(raw)
            found = existing.get("createdAt") if existing else None
            created = found if isinstance(found, str) else now
            data = self._flip_bytes(agent_name, instance_key, status, created, now)
            if (
                existing is not None
                and raw is not None
                and len(raw) == len(data)
                and self._overwrite_metadata(data, durable=True)
            ):
                self._metadata_len = len(data)
                self._created_at = created
                return
        self._drop_metadata_fd()  # replaced below: the kept descriptor would name the old file
        try:
            ensure_dir(self.path)
            replace_atomically(self.metadata_path, data)
        except OSError as exc:
            raise _write_error(self.metadata_path, "write", exc) from exc
        self._metadata_len = len(data)
        self._created_at = created

    # ------------------------------------------------------------------ fresh start

    def clear_history(self) -> None:
        """A fresh start (``restart --fresh``): delete the conversation, the runtime events and every
        extension's saved state (a memory or summary kept by an extension belongs to the conversation
        and would otherwise leak into the new one). ``metadata.json`` is kept."""
        self._check_lease()
        for fd in (self._events_fd, self._runtime_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._events_fd = None
        self._runtime_fd = None
        self._drop_base_fd()
        try:
            ensure_dir(self.messages_dir)
            # Events first: a crash in between must not leave events to replay on a deleted base.
            for path in (self.marker_path, self.tmp_path, self.events_path, self.base_path):
                unlink_if_exists(path)
            unlink_if_exists(self.runtime_events_path)
            unlink_if_exists(self.paused_turn_path)
            self._clear_extension_states()
            self._clear_attachments()
            self._ensure_files()
            fsync_dir(self.messages_dir)
            self._events_fd = open_private(self.events_path, _EVENTS_FLAGS)
        except OSError as exc:
            raise _write_error(self.messages_dir, "clear", exc) from exc
        self._events_size = 0
        self._base_count = 0
        self._pending = []
        self._pending_lines = []
        self._force_rewrite = False
        self._durable_clear = False
        self._loaded = True
        self._closed = False

    def _clear_attachments(self) -> None:
        try:
            entries = list(os.scandir(self.attachments_dir))
        except FileNotFoundError:
            return
        for entry in entries:
            if entry.is_file(follow_symlinks=False):
                unlink_if_exists(Path(entry.path))
        fsync_dir(self.attachments_dir)

    def _clear_extension_states(self) -> None:
        try:
            entries = list(os.scandir(self.extensions_dir))
        except FileNotFoundError:
            return
        for entry in entries:
            if entry.name.endswith(".json") and entry.is_file(follow_symlinks=False):
                unlink_if_exists(Path(entry.path))
        fsync_dir(self.extensions_dir)


__all__ = ["FileInstanceStore", "LoadedConversation"]
