"""The Ray executor: every agent instance is a named Ray actor, supervised from the head.

It is the process executor with another spawner: the head (``gdn run`` or the program holding
``Runtime(executor="ray")``) keeps the orchestrator, its queues, inter-agent routing and connectors;
the instances run in Ray actors wherever Ray places them, each opening its own instance in the
store by URL (the filesystem store on one machine, PostgreSQL on a cluster). See docs/cluster.md.

Where Ray comes from: an already connected ``ray`` in this process (``ray.init`` by the caller) is
used as is; else the executor connects to ``address`` / ``GOONDAN_RAY_ADDRESS`` / ``RAY_ADDRESS``
(``auto`` = the cluster started on this machine with ``ray start --head``) or, with none, starts a
local Ray for this runtime and shuts it down on close.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
from collections.abc import Callable, Mapping
from typing import Any

from ...errors import GoondanError
from .._protocol import ExecutorOptions
from ..process._executor import ProcessExecutor
from ._spawner import RaySpawner, import_ray, namespace_for

log = logging.getLogger("goondan.runtime")

ENV_ADDRESS = "GOONDAN_RAY_ADDRESS"
ENV_ACTOR_OPTIONS = "GOONDAN_RAY_ACTOR_OPTIONS"


def _env_actor_options(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``GOONDAN_RAY_ACTOR_OPTIONS`` of ``env`` (default: this process's environment) as a dict."""
    raw = (os.environ if env is None else env).get(ENV_ACTOR_OPTIONS, "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise GoondanError(
            "E_RAY_OPTIONS",
            f"{ENV_ACTOR_OPTIONS} is not JSON: {exc}",
            suggestion='Give a JSON object of Ray actor options, e.g. {"num_cpus": 1}.',
        ) from None
    if not isinstance(value, dict):
        raise GoondanError(
            "E_RAY_OPTIONS",
            f"{ENV_ACTOR_OPTIONS} must be a JSON object, got {type(value).__name__}",
            suggestion='Give a JSON object of Ray actor options, e.g. {"num_cpus": 1}.',
        )
    return value


class _DropTokenAuthEnabledNotice(logging.Filter):
    """Ray 2.5x logs "Token authentication is enabled for this Ray cluster..." on every ``ray.init``
    that starts a local Ray; with no logging configured, Python's last-resort handler put it on the
    user's terminal in the middle of ``gdn run`` output. It says the safe default is on, which needs
    nothing from the user. The "disabled" warning beside it (a cluster anyone on the network can use)
    is left alone."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Token authentication is enabled")


_TOKEN_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


def _quiet_token_auth_notice() -> None:
    logger = logging.getLogger(_TOKEN_AUTH_LOGGER)
    if not any(isinstance(f, _DropTokenAuthEnabledNotice) for f in logger.filters):
        logger.addFilter(_DropTokenAuthEnabledNotice())


def _check_reachable(address: str) -> None:
    """Fail at once on a ``HOST:PORT`` nothing listens on: ``ray.init`` itself retries for minutes
    before it gives up. ``auto`` and ``ray://`` addresses are left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return
    import socket

    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise GoondanError(
            "E_RAY_CONNECT",
            f"no Ray cluster answers at {address}: {exc}",
            suggestion="Start the cluster with `ray start --head` and pass its address (HOST:6379 by "
            "default) or --ray-address auto on the head machine.",
        ) from None


def _python_sigterm_handler() -> Any:
    """The SIGTERM handler Python has installed (``gdn run``'s graceful stop), or None when this is
    not the main thread or Python handles no SIGTERM."""
    if threading.current_thread() is not threading.main_thread():
        return None
    handler = signal.getsignal(signal.SIGTERM)
    return handler if handler not in (None, signal.SIG_DFL) else None


def _restore_sigterm(handler: Any) -> None:
    """``ray.init`` installs Ray's C failure-signal handler for SIGTERM in the driver, over
    Python's: ``systemctl stop`` then printed a native stack dump and aborted ``gdn run`` (exit -6)
    without letting the running turns finish, and left the local Ray it had started running.
    Installing the same Python handler again puts Python's signal handling back in front."""
    if handler is not None:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(signal.SIGTERM, handler)


class RayExecutor(ProcessExecutor):
    """Runs every instance as a named Ray actor (``executor="ray"``)."""

    name = "ray"

    def __init__(
        self,
        options: ExecutorOptions | None = None,
        *,
        address: str | None = None,
        actor_options: dict[str, Any] | None = None,
    ) -> None:
        import_ray()  # a missing extra is reported when the runtime is built, not on first turn
        super().__init__(options)
        self.address = address
        self.actor_options = dict(actor_options) if actor_options is not None else _env_actor_options()
        self._owns_ray = False

    def _connect(self) -> None:
        ray = import_ray()
        if ray.is_initialized():
            return
        address = self.address or os.environ.get(ENV_ADDRESS) or os.environ.get("RAY_ADDRESS") or None
        if address:
            _check_reachable(address)
        _quiet_token_auth_notice()
        kept = _python_sigterm_handler()
        try:
            ray.init(
                address=address or "local",  # never join a cluster someone else started unasked
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                ignore_reinit_error=True,
            )
        except Exception as exc:
            raise GoondanError(
                "E_RAY_CONNECT",
                f"could not {'connect to the Ray cluster at ' + address if address else 'start a local Ray'}: {exc}",
                suggestion="Start the cluster with `ray start --head` and pass --ray-address auto (or the "
                "head's host:port), or leave the address out to start a local Ray.",
            ) from None
        finally:
            _restore_sigterm(kept)
        self._owns_ray = address is None

    def _bind_host(self) -> str:
        """Where the head listens for its actors: loopback when this runtime started a Ray of its
        own (every node is this machine), else the address Ray knows this node by, which the
        cluster's other nodes reach."""
        ray = import_ray()
        return "127.0.0.1" if self._owns_ray else str(ray.util.get_node_ip_address())

    def _make_spawner(self, on_exit: Callable[[int, int], None]) -> Any:
        self._connect()
        ctx = self._context
        return RaySpawner(
            self._spawner_init(),
            on_exit,
            namespace=namespace_for(ctx.workspace_identity.workspace_id),
            actor_options=self.actor_options,
            bind_host=self._bind_host(),
        )

    async def close(self, *, interrupt: bool = False) -> None:
        try:
            await super().close(interrupt=interrupt)
        finally:
            if self._owns_ray:
                self._owns_ray = False
                ray = import_ray()
                with contextlib.suppress(Exception):
                    ray.shutdown()

    def kill_now(self) -> None:
        """Kill every actor at once and mark its instance ``idle`` (a killed actor cannot)."""
        if self._orch is None:
            return
        for handle in self._orch.kill_now():
            with contextlib.suppress(Exception):
                self._mark_idle(handle)

    async def actor_node(self, agent: str, instance_key: str) -> dict[str, Any] | None:
        """Where the actor of an instance runs now (``nodeId``, ``pid``, ``host``), ``None`` when it
        has none. For tests and diagnostics."""
        orch = self._orch
        h = orch.handles.get((agent, instance_key)) if orch is not None else None
        if h is None or h.pid is None or h.spawner is None:
            return None
        actor = h.spawner.handle(h.pid)
        if actor is None:
            return None
        import asyncio

        value: dict[str, Any] = await asyncio.wrap_future(actor.where.remote().future())
        return value


__all__ = ["ENV_ACTOR_OPTIONS", "ENV_ADDRESS", "RayExecutor"]
