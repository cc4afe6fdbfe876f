"""Serving Studio: the host rule, the token, and uvicorn on a socket bound before it starts.

Studio shows conversations, which may hold anything users told their agents, so it listens on the
loopback interface unless told otherwise, and a non-loopback host needs a token (every request must
then carry it). The socket is bound here, before uvicorn starts, so a port that is taken is a clear
``E_STUDIO_PORT_IN_USE`` instead of a log line from inside the server.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
from dataclasses import dataclass
from typing import Any

from ..errors import GoondanError

ENV_TOKEN = "GOONDAN_STUDIO_TOKEN"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4000


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# a token guards every conversation on a reachable address: short ones are guessed
MIN_TOKEN_LENGTH = 12


def check_host(host: str, token: str | None) -> None:
    """Refuse a non-loopback host without a token (``E_STUDIO_HOST_NOT_LOOPBACK``) or with one short
    enough to guess (``E_STUDIO_TOKEN_WEAK``)."""
    if not is_loopback(host) and not token:
        raise GoondanError(
            "E_STUDIO_HOST_NOT_LOOPBACK",
            f"refusing to serve Studio on {host}: it is not a loopback address and no token is set",
            suggestion=(
                f"Studio shows whole conversations. Keep the default --host {DEFAULT_HOST}, or set a token "
                f"(--token T or {ENV_TOKEN}) that every request must then carry."
            ),
        )
    if not is_loopback(host) and token is not None and len(token.strip()) < MIN_TOKEN_LENGTH:
        raise GoondanError(
            "E_STUDIO_TOKEN_WEAK",
            f"refusing to serve Studio on {host} with a token of {len(token.strip())} characters",
            suggestion=(
                f"Anyone who reaches {host} can guess a short token. Use at least {MIN_TOKEN_LENGTH} characters, "
                "for example: python -c 'import secrets; print(secrets.token_urlsafe(24))'"
            ),
        )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (``E_STUDIO_PORT_IN_USE`` / ``E_STUDIO_BIND`` otherwise)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise GoondanError(
            "E_STUDIO_BIND", f"cannot resolve --host {host!r}: {exc}", suggestion="Give an IP address or localhost."
        ) from exc
    family, _type, _proto, _canon, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno in (98, 48, 10048):  # EADDRINUSE on Linux, macOS, Windows
            raise GoondanError(
                "E_STUDIO_PORT_IN_USE",
                f"port {port} on {host} is already in use",
                suggestion="Pick another one with --port N (0 picks a free port).",
            ) from exc
        raise GoondanError(
            "E_STUDIO_BIND", f"cannot listen on {host}:{port}: {exc}", suggestion="Check --host and --port."
        ) from exc
    sock.set_inheritable(True)
    return sock


@dataclass(slots=True)
class StudioServer:
    """A bound, not yet running Studio (``url`` is known before :meth:`run`)."""

    app: Any
    sock: socket.socket
    host: str
    token: str | None
    stopping: threading.Event

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    @property
    def url(self) -> str:
        host = self.host if ":" not in self.host else f"[{self.host}]"
        if host in ("0.0.0.0", "[::]"):
            host = "127.0.0.1"
        return f"http://{host}:{self.port}/"

    def run(self) -> None:
        """Serve until interrupted (Ctrl+C / SIGTERM end it cleanly)."""
        import uvicorn

        stopping = self.stopping

        class Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: Any) -> None:
                stopping.set()  # open event streams end instead of holding the shutdown up
                super().handle_exit(sig, frame)

        config = uvicorn.Config(
            self.app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5
        )
        Server(config).run(sockets=[self.sock])


def make_server(
    *,
    store: str | None,
    state_root: str | os.PathLike[str],
    bundle_path: str | None = None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
) -> StudioServer:
    """Check the host rule, open the store and the bundle, bind the socket, build the app."""
    check_host(host, token)
    from ..storage import open_store
    from ._app import create_app
    from ._data import StudioData, bundle_info

    bundle = bundle_info(bundle_path) if bundle_path is not None else None
    backend = open_store(store, state_root=state_root)
    check_store(backend)
    sock = bind(host, port)
    info = {"store": _redacted(backend.url), "bundle": bundle.root if bundle else None}
    local = frozenset({"127.0.0.1", "localhost", "::1", host.strip("[]").lower()})
    stopping = threading.Event()
    data = StudioData(backend, bundle=bundle)
    app = create_app(data, token=token, info=info, allowed_hosts=local, stopping=stopping)
    return StudioServer(app, sock, host, token, stopping)


def check_store(backend: Any) -> None:
    """Read the store once before serving: a store Studio cannot read is the store's error now.

    Without this, Studio started and then answered every page with an empty list (a state root that
    is a file or unreadable: the filesystem store's listing treats it as "no workspaces yet") or a
    500 (a PostgreSQL server that is down), so the user saw a blank Studio and no cause. A state root
    that does not exist yet is fine: nothing has run there, and Studio shows runs as they appear.
    """
    from ..storage import FileStoreBackend

    where = _redacted(str(getattr(backend, "url", backend)))
    if isinstance(backend, FileStoreBackend):
        for directory in (backend.root, backend.root / "workspaces"):
            try:
                with os.scandir(directory):
                    pass
            except FileNotFoundError:
                return
            except OSError as exc:
                raise GoondanError(
                    "E_STORE_UNAVAILABLE",
                    f"Studio cannot read the state root {backend.root}: {exc.strerror or exc} ({directory})",
                    suggestion=(
                        "Give the directory gdn run writes to with --state-root DIR (or GOONDAN_STATE_ROOT); "
                        "it must be a directory this user can read."
                    ),
                ) from exc
        return
    try:
        backend.list_workspaces()
    except GoondanError:
        raise  # the store's own code and suggestion (E_STORE_UNAVAILABLE for a server that is down)
    except Exception as exc:  # a third-party store: still its failure, said at start
        raise GoondanError(
            "E_STORE_UNAVAILABLE",
            f"Studio cannot read the store {where}: {type(exc).__name__}: {exc}",
            suggestion="Check --store (or GOONDAN_STORE) and that the store is reachable from this machine.",
        ) from exc


def _redacted(url: str) -> str:
    from ..storage._backends import _redact

    return _redact(url)


__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "ENV_TOKEN",
    "StudioServer",
    "check_host",
    "check_store",
    "is_loopback",
    "make_server",
]
