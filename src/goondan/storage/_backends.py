"""``store=`` URLs: which backend keeps the instances, chosen by URL scheme.

* ``None`` (and no ``GOONDAN_STORE``) - the filesystem store under the state root.
* a filesystem path, or ``file:///abs/dir`` - the filesystem store with that directory as its root
  (``<dir>/workspaces/...``); the state root keeps everything else (run registry, packages).
* ``memory:`` - an in-memory store private to the runtime; ``memory://NAME`` - an in-memory space
  shared by every runtime of this process under that name.
* any other scheme - a factory registered with :func:`register_store` or published by an installed
  distribution under the entry point group ``goondan.stores`` (entry point name = scheme, object = a
  :class:`StoreFactory`).
* ``postgresql://`` / ``postgres://`` - the PostgreSQL store (:mod:`goondan.storage._postgres`, extra
  ``postgres``); a factory registered for the scheme takes precedence.

A scheme is at least two characters, so a Windows-style ``C:\\dir`` or a relative path with a colon
further on (``./a:b``) stays a path.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlsplit

from ..errors import GoondanError
from ._identity import WorkspaceIdentity
from ._memory import MemorySpace, MemoryWorkspaceStore, named_space
from ._protocol import StoreBackend
from ._workspace import FileWorkspaceStore

ENV_STORE = "GOONDAN_STORE"
ENTRY_POINT_GROUP = "goondan.stores"
CODE_UNSUPPORTED = "E_STORE_UNSUPPORTED"
CODE_INVALID = "E_STORE_URL_INVALID"

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]+):")
_MEMORY_NAME = re.compile(r"[A-Za-z0-9._\-]{1,128}")
_POSTGRES = ("postgresql", "postgres")


class StoreFactory(Protocol):
    """Opens the backend of one URL. ``state_root`` is the runtime's state root, for backends that
    keep local files beside their data."""

    def __call__(self, url: str, *, state_root: Path) -> StoreBackend: ...


class FileStoreBackend:
    """The filesystem store: ``<root>/workspaces/<workspaceId>/instances/<instanceDir>/``."""

    durable = True

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(os.path.expanduser(os.fspath(root))).absolute()
        self.url = self.root.as_uri()

    def workspace(self, workspace_id: str, *, identity: WorkspaceIdentity | None = None) -> FileWorkspaceStore:
        return FileWorkspaceStore(self.root, workspace_id, identity=identity)

    def list_workspaces(self) -> list[str]:
        """The directories under ``<root>/workspaces`` (hidden ones and files skipped)."""
        try:
            entries = list(os.scandir(self.root / "workspaces"))
        except OSError:
            return []
        return sorted(e.name for e in entries if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))

    def __repr__(self) -> str:
        return f"FileStoreBackend({str(self.root)!r})"


class MemoryStoreBackend:
    """The in-memory store (see :mod:`goondan.storage._memory`)."""

    durable = False

    def __init__(self, space: MemorySpace | None = None) -> None:
        self.space = space if space is not None else MemorySpace()
        self.url = f"memory://{self.space.name}" if self.space.name else "memory:"

    def workspace(self, workspace_id: str, *, identity: WorkspaceIdentity | None = None) -> MemoryWorkspaceStore:
        return MemoryWorkspaceStore(self.space, workspace_id, identity=identity)

    def list_workspaces(self) -> list[str]:
        return self.space.workspace_ids()

    def __repr__(self) -> str:
        return f"MemoryStoreBackend({self.url!r})"


_REGISTRY: dict[str, StoreFactory] = {}
_REGISTRY_LOCK = threading.Lock()


def register_store(scheme: str, factory: StoreFactory) -> None:
    """Make ``scheme://...`` URLs open ``factory(url, state_root=...)`` (replaces an earlier one).

    Installed packages do the same without code through the ``goondan.stores`` entry point group.
    """
    if not _SCHEME.fullmatch(scheme + ":") or scheme.lower() in ("file", "memory"):
        raise GoondanError(
            CODE_INVALID,
            f"cannot register a store for the scheme {scheme!r}",
            suggestion="Use a URL scheme of two or more letters, digits, '+', '.' or '-', other than file/memory.",
        )
    with _REGISTRY_LOCK:
        _REGISTRY[scheme.lower()] = factory


def _entry_point_factory(scheme: str) -> StoreFactory | None:
    """The factory an installed distribution publishes for ``scheme`` (loaded only when asked for,
    so runtimes using the built-in stores never scan the installed packages)."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name.lower() == scheme:
            factory = ep.load()  # a broken plugin keeps its own traceback
            if not callable(factory):
                raise GoondanError(
                    CODE_UNSUPPORTED,
                    f"the entry point {ep.value!r} for store scheme {scheme!r} is not callable",
                    suggestion="Point the goondan.stores entry point at a factory(url, *, state_root).",
                )
            return factory  # type: ignore[no-any-return]
    return None


def _invalid(url: str, why: str, suggestion: str) -> GoondanError:
    return GoondanError(CODE_INVALID, f"invalid store URL {url!r}: {why}", suggestion=suggestion)


def _file_root(url: str) -> Path:
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise _invalid(url, str(exc), "Write file:///absolute/dir, or give the directory path itself.") from exc
    if parts.netloc not in ("", "localhost") or not parts.path.startswith("/") or parts.query or parts.fragment:
        raise _invalid(
            url,
            "a file: URL names an absolute local directory",
            "Write file:///absolute/dir (three slashes), or give the directory path itself.",
        )
    return Path(unquote(parts.path))


def _memory_backend(url: str, rest: str) -> MemoryStoreBackend:
    if rest == "":
        return MemoryStoreBackend()
    name = rest[2:] if rest.startswith("//") else None
    if name is None or not _MEMORY_NAME.fullmatch(name):
        raise _invalid(
            url,
            "the in-memory store is 'memory:' (private to the runtime) or 'memory://NAME'",
            "NAME is 1-128 letters, digits, '.', '_' or '-'; runtimes of one process that use the same "
            "NAME share the store.",
        )
    return MemoryStoreBackend(named_space(name))


def open_store(
    store: str | os.PathLike[str] | StoreBackend | None,
    *,
    state_root: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
) -> StoreBackend:
    """The backend ``store`` names (see the module docstring). ``None`` reads ``GOONDAN_STORE`` from
    ``env`` (default ``os.environ``) and falls back to the filesystem store under ``state_root``."""
    if store is None:
        value = (os.environ if env is None else env).get(ENV_STORE)
        if not value or not value.strip():
            return FileStoreBackend(state_root)
        store = value
    if isinstance(store, os.PathLike):
        return FileStoreBackend(os.fspath(store))
    if not isinstance(store, str):
        return store  # already a backend
    url = store.strip()
    if not url:
        raise _invalid(store, "it is empty", "Leave the store unset for the filesystem store, or use 'memory:'.")
    if "\0" in url:
        raise _invalid(store, "it contains a NUL character", "Give a directory path or a URL.")
    match = _SCHEME.match(url)
    if match is None:
        _refuse_scheme_typo(url)
        return FileStoreBackend(url)
    scheme = match.group(1).lower()
    rest = url[match.end() :]
    if scheme == "file":
        return FileStoreBackend(_file_root(url))
    if scheme == "memory":
        return _memory_backend(url, rest)
    factory = _REGISTRY.get(scheme) or _entry_point_factory(scheme)
    if factory is not None:
        return factory(url, state_root=Path(state_root))
    if scheme in _POSTGRES:
        from ._postgres import open_postgres  # psycopg itself is imported on first use

        return open_postgres(url, state_root=Path(state_root))
    known = sorted({"file", "memory", "postgresql", *_REGISTRY})
    raise GoondanError(
        CODE_UNSUPPORTED,
        f"no store is registered for the URL scheme {scheme!r} ({_redact(url)})",
        suggestion=(
            f"Known schemes: {', '.join(known)}. A third-party store registers its scheme with "
            f"goondan.storage.register_store or the {ENTRY_POINT_GROUP!r} entry point group; "
            "a directory path (without a scheme) selects the filesystem store."
        ),
    )


def _refuse_scheme_typo(path: str) -> None:
    """A store "path" whose first component is a store scheme (``postgresql//db-host/app``,
    ``postgres/db-host/app``: the colon forgotten) is a mistyped URL, not a directory: it was taken
    for one, and the conversations went to ``./postgresql/db-host/app`` instead of the database,
    silently. Refused unless that directory exists (someone does keep state in a directory of
    that name)."""
    head, _, rest = path.partition("/")
    scheme = head.lower()
    if scheme not in ("file", "memory", *_POSTGRES, *_REGISTRY) or os.path.isdir(path):
        return
    rest = rest.lstrip("/")
    meant = f"{scheme}:///{rest}" if scheme == "file" else f"{scheme}://{rest}" if rest else f"{scheme}:"
    shown = path if "@" not in path else f"{head}/***@{path.rsplit('@', 1)[1]}"  # no password printed
    raise _invalid(
        shown,
        f"it reads as the directory {shown!r}, but {head!r} is a store URL scheme and the ':' is missing",
        f"Write {_redact(meant)!r} for that store, or './{shown}' if you do mean a directory.",
    )


def _redact(url: str) -> str:
    """``url`` without a password, safe to print."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
    except ValueError:
        return url.split("@", 1)[-1] if "@" in url else url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return parts._replace(netloc=f"{user}:***@{netloc}").geturl()


def runtime_store(
    store: str | os.PathLike[str] | StoreBackend | None,
    *,
    persist: bool,
    state_root: str | os.PathLike[str],
    env: Mapping[str, str] | None = None,
) -> StoreBackend:
    """The backend of a runtime: ``persist=False`` means the in-memory store (an explicit ``store``
    that is not in memory contradicts it)."""
    if persist:
        return open_store(store, state_root=state_root, env=env)
    if store is None:
        return MemoryStoreBackend()
    backend = open_store(store, state_root=state_root, env=env)
    if backend.durable:
        raise GoondanError(
            "E_RUNTIME_OPTION",
            f"persist=False (--no-persist) keeps conversations in memory, but store={_show(store)} is durable",
            suggestion="Drop one of the two: persist=False is the same as store='memory:'.",
        )
    return backend


def _show(store: object) -> str:
    return repr(_redact(store)) if isinstance(store, str) else repr(store)


__all__ = [
    "ENTRY_POINT_GROUP",
    "ENV_STORE",
    "FileStoreBackend",
    "MemoryStoreBackend",
    "StoreFactory",
    "open_store",
    "register_store",
    "runtime_store",
]
