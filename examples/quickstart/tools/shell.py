"""A tool the model must never reach: the tool-guard extension filters it out of the catalog, and
the executor refuses any call to a tool that is not in the step's catalog."""

from __future__ import annotations

from typing import Any, NoReturn

from goondan.types import ToolContext, ToolHandler


def wipe(ctx: ToolContext, args: dict[str, Any]) -> NoReturn:
    raise RuntimeError("this handler must never run")


handlers: dict[str, ToolHandler] = {"wipe": wipe}
