"""The model ids a provider SDK knows, read from the installed SDK's own ``Literal`` of them.

``model: claude-sonet-4`` used to pass ``gdn validate`` and fail at the first request. The SDKs carry
their model lists as typing Literals (``anthropic.types.ModelParam``, ``openai.types.ChatModel``), so a
name missing from that list is worth a warning with a did-you-mean from it. Only a warning: providers
ship models faster than SDK releases, and proxies name models as they like.

The list is read from the SDK's source file with ``ast``, not by importing it and calling
``typing.get_args``: importing ``anthropic.types.model_param`` imports the whole ``anthropic`` package
(1.30 s measured with ``python -X importtime`` on 2026-11-24; ``openai.types.chat_model`` 0.58 s),
and ``gdn validate`` promises never to pay an SDK's import (see ``goondan.models._sdk``). Reading
and parsing the one file takes about a millisecond. ``importlib.util.find_spec`` of a top-level
package locates it without importing it. Whatever does not look as expected (another layout in a
future SDK, no Literal) gives no list, so no warning: the check can go quiet, never wrong.

``google-genai`` (checked: 3.4.0) ships no such list, so Gemini model ids are not checked.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path

#: provider -> (top-level package, file inside it, name of the Literal type alias). openai: the chat
#: models, since the adapter calls chat.completions (responses-only models fail there).
SDK_MODEL_LISTS: dict[str, tuple[str, str, str]] = {
    "anthropic": ("anthropic", "types/model_param.py", "ModelParam"),
    "openai": ("openai", "types/shared/chat_model.py", "ChatModel"),
}

#: provider -> environment variable its SDK takes a base URL from when the client is given none
BASE_URL_VARIABLES: dict[str, str] = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}


@dataclass(frozen=True)
class SdkModels:
    package: str
    version: str
    names: tuple[str, ...]  # in the SDK's order (newest first in both SDKs)


def _literal_strings(node: ast.expr) -> list[str]:
    """Every string inside ``Literal[...]`` subscripts of ``node`` (``Union[Literal[...], str]`` too)."""
    out: list[str] = []
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Subscript):
            continue
        head = sub.value
        name = head.id if isinstance(head, ast.Name) else head.attr if isinstance(head, ast.Attribute) else ""
        if name != "Literal":
            continue
        items = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        out.extend(i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str))
    return out


@functools.cache
def sdk_models(provider: str) -> SdkModels | None:
    """The model ids the installed SDK of ``provider`` lists, or None (no SDK, no list, unreadable)."""
    where = SDK_MODEL_LISTS.get(provider)
    if where is None:
        return None
    package, relative, alias = where
    try:
        spec = importlib.util.find_spec(package)
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if not locations:
            return None
        tree = ast.parse((Path(locations[0]) / relative).read_bytes())
        version = importlib.metadata.version(package)
    except (ImportError, ValueError, OSError, SyntaxError, importlib.metadata.PackageNotFoundError):
        return None
    for stmt in tree.body:
        target: ast.expr | None = stmt.target if isinstance(stmt, ast.AnnAssign) else None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == alias and value is not None:
            names = tuple(dict.fromkeys(_literal_strings(value)))
            return SdkModels(package, version, names) if names else None
    return None


__all__ = ["BASE_URL_VARIABLES", "SDK_MODEL_LISTS", "SdkModels", "sdk_models"]
