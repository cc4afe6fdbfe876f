"""``gdn studio [PATH]``: serve the Studio web view of a state root (see :mod:`goondan.studio`).

Only argparse is imported at module level: the parser registration below runs for every ``gdn``
invocation, and ``gdn --help`` must not import starlette or uvicorn.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ._output import EXIT_OK, EXIT_USAGE, CliError

ENV_TOKEN = "GOONDAN_STUDIO_TOKEN"
# what the user asked for cannot be served: a usage error (exit 2), not an internal one
_USAGE_CODES = ("E_STUDIO_HOST_NOT_LOOPBACK", "E_STUDIO_TOKEN_WEAK", "E_STUDIO_PORT_IN_USE", "E_STUDIO_BIND")


def add_studio_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """Register ``gdn studio`` (one call from :func:`goondan.cli._parser.build_parser`)."""
    from ._commands import cmd_studio

    p = sub.add_parser(
        "studio",
        parents=[common],
        help="open a web view of instances, conversations and traces",
        description=(
            "Serve Studio, a read-only web view of the state root: instances with live status,\n"
            "conversations, per-turn trace waterfalls across agents, and the swarm graph. With PATH,\n"
            "only that bundle's workspaces, plus its connectors and routes in the graph.\n"
            "Binds 127.0.0.1; another --host needs a token (--token or $GOONDAN_STUDIO_TOKEN)."
        ),
        epilog=(
            "examples:\n"
            "  gdn studio                      every workspace of the state root, on http://127.0.0.1:4000/\n"
            "  gdn studio ./my-swarm --open    one bundle's workspaces, connectors and routes\n"
            "  gdn studio --store postgresql://db/goondan --port 4001\n"
            "  GOONDAN_STUDIO_TOKEN=... gdn studio --host 0.0.0.0   then open http://HOST:4000/?token=..."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", nargs="?", metavar="PATH", help="bundle directory (default: every workspace)")
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=4000, help="port (default: 4000; 0 picks a free one)")
    p.add_argument("--open", action="store_true", help="open the page in a web browser")
    p.add_argument("--token", metavar="T", help=f"require this token on every request (default: ${ENV_TOKEN})")
    p.add_argument("--store", metavar="URL", help="where conversations are kept (default: the state root)")
    p.set_defaults(func=cmd_studio)


def _check_extra() -> None:
    from importlib.util import find_spec

    missing = [name for name in ("starlette", "uvicorn") if find_spec(name) is None]
    if missing:
        raise CliError(
            "E_STUDIO_EXTRA_MISSING",
            f"gdn studio needs {' and '.join(missing)}, which are not installed",
            exit_code=EXIT_USAGE,
            suggestion="pip install 'goondan-runtime[studio]'",
        )


def cmd_studio(args: argparse.Namespace) -> int:
    from ..errors import GoondanError
    from ._state import state_root

    token = args.token or os.environ.get(ENV_TOKEN) or None
    if not 0 <= args.port <= 65535:
        raise CliError(
            "E_STUDIO_BIND",
            f"--port {args.port} is not a port",
            exit_code=EXIT_USAGE,
            suggestion="Give 0-65535 (0 picks a free port).",
        )
    _check_extra()
    from ..studio import make_server

    try:
        server = make_server(
            store=args.store,
            state_root=state_root(args),
            bundle_path=args.path,
            host=args.host,
            port=args.port,
            token=token,
        )
    except GoondanError as exc:
        if exc.code in _USAGE_CODES:
            raise CliError(exc.code, exc.message, exit_code=EXIT_USAGE, suggestion=exc.suggestion) from None
        raise
    url = server.url
    sys.stdout.write(f"Studio: {url}{'  (token required: open ' + url + '?token=...)' if token else ''}\n")
    sys.stdout.flush()
    if args.open:
        import webbrowser

        webbrowser.open(url + (f"?token={token}" if token else ""))
    server.run()
    return EXIT_OK
