"""``gdn studio``: a read-only web view of a state root (docs/architecture.md#studio).

Workspaces and instances with live status; conversations as a person reads them beside the stored
records; per-turn trace waterfalls joined across agent processes; the swarm graph. It reads through
the store's read-only readers (:meth:`goondan.storage.WorkspaceStore.reader`), so it never takes the
lease of a live run and works on any store. Needs the ``studio`` extra (starlette, uvicorn); the page
itself is plain HTML, CSS and JavaScript modules shipped in ``static/``, nothing fetched at run time.
"""

from __future__ import annotations

from ._app import create_app
from ._data import BundleInfo, StudioData, bundle_info
from ._server import StudioServer, check_host, is_loopback, make_server

__all__ = [
    "BundleInfo",
    "StudioData",
    "StudioServer",
    "bundle_info",
    "check_host",
    "create_app",
    "is_loopback",
    "make_server",
]
