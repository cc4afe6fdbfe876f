"""The wire protocol between ``gdn run`` (the supervisor) and a connector host process: the one every
child process of goondan speaks, :mod:`goondan.executors.process._ipc` (length-prefixed JSON frames
with the frame-size limit, typed records, dispatch tables), on the "connector channel" listed there.

The host gets the child end of a Unix socketpair as ``--fd N``; the connector keeps the process's own
stdin/stdout/stderr (the ``cli`` connector reads the terminal). Spawn, crash backoff and graceful
shutdown are the shared supervisor's (:mod:`goondan.executors.process._supervisor`).
"""

from __future__ import annotations

HOST_MODULE = "goondan.connectors.host"
SUPERVISOR = "supervisor"

__all__ = ["HOST_MODULE", "SUPERVISOR"]
