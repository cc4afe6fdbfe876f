"""The Ray actor that hosts one agent instance (runs on whichever node Ray placed it).

Why the actor speaks the process executor's IPC records over a TCP stream back to the head instead
of exchanging Ray method calls: the orchestrator on the head (crash restarts with backoff, TTL
eviction, graceful shutdown, inter-agent routing with cycle detection, approvals, cancellation,
steering) is then the very code the process executor runs, so both executors keep the same
semantics by construction, and an inter-agent request costs one frame each way on an open socket
instead of two Ray task submissions. Ray gives what a cluster needs: placement, a named actor per
instance (one namespace per workspace), the worker process, and the death of that process (or of
its node) reported on the ``serve`` call's result.

This module does not import ray: the head wraps :class:`AgentActor` with ``ray.remote`` when it
spawns the first instance, and the worker imports this module by name.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

# the first bytes an actor writes on its stream: the spawn token, so the head knows which spawn the
# connection belongs to and ignores anyone else who finds the port
TOKEN_BYTES = 32
CONNECT_TIMEOUT_S = 30.0


def build_context(init: dict[str, Any]) -> Any:
    """The swarm as the head loaded it: the same bundle path, environment, state root and store URL
    (so the bundle directory must exist at that path on every node; see docs/cluster.md)."""
    from goondan.bundle import load_bundle_for_requests
    from goondan.engine._swarm import SwarmContext

    state_root = Path(init["stateRoot"])
    # an actor starts no connector: the Connections' config and secrets are not its business
    bundle = load_bundle_for_requests(init["bundle"], env=init.get("env") or {}, state_root=state_root)
    return SwarmContext(
        bundle,
        swarm=init.get("swarm"),
        state_root=state_root,
        persist=bool(init.get("persist", True)),
        store=init.get("store"),
    )


class AgentActor:
    """One agent instance. ``serve`` runs for the life of the instance and returns the agent
    process's exit code (0 after a graceful shutdown); the worker dying ends it with an error."""

    def __init__(self, sys_path: list[str] | None = None) -> None:
        for path in reversed(sys_path or []):
            if path not in sys.path:
                sys.path.insert(0, path)

    async def where(self) -> dict[str, Any]:
        """Which node and process this instance runs on (tests and ``gdn`` diagnostics)."""
        import ray

        return {"nodeId": ray.get_runtime_context().get_node_id(), "pid": os.getpid(), "host": socket.gethostname()}

    async def serve(self, address: tuple[str, int], token: str, init: dict[str, Any], spec: dict[str, Any]) -> int:
        from goondan.executors.process._agent_process import _serve, error_dict
        from goondan.executors.process._ipc import ORCHESTRATOR, Connection, StartError

        sock = socket.create_connection(address, timeout=CONNECT_TIMEOUT_S)
        sock.sendall(token.encode("ascii"))
        sock.settimeout(None)
        sock.setblocking(False)
        try:
            ctx = build_context(init)
        except BaseException as exc:  # reported like an instance that cannot start
            import asyncio

            reader, writer = await asyncio.open_connection(sock=sock)
            conn = Connection(reader, writer)
            conn.send_record(StartError(error_dict(exc)), str(spec.get("agent")), ORCHESTRATOR)
            await writer.drain()
            conn.close()
            return 3
        return await _serve(sock, spec, ctx)


__all__ = ["CONNECT_TIMEOUT_S", "TOKEN_BYTES", "AgentActor", "build_context"]
