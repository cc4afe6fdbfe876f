"""Downloading a chat platform's attachment into an event part (``event["attachments"]``).

The connector downloads (it holds the platform token the file URL needs) and hands the bytes on as
``data``; the agent's store then keeps them beside the conversation, so a platform URL that expires
or needs a token never has to be fetched again. The per-part size limit of requests applies
(``GOONDAN_MAX_ATTACHMENT_BYTES``), on the advertised size and while the bytes arrive.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from .._content import IMAGE_TYPES, guess_media_type, max_part_bytes, sniff_image
from .._http_client import ResponseTooLarge, request


async def download_part(
    url: str,
    *,
    name: str | None = None,
    media_type: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> dict[str, Any]:
    """``GET url`` as an image part (PNG/JPEG/GIF/WebP bytes) or a file part named ``name``.

    ``OSError`` for network failures, ``ValueError`` for an error status or a file over the limit;
    a connector catches both and falls back to mentioning the file in the message text."""
    limit = max_part_bytes()
    try:
        # the limit stops the download itself, not just the result
        resp = await request("GET", url, headers=headers, timeout=timeout, max_bytes=limit)
    except ResponseTooLarge:
        raise ValueError(f"{name or url} is over the attachment limit of {limit} bytes") from None
    if resp.status >= 400:
        raise ValueError(f"downloading {name or url} failed with HTTP {resp.status}")
    data = resp.body
    sniffed = sniff_image(data)
    declared = media_type or resp.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if not declared or declared == "application/octet-stream":
        declared = guess_media_type(name or url)
    encoded = base64.b64encode(data).decode("ascii")
    if sniffed is not None and (declared in IMAGE_TYPES or declared.startswith("image/")):
        return {"type": "image", "mediaType": sniffed, "data": encoded}
    return {"type": "file", "mediaType": declared, "name": name or url.rsplit("/", 1)[-1] or "file", "data": encoded}


__all__ = ["download_part"]
