"""text-transform: small, exact string operations a model otherwise gets wrong.

Models miscount characters and miss occurrences; these exports do it exactly and report what they
did (``replacements``, ``length``, ``count``) so the model can check. Indices count Unicode code
points; negative ``slice`` indices count from the end, as in Python and JavaScript. ``split`` with
``maxParts`` keeps the first ``maxParts`` parts (JavaScript ``split(limit)`` semantics).
"""

from __future__ import annotations

from typing import Any

from goondan.base.tools._common import (
    ToolInputError,
    args_dict,
    check_keys,
    opt_bool,
    opt_enum,
    opt_int,
    opt_str,
    require_str,
)
from goondan.types import ToolContext


def replace(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``text-transform__replace``: ``{text, search, replacement?, all?}`` → ``{original, result, replacements}``."""
    args = args_dict(input)
    check_keys(args, ("text", "search", "replacement", "all"))
    text = require_str(args, "text")
    search = require_str(args, "search")
    replacement = opt_str(args, "replacement", "") or ""
    every = opt_bool(args, "all", False)
    found = text.count(search)
    n = found if every else min(found, 1)
    result = text.replace(search, replacement, n) if n else text
    return {"original": text, "result": result, "replacements": n}


def slice_text(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``text-transform__slice``: ``{text, start?, end?}`` → ``{original, result, start, end, length}``."""
    args = args_dict(input)
    check_keys(args, ("text", "start", "end"))
    text = require_str(args, "text")
    start_arg = opt_int(args, "start", 0)
    end_arg = opt_int(args, "end", None)
    assert start_arg is not None
    # normalize like Python/JS slicing so the reported bounds are the ones actually used
    start, end, _ = slice(start_arg, end_arg).indices(len(text))
    end = max(end, start)
    result = text[start:end]
    return {"original": text, "result": result, "start": start, "end": end, "length": len(result)}


def split(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``text-transform__split``: ``{text, delimiter?, maxParts?}`` → ``{delimiter, count, parts}``."""
    args = args_dict(input)
    check_keys(args, ("text", "delimiter", "maxParts"))
    text = require_str(args, "text")
    delimiter = opt_str(args, "delimiter", "\n")
    assert delimiter is not None
    max_parts = opt_int(args, "maxParts", None, minimum=1)
    parts = list(text) if delimiter == "" else text.split(delimiter)
    if max_parts is not None:
        parts = parts[:max_parts]
    return {"delimiter": delimiter, "count": len(parts), "parts": parts}


def join(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``text-transform__join``: ``{parts, delimiter?}`` → ``{delimiter, count, result}``."""
    args = args_dict(input)
    check_keys(args, ("parts", "delimiter"))
    parts = args.get("parts")
    if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
        raise ToolInputError("'parts' must be an array of strings")
    delimiter = opt_str(args, "delimiter", "\n")
    assert delimiter is not None
    return {"delimiter": delimiter, "count": len(parts), "result": delimiter.join(parts)}


def trim(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``text-transform__trim``: ``{text, mode?}`` → ``{original, result, mode, trimmedLength}``."""
    args = args_dict(input)
    check_keys(args, ("text", "mode"))
    text = require_str(args, "text")
    mode = opt_enum(args, "mode", ("both", "start", "end"), "both")
    result = text.strip() if mode == "both" else text.lstrip() if mode == "start" else text.rstrip()
    return {"original": text, "result": result, "mode": mode, "trimmedLength": len(result)}


def change_case(ctx: ToolContext, input: Any) -> dict[str, Any]:
    """``text-transform__case``: ``{text, to: upper|lower}`` → ``{original, result, to}``."""
    args = args_dict(input)
    check_keys(args, ("text", "to"))
    text = require_str(args, "text")
    if "to" not in args or args["to"] is None:
        raise ToolInputError("'to' must be one of upper, lower")
    to = opt_enum(args, "to", ("upper", "lower"), "upper")
    return {"original": text, "result": text.upper() if to == "upper" else text.lower(), "to": to}


handlers = {
    "replace": replace,
    "slice": slice_text,
    "split": split,
    "join": join,
    "trim": trim,
    "case": change_case,
}
