"""Durable, crash-safe storage of workspaces and agent instances (docs/architecture.md#durability).

Layout::

    <stateRoot>/workspaces/<workspaceId>/workspace.json   {workspaceId, bundle, package, swarm, instanceKey}
    <stateRoot>/workspaces/<workspaceId>/instances/<instanceDir>/
        lease.lock, lease.json        single-writer lease (see _lease)
        metadata.json                 {agentName, instanceKey, status, createdAt, updatedAt}
        messages/base.jsonl           committed messages, one JSON record per line
        messages/events.jsonl         message events of the turn in progress (residual after a crash)
        messages/runtime-events.jsonl observability records, append-only
        messages/.commit.json         transient marker of a base rewrite in progress
        extensions/<extensionName>.json

The invariant: at every instant, ``base.jsonl`` folded with ``events.jsonl`` is the
conversation including everything the current turn made durable. A process killed at any point loses no
committed message and applies no event twice; a restart replays the residual events.

Crash-safety protocol
=====================

**During a turn** every message event is written to ``events.jsonl`` as *one* ``os.write`` of
``json + "\\n"`` on a descriptor opened with ``O_APPEND`` and kept open. A single append-mode write of a
small buffer lands entirely in the page cache or not at all, so a killed process leaves at worst a torn
final line (only a power loss or a full disk can produce one). No fsync per event: that would cost
milliseconds per event, and an uncommitted turn is allowed to be lost on power failure - the commit is
the durability point.

**Reading (load)** streams each file in 1 MiB chunks and decodes line by line with orjson straight into
messages, so a long history is never held as raw text, split lines and decoded values at once. A torn
*final* line (one that does not decode) never held a whole record: it is dropped with an
``E_STORAGE_TORN_LINE`` warning and physically truncated, so the next append starts on a fresh line
instead of being glued to garbage. A final line that decodes but lacks its newline is a complete record
and is kept; the newline is added before anything else is appended. Damage anywhere else cannot come
from a crash and raises ``E_STORAGE_CORRUPT`` with file and line: committed data is never silently
discarded.

Each ``events.jsonl`` line names the base it applies on top of and carries a checksum
(``{"base":N,"crc":C,"type":...}``, see :mod:`goondan.storage._events`).

**Append commit** (the turn only appended messages - the common case), one fsync:

1. append the new lines to ``base.jsonl`` with one write, then ``fsync`` it - the turn is durable;
2. clear ``events.jsonl``, *not* fsynced: the bytes the turn wrote there are overwritten with newlines
   (blank lines, which every reader skips; the next turn writes its lines from offset 0 over them),
   which costs less than a truncation and the reallocation after it; a turn of more than 64 KiB of
   events is truncated instead.

Events are cleared only after the new base is durable, so there is no instant where the turn exists in
neither file. A power loss can undo step 2, in whole or in part (and let the next turn's lines land over the old bytes):
the lines left behind are tagged with a base shorter than the current one and their messages are in
``base.jsonl``, so ``load()`` drops them (with cut or zeroed lines after the pending turn's) and keeps
only the pending turn - and reports ``E_STORAGE_CORRUPT`` for anything no crash explains. A crash in
the middle of step 1 leaves the turn in *both* files: the pending lines are tagged with a base
shorter than the current one, and if ``base.jsonl``'s tail is a strict prefix of their appended
messages (same ids, in order - ids are unique random ids), those base lines are an unfinished commit;
they are truncated away and the events replayed. A torn half-line from step 1 is first dropped as a
torn tail. The store uses the append commit only when the ``appended`` messages are exactly the append
events it wrote to ``events.jsonl`` since the last commit and it knows how many messages base holds;
otherwise it rewrites, which is always correct. Untagged lines (written by older versions) are read as
before, and the clear after loading them is fsynced.

**Rewrite commit** (replace/remove/truncate, or anything the append commit cannot prove):

1. write ``base.jsonl.tmp`` and ``fsync`` it - the new base is durable before anything points at it;
2. write ``.commit.json`` ``{"mode": "rewrite", "inode": <inode of the tmp file>}``, fsync it and the
   directory - the marker must be durable before the rename can be;
3. ``rename(base.jsonl.tmp, base.jsonl)`` and fsync the directory - the atomic switch;
4. clear ``events.jsonl`` (ftruncate + fsync: a rewrite may give base a length it had before, so the
   turn's lines could not be told from a later turn's by their tag);
5. delete the marker and fsync the directory.

On load, a marker whose inode equals the inode of ``base.jsonl`` means the rename happened (step 3 done):
the events are already folded into base, so they are cleared and the marker deleted (finishing steps 4
and 5). A marker with another inode (or unreadable, i.e. step 2 never completed) means the rename did not
happen: the tmp file and marker are deleted and the events replayed on the old base. A stray tmp file
without a marker is deleted. The marker is deleted only after the events are durably cleared, otherwise
a crash could replay already-folded events; its deletion is itself fsynced so that a power loss cannot
resurrect it and wipe the events of a later turn.

**Failures** of a commit raise :class:`~goondan.errors.StorageError` and keep ``events.jsonl``
intact; a failure after base became durable makes the next commit a rewrite, so nothing is written twice.

Crash points for the tests: the private ``GOONDAN_STORAGE_CRASH_AT`` environment variable (read once at
import) SIGKILLs the process at ``event_append_partial``, ``after_base_append_partial``,
``after_base_append``, ``after_tmp_written``, ``after_marker_written``, ``after_rename`` and
``after_events_cleared``.

Other files: ``metadata.json`` and extension state are replaced atomically (tmp + fsync + rename +
directory fsync); ``runtime-events.jsonl`` is append-only without fsync and read tolerantly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._backends import (
    ENTRY_POINT_GROUP,
    ENV_STORE,
    FileStoreBackend,
    MemoryStoreBackend,
    StoreFactory,
    open_store,
    register_store,
    runtime_store,
)
from ._identity import WorkspaceIdentity, bundle_workspace_identity, read_workspace_record, workspace_identity
from ._instance import FileInstanceStore, LoadedConversation
from ._lease import InstanceLease
from ._memory import MemoryInstanceReader, MemoryInstanceStore, MemorySpace, MemoryWorkspaceStore
from ._paths import instance_dir_name, parse_instance_dir_name, resolve_state_root, workspace_id
from ._protocol import InstanceReader, InstanceStore, StoreBackend, WorkspaceStore
from ._reader import FileInstanceReader
from ._workspace import FileWorkspaceStore, InstanceInfo

#: Kept for code written before the protocol existed: any instance store.
AnyInstanceStore = InstanceStore

if TYPE_CHECKING:
    # Both backends implement the protocols; mypy checks these assignments.
    _file_instance: type[InstanceStore] = FileInstanceStore
    _memory_instance: type[InstanceStore] = MemoryInstanceStore
    _file_workspace: type[WorkspaceStore] = FileWorkspaceStore
    _memory_workspace: type[WorkspaceStore] = MemoryWorkspaceStore
    _file_backend: type[StoreBackend] = FileStoreBackend
    _memory_backend: type[StoreBackend] = MemoryStoreBackend
    _file_reader: type[InstanceReader] = FileInstanceReader
    _memory_reader: type[InstanceReader] = MemoryInstanceReader

__all__ = [
    "ENTRY_POINT_GROUP",
    "ENV_STORE",
    "AnyInstanceStore",
    "FileInstanceReader",
    "FileInstanceStore",
    "FileStoreBackend",
    "FileWorkspaceStore",
    "InstanceInfo",
    "InstanceLease",
    "InstanceReader",
    "InstanceStore",
    "LoadedConversation",
    "MemoryInstanceReader",
    "MemoryInstanceStore",
    "MemorySpace",
    "MemoryStoreBackend",
    "MemoryWorkspaceStore",
    "StoreBackend",
    "StoreFactory",
    "WorkspaceIdentity",
    "WorkspaceStore",
    "bundle_workspace_identity",
    "instance_dir_name",
    "open_store",
    "parse_instance_dir_name",
    "read_workspace_record",
    "register_store",
    "resolve_state_root",
    "runtime_store",
    "workspace_id",
    "workspace_identity",
]
