"""A workspace (``<root>/workspaces/<workspaceId>/``): the set of agent instances of one swarm."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from .._ids import parse_iso
from .._json import dumps_pretty
from ..errors import GoondanError, StorageError
from ._atomic import ensure_dir, fsync_dir, replace_atomically
from ._identity import WORKSPACE_FILE, WorkspaceIdentity, read_workspace_record
from ._instance import BASE_FILE, EVENTS_FILE, METADATA_FILE, FileInstanceStore
from ._lease import CODE_LOCKED, InstanceLease, os_error_suggestion, read_holder
from ._paths import instance_dir_name, parse_instance_dir_name
from ._reader import FileInstanceReader

_DELETING_PREFIX = ".deleting-"


@dataclass(slots=True)
class InstanceInfo:
    """One instance as described by its ``metadata.json``.

    ``problem`` is set only on the entries of :meth:`FileWorkspaceStore.unreadable_instances`: why
    the metadata could not be read (their name comes from the directory, their times from its files)."""

    agent_name: str
    instance_key: str
    status: str
    created_at: datetime
    updated_at: datetime
    path: Path
    problem: str | None = None
    #: whether a runtime holds the instance's lease now, where the store tells it with the listing
    #: (PostgreSQL: a session holds its lock); None where it does not. A ``processing`` instance
    #: nobody holds is a turn whose runtime was killed (shown as ``interrupted``).
    held: bool | None = None


#: the status shown for an instance whose ``metadata.json`` cannot be read
UNREADABLE_STATUS = "unreadable"


def _parse_info(directory: Path) -> tuple[InstanceInfo | None, str]:
    """The instance of ``directory``, or ``None`` and why its ``metadata.json`` is not usable."""
    try:
        meta = orjson.loads((directory / METADATA_FILE).read_bytes())
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    except orjson.JSONDecodeError:
        return None, "is not valid JSON"
    if not isinstance(meta, dict):
        return None, "is not a JSON object"
    agent, key, status = meta.get("agentName"), meta.get("instanceKey"), meta.get("status")
    created, updated = meta.get("createdAt"), meta.get("updatedAt")
    if not (isinstance(agent, str) and isinstance(key, str) and isinstance(status, str)):
        return None, "lacks agentName, instanceKey or status"
    if not (isinstance(created, str) and isinstance(updated, str)):
        return None, "lacks createdAt or updatedAt"
    try:
        created_at, updated_at = parse_iso(created), parse_iso(updated)
    except ValueError:
        return None, "has an invalid createdAt or updatedAt"
    return InstanceInfo(agent, key, status, created_at, updated_at, directory), ""


def _read_info(directory: Path) -> InstanceInfo | None:
    return _parse_info(directory)[0]


#: the status (and ``problem``) of an instance directory that never got its metadata nor any
#: conversation: its creation was interrupted (a ``gdn run`` killed at that moment); nothing is lost
#: by deleting it, and its next turn completes it
INCOMPLETE_STATUS = "incomplete"
INCOMPLETE_PROBLEM = f"{METADATA_FILE} missing and nothing stored: its creation was interrupted"


def _being_created(directory: Path) -> bool:
    """Whether a live process of this host holds the lease of ``directory`` (an instance being
    created right now, whose metadata is about to be written). Read from ``lease.json`` only: taking
    the lock to find out would refuse that very process."""
    holder = read_holder(directory)
    pid = holder.get("pid") if holder else None
    if not isinstance(pid, int) or (holder or {}).get("host") != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True


def _unreadable_info(directory: Path, reason: str) -> InstanceInfo | None:
    """An instance directory whose metadata cannot be read, named from the directory. A directory
    named as an instance without metadata nor conversation is listed too (:data:`INCOMPLETE_STATUS`:
    a creation that was interrupted, which the user must be able to see and delete), unless a live
    process holds its lease (an instance being created right now)."""
    times: list[float] = []
    for file in (directory / METADATA_FILE, directory / "messages" / BASE_FILE, directory / "messages" / EVENTS_FILE):
        try:
            st = file.stat()
        except OSError:
            continue
        if file.name == METADATA_FILE or st.st_size > 0:
            times.append(st.st_mtime)
    try:
        agent, key = parse_instance_dir_name(directory.name)
    except ValueError:
        if not times:
            return None  # an empty directory not named as an instance: not one of ours
        agent, key = "?", directory.name
    if not times:
        if reason != "missing" or _being_created(directory):
            return None
        try:
            times.append(directory.stat().st_mtime)
        except OSError:
            return None
        status, problem = INCOMPLETE_STATUS, INCOMPLETE_PROBLEM
    else:
        status, problem = UNREADABLE_STATUS, f"{METADATA_FILE} {reason}"
    first, last = (datetime.fromtimestamp(t, UTC) for t in (min(times), max(times)))
    return InstanceInfo(agent, key, status, first, last, directory, problem)


class FileWorkspaceStore:
    """Instances of one workspace on disk. Cheap to construct: nothing is created until an instance writes."""

    state_root: Path
    workspace_id: str
    path: Path
    instances_path: Path

    def __init__(
        self,
        state_root: str | os.PathLike[str],
        workspace_id: str,
        *,
        identity: WorkspaceIdentity | None = None,
    ) -> None:
        if (
            not workspace_id
            or workspace_id in (".", "..")
            or "/" in workspace_id
            or "\\" in workspace_id
            or "\0" in workspace_id
        ):
            raise ValueError(f"invalid workspace id {workspace_id!r}; build it with workspace_id()")
        self.state_root = Path(state_root)
        self.workspace_id = workspace_id
        self.path = self.state_root / "workspaces" / workspace_id
        self.instances_path = self.path / "instances"
        self._stores: dict[tuple[str, str], FileInstanceStore] = {}
        self.identity = identity
        self._recorded = identity is None

    def record(self) -> dict[str, Any] | None:
        """What ``workspace.json`` says about the bundle this workspace belongs to."""
        return read_workspace_record(self.path)

    def _record_identity(self) -> None:
        """Write ``workspace.json`` once, when the first instance is opened (read-only commands and
        runtimes that never write leave nothing behind). The bundle directory is refreshed when a
        package-named bundle was moved."""
        if self._recorded or self.identity is None:
            return
        wanted = self.identity.record()
        try:
            if read_workspace_record(self.path) != wanted:
                ensure_dir(self.path)
                replace_atomically(self.path / WORKSPACE_FILE, dumps_pretty(wanted))
        except OSError as exc:
            raise StorageError(
                "E_STORAGE_WRITE",
                f"could not write {self.path / WORKSPACE_FILE}: {exc}",
                file=str(self.path),
                suggestion=os_error_suggestion(exc),
            ) from exc
        self._recorded = True

    def instance_path(self, agent_name: str, instance_key: str) -> Path:
        return self.instances_path / instance_dir_name(agent_name, instance_key)

    def instance(self, agent_name: str, instance_key: str) -> FileInstanceStore:
        """The store of one instance. The same open store is returned until it is closed, so one
        process never holds two writers on the same files."""
        key = (agent_name, instance_key)
        store = self._stores.get(key)
        if store is None or store.closed:
            self._record_identity()
            store = FileInstanceStore(
                self.instance_path(agent_name, instance_key),
                agent_name=agent_name,
                instance_key=instance_key,
            )
            self._stores[key] = store
        return store

    def reader(self, agent_name: str, instance_key: str) -> FileInstanceReader:
        """A read-only view of the instance (no lease, nothing created): see :mod:`._reader`."""
        return FileInstanceReader(
            self.instance_path(agent_name, instance_key), agent_name=agent_name, instance_key=instance_key
        )

    def _instance_dirs(self) -> list[Path]:
        """The directories under ``instances/`` (not hidden ones: deletions in progress)."""
        try:
            entries = list(os.scandir(self.instances_path))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [Path(e.path) for e in entries if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]

    def list_instances(self) -> list[InstanceInfo]:
        """Every instance with a valid ``metadata.json``, sorted by (agent, key). Directories with
        missing or invalid metadata are skipped (they may be half-created or foreign; see
        :meth:`unreadable_instances`)."""
        infos = [info for info in map(_read_info, self._instance_dirs()) if info is not None]
        infos.sort(key=lambda i: (i.agent_name, i.instance_key, i.path.name))
        return infos

    def unreadable_instances(self) -> list[InstanceInfo]:
        """Instance directories that :meth:`list_instances` leaves out because their ``metadata.json``
        is corrupt (or missing while the conversation has content), each with ``problem`` set and
        status :data:`UNREADABLE_STATUS`; and those whose creation was interrupted (no metadata,
        nothing stored, no live holder), with status :data:`INCOMPLETE_STATUS`. The conversation in
        ``messages/`` does not depend on the metadata: ``gdn instance list`` shows these so that a
        user does not take them for lost (and can delete an incomplete one)."""
        out: list[InstanceInfo] = []
        for directory in self._instance_dirs():
            info, reason = _parse_info(directory)
            unreadable = _unreadable_info(directory, reason) if info is None else None
            if unreadable is not None:
                out.append(unreadable)
        out.sort(key=lambda i: i.path.name)
        return out

    def delete_instance(self, agent_name: str, instance_key: str, *, force: bool = False) -> bool:
        """Remove the instance (history, runtime events, extension state, metadata).

        Returns ``False`` if there was nothing to delete. The directory is first renamed to a hidden
        name (atomic), so a crash mid-way never leaves a half-deleted instance that still looks valid.
        An instance another runtime holds raises ``E_INSTANCE_LOCKED`` unless ``force`` (its writer
        then fails its next commit with ``E_INSTANCE_LEASE_LOST`` instead of writing into a deleted
        directory's successor).
        """
        store = self._stores.pop((agent_name, instance_key), None)
        if store is not None:
            store.close()
        targets: list[Path] = []
        path = self.instance_path(agent_name, instance_key)
        if path.is_dir():
            targets.append(path)
        else:
            # Instances written by other tools may live under another directory name; match metadata.
            targets.extend(
                info.path
                for info in self.list_instances()
                if info.agent_name == agent_name and info.instance_key == instance_key
            )
        deleted = False
        for target in targets:
            lease: InstanceLease | None = None
            try:
                lease = InstanceLease.acquire(target, wait_for_dead_holder=0)
            except GoondanError as exc:
                if exc.code != CODE_LOCKED or not force:
                    raise
            except OSError as exc:  # a read-only or full state root: nothing was deleted
                raise StorageError(
                    "E_STORAGE_WRITE",
                    f"could not delete {target}: {exc}",
                    file=str(target),
                    suggestion=os_error_suggestion(exc),
                ) from exc
            try:
                deleted = self._delete_dir(target) or deleted
            finally:
                if lease is not None:
                    lease.release()
        self._sweep_deleting()
        return deleted

    def _delete_dir(self, target: Path) -> bool:
        if not target.is_dir():
            return False
        doomed = target.with_name(f"{_DELETING_PREFIX}{target.name[:150]}-{os.urandom(4).hex()}")
        try:
            os.rename(target, doomed)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StorageError(
                "E_STORAGE_WRITE",
                f"could not delete {target}: {exc}",
                file=str(target),
                suggestion=os_error_suggestion(exc),
            ) from exc
        with contextlib.suppress(OSError):
            fsync_dir(self.instances_path)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    def _sweep_deleting(self) -> None:
        """Finish deletions a crashed process left half done."""
        try:
            entries = list(os.scandir(self.instances_path))
        except OSError:
            return
        for entry in entries:
            if entry.name.startswith(_DELETING_PREFIX) and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)

    def close(self) -> None:
        for store in self._stores.values():
            store.close()
        self._stores.clear()


__all__ = ["FileWorkspaceStore", "InstanceInfo"]
