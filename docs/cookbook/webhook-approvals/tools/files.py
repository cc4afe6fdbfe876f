"""The files tool: 'deletes' a file (this recipe only reports what it would remove)."""

from typing import Any

from goondan.types import ToolContext


def delete(ctx: ToolContext, args: dict[str, Any]) -> str:
    return f"removed {args['name'].removeprefix('delete ')}"


handlers = {"delete": delete}
