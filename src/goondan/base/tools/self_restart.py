"""self-restart: lets an agent ask the runtime to restart it (docs/architecture.md#restart-and-watch).

The handler only answers with ``restartRequested: true``; the runtime watches tool results for that
flag and restarts the instance after the turn (reloading the bundle, e.g. after the agent edited its
own tools). Keeping the decision in the runtime means a tool can never restart anything directly.
"""

from __future__ import annotations

from typing import Any

from goondan.base.tools._common import args_dict, check_keys, opt_str
from goondan.types import ToolContext

DEFAULT_REASON = "tool:self-restart"


def request(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``self-restart__request``: ``{reason?}`` → ``{ok, restartRequested, restartReason}``."""
    args = args_dict(input)
    check_keys(args, ("reason",))
    reason = (opt_str(args, "reason") or "").strip() or DEFAULT_REASON
    return {"ok": True, "restartRequested": True, "restartReason": reason}


handlers = {"request": request}
