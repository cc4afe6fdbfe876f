"""A Tool entry: `handlers` maps each export name to handler(ctx, input)."""

from __future__ import annotations

from typing import Any

from goondan.types import ToolContext, ToolHandler


def add(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"sum": args["a"] + args["b"]}


handlers: dict[str, ToolHandler] = {"add": add}
