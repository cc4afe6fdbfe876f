"""Tool ``greeting``: handlers by export name, each ``handler(ctx, input)`` returning JSON."""

from __future__ import annotations

from typing import Any


def greet(ctx: Any, args: dict[str, Any]) -> str:
    return f"Hello, {args['name']}!"


handlers = {"greet": greet}
