"""wait: pause the agent for a while without blocking anything else.

Useful between polls (a build, a deployment, another agent's work). ``asyncio.sleep`` keeps the
event loop free, so other instances and connectors keep running meanwhile.
"""

from __future__ import annotations

import asyncio
from typing import Any

from goondan.base.tools._common import args_dict, check_keys, require_number
from goondan.types import ToolContext

MAX_SECONDS = 300


async def wait_seconds(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``wait__seconds``: ``{seconds: 0..300}`` → ``{waitedSeconds, waitedMs}``."""
    args = args_dict(input)
    check_keys(args, ("seconds",))
    seconds = require_number(args, "seconds", minimum=0, maximum=MAX_SECONDS)
    await asyncio.sleep(seconds)
    value: int | float = int(seconds) if seconds.is_integer() else seconds
    return {"waitedSeconds": value, "waitedMs": round(seconds * 1000)}


handlers = {"seconds": wait_seconds}
