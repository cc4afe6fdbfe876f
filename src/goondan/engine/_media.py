"""Image and file parts between the store and the model (docs/architecture.md#messages).

An inbound message keeps its media by reference: the bytes go to the instance store
(``InstanceStore.put_attachment``) and the part keeps ``{"type", "mediaType", "attachment", "size"}``
(``name`` too for files), so the conversation files never hold base64. Only the model request of a
step gets the bytes back, as ``data`` (base64), which is the one shape every provider mapping reads.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._content import has_media, is_attachment_id, max_part_bytes, normalize_part, read_path
from .._json import repair_text


def store_parts(parts: Sequence[Any], put: Callable[[bytes], str]) -> list[dict[str, Any]]:
    """Inbound parts checked again (an event may come from elsewhere than ``Runtime.request``), their
    bytes stored through ``put`` and replaced by references."""
    limit = max_part_bytes()
    out: list[dict[str, Any]] = []
    for index, raw in enumerate(parts):
        part = normalize_part(raw, index, limit=limit, read_paths=True)
        if part["type"] == "text" and not part["text"].isascii():
            part["text"] = repair_text(part["text"])
        data = part.pop("data", None)
        if data is not None:
            raw_bytes = base64.b64decode(data)
            part["attachment"] = put(raw_bytes)
            part["size"] = len(raw_bytes)
        out.append(part)
    return out


def _resolved(part: Mapping[str, Any], read: Callable[[str], bytes]) -> Mapping[str, Any]:
    if part.get("type") not in ("image", "file"):
        return part
    ref = part.get("attachment")
    if is_attachment_id(ref):
        data = read(str(ref))
    elif isinstance(part.get("path"), str) and part.get("data") is None:
        data = read_path(part["path"], 0, max_part_bytes())  # a part an extension added by path
    else:
        return part
    out = {k: v for k, v in part.items() if k not in ("attachment", "path")}
    out["data"] = base64.b64encode(data).decode("ascii")
    return out


def resolve_media(messages: Sequence[dict[str, Any]], read: Callable[[str], bytes]) -> list[dict[str, Any]]:
    """The step's messages with every stored media part carrying its bytes as ``data``; messages
    without media are passed through untouched (no copy)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and has_media(content):
            out.append({**message, "content": [_resolved(p, read) for p in content]})
        else:
            out.append(message)
    return out


def any_media(messages: Sequence[dict[str, Any]]) -> bool:
    return any(has_media(m.get("content")) for m in messages)


def event_has_media(event: Any) -> bool:
    """Whether a message event (from an extension) appends or replaces a message with media parts,
    which then has to be resolved for the model like the inbound ones."""
    message = event.get("message") if isinstance(event, Mapping) else None
    data = getattr(message, "data", None) if message is not None and not isinstance(message, Mapping) else None
    if data is None and isinstance(message, Mapping):
        data = message.get("data")
    return isinstance(data, Mapping) and has_media(data.get("content"))


__all__ = ["any_media", "event_has_media", "resolve_media", "store_parts"]
